"""Serialized Image relay helpers against rclpy's own serializer (the independent truth)."""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image

from robot_bridge.ros import conversions as conv


def image(frame_id: str, width=5, height=3, encoding="rgb8") -> Image:
    msg = Image(width=width, height=height, encoding=encoding, step=width * 3, is_bigendian=0)
    msg.header.frame_id = frame_id
    msg.header.stamp.sec, msg.header.stamp.nanosec = 17, 123
    msg.data = bytes(np.arange(width * height * 3, dtype=np.uint8))
    return msg


@pytest.mark.parametrize("old", ["", "a", "ab", "abc", "abcd", "driver_camera_frame"])
@pytest.mark.parametrize("new", ["c", "cam_optical_frame", "abcd", "xy"])
def test_rewritten_header_deserializes_to_the_same_image(old, new):
    msg = image(old)
    raw = serialize_message(msg)
    parsed = conv.parse_serialized_image(raw)
    fields = (parsed.width, parsed.height, parsed.encoding, parsed.step, parsed.data_len)
    assert fields == (5, 3, "rgb8", 15, 45)
    assert conv.validate_serialized_image(parsed) is None
    out = deserialize_message(conv.rewrite_serialized_header(raw, parsed, new), Image)
    assert out.header.frame_id == new
    assert (out.header.stamp.sec, out.header.stamp.nanosec) == (17, 123)
    assert (out.width, out.height, out.encoding, out.step) == (5, 3, "rgb8", 15)
    assert bytes(out.data) == bytes(msg.data)
    restamped = deserialize_message(conv.rewrite_serialized_header(raw, parsed, new, Time(sec=5, nanosec=6)),
                                    Image)
    assert (restamped.header.stamp.sec, restamped.header.stamp.nanosec) == (5, 6)


def test_serialized_validation_matches_the_message_validation():
    bad = image("f")
    bad.step = 14                                   # < width * 3 and step * height != len(data)
    reason = conv.validate_serialized_image(conv.parse_serialized_image(serialize_message(bad)))
    assert reason == conv.validate_image(bad) and "step 14 < width 5" in reason
    short = image("f")
    short.data = bytes(44)
    reason = conv.validate_serialized_image(conv.parse_serialized_image(serialize_message(short)))
    assert reason == "step 15 x height 3 != 44 data bytes"


def test_truncated_or_foreign_bytes_are_rejected():
    raw = serialize_message(image("frame"))
    assert conv.parse_serialized_image(raw[:30]) is None
    assert conv.parse_serialized_image(b"\x00\x00" + raw[2:]) is None       # big-endian CDR: not handled
    assert "not a little-endian CDR Image" in conv.validate_serialized_image(None)


@pytest.mark.parametrize("old", ["", "abc", "abcd", "driver_camera_frame"])
@pytest.mark.parametrize("new", ["c", "abcd", "cam_optical_frame"])
def test_header_rewritten_in_place_keeps_the_data_where_it_is(old, new):
    msg = image(old)
    raw = serialize_message(msg)
    headroom = conv.serialized_header_size(new)
    buf = bytearray(headroom) + raw
    parsed = conv.parse_serialized_image(raw)
    data_at = headroom + parsed.rest
    start = conv.rewrite_serialized_header_in_place(buf, headroom, parsed, new)
    assert buf[data_at:] == raw[parsed.rest:]                      # height onwards untouched
    out = deserialize_message(bytes(buf[start:]), Image)
    assert out.header.frame_id == new and (out.header.stamp.sec, out.header.stamp.nanosec) == (17, 123)
    assert (out.width, out.height, out.encoding, out.step) == (5, 3, "rgb8", 15)
    assert bytes(out.data) == bytes(msg.data)
    buf = bytearray(headroom) + raw
    start = conv.rewrite_serialized_header_in_place(buf, headroom, parsed, new, Time(sec=5, nanosec=6))
    restamped = deserialize_message(bytes(buf[start:]), Image)
    assert (restamped.header.stamp.sec, restamped.header.stamp.nanosec) == (5, 6)


def test_in_place_rewrite_without_enough_headroom_is_refused():
    raw = bytearray(serialize_message(image("")))
    with pytest.raises(ValueError, match="headroom missing"):
        conv.rewrite_serialized_header_in_place(raw, 0, conv.parse_serialized_image(raw), "a_longer_frame")
