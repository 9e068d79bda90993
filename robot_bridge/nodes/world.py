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
  :mod:`robot_bridge.world.document`), ``~/objects_yaml`` the same as YAML;
- ``/collision_object`` (moveit_msgs/CollisionObject: ADD, MOVE, REMOVE in ``<world_frame>``) and the class
  colours as ObjectColor in a ``/planning_scene`` diff, for MoveIt's planning scene monitor; every current
  body again when a subscription matches (:mod:`robot_bridge.ros.planning_scene`).

The environment bodies of ``description_file`` (its other bodies than the robot, as the description node
publishes them on /tf_static) go out on ``/collision_object`` too, at their placement in ``<world_frame>``;
a change of ``description_file`` (or ``environment``) on the running node re-reads it (REMOVE of the old
bodies, ADD of the new ones; a file that does not load is refused and the old bodies kept), and so does a
switch the description node of the namespace accepts (its ``description_file``, ``publish_environment``),
when this node was given a ``description_file``.

world_node owns what the robot holds: ``~/attach`` (moveit_msgs/AttachedCollisionObject: ADD with
``link_name`` and ``touch_links``, REMOVE) is where the controller node (a sim GripperCommand whose
fingers stall on a body) and the planner node (Pickup / Place) say it.  The first ADD of a body goes out
once on ``/attached_collision_object`` (a second one, e.g. the planner's after the controller's, is not
repeated), its REMOVE once, followed by the body's put-down pose as an ADD on ``/collision_object``.  A
detected body a robot carries is re-parented on TF under the carrying link, at the pose it had when
attached, until its REMOVE (then it stays where it was put down); while carried, detections neither move
it nor let it time out.  An ADD or REMOVE is judged at its ``object.header.stamp`` (the grasp's or
release's time; 0: now): it waits until this node's /tf holds the link at or after that stamp (under load
/tf arrives late) and takes the link's pose at the stamp; a link whose TF makes no progress for 2 s (or
10 s in all) is taken at its latest TF, with a warning (:mod:`robot_bridge.world.attach`).

``~/reload`` (std_srvs/Trigger) re-reads the mapping; a mapping that fails to load leaves the previous one
in service.  Unknown class ids, unresolvable frames and non-finite poses are dropped with throttled
warnings naming them (one line per kind and message, with counts).  A message is looked at up to
``max_detections`` detections (the rest are never deserialized) and no body starts beyond ``max_bodies``
nor outside ``world_box`` (the cube of that half extent about the world origin):
what these leave out is summed up in one throttled warning.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from typing import Optional

import numpy as np
from rcl_interfaces.msg import ParameterEvent
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from vision_msgs.msg import Detection3DArray
from visualization_msgs.msg import MarkerArray

from ..kinematics import frames
from ..kinematics.tf_buffer import TFBuffer
from ..ros import params, qos
from ..ros.guard import ContainedNode
from ..ros.markers import body_markers, delete_markers
from ..ros.occupancy import PARAMETERS as OCCUPANCY
from ..ros.planning_scene import ScenePublisher
from ..ros.tf import matrix as tf_matrix
from ..ros.params import Param
from ..ros.conversions import detection_array_count, pose_matrix, truncate_detection_array
from ..ros.tf import transform_stamped
from ..world import Changes, Detection, ObjectMapping, WorldObjects, load_mapping, to_xml, to_yaml
from ..world.attach import AttachQueue
from ..world.objects import MAX_BODIES, MAX_DETECTIONS, WORLD_BOX

