"""/tf serialisation: the CDR template bytes decode to exactly the computed transforms."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tf2_msgs.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros.tf import TFBatchBuilder, matrix, tf_message  # noqa: E402
from robot_bridge.kinematics.state_publisher import FrameTransform  # noqa: E402
from robot_bridge.model.transform import from_rpy, make  # noqa: E402


def test_serialised_batches_decode_exactly():
    rng = np.random.default_rng(0)
    builder = TFBatchBuilder()
    parents, children = ["base", "a", "a/long_frame_name"], ["a", "a/long_frame_name", "c"]
    for k in range(3):
        q = rng.normal(size=(3, 4))
        values = np.hstack([rng.normal(size=(3, 3)), q / np.linalg.norm(q, axis=1, keepdims=True)])
        values[0] = [-0.0, np.inf, 1e-300, 0.0, 0.0, 0.0, 1.0]          # odd doubles survive too
        data = builder.serialize(parents, children, values, 1_700_000_000 + k, 999_999_999 - k)
        msg = deserialize_message(data, TFMessage)
        assert [t.header.frame_id for t in msg.transforms] == parents
        assert [t.child_frame_id for t in msg.transforms] == children
        assert {(t.header.stamp.sec, t.header.stamp.nanosec) for t in msg.transforms} == \
            {(1_700_000_000 + k, 999_999_999 - k)}
        got = [[getattr(t.transform.translation, a) for a in "xyz"]
               + [getattr(t.transform.rotation, a) for a in "xyzw"] for t in msg.transforms]
        assert np.array_equal(np.array(got), values)
    # another subset of frames gets its own template; the first is still right
    data = builder.serialize(parents[:1], children[:1], values[:1], 5, 6)
    assert len(deserialize_message(data, TFMessage).transforms) == 1


def test_template_cache_is_bounded():
    builder = TFBatchBuilder()
    for i in range(TFBatchBuilder.MAX_TEMPLATES + 5):
        builder.serialize(["p"], [f"c{i}"], np.array([[0, 0, 0, 0, 0, 0, 1.0]]), 0, 0)
    assert len(builder._cache) <= TFBatchBuilder.MAX_TEMPLATES


def test_static_message_round_trip():
    pose = make(from_rpy([0.3, -0.2, 1.0]), [1.0, 2.0, 3.0])
    msg = tf_message([FrameTransform("world", "thing", pose)], Time(sec=7))
    back = deserialize_message(serialize_message(msg), TFMessage)
    assert back.transforms[0].header.stamp.sec == 7 and back.transforms[0].child_frame_id == "thing"
    np.testing.assert_allclose(matrix(back.transforms[0]), pose, atol=1e-15)
