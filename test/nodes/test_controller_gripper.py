"""controller_node's GripperCommand server on the embedded LWA3-style arm with its parallel gripper (driving
joint finger_joint, 0 closed .. 0.04 m open, the right finger a mimic), from a real ActionClient in another
process: open and close reach the goal; closing on a body of the world (collision geometry) stalls at the
contact, reported stalled and not reached, with the gripper pressing at max_effort."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fixtures.hardware.lwa_fixture import Harness  # noqa: E402

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")


from fixtures.hardware.controller import BOX_HALF_WIDTH, FINGER, SUCCEEDED, Client, embedded_robot  # noqa: E402
from robot_bridge.formats.srdf import attach_semantics, read_srdf  # noqa: E402
from robot_bridge.bringup import DEFAULT_SRDF  # noqa: E402
from robot_bridge.kinematics.fk import KinematicModel  # noqa: E402
from robot_bridge.model import Box, Geometry, Link, Robot  # noqa: E402

ACTION = "/controller_node/gripper_cmd"


@pytest.fixture
def gripper(request):
    box, static, prefix = (request.param + ("",))[:3] if isinstance(request.param, tuple) else \
        (request.param, False, "")
    h = Harness(embedded_robot(box=box, static=static), state_rate=50.0, frame_prefix=prefix)
    h.prefix = prefix
    clients = []

    def command(position, max_effort=0.0):
        clients.append(Client({"position": position, "max_effort": max_effort}, ACTION, "--gripper"))
        return clients[-1].result(timeout=60.0)
    h.command = command
    h.finger = h.node.joints.index(FINGER)
    yield h
    try:
        for c in clients:
            c.close()
    finally:                    # the harness (spin thread, nodes, context) goes even if a client hangs
        h.close()


@pytest.mark.parametrize("gripper", [False], indirect=True)
def test_open_and_close_reach_the_goal(gripper):
    h = gripper
    assert [c.joints for c in h.node.controllers] == [[f"j{i}" for i in range(1, 8)]]   # arm: not the fingers
    opened = h.command(0.04)
    assert opened["status"] == SUCCEEDED and opened["reached_goal"] and not opened["stalled"], opened
    assert opened["position"] == pytest.approx(0.04, abs=1e-3)
    closed = h.command(0.005)
    assert closed["status"] == SUCCEEDED and closed["reached_goal"] and not closed["stalled"], closed
    assert h.latest_position()[h.finger] == pytest.approx(0.005, abs=1e-3)
    speeds = [abs(m.velocity[h.finger]) for m in h.snapshot(h.joint_states)]
    assert max(speeds) <= 0.05 * (1 + 1e-9)                  # finger_joint's velocity limit


@pytest.mark.parametrize("gripper", [True], indirect=True)
def test_closing_on_a_world_object_stalls(gripper):
    h = gripper
    opened = h.command(0.04)
    assert opened["reached_goal"], opened
    since = time.monotonic()
    closed = h.command(0.0, max_effort=30.0)
    assert closed["status"] == SUCCEEDED and closed["stalled"] and not closed["reached_goal"], closed
    # the left pad (inner face 0.02 - 0.008 + q from the gripper's middle) touches the box at q = 0.018
    contact = 0.02 - 0.008 + 0.0
    assert closed["position"] == pytest.approx(BOX_HALF_WIDTH - contact, abs=1e-4)
    assert closed["effort"] == pytest.approx(-30.0)           # pressing closed (negative) at max_effort
    positions = [m.position[h.finger] for m in h.snapshot(h.joint_states, since)]
    assert min(positions) >= BOX_HALF_WIDTH - contact - 1e-9  # never through the box


@pytest.mark.parametrize("gripper", [(True, False), (True, True), (True, False, "r1/")], indirect=True,
                         ids=["dynamic", "static", "frame_prefix"])
def test_fingers_stalled_on_a_movable_body_attach_it_at_world_node_and_opening_detaches(gripper):
    """world_node owns what the gripper holds: the controller says it on world_node/attach (ADD on the
    gripper joint's parent link, the fingers as touch links; REMOVE when opening).  A body of static links
    only (OpenRAVE type="static", a table) stops the fingers but is not carried.  Links are named as on TF
    (with the bridge's frame_prefix, as world_node looks them up)."""
    from moveit_msgs.msg import AttachedCollisionObject, CollisionObject

    h = gripper
    static = h.node.robot.environment["grasp_box"].links["grasp_box"].static
    said: list = []
    h.probe.create_subscription(AttachedCollisionObject, "/world_node/attach", h._keep(said), 100)
    h.wait_for(lambda: h.node.count_subscribers("/world_node/attach") >= 1, 30.0, "the probe's subscription")
    assert h.command(0.04)["reached_goal"]
    closed = h.command(0.0, max_effort=30.0)
    assert closed["stalled"], closed
    assert h.command(0.04)["reached_goal"]
    if static:
        states = len(h.snapshot(h.joint_states))       # ample time for a message that should not come
        h.wait_for(lambda: len(h.snapshot(h.joint_states)) > states + 25, 30.0, "25 more joint states")
        assert h.snapshot(said) == []
        return
    h.wait_for(lambda: len(h.snapshot(said)) >= 2, 30.0, "ADD and REMOVE on world_node/attach")
    add, remove = h.snapshot(said)
    p = h.prefix
    assert (add.object.id, add.object.operation, add.link_name) == ("grasp_box", CollisionObject.ADD,
                                                                     p + "gripper_base")
    assert add.object.header.frame_id == p + "gripper_base"
    assert set(add.touch_links) == {p + "gripper_base", p + "finger_left", p + "finger_right"}
    assert (remove.object.id, remove.object.operation) == ("grasp_box", CollisionObject.REMOVE)


def test_an_arm_trajectory_on_the_topic_drives_the_arm_and_the_gripper_holds():
    """Issue 31: a 7-joint trajectory on ~/joint_trajectory for the arm with a gripper was dropped with a log
    line only.  It now drives that controller's joints (the gripper holds), as its action does; a trajectory
    the topic cannot take says why on /diagnostics."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    h = Harness(embedded_robot(box=False), state_rate=50.0)
    try:
        arm = next(c for c in h.node.controllers if FINGER not in c.joints and len(c.joints) == 7)
        finger = h.node.joints.index(FINGER)
        before = h.latest_position()
        goal = before[arm.index] + 0.1
        h.trajectory_pub.publish(JointTrajectory(joint_names=list(arm.joints), points=[JointTrajectoryPoint(
            positions=list(goal), time_from_start=Duration(sec=1))]))
        h.wait_for(lambda: np.allclose(h.latest_position()[arm.index], goal, atol=1e-3), 10.0, "arm at goal")
        assert h.latest_position()[finger] == pytest.approx(before[finger], abs=1e-9)

        since = time.monotonic()
        some = list(arm.joints[:3])
        h.trajectory_pub.publish(JointTrajectory(joint_names=some, points=[JointTrajectoryPoint(
            positions=[0.0] * 3, time_from_start=Duration(sec=1))]))

        def said():
            for array in h.snapshot(h.diagnostics, since):
                for status in array.status:
                    if status.name.endswith("~/joint_trajectory") and "missing" in status.message:
                        return status
        status = h.wait_for(said, 10.0, "the refusal on /diagnostics")
        assert "allow_partial_joints_goal" in status.message, status.message
        assert np.all(h.latest_position()[arm.index[:3]] > 0.05)      # not sent towards 0: nothing taken
    finally:
        h.close()


def test_a_robot_placed_by_robot_pose_closes_on_the_body_where_it_stands():
    """Sim with robot_pose (issue 43, found by test/cli/test_robots_scenes.py): the world's bodies are in the
    world frame and the robot stands at robot_pose, so the fingers meet a box placed between them there.
    The old controller built its collision scene with the robot at its file's placement (the origin): the
    fingers closed through the box (reached, not stalled) and a Pickup failed "nothing grasped"."""
    from robot_bridge.bringup import DATA_DIR
    from robot_bridge.formats import load as load_robot
    from robot_bridge.model.placement import pose_matrix

    pose = [0.4, -0.3, 0.05, 0.0, 0.0, 0.6]
    robot = load_robot(str(DATA_DIR / "lwa3_gripper.robot.xml"))
    attach_semantics(robot, read_srdf(DEFAULT_SRDF, robot))
    at = np.eye(4)
    at[:3, 3] = [0.0, 0.0, 0.07]
    body = Robot("grasp_box")
    # 3 cm deep (x), the fingers 2 cm: no box face in a finger face's plane (rays grazing a coplanar face
    # hit it at once on the Embree backend, not on numpy's)
    body.links["grasp_box"] = Link("grasp_box", collisions=[Geometry(Box(np.array([0.015, BOX_HALF_WIDTH,
                                                                                   0.012])))])
    body.placement = pose_matrix(pose) @ KinematicModel(robot).link_poses({})["gripper_base"] @ at
    robot.environment["grasp_box"] = body
    h = Harness(robot, state_rate=50.0, robot_pose=pose)
    clients = []
    try:
        def command(position, max_effort=0.0):
            clients.append(Client({"position": position, "max_effort": max_effort}, ACTION, "--gripper"))
            return clients[-1].result(timeout=60.0)

        assert command(0.04)["reached_goal"]
        closed = command(0.0, max_effort=30.0)
        assert closed["stalled"] and not closed["reached_goal"], closed
        assert closed["position"] == pytest.approx(BOX_HALF_WIDTH - (0.02 - 0.008), abs=1e-4)
    finally:
        try:
            for c in clients:
                c.close()
        finally:
            h.close()
