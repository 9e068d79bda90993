"""controller_node with hardware=canopen: simulated CiA 402 drives on python-can's virtual bus."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from fixtures.hardware.lwa_fixture import JOINTS, LOWER, UPPER, VELOCITY, Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")
canopen = pytest.importorskip("canopen")
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from robot_bridge.hardware import FaultKind  # noqa: E402
from robot_bridge.hardware.cia402_sim import Cia402DriveSim  # noqa: E402

from fixtures.hardware.controller import assert_within_limits, point, report  # noqa: E402

ARM = JOINTS[:4]                     # four modules keep the bus and the 2 CPUs lightly loaded
NODE_IDS = [3, 4, 5, 6]


@pytest.fixture
def canopen_harness():
    channel = f"rb-node-{os.getpid()}"
    network = canopen.Network()
    network.connect(interface="virtual", channel=channel)
    robot = lwa_robot()
    drives = []
    for joint, node_id in zip(ARM, NODE_IDS):
        j = robot.joints[joint]
        drives.append(Cia402DriveSim(network, node_id, velocity=j.velocity[0], acceleration=j.acceleration[0],
                                     lower=j.lower[0], upper=j.upper[0]))
    for d in drives:
        d.start()
    h = Harness(robot, hardware="canopen", joints=ARM, state_rate=100.0, **{
        "canopen.interface": "virtual", "canopen.channel": channel, "canopen.node_ids": NODE_IDS,
        "canopen.heartbeat_ms": 50, "canopen.heartbeat_timeout": 2.0})     # no false cut cable under load
    yield h, drives
    h.close()
    for d in drives:
        d.stop()
    network.disconnect()


def test_node_on_canopen_trajectory_fault_recover(canopen_harness):
    h, drives = canopen_harness
    assert [d.state for d in drives] == ["OPERATION ENABLED"] * 4          # auto_init enabled them
    goal = np.array([0.6, -0.5, 0.4, 0.8])
    start = time.monotonic()
    h.trajectory_pub.publish(JointTrajectory(joint_names=ARM, points=[
        point([0.3, -0.25, 0.2, 0.4], np.zeros(4), 1.5), point(goal, np.zeros(4), 3.0)]))
    h.wait_for(lambda: np.max(np.abs(h.latest_position() - goal)) < 1e-3 and time.monotonic() - start > 3.0,
               6.0, "goal")
    time.sleep(0.2)
    final_error = float(np.max(np.abs(h.latest_position() - goal)))
    assert final_error < 1e-3
    samples = h.snapshot(h.joint_states, start)
    index = [JOINTS.index(j) for j in ARM]
    for msg in samples:
        q, v = np.array(msg.position), np.array(msg.velocity)
        assert np.all(q >= LOWER[index]) and np.all(q <= UPPER[index])
        assert np.all(np.abs(v) <= VELOCITY[index] * (1 + 1e-6))
    assert_within_limits(samples, [], ARM)
    report("trajectory_canopen", final_error_rad=final_error, samples=len(samples),
           drive_error_rad=float(np.max(np.abs([d.axis.position for d in drives] - goal))))

    drives[2].inject_fault(FaultKind.FOLLOWING_ERROR)
    since = time.monotonic()

    def error_status():
        arrays = h.snapshot(h.diagnostics, since)
        status = {s.name.split(": ")[-1]: s for s in arrays[-1].status} if arrays else {}
        return status if status and status[ARM[2]].level == DiagnosticStatus.ERROR else None
    status = h.wait_for(error_status, 3.0, "ERROR on /diagnostics")
    assert "0x8611" in status[ARM[2]].message and status[ARM[2]].hardware_id == "canopen:5"
    before = h.latest_position()
    h.commands_pub.publish(Float64MultiArray(data=[0.0] * 4))
    home = h.call("home")
    assert not home.success and "fault" in home.message
    time.sleep(0.3)
    assert np.allclose(h.latest_position(), before, atol=1e-6)
    assert h.call("recover").success
    assert drives[2].state == "OPERATION ENABLED"
    h.commands_pub.publish(Float64MultiArray(data=[0.0] * 4))
    h.wait_for(lambda: np.max(np.abs(h.latest_position())) < 1e-6, 4.0, "back to zero")


def test_follow_joint_trajectory_on_canopen(canopen_harness):
    """The MoveIt path over the virtual CAN bus: a FollowJointTrajectory goal from an ActionClient in another
    process succeeds, with feedback at the state rate and the final error within the goal tolerance."""
    from fixtures.hardware.controller import SUCCEEDED, Client

    h, drives = canopen_harness
    goal = np.array([0.4, -0.3, 0.3, 0.5])
    since = time.monotonic()
    client = Client({"joint_names": ARM, "points": [
        {"positions": list(goal / 2), "velocities": [0.0] * 4, "time_from_start": 1.0},
        {"positions": list(goal), "velocities": [0.0] * 4, "time_from_start": 2.0}]})
    try:
        result = client.result(timeout=60.0)
        feedback = client.of("feedback")
    finally:
        client.close()
    assert result["status"] == SUCCEEDED and result["error_code"] == 0, result
    stamps = np.array([f["stamp"] for f in feedback])
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    # one feedback per controller_state tick (same sample stamps), at most the harness' state_rate of 100 Hz
    state_stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in h.snapshot(h.states, since)]
    during = [t for t in state_stamps if stamps[0] <= t <= stamps[-1]]
    assert set(stamps.tolist()) <= set(state_stamps) and len(stamps) >= 0.9 * len(during)
    assert rate <= 1.05 * 100.0, rate                           # reported; a loaded machine delivers fewer
    final_error = float(np.max(np.abs(h.latest_position() - goal)))
    assert final_error <= 0.01                                  # constraints.goal_position
    assert_within_limits(h.snapshot(h.joint_states, since), [], ARM)
    report("fjt_canopen", final_error_rad=final_error, feedback_rate_hz=rate, feedback_messages=len(feedback),
           drive_error_rad=float(np.max(np.abs([d.axis.position for d in drives] - goal))))
