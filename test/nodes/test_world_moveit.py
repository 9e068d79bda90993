"""world_node tells MoveIt what the bridge sees (issue 32), observed by real rclpy subscribers typed by the
venv's moveit_msgs with the QoS of MoveIt 2's planning scene monitor (depth 1024, reliable, volatile):

- the environment bodies of the robot file (default.env.xml: table, crate, can, block, ball) as
  CollisionObject ADD with the poses and shapes the file gives, also to a subscriber that joins late; a
  switch of ``description_file`` on the running node replaces them (REMOVE / ADD), a file that does not load
  is refused and the bodies kept; a switch of the description node's robot file is followed;
- a sim GripperCommand that closes on a detected body: the controller's fingers stall on it and
  world_node sends one AttachedCollisionObject ADD on the gripper link with the finger links as touch
  links (a late subscriber gets it too); opening sends the REMOVE and the body's put-down pose (where the
  moved arm left it) as an ADD.

Detections becoming ADD within 100 ms of their TF, their expiry a REMOVE and the late joiner of detected
bodies: test_world_planning_scene.py.  Nodes run as their own processes; nothing waits on a sleep."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

pytest.importorskip("moveit_msgs.msg")
pytest.importorskip("control_msgs.action")

from moveit_msgs.msg import AttachedCollisionObject, CollisionObject  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from shape_msgs.msg import SolidPrimitive  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.fk import KinematicModel  # noqa: E402
from robot_bridge.model.transform import from_rpy, make  # noqa: E402
from robot_bridge.ros.actions import get_result, send_goal  # noqa: E402
from robot_bridge.ros.planning_scene import moveit_qos  # noqa: E402
from fixtures.spinning import answer  # noqa: E402
from fixtures.world_bridge import DATA, REPO, WORLD, Observer, Process, pose_of, stop, wait_until  # noqa: E402


def start(module: str, *params: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", f"robot_bridge.nodes.{module}", "--ros-args"]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def stop_all(procs) -> None:
    outputs = [stop(p) for p in procs]
    print(*outputs, sep="\n")                 # shown when the test fails
    for out in outputs:
        assert "Traceback" not in out, out


class MoveItRecorder:
    """/collision_object and /attached_collision_object as move_group subscribes them, in arrival order."""

    def __init__(self, node):
        self.lock = threading.Lock()
        self.messages: list = []              # CollisionObject and AttachedCollisionObject, arrival order
        node.create_subscription(CollisionObject, "/collision_object", self._add, moveit_qos())
        node.create_subscription(AttachedCollisionObject, "/attached_collision_object", self._add,
                                 moveit_qos())

    def _add(self, msg) -> None:
        with self.lock:
            self.messages.append(msg)

    def objects(self, name: str = None, operation: bytes = None) -> list[CollisionObject]:
        with self.lock:
            return [m for m in self.messages if isinstance(m, CollisionObject)
                    and (name is None or m.id == name) and (operation is None or m.operation == operation)]

    def attached(self, name: str) -> list[AttachedCollisionObject]:
        with self.lock:
            return [m for m in self.messages
                    if isinstance(m, AttachedCollisionObject) and m.object.id == name]

    def put_downs(self, name: str) -> list[CollisionObject]:
        """The ADDs of ``name`` on /collision_object that world_node sent after its last REMOVE on
        /attached_collision_object: stamped at or after it (world_node stamps each message as it sends it).
        Arrival order across the two topics is not send order: one executor takes the ready subscriptions
        in its own order."""
        removes = [m for m in self.attached(name) if m.object.operation == CollisionObject.REMOVE]
        if not removes:
            return []
        after = stamp_ns(removes[-1].object.header.stamp)
        return [m for m in self.objects(name, CollisionObject.ADD) if stamp_ns(m.header.stamp) >= after]

    def current(self) -> dict[str, CollisionObject]:
        """Every body whose last word was an ADD (or MOVE), as MoveIt's world would hold it."""
        out: dict[str, CollisionObject] = {}
        for m in self.objects():
            if m.operation == CollisionObject.REMOVE:
                out.pop(m.id, None)
            elif m.operation == CollisionObject.ADD:
                out[m.id] = m
        return out


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def boxes(msg: CollisionObject) -> list[tuple[tuple, tuple]]:
    """(full sizes, centre in the object's frame) of its boxes, rounded to 1e-9, sorted."""
    return sorted((tuple(round(d, 9) for d in p.dimensions),
                   tuple(round(v, 9) + 0.0 for v in pose_of(q)[:3, 3]))
                  for p, q in zip(msg.primitives, msg.primitive_poses) if p.type == SolidPrimitive.BOX)


