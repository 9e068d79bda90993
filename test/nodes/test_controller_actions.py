"""controller_node's FollowJointTrajectory server driven the way MoveIt drives it: a real rclpy ActionClient
in another process (test/fixtures/hardware/action_client.py), one test per joint_trajectory_controller rule.
Every test checks the error code, and that the arm ends held within its limits with no /joint_states sample
above the velocity limit and no ~/controller_state feedback above the acceleration limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fixtures.hardware.lwa_fixture import JOINTS, LOWER, UPPER, Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")
from std_msgs.msg import Float64MultiArray  # noqa: E402

from robot_bridge.hardware import FaultKind  # noqa: E402

from fixtures.hardware.controller import (ABORTED, ACTION, CANCELED, SUCCEEDED, Client,  # noqa: E402, F401
                                         assert_within_limits, goal, report)

STATE_RATE = 50.0


@pytest.fixture
def harness():
    h = Harness(lwa_robot(), state_rate=STATE_RATE)
    clients = []
    def client(spec, *options, action=ACTION):
        clients.append(Client(spec, action, *options))
        return clients[-1]
    h.client = client
    yield h
    try:
        for c in clients:
            c.close()
    finally:                    # the harness (spin thread, nodes, context) goes even if a client hangs
        h.close()


def assert_held_within_limits(h, since: float) -> np.ndarray:
    """At rest (two consecutive hardware-stamped samples with zero speed and the same position), inside the
    position limits, with no sample since ``since`` above the velocity / acceleration limits."""
    def settled():
        samples = h.snapshot(h.joint_states, since)[-2:]
        return len(samples) == 2 and all(np.all(np.abs(m.velocity) < 1e-9) for m in samples) and \
            np.array_equal(samples[0].position, samples[1].position) and samples[0].header.stamp != \
            samples[1].header.stamp
    h.wait_for(settled, 10.0, "arm at rest")
    q = h.latest_position()
    assert np.all(q >= LOWER - 1e-9) and np.all(q <= UPPER + 1e-9)
    peak_a = assert_within_limits(h.snapshot(h.joint_states, since), h.snapshot(h.states, since))
    return q, peak_a


def test_goal_succeeds_with_feedback_at_the_state_rate(harness):
    h = harness
    since = time.monotonic()
    target = np.array([0.5, -0.4, 0.3, 0.6, -0.2, 0.1, 0.4])
    client = h.client(goal(target, 2.0))
    result = client.result()
    assert result["status"] == SUCCEEDED and result["error_code"] == 0, result
    feedback = client.of("feedback")
    stamps = np.array([f["stamp"] for f in feedback])
    span = stamps[-1] - stamps[0]
    rate = (len(stamps) - 1) / span
    # feedback at the state rate: one feedback per controller_state publication while the goal ran (the same
    # tick publishes both, with the same sample stamp), never faster than state_rate; how many ticks a
    # loaded machine delivers per second is reported (2 busy cores: 10..50 Hz of the 50)
    state_stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in h.snapshot(h.states, since)]
    during = [t for t in state_stamps if stamps[0] <= t <= stamps[-1]]
    assert set(stamps.tolist()) <= set(state_stamps)
    assert len(stamps) >= 0.9 * len(during), (len(stamps), len(during))
    assert span > 1.5 and rate <= 1.05 * STATE_RATE, (rate, span)
    assert feedback[-1]["joint_names"] == JOINTS
    final_error = float(np.max(np.abs(h.latest_position() - target)))
    assert final_error <= 0.01                            # constraints.goal_position
    q, peak_a = assert_held_within_limits(h, since)
    report("fjt_sim", final_error_rad=final_error, feedback_rate_hz=rate, feedback_messages=len(feedback),
           peak_acceleration_fraction=peak_a)


@pytest.mark.parametrize("names, code_name", [
    (["lwa_joint_1", "nope"] + JOINTS[2:], "unknown"), (JOINTS[:3], "missing")])
def test_wrong_joints_give_invalid_joints_and_the_arm_stays(harness, names, code_name):
    h = harness
    since = time.monotonic()
    before = h.latest_position()
    result = h.client(goal([0.2] * len(names), 1.0, joints=names)).result()
    assert result["status"] == ABORTED and result["error_code"] == -2, result
    assert code_name in result["error_string"]
    q, _ = assert_held_within_limits(h, since)
    assert np.array_equal(q, before)


@pytest.mark.parametrize("spec, words", [
    ({"joint_names": JOINTS, "points": [{"positions": [0.1] * 7, "time_from_start": 1.0},
                                        {"positions": [0.2] * 7, "time_from_start": 1.0}]},
     "strictly increasing"),
    ({"joint_names": JOINTS, "points": [{"positions": [0.1] * 6, "time_from_start": 1.0}]},
     "6 positions for 7"),
    (goal([3.5] + [0.0] * 6, 1.0), "outside limits"),
])
def test_bad_trajectories_give_invalid_goal_and_the_arm_stays(harness, spec, words):
    h = harness
    since = time.monotonic()
    before = h.latest_position()
    result = h.client(spec).result()
    assert result["status"] == ABORTED and result["error_code"] == -1, result
    assert words in result["error_string"]
    q, _ = assert_held_within_limits(h, since)
    assert np.array_equal(q, before)


def test_path_tolerance_violation_aborts_and_holds(harness):
    h = harness
    since = time.monotonic()
    spec = goal([2.0] + [0.0] * 6, 1.0, velocities=False,            # twice lwa_joint_1's speed limit
                path_tolerance=[{"name": "lwa_joint_1", "position": 0.05}])
    result = h.client(spec).result()
    assert result["status"] == ABORTED and result["error_code"] == -4, result
    assert "lwa_joint_1 position error" in result["error_string"]
    q, peak_a = assert_held_within_limits(h, since)
    assert q[0] < 1.0                                         # stopped well short of the goal
    report("fjt_path_tolerance", stopped_at=float(q[0]), peak_acceleration_fraction=peak_a)


def test_goal_tolerance_violation_after_goal_time_tolerance(harness):
    h = harness
    since = time.monotonic()
    spec = goal([1.5] + [0.0] * 6, 0.5, goal_time_tolerance=0.1,
                goal_tolerance=[{"name": "lwa_joint_1", "position": 0.001}])
    result = h.client(spec).result()
    assert result["status"] == ABORTED and result["error_code"] == -5, result
    assert "lwa_joint_1 position error" in result["error_string"]
    assert_held_within_limits(h, since)


def test_cancel_decelerates_within_limits_and_holds(harness):
    h = harness
    since = time.monotonic()
    client = h.client(goal([2.5] + [0.0] * 6, 5.0), "--cancel-beyond", "0", "0.5")
    assert client.wait("cancel_response")[0]["canceling"] == 1
    result = client.result()
    assert result["status"] == CANCELED and result["error_code"] == 0, result
    q, peak_a = assert_held_within_limits(h, since)
    assert 0.5 < q[0] < 2.4                                     # stopped on the way
    report("fjt_cancel", stopped_at=float(q[0]), peak_acceleration_fraction=peak_a)


def test_new_goal_preempts_the_active_one(harness, tmp_path):
    h = harness
    since = time.monotonic()
    trigger = tmp_path / "send"
    second = h.client(goal([-0.3] + [0.0] * 6, 2.0), "--send-when", str(trigger))
    second.wait("ready")
    first = h.client(goal([1.0] + [0.0] * 6, 4.0))
    first.wait_moving(0, 0.2)
    trigger.touch()
    result = first.result()
    assert result["status"] == CANCELED and result["error_code"] == -1, result
    assert "new incoming action" in result["error_string"]
    assert second.result()["error_code"] == 0
    q, _ = assert_held_within_limits(h, since)
    assert abs(q[0] + 0.3) <= 0.01


def test_topic_command_preempts_the_goal(harness):
    h = harness
    since = time.monotonic()
    client = h.client(goal([1.0] + [0.0] * 6, 4.0))
    client.wait_moving(0, 0.2)
    h.commands_pub.publish(Float64MultiArray(data=[0.0] * 7))
    result = client.result()
    assert result["status"] == CANCELED and result["error_code"] == -1, result
    assert "~/commands" in result["error_string"]
    q, _ = assert_held_within_limits(h, since)
    assert np.allclose(q, 0.0, atol=1e-6)


def test_hardware_fault_aborts_naming_module_and_fault(harness):
    h = harness
    since = time.monotonic()
    client = h.client(goal([1.0] * 7, 4.0))
    client.wait_moving(0, 0.2)
    with h.node.lock:
        h.node.hardware.inject_fault("lwa_joint_3", FaultKind.FOLLOWING_ERROR)
    result = client.result()
    assert result["status"] == ABORTED and result["error_code"] == -4, result
    assert "lwa_joint_3 (sim:lwa_joint_3): following error exceeded" in result["error_string"]
    h.wait_for(lambda: np.all(np.abs(h.snapshot(h.joint_states)[-1].velocity) < 1e-9), 10.0, "stopped")
    assert_within_limits(h.snapshot(h.joint_states, since), h.snapshot(h.states, since))


def test_ros2_action_send_goal(harness):
    """The ros2 CLI, as a user types it, against the running server."""
    import shutil

    ros2 = str(Path(sys.prefix) / "bin" / "ros2")
    ros2 = ros2 if Path(ros2).exists() else shutil.which("ros2") or ros2
    if not Path(ros2).exists():
        from fixtures.ros2_tools import missing_reason

        pytest.skip(missing_reason())
    target = [0.2, 0.1, 0.0, 0.3, 0.0, 0.0, 0.1]
    text = ("{trajectory: {joint_names: [" + ", ".join(JOINTS) + "], points: [{positions: "
            + json.dumps(target) + ", velocities: " + json.dumps([0.0] * 7)
            + ", time_from_start: {sec: 1}}]}}")
    env = dict(os.environ)
    prefix = sys.prefix                                       # the venv: a ROS 2 prefix after make setup
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(p for p in (prefix, env.get("AMENT_PREFIX_PATH", "")) if p)
    command = [ros2, "action", "send_goal", ACTION, "control_msgs/action/FollowJointTrajectory", text,
               "--feedback"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "SUCCEEDED" in out.stdout and "error_code: 0" in out.stdout, out.stdout[-2000:]
    assert "Feedback:" in out.stdout
    assert np.max(np.abs(harness.latest_position() - target)) <= 0.01


def test_embedded_arm_goal_succeeds():
    """The same on the embedded LWA3-style arm with its SRDF (the bringup's default robot): the default
    controller drives j1..j7 (not the gripper), a two-point goal succeeds within the goal tolerance."""
    from robot_bridge.bringup import DEFAULT_ROBOT, DEFAULT_SRDF
    from robot_bridge.formats import load
    from robot_bridge.formats.srdf import attach_semantics, read_srdf

    robot = load(DEFAULT_ROBOT)
    attach_semantics(robot, read_srdf(DEFAULT_SRDF, robot))
    h = Harness(robot, state_rate=STATE_RATE)
    client = None
    try:
        arm = [f"j{i}" for i in range(1, 8)]
        assert [c.joints for c in h.node.controllers] == [arm]
        since = time.monotonic()
        target = np.array([0.4, 0.3, -0.2, 0.8, 0.1, 0.5, -0.3])
        client = Client({"joint_names": arm, "points": [
            {"positions": list(target / 2), "velocities": list(target / 3.0), "time_from_start": 1.5},
            {"positions": list(target), "velocities": [0.0] * 7, "time_from_start": 3.0}]})
        result = client.result()
        assert result["status"] == SUCCEEDED and result["error_code"] == 0, result
        index = [h.node.joints.index(j) for j in arm]
        final_error = float(np.max(np.abs(h.latest_position()[index] - target)))
        assert final_error <= 0.01
        limits = [h.node.limits[i] for i in index]
        vmax = np.array([lim.velocity for lim in limits]) * (1 + 1e-9)
        for msg in h.snapshot(h.joint_states, since):
            assert np.all(np.abs(np.array(msg.velocity)[index]) <= vmax)
        for msg in h.snapshot(h.states, since):
            accel = np.abs(np.array(msg.feedback.accelerations)[index])
            assert np.all(accel <= [lim.acceleration * (1 + 1e-6) for lim in limits])
        stamps = [f["stamp"] for f in client.of("feedback")]
        states = h.snapshot(h.states, since)
        state_stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in states]
        during = [t for t in state_stamps if stamps[0] <= t <= stamps[-1]]
        assert set(stamps) <= set(state_stamps) and len(stamps) >= 0.9 * len(during)   # at the state rate
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
        assert rate <= 1.05 * STATE_RATE, rate
        report("fjt_embedded", final_error_rad=final_error, feedback_messages=len(stamps),
               feedback_rate_hz=rate)
    finally:
        try:
            if client is not None:
                client.close()
        finally:
            h.close()
