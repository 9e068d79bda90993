"""The description node's in-place /joint_states reader against rclpy's own deserialisation."""

from __future__ import annotations

import math
from pathlib import Path

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


# -- JointStateTF: the whole hot path (read in place, compiled plan, TFMessage written in place) -------------
from rclpy.serialization import deserialize_message  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics import fk_kernel  # noqa: E402
from robot_bridge.kinematics.state_publisher import RateGate, RowEvaluation, StatePublisher  # noqa: E402
from robot_bridge.ros.joint_state_tf import JointStateTF  # noqa: E402

TWO_LINK_NAMES = ["hinge", "ball_axis0", "ball_axis1", "ball_axis2"]
# the /tf rows by the numba kernel (when numba is installed) and by numpy
PATHS = pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.skipif(
    not fk_kernel.AVAILABLE, reason="numba not installed"))])


def _as_taken(data: bytes, headroom: int) -> memoryview:
    """The bytes as the fast path hands them over: a writable view with headroom in front."""
    return memoryview(bytearray(headroom) + bytearray(data))


def _tf_values(tf: TFMessage) -> dict:
    def values(t):
        tr, rot = t.transform.translation, t.transform.rotation
        return [tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w]
    return {t.child_frame_id: (t.header.frame_id, t.header.stamp.sec, t.header.stamp.nanosec, values(t))
            for t in tf.transforms}


@PATHS
@pytest.mark.parametrize("headroom", [0, 13, 64])
@pytest.mark.parametrize("names,frame_id", [
    (TWO_LINK_NAMES, ""),
    (["ball_axis1", "hinge"], "odd"),                        # a subset, other order: only its rows
    (["nope", "hinge", "ball_axis0", "hinge"], "x" * 9),     # unknown and repeated names (last wins)
])
def test_joint_state_tf_matches_state_publisher(fixtures, names, frame_id, headroom, compiled):
    path = fixtures / "description" / "two_link.robot.xml"
    ours = JointStateTF(StatePublisher(load(path), "p/", compiled=compiled))
    truth = StatePublisher(load(path), "p/", compiled=False)
    assert (ours.state._rows_kernel is not None) == compiled
    rng = np.random.default_rng(len(names) + headroom)
    warnings = []
    for k in range(3):                                   # the second message reuses the compiled plan
        msg = _message(rng, names, 10 + k, frame_id)
        plan = ours.process(_as_taken(serialize_message(msg), headroom), headroom, RateGate(0.0),
                            warnings.append)
        moving, unknown = truth.update(names, list(msg.position))
        got = _tf_values(deserialize_message(plan.buffer.tobytes(), TFMessage))
        assert set(got) == set(moving.children)
        for parent, child, values in zip(moving.parents, moving.children, moving.values, strict=True):
            assert got[child][:3] == (parent, 10 + k, msg.header.stamp.nanosec)
            np.testing.assert_allclose(got[child][3], values, atol=1e-12)
        assert ours.process(serialize_message(msg), 0, RateGate(0.0), warnings.append).buffer is plan.buffer
    assert (plan.fused_args is not None) == compiled
    assert bool(unknown) == any("unknown joints (ignored): nope" in w for w in warnings)


def test_joint_state_tf_rejects_what_would_poison_tf(fixtures):
    state = StatePublisher(load(fixtures / "description" / "two_link.robot.xml"))
    ours, warnings = JointStateTF(state), []
    q = state.q.copy()
    bad = [JointState(name=["hinge", "ball_axis0"], position=[0.1, math.nan]),
           JointState(name=["hinge"], position=[-math.inf]),
           JointState(name=["hinge", "ball_axis0"], position=[0.1])]
    for msg in bad:
        assert ours.process(serialize_message(msg), 0, RateGate(0.0), warnings.append) is None
    assert ours.process(serialize_message(bad[0])[:-20], 0, RateGate(0.0), warnings.append) is None
    assert np.array_equal(state.q, q)                      # nothing of them was applied
    assert [w.split(" with ")[0].split(":")[0] for w in warnings] == [
        "ignored a JointState", "ignored a JointState", "ignored a JointState",
        "ignored an undecodable JointState"]
    gated = RateGate(10.0)                                 # publish_frequency: 100 ms per joint
    first = JointState(name=["hinge"], position=[0.2])
    first.header.stamp.sec = 1
    assert ours.process(serialize_message(first), 0, gated, warnings.append) is not None
    first.header.stamp.nanosec = 50_000_000
    assert ours.process(serialize_message(first), 0, gated, warnings.append) is None
    assert state.q[state.index["hinge"]] == 0.2                # stored even when not published