def check_default_environment(bodies: dict[str, CollisionObject]) -> None:
    """The bodies of robot_bridge/data/default.env.xml as its text gives them (box sizes: 2 x extents)."""
    assert {"table", "crate", "can", "block", "ball"} <= set(bodies), sorted(bodies)
    for msg in bodies.values():
        assert msg.header.frame_id == "world"
    table = bodies["table"]
    np.testing.assert_allclose(pose_of(table.pose), make(np.eye(3), (1.0, 0.0, 0.0)), atol=1e-9)
    legs = [((0.06, 0.06, 0.7), (x, y, 0.35)) for x in (-0.35, 0.35) for y in (-0.55, 0.55)]
    assert boxes(table) == sorted([((0.8, 1.2, 0.04), (0.0, 0.0, 0.72))] + legs)
    block = bodies["block"]          # <translation>0.9 -0.2 0.74</translation> <rotationaxis>0 0 1 30
    np.testing.assert_allclose(pose_of(block.pose),
                               make(from_rpy((0.0, 0.0, np.radians(30.0))), (0.9, -0.2, 0.74)), atol=1e-9)
    assert boxes(block) == [((0.08, 0.08, 0.08), (0.0, 0.0, 0.04))]
    ball = bodies["ball"]
    np.testing.assert_allclose(pose_of(ball.pose)[:3, 3], (1.1, 0.3, 0.79), atol=1e-9)
    assert [(p.type, list(p.dimensions)) for p in ball.primitives] == [(SolidPrimitive.SPHERE, [0.05])]
    can = bodies["can"]
    assert [(p.type, list(p.dimensions)) for p in can.primitives] == \
        [(SolidPrimitive.CYLINDER, pytest.approx([0.12, 0.035]))]


def set_parameter(node, target: str, name: str, value: str):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    client = node.create_client(SetParameters, f"{target}/set_parameters")
    assert client.wait_for_service(timeout_sec=60.0)
    request = SetParameters.Request(parameters=[Parameter(
        name=name, value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value))])
    # sent again when no answer comes (a reply sent before the server matched this new client is dropped by
    # DDS; the rehearsal lost one under load): setting the same value again is harmless
    return answer(lambda: client.call_async(request), 60.0, f"{target}/set_parameters").results[0]


def late_held(predicate) -> None:
    """A move_group starting now (its own participant) gets the world and what the gripper holds."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    context = rclpy.Context()
    context.init()
    try:
        node = rclpy.create_node("late_move_group", context=context)
        late = MoveItRecorder(node)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        assert wait_until(lambda: predicate(late), lambda: executor.spin_once(timeout_sec=0.05)), \
            [(type(m).__name__, getattr(m, "id", "")) for m in late.messages]
        executor.shutdown(timeout_sec=5)
        node.destroy_node()
    finally:
        context.try_shutdown()


GRASP_LOCAL = make(np.eye(3), (0.0, 0.0, 0.07))      # between the finger pads of the open gripper
ARM_JOINTS = [f"j{i}" for i in range(1, 8)]


# -- with a controller: its own nodes, first in the file (before the module's bridge starts) ------------
@pytest.mark.timeout(240)
def test_a_sim_gripper_closing_on_a_body_attaches_it_and_opening_puts_it_down(tmp_path, detector_node):
    from builtin_interfaces.msg import Duration
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionClient
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    body = tmp_path / "grasp_box.kinbody.xml"
    body.write_text("""<KinBody name="grasp_box"><Body name="grasp_box" type="dynamic">
  <Geom type="box"><extents>0.01 0.03 0.01</extents></Geom></Body></KinBody>
