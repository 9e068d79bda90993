"""view_node with real rclpy (no browser): it takes robot_description and /tf at its page rate, keeps its last
good robot when a bad description comes, and shows a topic that stopped as stale."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("viser")

from geometry_msgs.msg import TransformStamped  # noqa: E402
from sensor_msgs.msg import LaserScan  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402
from fixtures.waiting import wait_until  # noqa: E402

URDF = """<robot name="pole"><link name="base"><visual><geometry><box size="0.1 0.1 1"/></geometry></visual>
</link><link name="tip"/><joint name="j" type="revolute"><parent link="base"/><child link="tip"/>
<origin xyz="0 0 1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" velocity="1" effort="1"/>
</joint></robot>"""


@pytest.fixture
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
    node = ViewNode(context=context, parameter_overrides=[Parameter("port", value=port),
                                                          Parameter("stale_after", value=0.5),
                                                          Parameter("discover_period", value=0.2)])
    peer = rclpy.create_node("view_test_peer", context=context)
    with spun(context, node, peer):      # the spin ends before the nodes go (fixtures/spinning.py)
        yield node, peer


def test_robot_and_tf_are_taken_a_bad_description_keeps_the_last_good_robot(view):
    node, peer = view
    description = peer.create_publisher(String, "robot_description", qos.description_qos())
    tf = peer.create_publisher(TFMessage, "/tf", qos.tf_qos())
    description.publish(String(data=URDF))
    wait_until(lambda: node._scene is not None, 60.0, "robot_description never taken")
    assert node._scene.name == "pole" and [s.name for s in node._scene.sliders] == ["j"]

    def publish(x):
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = "world", "base"
        t.transform.translation.x = x
        t.transform.rotation.w = 1.0
        tf.publish(TFMessage(transforms=[t]))

    for k in range(200):                     # a burst: the newest wins
        publish(k * 0.01)
    wait_until(lambda: np.isclose(node.tf.poses("world", ["base"]).get("base", np.eye(4))[0, 3], 1.99), 60.0,
               "base at x 1.99")
    wait_until(lambda: node.page.poses_sent > 0, 60.0, "poses sent to the page")

    description.publish(String(data="<robot name='broken'><link name='a'/><joint name='j'/></robot>"))
    wait_until(lambda: node.status.names() and node.status._topics["/robot_description"].count >= 2, 60.0,
               "two robot_description messages counted")
    time.sleep(0.5)
    assert node._scene.name == "pole"


def test_a_topic_that_stops_is_stale(view):
    node, peer = view
    scan = peer.create_publisher(LaserScan, "/test_scan", qos.sensor_data_qos())
    msg = LaserScan(angle_min=-1.0, angle_increment=0.5, range_min=0.1, range_max=5.0, ranges=[1.0] * 5)
    msg.header.frame_id = "base"

    def live():
        scan.publish(msg)
        return node.status.names().count("/test_scan") and node.status.state("/test_scan", time.monotonic()) \
            == "live"

    wait_until(live, 60.0, "the scan topic was not discovered")
    wait_until(lambda: node.status.state("/test_scan", time.monotonic()) == "stale", 60.0, "stale scan")
    assert "/test_scan` **STALE**" in node.status.report(time.monotonic())


ARM2 = """<robot name="arm2"><link name="base"/><link name="l1"/><link name="l2"/>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
<limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/>
<axis xyz="0 0 1"/>
<limit lower="-2" upper="2" velocity="1" effort="1"/></joint></robot>"""


def drawn_box(node):
    return node.page._bodies.get("box_1")


def test_sliders_follow_joint_states_the_planning_scene_and_the_planned_path_are_drawn(view, monkeypatch):
    moveit = pytest.importorskip("moveit_msgs.msg")
    if not hasattr(moveit, "DisplayTrajectory"):
        pytest.skip("moveit_msgs without DisplayTrajectory (rebuild the venv: make setup)")
    from moveit_msgs.msg import (AttachedCollisionObject, CollisionObject, DisplayTrajectory, ObjectColor,
                                 PlanningScene, RobotTrajectory)
    from sensor_msgs.msg import JointState
    from shape_msgs.msg import SolidPrimitive
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from robot_bridge.ros.planning_scene import moveit_qos, pose_msg

    node, peer = view
    paths = []
    draw_path = node.page.set_path
    monkeypatch.setattr(node.page, "set_path", lambda points: (paths.append(points), draw_path(points)))
    peer.create_publisher(String, "robot_description", qos.description_qos()).publish(String(data=ARM2))
    static = peer.create_publisher(TFMessage, "/tf_static", qos.tf_static_qos())
    tf = peer.create_publisher(TFMessage, "/tf", qos.tf_qos())
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = "world", "base"
    t.transform.rotation.w = 1.0
    static.publish(TFMessage(transforms=[t]))
    wait_until(lambda: node._scene is not None and node._scene.name == "arm2", 60.0, "the scene of arm2")

    # the sliders show where the joints are, as they move
    joints = peer.create_publisher(JointState, "/joint_states", qos.sensor_data_qos())
    for j1 in (0.3, -0.7):
        wait_until(lambda: joints.publish(JointState(name=["j1", "j2"], position=[j1, 0.1])) or
                   abs(node.page.slider_values()["j1"] - j1) < 0.01, 60.0, lambda: f"slider j1 not at {j1}")

    # a body on /collision_object, its colour on /planning_scene, then MOVE, attach to l2, REMOVE
    objects = peer.create_publisher(CollisionObject, "/collision_object", moveit_qos())
    scene = peer.create_publisher(PlanningScene, "/planning_scene", moveit_qos())
    attached = peer.create_publisher(AttachedCollisionObject, "/attached_collision_object", moveit_qos())
    box = CollisionObject(id="box_1", operation=CollisionObject.ADD,
                          primitives=[SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.2, 0.3])],
                          primitive_poses=[pose_msg(np.eye(4))])
    box.header.frame_id = "world"
    box.pose = pose_msg(np.array([[1, 0, 0, 0.5], [0, 1, 0, 0.2], [0, 0, 1, 0], [0, 0, 0, 1.0]]))
    colour = PlanningScene(is_diff=True, object_colors=[ObjectColor(id="box_1")])
    c = colour.object_colors[0].color
    c.r, c.b, c.a = 1.0, 1.0, 1.0

    def drawn(rgba=(1.0, 0.0, 1.0, 1.0)):
        objects.publish(box)
        scene.publish(colour)
        d = node.page._bodies.get("box_1")
        return d is not None and d.rgba == rgba

    wait_until(drawn, 60.0, "the collision object was not drawn in its colour")
    assert np.allclose(node.planning_scene.get("box_1").pose[:3, 3], (0.5, 0.2, 0.0))
    box.operation = CollisionObject.MOVE
    box.pose.position.x = 0.8
    objects.publish(box)
    wait_until(lambda: np.isclose(drawn_box(node).handle.position[0], 0.8), 60.0, "the box at x 0.8")

    tf_l = TransformStamped()
    tf_l.header.frame_id, tf_l.child_frame_id = "base", "l1"
    tf_l.transform.rotation.w = 1.0
    tf_2 = TransformStamped()
    tf_2.header.frame_id, tf_2.child_frame_id = "l1", "l2"
    tf_2.transform.translation.x, tf_2.transform.rotation.w = 0.5, 1.0
    tf.publish(TFMessage(transforms=[tf_l, tf_2]))
    wait_until(lambda: "l2" in node.tf.poses("world", ["l2"]), 60.0, "l2 in /tf")
    attach = AttachedCollisionObject(link_name="l2", object=CollisionObject(id="box_1",
                                                                           operation=CollisionObject.ADD))
    attached.publish(attach)
    wait_until(lambda: drawn_box(node).frame == "l2", 60.0, "the body was not attached to l2")
    assert np.allclose(node.planning_scene.get("box_1").pose[:3, 3], (0.3, 0.2, 0.0))   # 0.8 - 0.5 in l2
    box.operation = CollisionObject.REMOVE
    attach.object.operation = CollisionObject.REMOVE
    attached.publish(attach)
    wait_until(lambda: drawn_box(node).frame == "world", 60.0, "the box back in world")
    objects.publish(box)
    wait_until(lambda: "box_1" not in node.page._bodies, 60.0, "REMOVE did not remove the body")

    # the planned path: j1 0 -> pi/2; j2 only in trajectory_start, so the path's tip is l2 (j2's child), whose
    # origin is 0.5 m out along l1
    display = peer.create_publisher(DisplayTrajectory, "/display_planned_path", qos.description_qos())
    points = [JointTrajectoryPoint(positions=[a]) for a in np.linspace(0.0, np.pi / 2, 5)]
    msg = DisplayTrajectory(trajectory=[RobotTrajectory(joint_trajectory=JointTrajectory(joint_names=["j1"],
                                                                                         points=points))])
    msg.trajectory_start.joint_state = JointState(name=["j2"], position=[0.4])
    display.publish(msg)
    wait_until(lambda: paths and paths[-1] is not None, 60.0, "the planned path was not drawn")
    angles = np.linspace(0.0, np.pi / 2, 5)
    assert np.allclose(paths[-1], np.stack([0.5 * np.cos(angles), 0.5 * np.sin(angles), 0 * angles], axis=1))


def test_the_occupancy_map_on_the_planning_scene_is_drawn_as_its_cells(view):
    """world_node's /planning_scene diff with world.octomap (made by robot_bridge.ros.occupancy) becomes the
    view's octomap body: boxes covering the occupied cells, drawn on the page; a colour-only diff keeps it."""
    pytest.importorskip("octomap")
    pytest.importorskip("moveit_msgs.msg")
    from moveit_msgs.msg import PlanningScene

    from robot_bridge.ros.occupancy import planning_scene_diff
    from robot_bridge.ros.planning_scene import moveit_qos
    from robot_bridge.view.planning_scene import OCTOMAP_ID
    from robot_bridge.world.occupancy import OccupancyMap

    node, peer = view
    occupancy = OccupancyMap()
    cells = np.array([[1.01, 0.01, 0.01], [1.01, 0.03, 0.01], [1.01, 0.05, 0.01]])     # a row of 3 cells
    occupancy.insert_points(cells, np.eye(4))
    scene = peer.create_publisher(PlanningScene, "/planning_scene", moveit_qos())
    msg = planning_scene_diff(occupancy.to_message_fields(), "world", peer.get_clock().now().to_msg())
    drawn = node.page._bodies
    wait_until(lambda: scene.publish(msg) or OCTOMAP_ID in drawn, 60.0, "the octomap never drawn")
    body = node.planning_scene.get(OCTOMAP_ID)
    v = np.concatenate([p.vertices for p in body.parts])
    assert body.frame == "world" and np.allclose(v.min(axis=0), [1.0, 0.0, 0.0], atol=1e-6)
    assert np.allclose(v.max(axis=0), [1.02, 0.06, 0.02], atol=1e-6)
    # a diff without a map (only a colour): taken (the colour is there), the map left as it was
    from moveit_msgs.msg import ObjectColor

    def colour_taken(name: str) -> None:
        colour = PlanningScene(is_diff=True, object_colors=[ObjectColor(id=name)])
        colour.object_colors[0].color.a = 1.0
        wait_until(lambda: scene.publish(colour) or name in node.planning_scene.colors, 60.0, "no colour")

    colour_taken("first")                  # the maps published while waiting are taken before it (in order)
    serial = node.planning_scene.get(OCTOMAP_ID).shape_serial
    colour_taken("second")
    assert node.planning_scene.get(OCTOMAP_ID).shape_serial == serial and OCTOMAP_ID in drawn
