"""Operator messages of controller_node: a refused or idle command says what to call."""

from __future__ import annotations


import pytest

from fixtures.hardware.lwa_fixture import Harness, lwa_robot  # noqa: E402

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

    from fixtures.hardware.lwa_fixture import JOINTS

    h = Harness(lwa_robot())
    try:
        h.trajectory_pub.publish(JointTrajectory(joint_names=JOINTS, points=[JointTrajectoryPoint(
            positions=[0.5] + [0.0] * 6, time_from_start=Duration(sec=0, nanosec=100_000_000))]))
        seen = []

        def warned():
            seen.append(capfd.readouterr().err)
            return "trajectory accepted beyond the joint limits" in "".join(seen) or None
        h.wait_for(warned, 30.0, lambda: f"the warning; stderr had: {''.join(seen)[-2000:]!r}")
        text = "".join(seen)
        assert text.count("trajectory accepted beyond the joint limits") == 1
        assert "lwa_joint_1 needs velocity 5, its limit is 1" in text, text
    finally:
        h.close()


@pytest.mark.parametrize("index", [[0, 1, 2, 3, 4, 5, 6], [4, 1], [7]])
def test_state_templates_serialize_what_the_messages_say(index):
    """The serialized templates of the state publishing equal the messages built field by field."""
    import numpy as np
    from rclpy.serialization import deserialize_message
    from builtin_interfaces.msg import Time
    from control_msgs.msg import JointTrajectoryControllerState
    from std_msgs.msg import Header

    from robot_bridge.nodes.controller import _controller_state, _controller_state_template

    n = 8
    joints = [f"j{i}" for i in range(n)]
    rng = np.random.default_rng(len(index))
    desired, actual, effort = rng.normal(size=(3, n)), rng.normal(size=(3, n)), rng.normal(size=n)
    error = desired - actual
    index = np.array(index)
    template, gather = _controller_state_template([joints[i] for i in index], index, n)
    source = np.concatenate([desired.ravel(), actual.ravel(), effort, error.ravel()])
    data = template.fill(source[gather], 12, 345)
    truth = _controller_state(Header(stamp=Time(sec=12, nanosec=345)), [joints[i] for i in index], index,
                              desired, actual, effort, error)
    assert deserialize_message(data, JointTrajectoryControllerState) == truth
