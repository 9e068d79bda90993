"""The image drain's compiled reader against the Python one, and its fallback when it cannot compile."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from robot_bridge.ros import conversions as conv  # noqa: E402
from robot_bridge.ros import fast_relay, image_drain  # noqa: E402


def _image(frame_id="cam", width=4, height=3, encoding="rgb8", step=None, data_len=None):
    msg = Image(width=width, height=height, encoding=encoding, step=step if step is not None else width * 3)
    msg.header.frame_id = frame_id
    msg.data = bytes(range(data_len if data_len is not None else msg.step * height))
    return serialize_message(msg)


def test_compiled_reader_finds_height_exactly_where_the_python_parser_does():
    pytest.importorskip("numba")
    if image_drain._drainer() is None:
        pytest.skip("no compiled drain here")
    drain = image_drain.ImageDrain("out", lambda: True)
    drain.learn(conv.parse_serialized_image(_image()))
    headroom = 16
    for frame_id in ("", "a", "ab", "abc", "abcd", "a_long_driver_frame"):
        data = _image(frame_id)
        msg = np.zeros(headroom + len(data), np.uint8)
        msg[headroom:] = np.frombuffer(data, np.uint8)
        rest = image_drain._image_rest(msg, headroom, len(msg), drain.shape, drain.encoding)
        assert rest == conv.parse_serialized_image(data).rest, frame_id
        assert image_drain._image_rest(msg, headroom, len(msg) - 1, drain.shape, drain.encoding) == -1
    for other in (dict(width=5), dict(height=2), dict(encoding="bgr8"), dict(encoding="rgb16"),
                  dict(step=13), dict(data_len=35)):
        data = _image(**other)
        msg = np.frombuffer(data, np.uint8).copy()
        assert image_drain._image_rest(msg, 0, len(msg), drain.shape, drain.encoding) == -1, other


def test_a_drain_that_cannot_compile_leaves_the_images_to_python(monkeypatch):
    def broken(*_args):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(image_drain, "_drainer_state", [broken])
    drain = image_drain.ImageDrain("out", lambda: True)          # warming fails: reported, not raised
    assert image_drain._drainer() is None
    drain.learn(conv.parse_serialized_image(_image()))
    assert drain(None, np.zeros(8, np.uint8), 0) == fast_relay.DRAIN_UNAVAILABLE
