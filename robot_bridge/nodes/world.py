"""world_node: object detections become environment bodies on TF, in markers and in one world document.

Subscribes ``detections`` (vision_msgs/Detection3DArray).  Each detection's best hypothesis (highest
score) names a class of the mapping file (``objects_file``) and gives the pose of the body file's frame in
the detection's header frame (the array's when the detection's is empty); that pose is brought into the
world frame with the TF the bridge publishes (/tf and /tf_static) at the detection's stamp (interpolated;
the nearest sample outside the cached 10 s; unstamped: the latest) and handed to the
rclpy-free :class:`robot_bridge.world.WorldObjects` (matching, jitter, timeouts).  Publishes:

- /tf: ``<world_frame>`` -> ``<frame_prefix><class>_<n>`` for every body, at ``publish_rate`` and on change;
- ``~/markers`` (MarkerArray, latched): each body's geometry in namespace ``<class>_<n>``, DELETE on removal;
- ``~/objects`` (std_msgs/String, latched): the world as OpenRAVE ``<Environment>`` XML (see
  :mod:`robot_bridge.world.document`), ``~/objects_yaml`` the same as YAML.

A body a robot carries (moveit_msgs/AttachedCollisionObject ADD on /attached_collision_object, as the
planner node and move_group publish it) is re-parented on TF under the carrying link, at the pose it had
when attached, until its REMOVE (then it stays where it was put down); while carried, detections neither
move it nor let it time out.

``~/reload`` (std_srvs/Trigger) re-reads the mapping; a mapping that fails to load leaves the previous one
in service.  Unknown class ids, unresolvable frames and non-finite poses are dropped with throttled
warnings naming them.
"""

from __future__ import annotations

import math
import sys
from typing import Optional

import numpy as np
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from vision_msgs.msg import Detection3DArray
from visualization_msgs.msg import MarkerArray

from ..kinematics import frames
from ..kinematics.tf_buffer import TFBuffer
from ..model.transform import make
from ..ros import params, qos
from ..ros.guard import ContainedNode
from ..ros.markers import body_markers, delete_markers
from ..ros.tf import matrix as tf_matrix
from ..ros.params import Param
from ..ros.tf import transform_stamped
from ..world import Changes, Detection, ObjectMapping, WorldObjects, load_mapping, to_xml, to_yaml

RELOADS = "re-reads the mapping when set; refused (old mapping kept) if it does not load"
PARAMETERS = params.schema(
    Param("objects_file", "", "Object mapping YAML: detection class ids -> body files (see README); empty: "
                              "wait for a parameter change", rule_text=RELOADS, string="text", confined=True),
    Param("search_path", params.STRING_ARRAY, "Directories searched for the body files' includes and "
                                              "meshes (before $OPENRAVE_DATA)", rule_text=RELOADS,
          string="text", confined=True),
    Param("frame_prefix", "", "Prefix of every published object frame (as the description node's)",
          read_only=True, string="frame"),
    Param("world_frame", "", "Frame the bodies are placed in; empty: world (the description node's shared "
                             "world_frame default)", read_only=True, string="frame"),
    Param("publish_rate", 10.0, "Hz: /tf of every body, and how often timeouts are checked",
          range=(0.001, 1000.0)),
    Param("min_score", 0.0, "Hypotheses scoring below this are ignored",
          rule=lambda v: None if math.isfinite(v) else "must be a finite number", rule_text="finite"),
    Param("warn_throttle", 5.0, "Seconds between repeated warnings about one kind of dropped detection",
          range=(0.0, 86400.0)),
)
RELOAD_PARAMETERS = {"objects_file", "search_path"}


