"""world_node in MoveIt's language, observed by real rclpy subscribers typed by the venv's moveit_msgs with
the QoS of MoveIt 2's planning scene monitor (depth 1024, reliable, volatile: moveit2
``moveit_ros/planning/planning_scene_monitor/src/planning_scene_monitor.cpp``, ``startWorldGeometryMonitor``).

description_node and world_node run as their own processes; this process is the detector and the
observer.  Timing is judged by header stamps (world_node's clock), never by this process's receive times;
nothing waits on a sleep."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import trimesh

pytest.importorskip("moveit_msgs.msg")

from moveit_msgs.msg import CollisionObject, PlanningScene  # noqa: E402
from shape_msgs.msg import SolidPrimitive  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.model.transform import from_rpy  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.planning_scene import moveit_qos  # noqa: E402
from robot_bridge.ros.tf import matrix as tf_matrix  # noqa: E402
from fixtures.world_bridge import (CAMERA_LOCAL, DATA, TIMEOUT, check_nodes, expected_camera_pose,  # noqa: E402
                                   module_bridge, pose_of, reset_world, wait_until)
from robot_bridge.model.transform import make  # noqa: E402

STARTUP = 90.0           # s: description_node and world_node start on loaded cores (a guard against hangs)
CAN_RGBA = (0.8, 0.1, 0.1, 1.0)          # can.kinbody.xml diffuseColor, opaque
CRATE_EXTENTS = (0.2, 0.1, 0.4)          # the crate: a mesh box (trimesh), its geom 20 cm up the body's z
CRATE_GEOM = make(translation=(0.0, 0.0, 0.2))
CRATE_LOCAL = make(from_rpy((0.0, 0.1, 0.4)), (-0.1, 0.05, 0.6))      # the crate in the optical frame


class SceneRecorder:
    """/tf and /collision_object, /planning_scene with MoveIt's QoS; every message with its receive time."""

    def __init__(self, node):
        self.node = node
        self.lock = threading.Lock()
        self.tf: list[tuple[float, float, str, np.ndarray]] = []         # (received, stamp, child, matrix)
        self.objects: list[tuple[float, CollisionObject]] = []
        self.scenes: list[PlanningScene] = []
        self.since = 0.0                # s: /tf and objects stamped earlier are not recorded
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.tf_qos())
        self.subscribe()

    def clear(self, since: float) -> None:
        """Forget what was recorded; /tf and objects stamped before ``since`` are no longer recorded."""
        with self.lock:
            self.since = since
            for records in (self.tf, self.objects, self.scenes):
                records.clear()

    def subscribe(self):
        self.node.create_subscription(CollisionObject, "/collision_object", self._on_object, moveit_qos())
        self.node.create_subscription(PlanningScene, "/planning_scene", self._on_scene, moveit_qos())

    def _on_tf(self, msg: TFMessage) -> None:
        now = time.monotonic()
        with self.lock:
            for t in msg.transforms:
                stamp = t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
                if t.header.frame_id == "world" and stamp >= self.since:
                    self.tf.append((now, stamp, t.child_frame_id, tf_matrix(t)))

    def _on_object(self, msg: CollisionObject) -> None:
        now = time.monotonic()
        with self.lock:
            if msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 >= self.since:
                self.objects.append((now, msg))

    def _on_scene(self, msg: PlanningScene) -> None:
        with self.lock:
            self.scenes.append(msg)

    def first_tf(self, child: str):
        with self.lock:
            return next((t for t in self.tf if t[2] == child), None)

    def ops(self, name: str, operation: bytes) -> list[tuple[float, CollisionObject]]:
        with self.lock:
            return [(t, m) for t, m in self.objects if m.id == name and m.operation == operation]

    def colors(self) -> dict:
        with self.lock:
            return {c.id: (c.color.r, c.color.g, c.color.b, c.color.a) for s in self.scenes if s.is_diff
                    for c in s.object_colors}


def mapping(folder, timeout: float) -> str:
    """The crate (a mesh body written to ``folder``), the can and the block; bodies time out after
    ``timeout`` s."""
    trimesh.creation.box(extents=CRATE_EXTENTS).export(folder / "crate.stl")
    x, y, z = CRATE_GEOM[:3, 3]
    (folder / "crate.kinbody.xml").write_text(
        '<KinBody name="crate"><Body name="crate" type="dynamic"><Geom type="trimesh"><data>crate.stl</data>'
        f'<translation>{x} {y} {z}</translation><diffuseColor>0.2 0.6 0.2</diffuseColor></Geom></Body>'
        '</KinBody>')
    return f"""
defaults: {{timeout: {timeout}, jitter: 0.005, jitter_angle: 0.02, match_distance: 0.15}}
classes:
  can: {{file: {DATA / 'objects' / 'can.kinbody.xml'}}}
  block: {{file: {DATA / 'objects' / 'block.kinbody.xml'}, static: true}}
  crate: {{file: {folder / 'crate.kinbody.xml'}}}
"""


