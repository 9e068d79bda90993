"""Operator messages of controller_node: a refused or idle command says what to call."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "hardware"))
from lwa_fixture import Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")


def test_halt_and_home_on_disabled_modules_say_call_enable():
    h = Harness(lwa_robot())
    try:
        assert h.call("enable", False).success
        halt = h.call("halt")
        assert halt.success
        assert halt.message.startswith("nothing moving to halt: modules disabled, brakes engaged (lwa_")
        assert halt.message.endswith("): call ~/enable true")
        home = h.call("home")
        assert not home.success and "modules disabled" in home.message
        assert home.message.endswith("call ~/enable true")
        assert h.call("enable", True).success
        assert h.call("home").success
        assert h.call("halt").message == "halting"
    finally:
        h.close()


def test_a_trajectory_beyond_the_velocity_limit_is_accepted_with_one_warning(capfd):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from lwa_fixture import JOINTS

    h = Harness(lwa_robot())
    try:
        h.trajectory_pub.publish(JointTrajectory(joint_names=JOINTS, points=[JointTrajectoryPoint(
            positions=[0.5] + [0.0] * 6, time_from_start=Duration(sec=0, nanosec=100_000_000))]))
        seen = []

        def warned():
            seen.append(capfd.readouterr().err)
            return "trajectory accepted beyond the joint limits" in "".join(seen) or None
        h.wait_for(warned, 30.0, "the warning")
        text = "".join(seen)
        assert text.count("trajectory accepted beyond the joint limits") == 1
        assert "lwa_joint_1 needs velocity 5, its limit is 1" in text, text
    finally:
        h.close()
