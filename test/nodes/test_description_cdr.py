"""The description node's in-place /joint_states reader against rclpy's own deserialisation."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rclpy")
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from robot_bridge.nodes.description import read_joint_state  # noqa: E402


def _message(rng, names, stamp_sec, frame_id):
    msg = JointState()
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_sec, int(rng.integers(0, 10**9))
    msg.header.frame_id = frame_id
    msg.name = names
    msg.position = [float(v) for v in rng.normal(size=len(names))]
    msg.velocity = [float(v) for v in rng.normal(size=int(rng.integers(0, 3)))]
    return msg


@pytest.mark.parametrize("names,stamp_sec,frame_id", [
    ([], 0, ""),
    (["j1"], 1, "base"),
    (["j1", "joint_two", "a"], -5, "x" * 7),
    ([f"j{i}" for i in range(40)], 2**31 - 1, "odd-length frame"),
    (["gelenk_ä", "关节"], 12, "ü"),          # non-ASCII names (UTF-8 lengths differ from character counts)
])
def test_reader_matches_rclpy(names, stamp_sec, frame_id):
    rng = np.random.default_rng(len(names) + stamp_sec % 97)
    msg = _message(rng, names, stamp_sec, frame_id)
    got_names, got_positions, sec, nanosec = read_joint_state(serialize_message(msg))
    assert (sec, nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
    assert list(got_names) == list(msg.name)
    assert np.array_equal(np.asarray(got_positions, dtype=float), np.asarray(msg.position, dtype=float))


def test_reader_keeps_non_finite_positions_for_the_node_to_reject():
    msg = JointState(name=["a", "b"], position=[math.nan, math.inf])
    names, positions, _sec, _nsec = read_joint_state(serialize_message(msg))
    assert list(names) == ["a", "b"]
    assert math.isnan(positions[0]) and math.isinf(positions[1])