@pytest.fixture(scope="module")
def running_bridge(tmp_path_factory, module_detector_node):
    """description_node and world_node, started once for the module's tests, with the observer and the
    MoveIt recorder."""
    folder = tmp_path_factory.mktemp("scene")
    for obs in module_bridge(folder / "objects.yaml", mapping(folder, TIMEOUT), module_detector_node):
        obs.recorder = SceneRecorder(module_detector_node)
        yield obs


@pytest.fixture
def scene_bridge(running_bridge):
    """reset(timeout) -> (observer, recorder): the module's bridge as a fresh one whose bodies time out
    after ``timeout`` s, the records emptied (reset_world, fixtures/world_bridge.py); after the test, every
    node still runs and printed no traceback during it."""
    obs = running_bridge

    def reset(timeout: float):
        since = reset_world(obs, mapping(obs.mapping_file.parent, timeout))
        obs.recorder.clear(since)
        return obs, obs.recorder

    yield reset
    check_nodes(obs)


@pytest.mark.timeout(240)
def test_detection_becomes_add_with_pose_and_shape_within_100ms_of_its_tf_a_move_a_move_and_expiry_a_remove(
        scene_bridge):
    obs, rec = scene_bridge(timeout=TIMEOUT)
    camera = expected_camera_pose()

    def publish():
        obs.publish_joints()
        obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                   ("crate", CRATE_LOCAL, "wrist_camera_optical_frame"))

    assert wait_until(lambda: rec.ops("can_0", CollisionObject.ADD) and rec.first_tf("can_0") and
                      rec.ops("crate_0", CollisionObject.ADD), publish, timeout=STARTUP), \
        "no ADD of can_0 and crate_0 on /collision_object"
    _, add = rec.ops("can_0", CollisionObject.ADD)[0]
    _, tf_stamp, _, tf_pose = rec.first_tf("can_0")
    # world_node publishes the body's /tf and its ADD in one callback: their stamps (world_node's clock,
    # not this loaded process's receive times) within 100 ms
    add_stamp = add.header.stamp.sec + add.header.stamp.nanosec * 1e-9
    assert abs(add_stamp - tf_stamp) < 0.1, (add_stamp, tf_stamp)

    # pose in the world frame (on TF: MoveIt's planning frame reaches it), as the TF and the detection say
    assert add.header.frame_id == "world"
    np.testing.assert_allclose(pose_of(add.pose), camera @ CAMERA_LOCAL, rtol=0, atol=1e-6)
    np.testing.assert_allclose(pose_of(add.pose), tf_pose, rtol=0, atol=1e-6)
    # shape: the can's cylinder, shape_msgs order [height, radius], centred 6 cm up its axis (z)
    assert [p.type for p in add.primitives] == [SolidPrimitive.CYLINDER]
    assert list(add.primitives[0].dimensions) == pytest.approx([0.12, 0.035])
    assert SolidPrimitive.CYLINDER_HEIGHT == 0 and SolidPrimitive.CYLINDER_RADIUS == 1
    local = pose_of(add.primitive_poses[0])
    np.testing.assert_allclose(local[:3, 3], [0.0, 0.0, 0.06], atol=1e-9)
    np.testing.assert_allclose(abs(local[:3, 2] @ [0.0, 0.0, 1.0]), 1.0, atol=1e-9)   # axis along z
    assert not add.meshes
    assert wait_until(lambda: "can_0" in rec.colors())
    assert rec.colors()["can_0"] == pytest.approx(CAN_RGBA)

    # a body from a mesh: the ADD carries the mesh itself (12 triangles of the box, its extents as
    # written), posed where the body file puts the geom; no primitives
    [(_, crate)] = rec.ops("crate_0", CollisionObject.ADD)
    assert crate.header.frame_id == "world" and not crate.primitives
    np.testing.assert_allclose(pose_of(crate.pose), camera @ CRATE_LOCAL, rtol=0, atol=1e-6)
    assert len(crate.meshes) == 1 and len(crate.mesh_poses) == 1
    mesh = crate.meshes[0]
    assert len(mesh.triangles) == 12
    vertices = np.array([(v.x, v.y, v.z) for v in mesh.vertices])
    corners = np.array([t.vertex_indices for t in mesh.triangles])
    assert corners.min() >= 0 and corners.max() < len(vertices)
    np.testing.assert_allclose(vertices.max(axis=0) - vertices.min(axis=0), CRATE_EXTENTS, atol=1e-6)
    np.testing.assert_allclose((vertices.max(axis=0) + vertices.min(axis=0)) / 2, 0.0, atol=1e-6)
    np.testing.assert_allclose(pose_of(crate.mesh_poses[0]), CRATE_GEOM, rtol=0, atol=1e-9)
    assert wait_until(lambda: "crate_0" in rec.colors())
    assert rec.colors()["crate_0"] == pytest.approx((0.2, 0.6, 0.2, 1.0))

    # the can seen again 8 mm away (beyond the 5 mm jitter): one MOVE with the new pose and, as
    # MoveIt's MOVE, no shapes; the crate, seen where it was, does not move
    moved_8mm = make(translation=(0.0, 0.008, 0.0)) @ CAMERA_LOCAL
    assert wait_until(lambda: rec.ops("can_0", CollisionObject.MOVE), lambda: obs.detect(
        ("can", moved_8mm, "wrist_camera_optical_frame"),
        ("crate", CRATE_LOCAL, "wrist_camera_optical_frame"))), "no MOVE of can_0"

    # no more detections: the can expires and MoveIt is told to remove it: the last word
    # on can_0 is a REMOVE, and world_node's own document agrees
    def last_is_remove():
        with rec.lock:
            mine = [m for _, m in rec.objects if m.id == "can_0"]
        return mine[-1].operation == CollisionObject.REMOVE and "can_0" not in obs.latest_objects()
    assert wait_until(last_is_remove, timeout=30.0), "no REMOVE"
    _, remove = rec.ops("can_0", CollisionObject.REMOVE)[-1]
    assert remove.header.frame_id == "world" and not remove.primitives
    # by then every message on can_0 is in: exactly one MOVE, to the new pose, between ADD and REMOVE
    # (an ADD may come twice: a republish for the recorder's subscriptions matching late)
    with rec.lock:
        ops = [m.operation for _, m in rec.objects if m.id == "can_0"]
    assert ops[0] == CollisionObject.ADD, ops
    not_add = [o for o in ops if o != CollisionObject.ADD]
    assert not_add == [CollisionObject.MOVE, CollisionObject.REMOVE], ops
    [(_, move)] = rec.ops("can_0", CollisionObject.MOVE)
    assert move.header.frame_id == "world"
    np.testing.assert_allclose(pose_of(move.pose), camera @ moved_8mm, rtol=0, atol=1e-6)
    assert not move.primitives and not move.primitive_poses and not move.meshes and not move.mesh_poses
    assert not rec.ops("crate_0", CollisionObject.MOVE)


