"""The controller follows the robot it drives (issue 31): after description_file is switched on a live
bridge, the controller kept the old robot and its joint names drove the new arm.  Now it re-reads the robot
when nothing moves, else refuses the switch with the reason (log, /diagnostics) and every command until
the description comes back; it never maps old joint names onto a new robot."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
from builtin_interfaces.msg import Duration  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robot_bridge import bringup  # noqa: E402

from fixtures.bridge_nodes import Bridge  # noqa: E402
from fixtures.waiting import wait_until  # noqa: E402


def chain(name: str, joints: list[str]) -> str:
    links = "".join(f'<link name="{name}_l{i}"/>' for i in range(len(joints) + 1))
    moving = "".join(
        f'<joint name="{j}" type="revolute"><parent link="{name}_l{i}"/><child link="{name}_l{i + 1}"/>'
        f'<origin xyz="0 0 0.2"/><axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="1" velocity="1"/>'
        "</joint>" for i, j in enumerate(joints))
    return f'<robot name="{name}">{links}{moving}</robot>'


@pytest.fixture
def two_robots(tmp_path):
    (tmp_path / "a.urdf").write_text(chain("a", ["a1", "a2"]))
    (tmp_path / "b.urdf").write_text(chain("b", ["b1", "b2", "b3"]))
    bridge = Bridge({"sensor_bridge": {"default_mode": "off"}},
                    bringup.Options(robot=str(tmp_path / "a.urdf"), search_path=str(tmp_path)))
    yield bridge, tmp_path
    bridge.close()


def test_the_controller_follows_a_switched_description_only_when_nothing_moves(two_robots):
    bridge, folder = two_robots
    controller = bridge.nodes["controller_node"]
    assert controller.joints == ["a1", "a2"]
    # a long trajectory: the switch comes while it runs
    controller._on_trajectory(JointTrajectory(joint_names=["a1", "a2"], points=[JointTrajectoryPoint(
        positions=[1.5, -1.5], time_from_start=Duration(sec=60))]))
    assert controller.control.motions
    assert bridge.set("description_node", "description_file", str(folder / "b.urdf")).successful
    # both set by the same callback, one after the other (description_refusal first): wait for both
    wait_until(lambda: controller.description_refusal is not None and "description" in controller.refusals,
               30.0, "the switch refused")
    assert "a trajectory is running" in controller.description_refusal
    assert controller.joints == ["a1", "a2"] and controller.robot.name == "a"
    assert "description" in controller.refusals                       # on /diagnostics
    with pytest.raises(Exception, match="not followed"):              # no command reaches the old joints
        controller._check_operational()

    # switched back: the robot driven is the described one again, commands accepted
    assert bridge.set("description_node", "description_file", str(folder / "a.urdf")).successful
    wait_until(lambda: controller.description_refusal is None, 30.0, "the refusal cleared")
    controller._check_operational()

    controller.halt()
    wait_until(lambda: not controller.control.motions and
               not np.any(np.abs(controller.control.sample.velocity) > 1e-6), 30.0, "the arm at rest")
    assert bridge.set("description_node", "description_file", str(folder / "b.urdf")).successful
    wait_until(lambda: controller.joints == ["b1", "b2", "b3"], 30.0, "the controller on robot b")
    assert controller.robot.name == "b" and controller.description_refusal is None
    got = bridge.call("controller_node", lambda c: c.get_parameters(["joints"])).values[0]
    assert list(got.string_array_value) == ["b1", "b2", "b3"]
    controller._on_trajectory(JointTrajectory(joint_names=["a1", "a2"], points=[JointTrajectoryPoint(
        positions=[0.1, 0.1], time_from_start=Duration(sec=1))]))
    assert not controller.control.motions                             # old names: refused
    controller._on_trajectory(JointTrajectory(joint_names=["b1", "b2", "b3"], points=[JointTrajectoryPoint(
        positions=[0.1, 0.2, 0.3], time_from_start=Duration(sec=1))]))
    wait_until(lambda: np.allclose(controller.control.sample.position, [0.1, 0.2, 0.3], atol=1e-3), 30.0,
               "robot b at its goal")


def test_a_switch_never_destroys_the_state_publishers_under_a_state_tick(tmp_path):
    """The state tick publishes (serialized templates through the publishers' raw rcl handles, goal
    feedback) outside the controller's lock; a robot switch used to destroy a named controller's state
    publisher under it (a use after free in C).  Now the switch waits for the tick: held here inside its
    publish until the switch either reaches the state lock or has destroyed the publisher."""
    import threading

    import rclpy
    from rclpy.parameter import Parameter

    from robot_bridge.nodes.controller import ControllerNode

    description = {}
    for name in ("a", "b"):
        (tmp_path / f"{name}.urdf").write_text(chain(name, [f"{name}1", f"{name}2"]))
        group = f'<group name="arm"><joint name="{name}1"/><joint name="{name}2"/></group>'
        (tmp_path / f"{name}.srdf").write_text(f'<robot name="{name}">{group}</robot>')
        description[name] = {"description_file": str(tmp_path / f"{name}.urdf"), "search_path": [],
                              "xacro_args": "", "srdf_file": str(tmp_path / f"{name}.srdf")}
    context = rclpy.Context()
    context.init()
    node = ControllerNode(context=context, parameter_overrides=[
        Parameter(k, value=v) for k, v in description["a"].items() if v] + [
        Parameter("controllers", value=["arm"])])
    try:
        old = node.controllers[0].state_pub
        assert old is not None and node._templates[2] is not None
        templates = node._templates[2]
        publish = templates.publish_state
        inside, attempted, switched, seen = threading.Event(), threading.Event(), threading.Event(), []
        switcher = threading.Thread(target=lambda: (seen.append(node.follow_description(description["b"])),
                                                    switched.set()))

        class Watched:                      # the state lock, telling when the switch reaches it
            def __init__(self, lock):
                self.lock = lock

            def __enter__(self):
                if threading.current_thread() is switcher:
                    attempted.set()
                return self.lock.__enter__()

            def __exit__(self, *exc):
                return self.lock.__exit__(*exc)

        def held(*args):
            if not inside.is_set():
                inside.set()
                deadline = time.monotonic() + 60
                while not (attempted.is_set() or switched.is_set()) and time.monotonic() < deadline:
                    time.sleep(0.005)
                seen.append(("publisher alive", old in node.publishers))
            return publish(*args)
        node._state_lock = Watched(getattr(node, "_state_lock", threading.Lock()))
        templates.publish_state = held
        assert inside.wait(30)
        switcher.start()
        switcher.join(60)
        assert not switcher.is_alive()
        assert seen[0] == ("publisher alive", True), seen          # the switch waited for the tick
        assert seen[1] is True and node.joints == ["b1", "b2"] and old not in node.publishers
        assert node.controllers[0].state_pub is not None
    finally:
        node.destroy_node()
        context.try_shutdown()
