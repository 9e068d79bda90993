"""moveit_msgs for world_node's bodies: CollisionObject (ADD/MOVE/REMOVE) and ObjectColor in a PlanningScene
diff, and AttachedCollisionObject for held bodies, from the rclpy-free shapes of
:mod:`robot_bridge.world.planning_scene`.

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


def attached_object(name: str, link: str, touch: list[str], operation: int, stamp):
    """AttachedCollisionObject of body ``name`` on ``link`` (ADD without shapes: MoveIt takes its world
    object's; REMOVE: back into the world where it is)."""
    from moveit_msgs.msg import AttachedCollisionObject

    msg = AttachedCollisionObject(link_name=link, touch_links=list(touch))
    msg.object.id = name
    msg.object.header.frame_id = link
    msg.object.header.stamp = stamp
    msg.object.operation = operation
    return msg


def colors_diff(colors: dict[str, tuple[float, float, float, float]]) -> PlanningScene:
    """A PlanningScene diff carrying only ObjectColor per body id."""
    return PlanningScene(is_diff=True, object_colors=[
        ObjectColor(id=name, color=ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a)))
        for name, (r, g, b, a) in colors.items()])


class ScenePublisher:
    """world_node's bodies on ``/collision_object``, their colours on ``/planning_scene`` and the bodies a
    gripper holds on ``/attached_collision_object``.

    :meth:`stage` builds what changed since the last call (:class:`SceneSync`), :meth:`send` sends it
    (world_node: right after the bodies' /tf); :meth:`attach` / :meth:`detach` send one
    AttachedCollisionObject ADD / REMOVE.  A subscription that matches later gets every current body as
    ADD (and the colours, and every held body's attach) at once -- by the publishers' matched event where
    the middleware has it, else by a timer that watches the subscription counts."""

    def __init__(self, node, frame: str, poll_period: float = 0.2, coalesce: float = 0.2):
        import threading

        from moveit_msgs.msg import AttachedCollisionObject
        from rclpy.event_handler import PublisherEventCallbacks

        from ..world.planning_scene import SceneSync

        self.node = node
        self.frame = frame
        self.lock = threading.Lock()
        self.sync = SceneSync()
        self._shapes: dict[str, tuple[object, BodyShapes]] = {}      # shapes key -> (body, its shapes)
        self._colors: dict[str, tuple[float, float, float, float]] = {}
        self._keys: dict[str, str] = {}                               # body name -> its shapes key
        self.held: dict[str, tuple[str, list[str]]] = {}             # body name -> (link, touch links)
        self._counts = [0, 0, 0]
        self._reported: set[tuple[str, str]] = set()
        topics = ((CollisionObject, "/collision_object"), (PlanningScene, "/planning_scene"),
                  (AttachedCollisionObject, "/attached_collision_object"))
        try:
            pubs = [node.create_publisher(t, name, moveit_qos(),
                                          event_callbacks=PublisherEventCallbacks(matched=self._on_matched))
                    for t, name in topics]
            self.poll = None
        except Exception:            # no matched event in this rclpy / middleware: watch the counts
            pubs = [node.create_publisher(t, name, moveit_qos()) for t, name in topics]
            self.poll = node.create_timer(poll_period, self._poll_counts)
        self.objects_pub, self.scene_pub, self.attached_pub = pubs
        self.on_republish: list = []                # called after a republish (world_node: the occupancy map)
        self._coalesce = node.create_timer(coalesce, self._coalesced)
        self._coalesce.cancel()                     # started by a match (reset)

    def shapes(self, key: str, body) -> BodyShapes:
        """The collision shapes of ``body`` (an object class's or an environment body's, named by ``key``),
        computed once per body file read (a reload re-reads)."""
        from ..world.planning_scene import body_color, body_shapes

        cached = self._shapes.get(key)
        if cached is None or cached[0] is not body:
            shapes = body_shapes(body)
            for note in shapes.notes:
                if (key, note) not in self._reported:
                    self._reported.add((key, note))
                    self.node.get_logger().warning(f"{key} in MoveIt's planning scene: {note}")
            cached = (body, shapes)
            self._shapes[key] = cached
            self._colors[key] = body_color(body)
        return cached[1]

    def load(self, entries) -> None:
        """Compute the shapes of (key, body) pairs now (a (re)loaded mapping), not when a body appears."""
        with self.lock:
            for key, body in entries:
                self.shapes(key, body)

    def stage(self, bodies) -> list:
        """The messages that bring subscribers to ``bodies`` (name, shapes key, body, 4x4 pose of the body's
        frame in ``frame``), built now (and remembered as sent): hand them to :meth:`send` right after
        the bodies' /tf."""
        with self.lock:
            stamp = self.node.get_clock().now().to_msg()
            current = []
            for name, key, body, pose in bodies:
                self.shapes(key, body)
                self._keys[name] = key
                current.append((name, self._shapes[key][0], pose))
            out, added = [], []
            for op, name in self.sync.changes(current):
                if op == "remove":
                    self._keys.pop(name, None)
                    self.held.pop(name, None)
                    out.append(remove_object(name, self.frame, stamp))
                    continue
                out.append(collision_object(name, self.frame, self.sync.pose(name), stamp,
                                            self._shapes[self._keys[name]][1], op))
                if op == ADD:
                    added.append(name)
            if added:
                out.append(colors_diff({n: self._colors[self._keys[n]] for n in added}))
            return out

    def forget(self, name: str) -> None:
        """Send ``name`` as ADD again at the next :meth:`stage` (MoveIt's copy may differ: a detach)."""
        with self.lock:
            self.sync.sent.pop(name, None)

    def send(self, staged: list) -> None:
        with self.lock:
            for msg in staged:
                (self.scene_pub if isinstance(msg, PlanningScene) else self.objects_pub).publish(msg)

    def attach(self, name: str, link: str, touch: list[str]) -> None:
        """AttachedCollisionObject ADD: MoveIt moves its world object ``name`` (shapes and pose as it has
        them) onto ``link``; ``touch``: the robot links it may touch."""
        with self.lock:
            self.held[name] = (link, list(touch))
            self.attached_pub.publish(attached_object(name, link, touch, CollisionObject.ADD,
                                                      self.node.get_clock().now().to_msg()))

    def detach(self, name: str) -> None:
        """AttachedCollisionObject REMOVE: MoveIt puts the body back into its world where the link holds it
        (world_node then sends the put-down pose: :meth:`forget`, :meth:`stage`)."""
        with self.lock:
            link, _ = self.held.pop(name, ("", []))
            self.attached_pub.publish(attached_object(name, link, [], CollisionObject.REMOVE,
                                                      self.node.get_clock().now().to_msg()))

    def republish(self) -> None:
        """Every current body as ADD, all colours and every held body's attach (a subscription joined)."""
        with self.lock:
            stamp = self.node.get_clock().now().to_msg()
            names = [n for n in self.sync.current() if n in self._keys]
            for name in names:
                self.objects_pub.publish(collision_object(name, self.frame, self.sync.pose(name), stamp,
                                                          self._shapes[self._keys[name]][1], ADD))
            colors = {n: self._colors[self._keys[n]] for n in names}
            if colors:
                self.scene_pub.publish(colors_diff(colors))
            for name, (link, touch) in self.held.items():
                self.attached_pub.publish(attached_object(name, link, touch, CollisionObject.ADD, stamp))
        for hook in self.on_republish:
            hook()

    def _on_matched(self, info) -> None:
        """A subscriber joined: republish once its topics have matched (move_group's three topics match
        one after the other: one republish for them, not three)."""
        if info.current_count_change > 0:
            self._coalesce.reset()

    def _coalesced(self) -> None:
        self._coalesce.cancel()
        self.republish()

    def _poll_counts(self) -> None:
        counts = [p.get_subscription_count() for p in (self.objects_pub, self.scene_pub, self.attached_pub)]
        grown = any(n > old for n, old in zip(counts, self._counts))
        self._counts = counts
        if grown:
            self.republish()
