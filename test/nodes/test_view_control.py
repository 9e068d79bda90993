"""view_node with control allowed (issue 41): only the page with the start's token moves joints, and its goal
names every joint of the controller, the others held where /joint_states has them, so a controller that wants
all its joints takes it.  The controller here is a FollowJointTrajectory server that checks goals with the
controller node's own check (``prepare_trajectory``, ``allow_partial_joints_goal`` false) and, like
controller_node, names a gripper joint it does not drive on its ``controller_state``."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("viser")
pytest.importorskip("control_msgs.action")

from fixtures.viser_client import CAMERA, open_ws, send, slider_update, wait_until  # noqa: E402

ARM = """<robot name="arm3"><link name="base"/><link name="l1"/><link name="l2"/><link name="finger"/>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
<limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/>
<axis xyz="0 0 1"/><limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
<joint name="g" type="prismatic"><parent link="l2"/><child link="finger"/><axis xyz="1 0 0"/>
<limit lower="0" upper="0.05" velocity="0.1" effort="1"/></joint></robot>"""
DRIVEN = ["j1", "j2"]                               # the arm controller's joints
POSITIONS = {"j1": 0.0, "j2": 0.4, "g": 0.01}       # /joint_states


class Controller:
    """A FollowJointTrajectory server on /controller_node checked as controller_node checks."""

    def __init__(self, node):
        from control_msgs.action import FollowJointTrajectory
        from rclpy.action import ActionServer

        self.accepted: list[dict] = []
        self.refused: list[str] = []
        self.server = ActionServer(node, FollowJointTrajectory, "/controller_node/follow_joint_trajectory",
                                   self.execute)

    def execute(self, handle):
        from control_msgs.action import FollowJointTrajectory

        from robot_bridge.control.goals import GoalRejected, prepare_trajectory
        from robot_bridge.hardware.base import JointLimits
        from robot_bridge.ros.conversions import trajectory_command

        trajectory = handle.request.trajectory
        try:
            prepare_trajectory(trajectory_command(trajectory), DRIVEN, [JointLimits(-2, 2)] * 2,
                               allow_partial=False)
        except GoalRejected as exc:
            self.refused.append(str(exc))
            handle.abort()
            return FollowJointTrajectory.Result(error_code=int(exc.code), error_string=str(exc))
        self.accepted.append(dict(zip(trajectory.joint_names, trajectory.points[-1].positions)))
        handle.succeed()
        return FollowJointTrajectory.Result(error_code=0)


@pytest.fixture(scope="module")
def view():
    import rclpy
    from fixtures.spinning import spun
    from rclpy.parameter import Parameter

    from robot_bridge.nodes.view import ViewNode

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = rclpy.Context()
    context.init()
    overrides = [Parameter("port", value=port), Parameter("allow_control", value=True),
                 Parameter("discover_period", value=0.2)]
    node = ViewNode(context=context, print_url=False, parameter_overrides=overrides)
    peer = rclpy.create_node("view_control_peer", context=context)
    controller = Controller(peer)
    with spun(context, node, peer):
        yield node, peer, controller


def test_only_the_page_with_the_token_moves_a_joint_and_the_others_are_held(view):
    from control_msgs.msg import JointTrajectoryControllerState
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from robot_bridge.ros import qos

    node, peer, controller = view
    token = node.url.partition("?token=")[2]
    assert node.url.startswith(f"http://127.0.0.1:{node.page.port}/?token=") and len(token) >= 40
    peer.create_publisher(String, "robot_description", qos.description_qos()).publish(String(data=ARM))
    joints = peer.create_publisher(JointState, "/joint_states", qos.sensor_data_qos())
    state = peer.create_publisher(JointTrajectoryControllerState, "/controller_node/controller_state", 10)

    def publish():
        joints.publish(JointState(name=list(POSITIONS), position=list(POSITIONS.values())))
        state.publish(JointTrajectoryControllerState(joint_names=["j1", "j2", "g"]))   # the gripper too

    seen = wait_until(lambda: publish() or (node._scene is not None and node._controllers and
                                            node._joint_positions == POSITIONS), 60)
    assert seen, "the view never had the robot, the controller and the joint positions"

    port = node.page.port
    with open_ws(port) as plain, open_ws(port, origin=None, token=token) as granted:
        send(plain, CAMERA)
        page = wait_until(lambda: next((p for p in list(node.page._panels.values()) if p.sliders), None))
        assert page is not None and not page.granted
        for value in (0.3, 0.31, 0.32):                   # a page without the token: moves nothing
            send(plain, slider_update(page.sliders["j1"]._impl.uuid, value))
        send(granted, CAMERA)
        mine = wait_until(lambda: next((p for p in list(node.page._panels.values())
                                        if p.granted and p.sliders), None))
        assert mine is not None, "the page with the token got no control"
        send(granted, slider_update(mine.sliders["j2"]._impl.uuid, -0.5))
        assert wait_until(lambda: publish() or controller.accepted, 60), \
            f"no goal accepted; refused: {controller.refused}"
    # the controller's joints only, j2 where it was moved, j1 held (not the other page's 0.3)
    assert controller.accepted[0] == pytest.approx({"j1": 0.0, "j2": -0.5})
    assert all("unknown joints ['g']" in r for r in controller.refused), controller.refused