@pytest.mark.timeout(240)
def test_a_late_subscriber_with_moveit_qos_gets_every_current_body(scene_bridge):
    """Bodies added before a subscription existed reach it when it joins (volatile: nothing is latched)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    late_context = None
    try:
        obs, rec = scene_bridge(timeout=600.0)
        block_local = np.eye(4)
        block_local[:3, 3] = (0.1, 0.0, 0.5)

        def publish():
            obs.publish_joints()
            obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                       ("block", block_local, "wrist_camera_optical_frame"),
                       ("crate", CRATE_LOCAL, "wrist_camera_optical_frame"))

        assert wait_until(lambda: rec.ops("can_0", CollisionObject.ADD) and
                          rec.ops("block_0", CollisionObject.ADD) and rec.ops("crate_0", CollisionObject.ADD),
                          publish, timeout=STARTUP)
        assert wait_until(lambda: {"can_0", "block_0", "crate_0"} <= set(obs.latest_objects()))
        current = set(obs.latest_objects())

        # a new process-like participant (own context) joins late, as move_group would
        late_context = rclpy.Context()
        late_context.init()
        late_node = rclpy.create_node("late_move_group", context=late_context)
        late = SceneRecorder.__new__(SceneRecorder)
        late.node, late.lock, late.tf, late.objects, late.scenes = late_node, threading.Lock(), [], [], []
        late.since = 0.0
        late.subscribe()
        executor = SingleThreadedExecutor(context=late_context)
        executor.add_node(late_node)

        def spin_once():
            executor.spin_once(timeout_sec=0.05)

        def got_all():
            with late.lock:
                return current <= {m.id for _, m in late.objects if m.operation == CollisionObject.ADD}
        assert wait_until(got_all, spin_once), f"late subscriber got {[m.id for _, m in late.objects]}"
        with late.lock:
            adds = {m.id: m for _, m in late.objects if m.operation == CollisionObject.ADD}
        assert adds["can_0"].primitives and adds["block_0"].primitives
        assert len(adds["crate_0"].meshes) == 1 and len(adds["crate_0"].meshes[0].triangles) == 12
        np.testing.assert_allclose(pose_of(adds["can_0"].pose), expected_camera_pose() @ CAMERA_LOCAL,
                                   rtol=0, atol=1e-6)
        assert wait_until(lambda: {"can_0", "block_0"} <= set(late.colors()), spin_once)
        executor.shutdown(timeout_sec=5)
        late_node.destroy_node()
    finally:
        if late_context is not None:
            late_context.try_shutdown()