RELOADS = "re-reads the mapping when set; refused (old mapping kept) if it does not load"
PARAMETERS = params.schema(
    Param("objects_file", "", "Object mapping YAML: detection class ids -> body files (see "
                              "docs/world_node.md); empty: wait for a parameter change", rule_text=RELOADS,
          string="text",
          confined=True),
    Param("search_path", params.STRING_ARRAY, "Directories searched for the body files' includes and "
                                              "meshes (before $OPENRAVE_DATA)", rule_text=RELOADS,
          string="text", confined=True),
    Param("description_file", "", "Robot file whose environment bodies (all but the robot) go to MoveIt on "
                                  "/collision_object; empty: detected bodies only",
          rule_text="re-read when set; refused (old bodies kept) if it does not load", string="text",
          confined=True),
    Param("environment", True, "Send the environment bodies of description_file (false: detected bodies "
                               "only)"),
    Param("frame_prefix", "", "Prefix of every published object frame (as the description node's)",
          read_only=True, string="prefix"),
    Param("world_frame", "", "Frame the bodies are placed in; empty: world (the description node's shared "
                             "world_frame default)", read_only=True, string="frame"),
    Param("publish_rate", 10.0, "Hz: /tf of every body, and how often timeouts are checked",
          range=(0.001, 1000.0)),
    Param("min_score", 0.0, "Hypotheses scoring below this are ignored",
          rule=lambda v: None if math.isfinite(v) else "must be a finite number", rule_text="finite"),
    Param("warn_throttle", 5.0, "Seconds between repeated warnings about one kind of dropped detection",
          range=(0.0, 86400.0)),
    Param("max_detections", MAX_DETECTIONS, "Detections of one message looked at; the rest are dropped "
                                            "unread (one throttled warning with the counts)",
          range=(1, 10000)),
    Param("max_bodies", MAX_BODIES, "Bodies of all classes together; new ones beyond are refused (one "
                                    "throttled warning with the counts); lowering it removes none",
          range=(1, 10000)),
    Param("world_box", WORLD_BOX, "m: half extent of the cube about the world origin where bodies may be; a "
                                  "detection placing one outside is refused (one throttled warning naming "
                                  "it): a body at 1e308 m broke the planner's collision scene",
          range=(0.01, 1e6)),
)
PARAMETERS = PARAMETERS + OCCUPANCY      # issue 44: sensor topics -> the occupancy map
LISTED_NAMES = 5              # names shown in one warning or log line (the rest counted)
REPORTED_NAMES = 1000         # distinct unknown classes / frames reported at once however throttled
RELOAD_PARAMETERS = {"objects_file", "search_path"}
NO_ENVIRONMENT = (".urdf", ".xacro")     # robot formats without other bodies: not read
FOLLOWED = {"description_file": "description_file", "publish_environment": "environment"}   # theirs: ours
ENVIRONMENT_PARAMETERS = {"description_file", "search_path", "environment"}


def names(items: list, limit: int = LISTED_NAMES) -> str:
    """`` (a, b, c and 7 more)`` ('' for none)."""
    if not items:
        return ""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f" ({', '.join(items[:limit])}{more})"