""")
    mapping = tmp_path / "objects.yaml"
    mapping.write_text(f"classes:\n  grasp_box: {{file: {body}, static: true}}\n")
    procs = [start("description", f"description_file:={WORLD}"),
             start("controller", f"description_file:={WORLD}", "state_rate:=20.0",
                   f"sim.objects_roots:=[{tmp_path}]"),
             start("world", f"description_file:={WORLD}", f"objects_file:={mapping}", "publish_rate:=20.0")]
    try:
        obs, rec = Observer(detector_node), MoveItRecorder(detector_node)
        lock, states = threading.Lock(), []

        def on_state(msg):
            with lock:
                states.append(dict(zip(msg.name, msg.position)))
        detector_node.create_subscription(JointState, "/joint_states", on_state, 10)
        gripper = ActionClient(detector_node, GripperCommand, "/controller_node/gripper_cmd")
        assert gripper.wait_for_server(timeout_sec=60.0)

        def command(position: float):
            goal = GripperCommand.Goal()
            goal.command.position, goal.command.max_effort = position, 30.0
            sent = send_goal(detector_node, gripper, goal)
            assert wait_until(sent.done, timeout=60.0)
            result = get_result(detector_node, sent.result())
            assert wait_until(result.done, timeout=60.0)
            return result.result().result

        assert command(0.04).reached_goal
        assert wait_until(lambda: "grasp_box_0" in rec.current(),
                          lambda: obs.detect(("grasp_box", GRASP_LOCAL, "gripper_base")), timeout=60.0)
        assert wait_until(lambda: "grasp_box_0" in obs.latest_objects())    # the controller reads it
        robot = load(WORLD)
        with lock:
            q0 = dict(states[-1])
        grasped_at = robot.placement @ KinematicModel(robot).link_poses(q0)["gripper_base"] @ GRASP_LOCAL
        np.testing.assert_allclose(pose_of(rec.current()["grasp_box_0"].pose), grasped_at, atol=1e-6)

        closed = command(0.0)
        assert closed.stalled and not closed.reached_goal, closed             # the fingers met the box
        assert wait_until(lambda: rec.attached("grasp_box_0")), "no AttachedCollisionObject"
        add = rec.attached("grasp_box_0")[0]
        assert add.object.operation == CollisionObject.ADD and add.link_name == "gripper_base"
        assert set(add.touch_links) == {"gripper_base", "finger_left", "finger_right"}
        assert len(rec.attached("grasp_box_0")) == 1                             # one ADD per grasp
        late_held(lambda late: "grasp_box_0" in late.current() and late.attached("grasp_box_0") and
                  late.attached("grasp_box_0")[-1].link_name == "gripper_base")

        # the arm carries it away: j2 turned by 0.4 rad
        target = dict(q0, j2=q0["j2"] + 0.4)
        trajectory = JointTrajectory(joint_names=ARM_JOINTS, points=[JointTrajectoryPoint(
            positions=[target[j] for j in ARM_JOINTS], time_from_start=Duration(sec=2))])
        pub = detector_node.create_publisher(JointTrajectory, "/controller_node/joint_trajectory", 10)

        def settled():
            with lock:
                return len(states) > 0 and abs(states[-1]["j2"] - target["j2"]) < 1e-4
        assert wait_until(lambda: pub.get_subscription_count() > 0, timeout=60.0)
        pub.publish(trajectory)
        assert wait_until(settled, timeout=60.0)
        with lock:
            q1 = dict(states[-1])
        opened = command(0.04)
        assert opened.reached_goal, opened
        assert wait_until(lambda: len(rec.attached("grasp_box_0")) >= 2), "no detach"
        # the grasp's ADD (and its repetition for the late joiner: a volatile topic reaches everyone), then
        # one REMOVE
        attach = [m.object.operation for m in rec.attached("grasp_box_0")]
        assert attach[-1] == CollisionObject.REMOVE and attach.count(CollisionObject.REMOVE) == 1, attach
        put_down = robot.placement @ KinematicModel(robot).link_poses(q1)["gripper_base"] @ GRASP_LOCAL
        assert np.linalg.norm(put_down[:3, 3] - grasped_at[:3, 3]) > 0.1          # really carried away

        def put_down_sent():
            adds = rec.objects("grasp_box_0", CollisionObject.ADD)
            return adds and np.allclose(pose_of(adds[-1].pose), put_down, atol=1e-3)
        assert wait_until(put_down_sent), pose_of(rec.objects("grasp_box_0", CollisionObject.ADD)[-1].pose)
        assert rec.objects("grasp_box_0", CollisionObject.ADD)[-1].primitives      # with its shape
    finally:
        stop_all(procs)


# -- on the module's bridge: world_node and description_node --------------------------------------------
@pytest.fixture(scope="module")
def running_bridge(tmp_path_factory, module_detector_node):
    """world_node and description_node on the robot file, started once for the tests that need no
    controller; run-time files may be in ``folder``."""
    from types import SimpleNamespace

    folder = tmp_path_factory.mktemp("moveit")
    roots = os.pathsep.join([str(folder), str(DATA)])
    env = {"ROBOT_BRIDGE_ALLOWED_ROOTS": roots}          # run-time files: the module's folder
    procs = [Process("world", f"description_file:={WORLD}", env=env),
             Process("description", f"description_file:={WORLD}", env=env)]
    try:
        yield SimpleNamespace(node=module_detector_node, folder=folder, procs=procs)
    finally:
        outputs = [p.stop() for p in procs]
        print(*outputs, sep="\n")                 # shown when the last test fails
    for out in outputs:
        assert "Traceback" not in out, out


@pytest.fixture
def bridge(running_bridge):
    """The module's bridge as a fresh one: the description node on the robot file again, world_node's
    environment read from it again (every body where the file puts it, nothing attached); a test's MoveIt
    recorder subscribes anew (volatile topics: nothing sent before reaches it).  After the test: both nodes
    run and printed no traceback during it."""
    node = running_bridge.node
    since = [len(p.lines) for p in running_bridge.procs]
    for target in ("/description_node", "/world_node"):
        result = set_parameter(node, target, "description_file", str(WORLD))
        assert result.successful, result.reason
    yield running_bridge
    for p, start in zip(running_bridge.procs, since):
        during = p.output(start)
        print(during[-4000:])                  # shown when the test fails
        assert p.proc.poll() is None, during[-4000:]
        assert "Traceback" not in during, during


@pytest.mark.timeout(180)
def test_environment_bodies_go_to_moveit_and_follow_a_switch_of_the_robot_file(bridge):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    detector_node, tmp_path = bridge.node, bridge.folder
    other = tmp_path / "other.env.xml"
    other.write_text(f"""<Environment>
  <Robot file="{DATA / 'lwa3_gripper.robot.xml'}"/>
  <KinBody name="shelf"><translation>0.2 0.7 0.1</translation>
    <Body name="shelf" type="static"><Geom type="box"><extents>0.3 0.1 0.2</extents></Geom></Body>
  </KinBody>
