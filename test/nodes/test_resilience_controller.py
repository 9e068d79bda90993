"""controller_node under hardware faults and bus loss: it halts (the running trajectory is dropped,
the arm stops), reports (diagnostics ERROR naming the cause), stays up, and recovers on ~/recover."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fixtures.hardware.lwa_fixture import HOME, JOINTS, Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")
from builtin_interfaces.msg import Duration  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robot_bridge.hardware import FaultKind, HardwareError  # noqa: E402


@pytest.fixture
def harness():
    h = Harness(lwa_robot(), state_rate=100.0)
    yield h
    h.close()


def _statuses(h, since):
    arrays = h.snapshot(h.diagnostics, since)
    return {s.name.split(": ")[-1]: s for s in arrays[-1].status} if arrays else {}


def _start_slow_trajectory(h):
    target = [0.8] * len(JOINTS)
    point = JointTrajectoryPoint(positions=target, time_from_start=Duration(sec=20))
    h.trajectory_pub.publish(JointTrajectory(joint_names=JOINTS, points=[point]))
    start = h.latest_position()
    h.wait_for(lambda: np.max(np.abs(h.latest_position() - start)) > 1e-3, 5.0, "motion")


def _stopped(h, window=0.3) -> bool:
    a = h.latest_position()
    time.sleep(window)
    return bool(np.max(np.abs(h.latest_position() - a)) < 1e-9)


def _recover_and_home(h):
    res = h.call("recover")
    assert res.success, res.message
    since = time.monotonic()
    h.wait_for(lambda: (s := _statuses(h, since)) and all(v.level == DiagnosticStatus.OK for v in s.values()),
               5.0, "all OK after recover")
    assert h.call("home").success
    expected = np.array([HOME.get(j, 0.0) for j in JOINTS])
    h.wait_for(lambda: np.max(np.abs(h.latest_position() - expected)) < 1e-6, 10.0, "home")


@pytest.mark.parametrize("kind", list(FaultKind), ids=lambda k: k.name.lower())
def test_fault_during_motion_halts_reports_recovers(harness, kind):
    h = harness
    _start_slow_trajectory(h)
    since = time.monotonic()
    with h.node.lock:
        h.node.hardware.inject_fault("lwa_joint_2", kind)
    statuses = h.wait_for(lambda: (s := _statuses(h, since)) and
                          s["lwa_joint_2"].level == DiagnosticStatus.ERROR and s, 3.0, "ERROR on diagnostics")
    assert statuses["lwa_joint_2"].message
    h.wait_for(lambda: _stopped(h), 5.0, "the whole arm stopped")
    assert h.node.control.motions == []
    _recover_and_home(h)


def test_bus_loss_halts_reports_and_recovers(harness):
    h = harness
    _start_slow_trajectory(h)
    hardware = h.node.hardware
    real_read = hardware.read
    lost = {"on": True}

    def read():
        if lost["on"]:
            raise HardwareError("CAN bus lost (simulated)")
        return real_read()

    since = time.monotonic()
    hardware.read = read
    try:
        h.wait_for(lambda: any(s.level == DiagnosticStatus.ERROR and "bus" in s.message
                               for s in _statuses(h, since).values()), 3.0, "bus loss on diagnostics")
        assert h.node.control.motions == []                       # halted: nothing resumes by itself
        time.sleep(0.3)
    finally:
        lost["on"] = False
    back = h.node._now()          # a sample measured after the bus came back (not the last one before it)
    h.wait_for(lambda: any(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 > back
                           for m in h.snapshot(h.joint_states)), 3.0, "joint_states after the bus came back")
    assert _stopped(h)                                            # still halted until told otherwise
    _recover_and_home(h)