def listed(counts: Counter, limit: int = LISTED_NAMES) -> str:
    """``'a' (3), 'b' (1) and 4 more`` of a Counter, most frequent first (each name cut to 80 characters:
    they come from peers)."""
    items = counts.most_common()
    text = ", ".join(f"{name[:80]!r}{'...' if len(name) > 80 else ''} ({n})" for name, n in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


class WorldNode(ContainedNode):
    def __init__(self, **kwargs):
        super().__init__("world_node", **kwargs)
        self.params = params.NodeParameters(
            self, PARAMETERS, validate=self._check_parameters, apply=self._apply_parameters,
            roots=lambda get: params.launch_roots([get("objects_file"), get("description_file")],
                                                  get("search_path")))
        self.tf = TFBuffer()
        self.world: Optional[WorldObjects] = None
        self._marker_counts: dict[str, int] = {}          # body -> markers published in its namespace
        self._warned: dict[str, float] = {}                 # warning key -> last time (throttle per kind)
        self._reported: set[tuple[str, str]] = set()       # (kind, name) warned about at least once
        self._over = Counter()                              # limits: counts since the last warning
        self.frame_prefix = str(self._p("frame_prefix"))
        self.world_frame = str(self._p("world_frame")) or frames.WORLD_FRAME

        self.tf_pub = self.create_publisher(TFMessage, "/tf", qos.tf_qos())
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", qos.description_qos())
        self.objects_pub = self.create_publisher(String, "~/objects", qos.description_qos())
        self.objects_yaml_pub = self.create_publisher(String, "~/objects_yaml", qos.description_qos())
        self.scene = ScenePublisher(self, self.world_frame)      # MoveIt: /collision_object, /planning_scene
        self.environment: dict[str, tuple[object, np.ndarray]] = {}   # body name -> (body at origin, pose)
        self.create_subscription(TFMessage, "/tf", lambda m: self._on_tf(m, False), qos.tf_qos())
        self.create_subscription(TFMessage, "/tf_static", lambda m: self._on_tf(m, True),
                                 qos.tf_static_listener_qos())
        self.create_subscription(Detection3DArray, "detections", self._on_detections, 10, raw=True)
        self.create_reload_service(self.reload, lambda: self._p("objects_file"), "mapping")
        self.timer = self.create_timer(1.0 / float(self._p("publish_rate")), self._tick)
        self._attached: dict[str, tuple[str, np.ndarray]] = {}      # body -> (link frame, link -> body)
        self._attach_queue = AttachQueue()          # ~/attach requests waiting for the TF at their stamp
        self._subscribe_attach()
        # the description node's switches of the robot file (ros2 param set /description_node ...)
        self.create_subscription(ParameterEvent, "/parameter_events", self._on_parameter_event, 10)

        self.occupancy = None                        # the sensors' map (issue 44), when topics feed it
        if any(self._p(f"occupancy_{kind}_topics") for kind in ("depth", "scan", "cloud")):
            from ..ros.occupancy import OccupancyFeed

            try:
                self.occupancy = OccupancyFeed(self, self.tf, self.world_frame, self.frame_prefix, self._p,
                                               self.scene.scene_pub, lambda key, text: self._warn(key, text),
                                               self._placed_bodies)
                self.scene.on_republish.append(lambda: setattr(self.occupancy, "resend", True))
            except (ImportError, ValueError) as exc:    # octomap-python missing, a workspace over its bound
                self.get_logger().error(f"no occupancy map: {exc}")
        ok, error = self.load_environment()
        if not ok:
            self.get_logger().error(f"cannot load the environment of description_file: {error}")
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
        if ENVIRONMENT_PARAMETERS & new.keys():
            ok, error = self.load_environment(new)
            if not ok:
                return error
        if RELOAD_PARAMETERS & new.keys():
            ok, error = self.reload(new)
            if not ok:
                return error
        return None

    def _on_parameter_event(self, event) -> None:
        """The description node switched its robot file (a set it accepted): follow it, when this node was
        given one (``description_file`` not empty)."""
        from rclpy.parameter import Parameter, parameter_value_to_python

        ours = self.get_namespace().rstrip("/") + "/description_node"
        if not self._p("description_file") or event.node != ours:
            return
        changed = [Parameter(name, value=parameter_value_to_python(p.value)) for p in event.changed_parameters
                   for name in [FOLLOWED.get(p.name)] if name is not None]
        changed = [c for c in changed if c.value != self._p(c.name)]
        if not changed:
            return
        results = self.set_parameters(changed)
        for c, result in zip(changed, results):
            if not result.successful:
                self.get_logger().warning(f"the description node switched {c.name} to {c.value!r}, not "
                                          f"followed: {result.reason}")

    def load_environment(self, overrides: Optional[dict] = None) -> tuple[bool, str]:
        """Read the environment bodies of ``description_file``; on success send them (the old ones that
        are gone: REMOVE), else keep the old ones."""
        import copy

        from ..formats import load

        path = self._p("description_file", overrides)
        bodies: dict[str, tuple[object, np.ndarray]] = {}
        if path and self._p("environment", overrides) and not path.lower().endswith(NO_ENVIRONMENT):
            try:
                robot = load(path, search_path=list(self._p("search_path", overrides) or []) or None)
            except Exception as exc:     # any reader failure must leave the node serving
                return False, f"{path}: {type(exc).__name__}: {exc}"
            for name, body in robot.environment.items():
                at_origin = copy.copy(body)          # shapes in the body's frame, posed by its placement
                at_origin.placement = np.eye(4)
                bodies[name] = (at_origin, np.array(body.placement, dtype=float))
        for name in self.environment:
            self._attached.pop(name, None)
        self.environment = bodies
        if path:
            self.get_logger().info(f"environment of {path}: {len(bodies)} bodies{names(sorted(bodies))}")
        self._publish(Changes(), force=True)
        return True, ""

    def _apply_parameters(self, new: dict) -> None:
        if self.world is not None and {"max_detections", "max_bodies"} & new.keys():
            self.world.set_limits(int(self._p("max_detections", new)), int(self._p("max_bodies", new)))
        if self.world is not None and "world_box" in new:
            self.world.set_world_box(float(new["world_box"]))
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
        self.scene.load((f"class {name!r}", cls.body) for name, cls in mapping.classes.items())
        if self.world is None:
            self.world = WorldObjects(mapping, int(self._p("max_detections")), int(self._p("max_bodies")),
                                      float(self._p("world_box")))
            self._publish(Changes(), force=True)
        else:
            changes = self.world.set_mapping(mapping)
            self._publish(changes, force=True)       # files of kept classes may have changed

    # -- input -----------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _warn(self, key: str, text: str, names=()) -> bool:
        """Warn once per ``warn_throttle`` s per ``key`` (a fixed kind, never a peer's string), and at once
        when it names something (``names``) not reported before (up to REPORTED_NAMES of them)."""
        now = self._now()
        last = self._warned.get(key)
        fresh = [n for n in names if (key, n) not in self._reported]
        self._reported.update((key, n) for n in fresh[:max(0, REPORTED_NAMES - len(self._reported))])
        if last is None or now - last >= float(self._p("warn_throttle")) or \
                any((key, n) in self._reported for n in fresh):
            self._warned[key] = now
            self.get_logger().warning(text)
            return True
        return False

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        for t in msg.transforms:
            stamp = t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
            try:
                m = tf_matrix(t)
            except ValueError:        # non-finite or zero quaternion
                continue
            if not np.isfinite(m).all():
                continue
            self.tf.set_transform(t.header.frame_id, t.child_frame_id, m, stamp, static)
        if len(self._attach_queue):
            self._run_attach()

    def _on_detections(self, data: bytes) -> None:
        """One serialized Detection3DArray: its first ``max_detections`` detections deserialized and
        applied, everything dropped summed up per kind."""
        from rclpy.serialization import deserialize_message

        world = self.world
        if world is None:
            return
        count = detection_array_count(data)
        if count is None:
            self._warn("undecodable", "detections message that is not CDR (or truncated) dropped")
            return
        left_out = max(0, count - world.max_detections)
        try:
            msg = deserialize_message(truncate_detection_array(data, count - left_out) if left_out else data,
                                      Detection3DArray)
        except Exception as exc:      # the middleware's own check of a malformed message
            self._warn("undecodable", f"detections message dropped: {exc}")
            return
        min_score = float(self._p("min_score"))
        unknown, bad_pose, bad_frame = Counter(), Counter(), Counter()
        frame_errors: dict[str, str] = {}
        transforms: dict[tuple[str, Optional[float]], object] = {}      # (frame, stamp) -> matrix or error
        detections = []
        for det in msg.detections:
            best = None
            for r in det.results:
                score = r.hypothesis.score
                if score >= min_score and (best is None or score > best.hypothesis.score):
                    best = r
            if best is None:
                continue
            class_id = best.hypothesis.class_id
            if world.mapping.get(class_id) is None:
                unknown[class_id] += 1
                continue
            frame = det.header.frame_id or msg.header.frame_id
            stamp = det.header.stamp if det.header.stamp.sec or det.header.stamp.nanosec else msg.header.stamp
            at = stamp.sec + stamp.nanosec * 1e-9 or None       # unstamped: the latest transforms
            try:
                local = pose_matrix(best.pose.pose)
            except ValueError as exc:
                bad_pose[f"{class_id!r}: {exc}"] += 1
                continue
            key = (frame, at)
            if key not in transforms:
                try:
                    transforms[key] = self.tf.lookup(self.world_frame, frame, at)
                except LookupError as exc:
                    transforms[key] = None
                    frame_errors.setdefault(frame, str(exc))
            to_world = transforms[key]
            if to_world is None:
                bad_frame[frame] += 1
                continue
            detections.append(Detection(class_id, to_world @ local, det.id, best.hypothesis.score))
        changes = world.update(detections, self._now(), left_out=left_out)
        self._report(count, changes, unknown, bad_pose, bad_frame, frame_errors)
        if changes:
            self._publish(changes)

    def _report(self, count: int, changes: Changes, unknown: Counter, bad_pose: Counter, bad_frame: Counter,
                frame_errors: dict) -> None:
        """One warning line per kind of dropped detection in this message (throttled per kind)."""
        world = self.world
        if unknown:
            known = ", ".join(sorted(world.mapping.classes))
            kind = "class" if len(unknown) == 1 else "classes"
            self._warn("unknown", f"{sum(unknown.values())} detections of unknown {kind} {listed(unknown)} "
                       f"ignored (classes: {known})", unknown)
        if bad_pose:
            self._warn("pose", f"{sum(bad_pose.values())} detections with a non-finite pose or zero "
                       f"quaternion dropped: {listed(bad_pose)}")
        if bad_frame:
            first = next(iter(bad_frame))
            self._warn("frame", f"{sum(bad_frame.values())} detections in frames {listed(bad_frame)} "
                       f"dropped: {first!r}: {frame_errors[first]}", bad_frame)
        if changes.rejected:
            rejected = Counter(changes.rejected)
            self._warn("rejected", f"{sum(rejected.values())} detections dropped: {listed(rejected)}")
        if changes.over_detections or changes.over_bodies:
            over = self._over
            over["messages"] += 1
            over["detections"] += changes.over_detections
            over["bodies"] += changes.over_bodies
            over["largest"] = max(over["largest"], count)
            limits = "; ".join(changes.limited)
            if self._warn("limits", f"input over the limits ({over['messages']} messages since the last "
                          f"warning, the largest of {over['largest']} detections): {over['detections']} "
                          f"detections beyond max_detections {world.max_detections} dropped unread, "
                          f"{over['bodies']} new bodies refused" + (f" ({limits})" if limits else "")):
                over.clear()

    # -- output ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        if len(self._attach_queue):
            self._run_attach()                      # a request whose TF does not come: its bound
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
        if self.world is None:                       # no mapping yet: the environment bodies only
            self.scene.send(self.scene.stage(self._scene_bodies([])))
            return
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
        staged = self.scene.stage(self._scene_bodies(objects))
        self._publish_tf()
        self.scene.send(staged)
        self.markers_pub.publish(MarkerArray(markers=markers))
        now = self._now()
        self.objects_pub.publish(String(data=to_xml(objects, self.world_frame, now)))
        self.objects_yaml_pub.publish(String(data=to_yaml(objects, self.world_frame, now)))
        if len(changes.added) + len(changes.removed) > LISTED_NAMES:      # many at once: one line
            self.get_logger().info(f"{len(changes.added)} objects added{names(changes.added)}, "
                                   f"{len(changes.removed)} removed{names(changes.removed)}; "
                                   f"{len(objects)} in {self.world_frame}")
            return
        for name in changes.added:
            obj = self.world.get(name)
            if obj is not None:
                t = obj.pose[:3, 3]
                self.get_logger().info(f"object {name} ({obj.class_id}) at {t[0]:.3f} {t[1]:.3f} {t[2]:.3f} "
                                       f"in {self.world_frame}")
        for name in changes.removed:
            self.get_logger().info(f"object {name} removed")


    def _placed_bodies(self) -> list:
        """(body, world pose now) of every environment, detected and held body (the occupancy map's body
        filter)."""
        out = []
        for name, _key, body, pose in self._scene_bodies(self.world.snapshot() if self.world else []):
            held = self._attached.get(name)
            if held is not None:
                try:
                    pose = self.tf.lookup(self.world_frame, held[0]) @ held[1]
                except LookupError:
                    pass
            out.append((body, pose))
        return out

    def _scene_bodies(self, objects) -> list:
        """(name, shapes key, body, pose) of every environment and detected body, for the ScenePublisher."""
        out = [(name, f"environment body {name!r}", body, pose)
               for name, (body, pose) in self.environment.items()]
        for obj in objects:
            cls = self.world.mapping.get(obj.class_id)
            if cls is not None and obj.name not in self.environment:
                out.append((obj.name, f"class {cls.name!r}", cls.body, obj.pose))
        return out

    # -- bodies carried by a robot -------------------------------------------------------------------
    def _subscribe_attach(self) -> None:
        from moveit_msgs.msg import AttachedCollisionObject
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.create_subscription(AttachedCollisionObject, "~/attach", self._on_attach,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                            durability=DurabilityPolicy.VOLATILE))

    def _body_pose(self, name: str) -> Optional[np.ndarray]:
        if name in self.environment:
            return self.environment[name][1]
        obj = self.world.get(name) if self.world is not None else None
        return None if obj is None else obj.pose

    def _on_attach(self, msg) -> None:
        """Queued until the TF of its link reaches the message's stamp (the grasp's or release's time; 0:
        now), or the queue's bound (:class:`robot_bridge.world.attach.AttachQueue`)."""
        stamp = msg.object.header.stamp
        if not self._attach_queue.push(msg.link_name.lstrip("/"), stamp.sec + stamp.nanosec * 1e-9, msg,
                                       time.monotonic()):
            self._warn("attach:full", f"attach/detach of {msg.object.id!r} refused: "
                                      f"{self._attach_queue.max_items} requests already wait for their TF")
        self._run_attach()

    def _run_attach(self) -> None:
        for due in self._attach_queue.due(self.tf, self.world_frame, time.monotonic()):
            if due.late:
                self._warn("attach:late", f"attach/detach of {due.payload.object.id!r} at the latest TF: "
                                          f"{due.late}")
            self._apply_attach(due.payload, due.time)

    def _apply_attach(self, msg, at: Optional[float]) -> None:
        """ADD: the body is held by ``link_name`` (at its current world pose, the link's at ``at``) and
        MoveIt is told once; REMOVE: put down where the link holds it at ``at`` (an empty object id: every
        held body).  ``at``: seconds, None: the latest TF."""
        from moveit_msgs.msg import CollisionObject

        if self.world is None and not self.environment:
            return
        name, link, operation = msg.object.id, msg.link_name.lstrip("/"), msg.object.operation
        if operation == CollisionObject.ADD:
            if name in self._attached:
                return                              # one ADD per grasp (the controller's, then the planner's)
            pose = self._body_pose(name)
            if pose is None:
                self._warn(f"attach:{name}", f"attached object {name!r} is not a world body: ignored")
                return
            try:
                link_pose = self.tf.lookup(self.world_frame, link, at)
            except LookupError as exc:
                self._warn(f"attach:{link}", f"cannot attach {name!r} to {link!r}: {exc}")
                return
            if name not in self.environment and not self.world.hold(name):
                return
            self._attached[name] = (link, np.linalg.inv(link_pose) @ pose)
            touch = [t.lstrip("/") for t in msg.touch_links] or [link]
            self.scene.attach(name, link, touch)
            self.get_logger().info(f"object {name} attached to {link} (touch links: {', '.join(touch)})")
            self._publish_tf()
        elif operation == CollisionObject.REMOVE:
            for body in [name] if name else list(self._attached):
                self._detach(body, at)

    def _detach(self, name: str, at: Optional[float] = None) -> None:
        entry = self._attached.pop(name, None)
        if entry is None:
            return
        link, offset = entry
        try:
            pose = self.tf.lookup(self.world_frame, link, at) @ offset
        except LookupError as exc:
            self._warn(f"attach:{link}", f"{name!r} detached from {link!r} at its last known pose: {exc}")
            pose = self._body_pose(name)
            if pose is None:
                return
        self.scene.detach(name)
        self.scene.forget(name)                      # MoveIt's copy is where its link held it: send ours
        if name in self.environment:
            self.environment[name] = (self.environment[name][0], pose)
            changes = Changes()
        else:
            changes = self.world.release(name, pose, self._now())
        t = pose[:3, 3]
        self.get_logger().info(f"object {name} detached from {link}, put down at {t[0]:.3f} {t[1]:.3f} "
                               f"{t[2]:.3f} in {self.world_frame}")
        self._publish(changes)


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(WorldNode, args)


if __name__ == "__main__":
    sys.exit(main())
