"""moveit_msgs for world_node's bodies: CollisionObject (ADD/MOVE/REMOVE) and ObjectColor in a PlanningScene
diff, from the rclpy-free shapes of :mod:`robot_bridge.world.planning_scene`.

QoS: MoveIt 2's planning scene monitor subscribes ``/collision_object`` and ``/attached_collision_object``
with depth 1024, reliable, volatile (moveit2 ``moveit_ros/planning/planning_scene_monitor/src/
planning_scene_monitor.cpp``: ``create_subscription<CollisionObject>(collision_objects_topic, 1024, ...)``);
a volatile subscriber gets nothing published before it matched, so world_node sends the current bodies
again when a subscription matches (:func:`moveit_qos` publishers, ``PublisherEventCallbacks(matched=...)``).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Point, Pose
from moveit_msgs.msg import CollisionObject, ObjectColor, PlanningScene
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from shape_msgs.msg import Mesh, MeshTriangle, SolidPrimitive
from std_msgs.msg import ColorRGBA

from ..model.transform import to_quat_xyzw
from ..world.planning_scene import ADD, MOVE, BodyShapes

MOVEIT_DEPTH = 1024
PRIMITIVE_TYPES = {"box": SolidPrimitive.BOX, "sphere": SolidPrimitive.SPHERE,
                   "cylinder": SolidPrimitive.CYLINDER}
OPERATIONS = {ADD: CollisionObject.ADD, MOVE: CollisionObject.MOVE}


def moveit_qos() -> QoSProfile:
    """The planning scene monitor's: depth 1024, reliable, volatile."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=MOVEIT_DEPTH,
                      reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


def pose_msg(matrix: np.ndarray) -> Pose:
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in matrix[:3, 3])
    q = pose.orientation
    q.x, q.y, q.z, q.w = (float(v) for v in to_quat_xyzw(matrix))
    return pose


def _mesh_msg(vertices: np.ndarray, triangles: np.ndarray) -> Mesh:
    return Mesh(vertices=[Point(x=float(x), y=float(y), z=float(z)) for x, y, z in vertices],
                triangles=[MeshTriangle(vertex_indices=np.asarray(t, dtype=np.uint32)) for t in triangles])


def collision_object(name: str, frame: str, pose: np.ndarray, stamp, shapes: BodyShapes | None,
                     operation: str) -> CollisionObject:
    """ADD (with the shapes, each posed in the object's frame) or MOVE (pose only) of body ``name``."""
    msg = CollisionObject(id=name, operation=OPERATIONS[operation])
    msg.header.frame_id = frame
    msg.header.stamp = stamp
    msg.pose = pose_msg(pose)
    if operation == ADD and shapes is not None:
        for p in shapes.primitives:
            msg.primitives.append(SolidPrimitive(type=PRIMITIVE_TYPES[p.kind],
                                                 dimensions=[float(d) for d in p.dimensions]))
            msg.primitive_poses.append(pose_msg(p.pose))
        for m in shapes.meshes:
            msg.meshes.append(_mesh_msg(m.vertices, m.triangles))
            msg.mesh_poses.append(pose_msg(m.pose))
    return msg


def remove_object(name: str, frame: str, stamp) -> CollisionObject:
    msg = CollisionObject(id=name, operation=CollisionObject.REMOVE)
    msg.header.frame_id = frame
    msg.header.stamp = stamp
    return msg


def colors_diff(colors: dict[str, tuple[float, float, float, float]]) -> PlanningScene:
    """A PlanningScene diff carrying only ObjectColor per body id."""
    return PlanningScene(is_diff=True, object_colors=[
        ObjectColor(id=name, color=ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a)))
        for name, (r, g, b, a) in colors.items()])


