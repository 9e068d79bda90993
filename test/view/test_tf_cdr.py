"""The view's /tf decoding against rclpy's own serialization, and latest-pose-wins."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_bridge.errors import SchemaError
from robot_bridge.view.tf_cdr import LatestTF, decode

rclpy_serialization = pytest.importorskip("rclpy.serialization")
TFMessage = pytest.importorskip("tf2_msgs.msg").TFMessage
TransformStamped = pytest.importorskip("geometry_msgs.msg").TransformStamped


def tf_bytes(edges, stamp=(5, 7)) -> bytes:
    """edges: (parent, child, xyz, xyzw)."""
    msg = TFMessage()
    for parent, child, xyz, q in edges:
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = parent, child
        t.header.stamp.sec, t.header.stamp.nanosec = stamp
        tr, r = t.transform.translation, t.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in xyz)
        r.x, r.y, r.z, r.w = (float(v) for v in q)
        msg.transforms.append(t)
    return rclpy_serialization.serialize_message(msg)


def test_decode_matches_the_serialized_transforms():
    rng = np.random.default_rng(3)
    edges = [("world" if i == 0 else f"link_{i - 1}", f"link_{i}" + "x" * (i % 5), rng.normal(size=3),
              Rotation.random(random_state=i).as_quat()) for i in range(30)]
    msg = decode(tf_bytes(edges))
    assert msg.parents == [e[0] for e in edges] and msg.children == [e[1] for e in edges]
    assert np.allclose(msg.stamps, 5 + 7e-9)
    for m, (_p, _c, xyz, q) in zip(msg.matrices, edges):
        assert np.allclose(m[:3, 3], xyz) and np.allclose(m[:3, :3], Rotation.from_quat(q).as_matrix())


@pytest.mark.parametrize("cut", [3, 9, 20, -1])
def test_a_truncated_message_is_a_schema_error(cut):
    data = tf_bytes([("world", "a", (1, 2, 3), (0, 0, 0, 1))])
    with pytest.raises(SchemaError):
        decode(data[:cut])


def test_a_lying_count_is_refused_before_allocating():
    data = bytearray(tf_bytes([("world", "a", (1, 2, 3), (0, 0, 0, 1))]))
    data[4:8] = (2**31).to_bytes(4, "little")
    with pytest.raises(SchemaError, match="do not fit"):
        decode(bytes(data))


def test_the_newest_pose_wins_and_older_messages_of_the_same_frames_are_skipped_undecoded():
    tf = LatestTF()
    batch = [tf_bytes([("world", "base", (0, 0, 0), (0, 0, 0, 1)), ("base", "arm", (k, 0, 0), (0, 0, 0, 1))])
             for k in range(10)]
    tf.add_batch(batch)
    assert tf.decoded == 1 and tf.skipped == 9
    assert np.allclose(tf.poses("world", ["arm"])["arm"][:3, 3], (9, 0, 0))


def test_frames_only_in_an_older_message_are_kept():
    tf = LatestTF()
    world_object = tf_bytes([("world", "ball", (1, 2, 3), (0, 0, 0, 1))])
    robot = [tf_bytes([("world", "arm", (k, 0, 0), (0, 0, 0, 1))]) for k in range(3)]
    tf.add_batch([robot[0], world_object, robot[1], robot[2]])
    poses = tf.poses("world", ["ball", "arm"])
    assert np.allclose(poses["ball"][:3, 3], (1, 2, 3)) and np.allclose(poses["arm"][:3, 3], (2, 0, 0))


def test_poses_compose_chains_in_the_fixed_frame_and_leave_out_unconnected_frames():
    tf = LatestTF()
    q = Rotation.from_euler("z", 90, degrees=True).as_quat()
    tf.add_batch([tf_bytes([("world", "base", (1, 0, 0), q), ("base", "tool", (1, 0, 0), (0, 0, 0, 1)),
                            ("elsewhere", "lost", (0, 0, 0), (0, 0, 0, 1))])])
    poses = tf.poses("world", ["tool", "lost"])
    assert set(poses) == {"tool"} and np.allclose(poses["tool"][:3, 3], (1, 1, 0))
    assert np.allclose(tf.poses("base", ["world"])["world"][:3, 3], (0, 1, 0))


def test_static_frames_are_not_moved_by_tf_and_loops_and_nan_are_refused():
    tf = LatestTF()
    tf.add_batch([tf_bytes([("world", "table", (0, 0, 1), (0, 0, 0, 1))])], static=True)
    tf.add_batch([tf_bytes([("world", "table", (5, 0, 0), (0, 0, 0, 1)),
                            ("table", "world", (0, 0, 0), (0, 0, 0, 1)),
                            ("world", "bad", (np.nan, 0, 0), (0, 0, 0, 1))])])
    assert np.allclose(tf.poses("world", ["table"])["table"][:3, 3], (0, 0, 1))
    assert tf.rejected == 2 and "bad" not in tf.frames()


def test_a_newer_message_with_the_same_frames_is_read_through_the_remembered_layout():
    tf = LatestTF()
    rng = np.random.default_rng(5)
    names = [("world", "base"), ("base", "arm_a"), ("arm_a", "tool")]
    for k in range(4):                      # batch after batch: the layout of the first is reused
        qs = Rotation.random(3, random_state=k).as_quat()
        xyz = rng.normal(size=(3, 3))
        tf.add_batch([tf_bytes([(p, c, xyz[i], qs[i]) for i, (p, c) in enumerate(names)], stamp=(k, 9))])
        want = np.eye(4)
        for i in range(3):
            m = np.eye(4)
            m[:3, :3], m[:3, 3] = Rotation.from_quat(qs[i]).as_matrix(), xyz[i]
            want = want @ m
        assert np.allclose(tf.poses("world", ["tool"])["tool"], want)
        assert np.isclose(tf.stamp("tool"), k + 9e-9, rtol=0, atol=1e-12)
    # same length, another frame name: parsed again, the new frame appears
    still = (0, 0, 0, 1)
    tf.add_batch([tf_bytes([("world", "base", (0, 0, 0), still), ("base", "arm_b", (1, 0, 0), still),
                            ("arm_a", "tool", (0, 0, 0), still)])])
    assert np.allclose(tf.poses("world", ["arm_b"])["arm_b"][:3, 3], (1, 0, 0))