def pose_matrix(pose) -> Optional[np.ndarray]:
    """4x4 of a geometry_msgs/Pose; None when not finite or the quaternion is zero (normalised otherwise,
    as tf2 does)."""
    p, q = pose.position, pose.orientation
    values = np.array([p.x, p.y, p.z, q.x, q.y, q.z, q.w], dtype=float)
    if not np.isfinite(values).all():
        return None
    quat = values[3:]
    norm = float(np.linalg.norm(quat))
    if norm < 1e-9:
        return None
    x, y, z, w = quat / norm
    rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                    [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                    [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return make(rot, values[:3])


class WorldNode(ContainedNode):
    def __init__(self, **kwargs):
        super().__init__("world_node", **kwargs)
        self.params = params.NodeParameters(
            self, PARAMETERS, validate=self._check_parameters, apply=self._apply_parameters,
            roots=lambda get: params.launch_roots([get("objects_file")], get("search_path")))
        self.tf = TFBuffer()
        self.world: Optional[WorldObjects] = None
        self._marker_counts: dict[str, int] = {}          # body -> markers published in its namespace
        self._warned: dict[str, float] = {}                 # warning key -> last time (throttle per kind)
        self.frame_prefix = str(self._p("frame_prefix"))
        self.world_frame = str(self._p("world_frame")) or frames.WORLD_FRAME

        self.tf_pub = self.create_publisher(TFMessage, "/tf", qos.tf_qos())
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", qos.description_qos())
        self.objects_pub = self.create_publisher(String, "~/objects", qos.description_qos())
        self.objects_yaml_pub = self.create_publisher(String, "~/objects_yaml", qos.description_qos())
        self.create_subscription(TFMessage, "/tf", lambda m: self._on_tf(m, False), qos.tf_qos())
        self.create_subscription(TFMessage, "/tf_static", lambda m: self._on_tf(m, True),
                                 qos.tf_static_listener_qos())
        self.create_subscription(Detection3DArray, "detections", self._on_detections, 10)
        self.create_reload_service(self.reload, lambda: self._p("objects_file"), "mapping")
        self.timer = self.create_timer(1.0 / float(self._p("publish_rate")), self._tick)
        self._attached: dict[str, tuple[str, np.ndarray]] = {}      # body -> (link frame, link -> body)
        self._subscribe_attached()

        ok, error = self.reload()
        if not ok:
            self.get_logger().error(f"cannot load the object mapping: {error}; waiting for a good ~/reload "
                                    "or objects_file change")

    # -- parameters and mapping ------------------------------------------------------------------
    def _p(self, name: str, overrides: Optional[dict] = None):
        if overrides and name in overrides:
            return overrides[name]
        return self.params.get(name)

    def _check_parameters(self, new: dict) -> Optional[str]:
        """A set naming the mapping reloads it; a mapping that does not load refuses the set."""
        if RELOAD_PARAMETERS & new.keys():
            ok, error = self.reload(new)
            if not ok:
                return error
        return None

    def _apply_parameters(self, new: dict) -> None:
        if "publish_rate" in new:
            self.destroy_timer(self.timer)
            self.timer = self.create_timer(1.0 / float(new["publish_rate"]), self._tick)

    def reload(self, overrides: Optional[dict] = None) -> tuple[bool, str]:
        """Read the mapping; on success use it (bodies of dropped classes go), else keep the old one."""
        path = self._p("objects_file", overrides)
        if not path:
            return False, "parameter objects_file is empty"
        try:
            mapping = load_mapping(path, search_path=list(self._p("search_path", overrides) or []) or None)
        except Exception as exc:     # any reader failure must leave the node serving
            return False, f"{type(exc).__name__}: {exc}"
        self._use_mapping(mapping)
        self.get_logger().info(f"object mapping {path}: classes {', '.join(sorted(mapping.classes))}")
        return True, ""

    def _use_mapping(self, mapping: ObjectMapping) -> None:
        if self.world is None:
            self.world = WorldObjects(mapping)
            self._publish(Changes(), force=True)
        else:
            changes = self.world.set_mapping(mapping)
            self._publish(changes, force=True)       # files of kept classes may have changed

    # -- input -----------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _warn(self, key: str, text: str) -> None:
        now = self._now()
        last = self._warned.get(key)
        if last is None or now - last >= float(self._p("warn_throttle")):
            self._warned[key] = now
            self.get_logger().warning(text)

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        for t in msg.transforms:
            stamp = t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
            try:
                m = tf_matrix(t)
            except ValueError:        # zero quaternion
                continue
            self.tf.set_transform(t.header.frame_id, t.child_frame_id, m, stamp, static)

    def _on_detections(self, msg: Detection3DArray) -> None:
        world = self.world
        if world is None:
            return
        min_score = float(self._p("min_score"))
        detections = []
        for det in msg.detections:
            results = [r for r in det.results if r.hypothesis.score >= min_score]
            if not results:
                continue
            best = max(results, key=lambda r: r.hypothesis.score)
            class_id = best.hypothesis.class_id
            if world.mapping.get(class_id) is None:
                known = ", ".join(sorted(world.mapping.classes))
                self._warn(f"unknown:{class_id}",
                           f"detections of unknown class {class_id!r} ignored (classes: {known})")
                continue
            frame = det.header.frame_id or msg.header.frame_id
            stamp = det.header.stamp if det.header.stamp.sec or det.header.stamp.nanosec else msg.header.stamp
            at = stamp.sec + stamp.nanosec * 1e-9 or None       # unstamped: the latest transforms
            local = pose_matrix(best.pose.pose)
            if local is None:
                self._warn(f"pose:{class_id}", f"detection of {class_id!r} with a non-finite pose or zero "
                           "quaternion dropped")
                continue
            try:
                to_world = self.tf.lookup(self.world_frame, frame, at)
            except LookupError as exc:
                self._warn(f"frame:{frame}", f"detection of {class_id!r} in frame {frame!r} dropped: {exc}")
                continue
            detections.append(Detection(class_id, to_world @ local, det.id, best.hypothesis.score))
        changes = world.update(detections, self._now())
        for reason in changes.rejected:
            self._warn(f"rejected:{reason}", f"detection dropped: {reason}")
        if changes:
            self._publish(changes)

    # -- output ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        world = self.world
        if world is None:
            return
        changes = world.expire(self._now())
        if changes:
            self._publish(changes)
        else:
            self._publish_tf()

    def _object_frame(self, name: str) -> str:
        return self.frame_prefix + name

    def _publish_tf(self) -> None:
        objects = self.world.snapshot() if self.world is not None else []
        if not objects:
            return
        stamp = self.get_clock().now().to_msg()
        attached = dict(self._attached)
        self.tf_pub.publish(TFMessage(transforms=[
            transform_stamped(attached[o.name][0], self._object_frame(o.name), attached[o.name][1], stamp)
            if o.name in attached else
            transform_stamped(self.world_frame, self._object_frame(o.name), o.pose, stamp) for o in objects]))

    def _publish(self, changes: Changes, force: bool = False) -> None:
        objects = self.world.snapshot()
        stamp = self.get_clock().now().to_msg()
        markers = []
        for name in changes.removed:
            self._attached.pop(name, None)
            markers += delete_markers(self._object_frame(name), name, self._marker_counts.pop(name, 0), stamp)
        for obj in objects:
            cls = self.world.mapping.get(obj.class_id)
            if cls is None:
                continue
            ms = body_markers(cls.body, self._object_frame(obj.name), obj.name, stamp)
            old = self._marker_counts.get(obj.name, 0)
            if old > len(ms):            # a reloaded body with fewer geometries
                markers += delete_markers(self._object_frame(obj.name), obj.name, old, stamp)[len(ms):]
            self._marker_counts[obj.name] = len(ms)
            markers += ms
        self._publish_tf()
        self.markers_pub.publish(MarkerArray(markers=markers))
        now = self._now()
        self.objects_pub.publish(String(data=to_xml(objects, self.world_frame, now)))
        self.objects_yaml_pub.publish(String(data=to_yaml(objects, self.world_frame, now)))
        for name in changes.added:
            obj = self.world.get(name)
            if obj is not None:
                t = obj.pose[:3, 3]
                self.get_logger().info(f"object {name} ({obj.class_id}) at {t[0]:.3f} {t[1]:.3f} {t[2]:.3f} "
                                       f"in {self.world_frame}")
        for name in changes.removed:
            self.get_logger().info(f"object {name} removed")


    # -- bodies carried by a robot -------------------------------------------------------------------
    def _subscribe_attached(self) -> None:
        try:
            from moveit_msgs.msg import AttachedCollisionObject
        except ImportError:
            self.get_logger().info("moveit_msgs is not installed: /attached_collision_object is not followed")
            return
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.create_subscription(AttachedCollisionObject, "/attached_collision_object", self._on_attached,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                            durability=DurabilityPolicy.VOLATILE))

    def _on_attached(self, msg) -> None:
        """ADD: carry the body with ``link_name`` at its current world pose; REMOVE: put it down where the
        link holds it now (an empty object id: every carried body)."""
        from moveit_msgs.msg import CollisionObject

        world = self.world
        if world is None:
            return
        name, link, operation = msg.object.id, msg.link_name.lstrip("/"), msg.object.operation
        if operation == CollisionObject.ADD:
            obj = world.get(name)
            if obj is None:
                self._warn(f"attach:{name}", f"attached object {name!r} is not a world body: ignored")
                return
            try:
                link_pose = self.tf.lookup(self.world_frame, link)
            except LookupError as exc:
                self._warn(f"attach:{link}", f"cannot attach {name!r} to {link!r}: {exc}")
                return
            if world.hold(name):
                self._attached[name] = (link, np.linalg.inv(link_pose) @ obj.pose)
                self.get_logger().info(f"object {name} attached to {link}")
                self._publish_tf()
        elif operation == CollisionObject.REMOVE:
            for body in [name] if name else list(self._attached):
                self._detach(body)

    def _detach(self, name: str) -> None:
        entry = self._attached.pop(name, None)
        if entry is None:
            return
        link, offset = entry
        try:
            pose = self.tf.lookup(self.world_frame, link) @ offset
        except LookupError as exc:
            self._warn(f"attach:{link}", f"{name!r} detached from {link!r} at its last known pose: {exc}")
            obj = self.world.get(name)
            if obj is None:
                return
            pose = obj.pose
        changes = self.world.release(name, pose, self._now())
        self.get_logger().info(f"object {name} detached from {link}")
        self._publish(changes)


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(WorldNode, args)


if __name__ == "__main__":
    sys.exit(main())