</Environment>
""")
    (tmp_path / "broken.env.xml").write_text("<Environment><KinBody name=")
    late_context = None
    try:
        rec = MoveItRecorder(detector_node)
        assert wait_until(lambda: {"table", "crate", "can", "block", "ball"} <= set(rec.current()),
                          timeout=60.0), [m.id for m in rec.objects()]
        check_default_environment(rec.current())

        # move_group starting later (its own participant) still gets every current body
        late_context = rclpy.Context()
        late_context.init()
        late_node = rclpy.create_node("late_move_group", context=late_context)
        late = MoveItRecorder(late_node)
        executor = SingleThreadedExecutor(context=late_context)
        executor.add_node(late_node)
        assert wait_until(lambda: {"table", "crate", "can", "block", "ball"} <= set(late.current()),
                          lambda: executor.spin_once(timeout_sec=0.05)), [m.id for m in late.objects()]
        check_default_environment(late.current())
        executor.shutdown(timeout_sec=5)
        late_node.destroy_node()

        # a file that does not load: refused, the bodies stay
        broken = str(tmp_path / "broken.env.xml")
        result = set_parameter(detector_node, "/world_node", "description_file", broken)
        assert not result.successful and "broken.env.xml" in result.reason, result.reason
        assert not rec.objects(operation=CollisionObject.REMOVE)
        # the description node switched to another robot file: world_node follows, the old bodies go, the
        # new one comes
        result = set_parameter(detector_node, "/description_node", "description_file", str(other))
        assert result.successful, result.reason
        assert wait_until(lambda: set(rec.current()) == {"shelf"}, timeout=60.0), sorted(rec.current())
        assert {m.id for m in rec.objects(operation=CollisionObject.REMOVE)} == \
            {"table", "crate", "can", "block", "ball"}
        shelf = rec.current()["shelf"]
        np.testing.assert_allclose(pose_of(shelf.pose)[:3, 3], (0.2, 0.7, 0.1), atol=1e-9)
        assert boxes(shelf) == [((0.6, 0.2, 0.4), (0.0, 0.0, 0.0))]
    finally:
        if late_context is not None:
            late_context.try_shutdown()


@pytest.mark.timeout(180)
def test_an_attach_and_a_detach_take_the_link_at_their_stamp_not_the_latest_tf(bridge):
    """/tf lags or runs ahead of ~/attach (under load world_node works through a queue of /tf): the grasp's
    offset and the put-down pose are the link's TF at the message's stamp, interpolated between samples."""
    from builtin_interfaces.msg import Time
    from tf2_msgs.msg import TFMessage

    from robot_bridge.ros.qos import tf_qos
    from robot_bridge.ros.tf import transform_stamped
    from robot_bridge.nodes.planner import attached_qos

    detector_node = bridge.node
    rec = MoveItRecorder(detector_node)
    assert wait_until(lambda: "ball" in rec.current(), timeout=60.0)
    ball = pose_of(rec.current()["ball"].pose)
    tf_pub = detector_node.create_publisher(TFMessage, "/tf", tf_qos())
    attach_pub = detector_node.create_publisher(AttachedCollisionObject, "/world_node/attach",
                                                attached_qos())
    assert wait_until(lambda: tf_pub.get_subscription_count() > 0 and
                      attach_pub.get_subscription_count() > 0, timeout=60.0)

    def hand(t: float, x: float) -> None:          # world -> test_hand at stamp t: x along the x axis
        tf_pub.publish(TFMessage(transforms=[transform_stamped(
            "world", "test_hand", make(np.eye(3), (x, 0.0, 0.0)), Time(sec=int(t)))]))

    def attach(t: int, operation: bytes) -> None:
        msg = AttachedCollisionObject(link_name="test_hand", touch_links=["test_hand"])
        msg.object.id, msg.object.operation = "ball", operation
        msg.object.header.frame_id, msg.object.header.stamp = "test_hand", Time(sec=t)
        attach_pub.publish(msg)

    hand(10, 0.0)
    hand(12, 0.2)                 # already newer than the grasp: the offset is taken at 10 (x = 0)
    attach(10, CollisionObject.ADD)
    assert wait_until(lambda: rec.attached("ball"), timeout=60.0), "no AttachedCollisionObject"
    hand(14, 0.4)
    attach(15, CollisionObject.REMOVE)        # released at 15: its TF comes after the REMOVE
    hand(16, 0.6)

    assert wait_until(lambda: rec.put_downs("ball"), timeout=60.0), "no put-down"
    put_down = pose_of(rec.put_downs("ball")[0].pose)
    # the link moved from x = 0 (grasp, stamp 10) to x = 0.5 (release, stamp 15: halfway from 14 to 16)
    np.testing.assert_allclose(put_down, make(np.eye(3), (0.5, 0.0, 0.0)) @ ball, atol=1e-9)


def link_subtree(robot, link: str) -> list[str]:
    """``link`` and every link below it (the gripper's fingers), from the robot file's joints."""
    out = [link]
    for joint in robot.child_joints(link):
        out += link_subtree(robot, joint.child)
    return out


@pytest.mark.timeout(180)
def test_the_planners_attach_message_attaches_with_its_link_and_touch_links(bridge):
    """The AttachedCollisionObject planner_node sends on a Pickup / Place (``PlannerNode.publish_attached``,
    its own code on a stand-in node: the planner node's model build is slow), on its own -- without the sim
    gripper's, which world_node would take first -- reaches MoveIt as one ADD on the gripper link with the
    gripper's links as touch links, and one REMOVE."""
    from types import SimpleNamespace

    from robot_bridge.nodes.planner import PlannerNode, attached_qos

    detector_node = bridge.node
    obs, rec = Observer(detector_node), MoveItRecorder(detector_node)
    assert wait_until(lambda: "ball" in rec.current(), obs.publish_joints, timeout=60.0)
    ball = pose_of(rec.current()["ball"].pose)
    pub = detector_node.create_publisher(AttachedCollisionObject, "/world_node/attach", attached_qos())
    planner = SimpleNamespace(frame_prefix="", attached_pub=pub, get_clock=detector_node.get_clock)
    assert wait_until(lambda: pub.get_subscription_count() > 0, obs.publish_joints, timeout=60.0)
    touch = link_subtree(load(WORLD), "gripper_base")
    assert set(touch) == {"gripper_base", "finger_left", "finger_right"}

    PlannerNode.publish_attached(planner, "ball", "gripper_base", touch, True)
    # its stamp is now: world_node takes the link's TF at it (the joint states keep /tf coming)
    assert wait_until(lambda: rec.attached("ball"), obs.publish_joints, timeout=60.0), \
        "no AttachedCollisionObject"
    add = rec.attached("ball")[0]
    assert add.object.operation == CollisionObject.ADD and add.object.id == "ball"
    assert add.link_name == "gripper_base" and add.object.header.frame_id == "gripper_base"
    assert sorted(add.touch_links) == sorted(touch)

    PlannerNode.publish_attached(planner, "ball", "gripper_base", [], False)
    assert wait_until(lambda: rec.attached("ball")[-1].object.operation == CollisionObject.REMOVE,
                      obs.publish_joints, timeout=60.0), "no detach"
    # (the ADD may come again before it: world_node's republish for the recorder's subscriptions, if
    # they matched late, sends what is held -- the same message)
    ops = [m.object.operation for m in rec.attached("ball")]
    assert ops[-1] == CollisionObject.REMOVE and ops.count(CollisionObject.REMOVE) == 1, ops
    assert all((m.link_name, sorted(m.touch_links)) == ("gripper_base", sorted(touch))
               for m in rec.attached("ball")[:-1])
    assert rec.attached("ball")[-1].link_name == "gripper_base"
    # the arm did not move: put down where it was, sent again to MoveIt's world
    assert wait_until(lambda: rec.put_downs("ball"), timeout=60.0), "no put-down"
    np.testing.assert_allclose(pose_of(rec.put_downs("ball")[0].pose), ball, atol=1e-6)