@PATHS
def test_a_stream_that_turns_bad_keeps_its_last_good_state(fixtures, compiled):
    """Bad messages with the names of the stream so far (the compiled kernel's case: a known plan)."""
    state = StatePublisher(load(fixtures / "description" / "two_link.robot.xml"), compiled=compiled)
    ours, warnings = JointStateTF(state), []
    names = ["hinge", "ball_axis0"]
    good = serialize_message(JointState(name=names, position=[0.1, 0.2]))
    bad = {"a NaN": serialize_message(JointState(name=names, position=[0.3, math.nan])),
           "an inf": serialize_message(JointState(name=names, position=[math.inf, 0.3])),
           "one position short": serialize_message(JointState(name=names, position=[0.3])),
           "truncated": good[:-20],                        # into the positions
           "empty": b""}
    expected = ["ignored a JointState with non-finite positions"] * 2 + [
        "ignored a JointState with 2 names and 1 positions", "ignored an undecodable JointState",
        "ignored an undecodable JointState"]
    for (what, data), warning in zip(bad.items(), expected, strict=True):
        assert ours.process(good, 0, RateGate(0.0), warnings.append) is not None, what
        q = state.q.copy()
        assert ours.process(data, 0, RateGate(0.0), warnings.append) is None, what
        assert np.array_equal(state.q, q), what
        assert warnings.pop().startswith(warning), what
    assert warnings == []
    assert (ours._last.fused_args is not None) == compiled     # the compiled kernel judged them
    if compiled:
        # a relay's take buffer: the compiled entry of the warmed types; nothing compiled per message
        taken = np.frombuffer(bytearray(good), np.uint8)
        assert ours.process(taken, 0, RateGate(0.0), warnings.append, taken=True) is not None
        assert ours._last.fused_taken is not ours._fused
        assert len(ours._fused.overloads) == 2                   # writable and read-only message
    # the stream goes on: a good message after the bad ones is applied and published
    plan = ours.process(serialize_message(JointState(name=names, position=[0.5, -0.5])), 0, RateGate(0.0),
                        warnings.append)
    assert plan is not None and state.q[state.index["hinge"]] == 0.5 and warnings == []


@pytest.mark.parametrize("robot", ["two_link", "lwa3", "pr2"])
def test_selection_values_are_the_rows_of_all_values(request, fixtures, robot):
    """The per-selection product (exp form, chunked beyond 12 rows) equals the rows of the all-rows
    product (cos form), for revolute, spherical, prismatic and mimic rows and subsets in any order."""
    if robot == "pr2":
        data = request.getfixturevalue("openrave_data")
        state = StatePublisher(load(data / "robots" / "pr2-beta-static.zae", search_path=[data]))
        assert len(state.moving) > 3 * RowEvaluation.CHUNK
    else:
        path = fixtures / "description" / "two_link.robot.xml" if robot == "two_link" else \
            Path(__file__).resolve().parents[2] / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"
        state = StatePublisher(load(path))
    names = [j.name for j in state.moving]
    assert robot == "two_link" or any(j.type == "prismatic" for j in state.moving)
    rng = np.random.default_rng(5)
    state.accept(names, rng.uniform(-1.0, 1.0, len(names)))
    for subset in (names, names[-1:], names[::-2], []):
        sel = state.selection(subset)
        np.testing.assert_allclose(state.selection_values(sel), state._values()[sel.rows], atol=1e-15)
        if sel.evaluation is not None and fk_kernel.AVAILABLE:    # the compiled rows, scattered in place
            assert sel.evaluation.kernel is not None
            dest = np.full(7 * len(sel.rows) + 3, np.nan)
            index = rng.permutation(len(dest))[:7 * len(sel.rows)].astype(np.int64)
            sel.evaluation.write(state.q, dest, index)
            np.testing.assert_allclose(dest[index], state._values()[sel.rows].reshape(-1), atol=1e-15)
            assert np.isnan(np.delete(dest, index)).all()