class ScenePublisher:
    """world_node's bodies on ``/collision_object`` and their class colours on ``/planning_scene``.

    :meth:`stage` builds what changed since the last call (:class:`SceneSync`), :meth:`send` sends it
    (world_node: right after the bodies' /tf); a subscription that
    matches later gets every current body as ADD (and the colours) at once -- by the publishers' matched
    event where the middleware has it, else by a timer that watches the subscription counts."""

    def __init__(self, node, frame: str, poll_period: float = 0.2):
        import threading

        from rclpy.event_handler import PublisherEventCallbacks

        from ..world.planning_scene import SceneSync

        self.node = node
        self.frame = frame
        self.lock = threading.Lock()
        self.sync = SceneSync()
        self._shapes: dict[str, tuple[object, BodyShapes]] = {}      # class id -> (body, its shapes)
        self._colors: dict[str, tuple[float, float, float, float]] = {}
        self._classes: dict[str, object] = {}                         # body name -> its ObjectClass
        self._counts = [0, 0]
        self._reported: set[str] = set()
        try:
            self.objects_pub = node.create_publisher(
                CollisionObject, "/collision_object", moveit_qos(),
                event_callbacks=PublisherEventCallbacks(matched=self._on_matched))
            self.scene_pub = node.create_publisher(
                PlanningScene, "/planning_scene", moveit_qos(),
                event_callbacks=PublisherEventCallbacks(matched=self._on_matched))
            self.poll = None
        except Exception:            # no matched event in this rclpy / middleware: watch the counts
            self.objects_pub = node.create_publisher(CollisionObject, "/collision_object", moveit_qos())
            self.scene_pub = node.create_publisher(PlanningScene, "/planning_scene", moveit_qos())
            self.poll = node.create_timer(poll_period, self._poll_counts)

    def shapes(self, cls) -> BodyShapes:
        """The collision shapes of an object class, computed once per body file read (a reload re-reads)."""
        from ..world.planning_scene import body_color, body_shapes

        cached = self._shapes.get(cls.name)
        if cached is None or cached[0] is not cls.body:
            shapes = body_shapes(cls.body)
            for note in shapes.notes:
                if (cls.name, note) not in self._reported:
                    self._reported.add((cls.name, note))
                    self.node.get_logger().warning(f"class {cls.name!r} in MoveIt's planning scene: {note}")
            cached = (cls.body, shapes)
            self._shapes[cls.name] = cached
            self._colors[cls.name] = body_color(cls.body)
        return cached[1]

    def load(self, mapping) -> None:
        """Compute the shapes of every class of a (re)loaded mapping now, not when a body first appears."""
        with self.lock:
            for cls in mapping.classes.values():
                self.shapes(cls)

    def stage(self, objects, mapping) -> list:
        """The messages that bring subscribers to ``objects`` (WorldObject list) of ``mapping``, built now
        (and remembered as sent): hand them to :meth:`send` right after the bodies' /tf."""
        with self.lock:
            stamp = self.node.get_clock().now().to_msg()
            bodies = []
            for obj in objects:
                cls = mapping.get(obj.class_id)
                if cls is None:
                    continue
                self.shapes(cls)
                self._classes[obj.name] = cls
                bodies.append((obj.name, cls.body, obj.pose))
            out, added = [], []
            for op, name in self.sync.changes(bodies):
                if op == "remove":
                    self._classes.pop(name, None)
                    out.append(remove_object(name, self.frame, stamp))
                    continue
                cls = self._classes[name]
                out.append(collision_object(name, self.frame, self.sync.pose(name), stamp,
                                            self._shapes[cls.name][1], op))
                if op == ADD:
                    added.append(name)
            if added:
                out.append(colors_diff({n: self._colors[self._classes[n].name] for n in added}))
            return out

    def send(self, staged: list) -> None:
        with self.lock:
            for msg in staged:
                (self.scene_pub if isinstance(msg, PlanningScene) else self.objects_pub).publish(msg)

    def republish(self) -> None:
        """Every current body as ADD, and all colours (a subscription joined)."""
        with self.lock:
            stamp = self.node.get_clock().now().to_msg()
            names = self.sync.current()
            for name in names:
                cls = self._classes.get(name)
                if cls is not None:
                    self.objects_pub.publish(collision_object(name, self.frame, self.sync.pose(name), stamp,
                                                              self._shapes[cls.name][1], ADD))
            colors = {n: self._colors[self._classes[n].name] for n in names if n in self._classes}
            if colors:
                self.scene_pub.publish(colors_diff(colors))

    def _on_matched(self, info) -> None:
        if info.current_count_change > 0:
            self.republish()

    def _poll_counts(self) -> None:
        counts = [self.objects_pub.get_subscription_count(), self.scene_pub.get_subscription_count()]
        grown = any(n > old for n, old in zip(counts, self._counts))
        self._counts = counts
        if grown:
            self.republish()
