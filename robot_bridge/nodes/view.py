"""view_node: the live browser view (``robot-bridge view``), the thin rclpy side of :mod:`robot_bridge.view`.

Subscriptions are never spun: a page thread *takes* what arrived at the page rate (``page_rate``, 30 Hz), so
the browser's update rate is decoupled from /tf's.  /tf is taken serialized (history 100 deep: at most that
many messages wait between two page updates, older ones are dropped by the middleware) and decoded newest
first, an older message with the same frames skipped undecoded (latest pose wins,
:class:`robot_bridge.view.tf_cdr.LatestTF`).  Shows:

- the robot of ``robot_description`` (meshes and colours as its URDF names them), posed from /tf + /tf_static;
- the planning scene, as MoveIt's planning scene monitor follows it: the bodies of ``/collision_object``
  (ADD, APPEND, MOVE, REMOVE; primitives and meshes: world_node's detections and environment), the bodies
  attached to a link on ``/attached_collision_object`` (the planner's pick: the body follows the gripper
  until detached) and their class colours from ``/planning_scene`` ObjectColor
  (:mod:`robot_bridge.view.planning_scene`);
- bodies from ``markers_topics`` (MarkerArray, none by default: CUBE, SPHERE, CYLINDER, MESH_RESOURCE,
  TRIANGLE_LIST; other marker types are reported once and not drawn);
- every LaserScan topic as points, every Image topic in a panel (depth encodings as grey levels), every Imu
  as an arrow of its linear acceleration (topics found by type, re-discovered every ``discover_period``);
- the planned path: moveit_msgs/DisplayTrajectory on ``path_topic`` (default ``/display_planned_path``, what
  planner_node and move_group publish for each plan), the tip link's positions along it as a polyline;
- joint sliders that follow /joint_states (where the robot is); with ``allow_control`` (default false) and
  on the page opened with the start's token only (:mod:`robot_bridge.view.access`), moving one sends a
  control_msgs/FollowJointTrajectory goal to each trajectory controller of ``controller`` (found by its
  ``.../controller_state`` topics: their joint_names say which joints it drives) naming all of the
  controller's joints, the others held where they are;
- a table of topics with the age of their last message, **STALE** after ``stale_after`` seconds.

The page is served by viser on ``host``:``port`` (127.0.0.1:8080 by default: this host only); its WebSocket
takes only this page's Origin, messages up to 1 MiB and 8 connections (:mod:`robot_bridge.view.access`).
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from typing import Optional

import numpy as np
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, Imu, JointState, LaserScan
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectoryPoint
from visualization_msgs.msg import Marker, MarkerArray

from ..errors import DescriptionError
from ..ros import params, qos
from ..ros.actions import destroy_actions
from ..ros.guard import ContainedNode
from ..ros.logs import Throttle
from ..view.access import ViewAccess
from ..view.images import image_array
from ..view.page import DEFAULT_HOST, DEFAULT_PORT, MarkerShape, ViewPage, hold_others, scan_points
from ..view.planning_scene import ObjectUpdate, PlanningScene
from ..view.scene import RobotScene, robot_scene
from ..view.status import TopicStatus
from ..view.tf_cdr import LatestTF, quat_matrices

PARAMETERS = params.schema(
    params.Param("host", DEFAULT_HOST, "Interface the page is served on (127.0.0.1: this host only; 0.0.0.0: "
                                       "every interface, anyone who reaches the port sees the robot, its "
                                       "world and camera images)", read_only=True),
    params.Param("allow_control", False, "Offer joint sliders that send goals to the controller, on the page "
                                         "opened with this start's token (its URL is printed on stdout); "
                                         "false: a read-only view", read_only=True),
    params.Param("port", DEFAULT_PORT, "TCP port of the page (HTTP and its WebSocket)", range=(1, 65535),
                 read_only=True),
    params.Param("fixed_frame", "world", "Frame the scene is drawn in", read_only=True, string="frame"),
    params.Param("page_rate", 30.0, "Hz: how often the page takes what arrived and updates the browser",
                 range=(0.1, 120.0), read_only=True),
    params.Param("stale_after", 2.0, "s without a message before a streaming topic is shown STALE",
                 range=(0.01, 3600.0), read_only=True),
    params.Param("image_rate", 5.0, "Hz: most image panel updates per topic", range=(0.1, 60.0),
                 read_only=True),
    params.Param("discover_period", 2.0, "s between looks for new LaserScan, Image, Imu and controller "
                                         "topics",
                 range=(0.1, 3600.0), read_only=True),
    params.Param("description_topic", "robot_description", "std_msgs/String URDF (latched)", read_only=True),
    params.Param("markers_topics", params.STRING_ARRAY, "MarkerArray topics drawn besides the planning scene "
                 "(world_node's bodies come on /collision_object; its ~/markers would draw them twice)",
                 read_only=True),
    params.Param("path_topic", "/display_planned_path", "moveit_msgs/DisplayTrajectory of the planned path",
                 read_only=True),
    params.Param("controller", "/controller_node", "Namespace of the FollowJointTrajectory controllers",
                 read_only=True),
    params.Param("search_path", params.STRING_ARRAY, "Directories searched for package:// meshes",
                 read_only=True),
)
TF_DEPTH = 100
MAX_TAKE = 1000                  # messages taken from one subscription per page update
MAX_DISCOVERED = 16              # topics of one kind
SENSOR_TYPES = {"sensor_msgs/msg/LaserScan": LaserScan, "sensor_msgs/msg/Image": Image,
                "sensor_msgs/msg/Imu": Imu}
CONTROLLER_STATE = "control_msgs/msg/JointTrajectoryControllerState"
MARKER_KINDS = {Marker.CUBE: "box", Marker.SPHERE: "sphere", Marker.CYLINDER: "cylinder",
                Marker.MESH_RESOURCE: "mesh", Marker.TRIANGLE_LIST: "triangles"}
MIN_GOAL_TIME = 1.0              # s
INVALID_JOINTS = -2              # FollowJointTrajectory.Result.INVALID_JOINTS
_DRIVES = re.compile(r"this controller drives \[([^\]]*)\]")
_QUOTED = re.compile(r"'([^']{1,256})'")
GOAL_SPEED_FRACTION = 0.5        # of each joint's velocity limit


def _latched(depth: int = 1) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


class _Taken:
    """A subscription whose messages are taken by the page thread (never by an executor)."""

    def __init__(self, node, msg_type, topic: str, profile: QoSProfile, raw: bool = False):
        self.topic = topic
        self.sub = node.create_subscription(msg_type, topic, lambda _m: None, profile, raw=raw)

    def take(self, limit: int = MAX_TAKE) -> list:
        out = []
        handle = self.sub.handle
        while len(out) < limit:
            with handle:
                got = handle.take_message(self.sub.msg_type, self.sub.raw)
            if got is None:
                break
            out.append(got[0])
        return out

    def latest(self):
        got = self.take()
        return got[-1] if got else None


def _pose(pose) -> np.ndarray:
    p, q = pose.position, pose.orientation
    return quat_matrices(np.array([[p.x, p.y, p.z, q.x, q.y, q.z, q.w]]))[0]


def _object_update(obj) -> ObjectUpdate:
    """A moveit_msgs/CollisionObject as plain data for :class:`robot_bridge.view.planning_scene.PlanningScene`
    (subframes, plane shapes and the type field are not drawn)."""
    op = obj.operation                                   # a ``byte`` field: bytes of length 1 in rclpy
    op = op[0] if isinstance(op, (bytes, bytearray)) else int(op)
    return ObjectUpdate(
        obj.id, op, obj.header.frame_id, _pose(obj.pose),
        [(int(p.type), list(p.dimensions), _pose(q)) for p, q in zip(obj.primitives, obj.primitive_poses)],
        [(np.array([[v.x, v.y, v.z] for v in m.vertices], dtype=float).reshape(-1, 3),
          np.array([list(t.vertex_indices) for t in m.triangles], dtype=np.int64).reshape(-1, 3), _pose(q))
         for m, q in zip(obj.meshes, obj.mesh_poses)])


CONTROL_URL = "view_node: control granted to the page at"     # printed on stdout (not logged to /rosout)


class ViewNode(ContainedNode):
    def __init__(self, print_url: bool = True, **kwargs):
        """``print_url``: print the URL with the token on stdout when control is allowed (``robot-bridge
        view`` prints it itself)."""
        super().__init__("view_node", **kwargs)
        self.params = params.NodeParameters(self, PARAMETERS)
        p = self.params.get
        self.tf = LatestTF()
        self.status = TopicStatus()
        self.stale_after = float(p("stale_after"))
        self._reported: set[str] = set()
        self._reported_lock = threading.Lock()
        self._throttle = Throttle()
        self._scene: Optional[RobotScene] = None
        self._joint_positions: dict[str, float] = {}
        self._controllers: dict[str, list[str]] = {}           # action name -> joints (its state topic's)
        self._driven: dict[str, list[str]] = {}                # action name -> joints a refusal named
        self._goal_clients: dict[str, ActionClient] = {}
        self._goal_lock = threading.Lock()
        self._last_image: dict[str, float] = {}
        access = ViewAccess(str(p("host")), bool(p("allow_control")), report=self._report_once)
        self.page = ViewPage(str(p("host")), int(p("port")), str(p("fixed_frame")), self.send_joint_goal,
                             access=access, report=self._report_once)
        self.url = access.url()                                # with the token when control is allowed
        # the subscriptions live on a node no executor spins: the page thread takes from them
        self._topics_node = self._make_topics_node()
        n = self._topics_node
        self._tf_sub = _Taken(n, TFMessage, "/tf", qos.tf_qos(), raw=True)
        self._tf_static_sub = _Taken(n, TFMessage, "/tf_static", qos.tf_static_listener_qos(), raw=True)
        self._description = _Taken(n, String, str(p("description_topic")), qos.description_qos())
        self._markers = [_Taken(n, MarkerArray, t, _latched(100)) for t in p("markers_topics")]
        self._joint_states = _Taken(n, JointState, "joint_states", qos.sensor_data_qos(1))
        self.planning_scene = PlanningScene(str(p("fixed_frame")))
        self._scene_subs = self._subscribe_planning_scene(n)
        self._path = (_Taken(n, self._moveit.DisplayTrajectory, str(p("path_topic")), _latched(1))
                      if self._moveit else None)
        self._sensors: dict[str, _Taken] = {}
        self._controller_states: dict[str, _Taken] = {}
        watched = [m.sub for m in self._markers] + [s.sub for s in self._scene_subs.values()] + \
            ([self._path.sub] if self._path else [])
        for name, latched in ((self._tf_sub.topic, False), (self._tf_static_sub.topic, True),
                              (self._description.sub.topic_name, True),
                              *((sub.topic_name, True) for sub in watched)):
            self.status.watch(name, latched=latched, stale_after=self.stale_after)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="view_page", daemon=True)
        self._thread.start()
        control = ("joint control allowed on the page opened with the token URL printed on stdout"
                   if access.token else "read-only: no joint control")
        self.get_logger().info(f"live view on {self.url.partition('?')[0]} (fixed frame {p('fixed_frame')}; "
                               f"{control})")
        if access.token and print_url:
            print(f"{CONTROL_URL} {self.url}", flush=True)

    def _make_topics_node(self):
        from rclpy.node import Node

        return Node(self.get_name() + "_topics", namespace=self.get_namespace(), context=self.context,
                    enable_rosout=False, start_parameter_services=False)

    def _subscribe_planning_scene(self, n) -> dict:
        """/collision_object, /attached_collision_object and /planning_scene with MoveIt's planning scene
        monitor's QoS (depth 1024, reliable, volatile: world_node sends every body again when one matches)."""
        try:
            import moveit_msgs.msg as moveit

            from ..ros.planning_scene import moveit_qos
        except ImportError:
            self._moveit = None
            self.get_logger().info("moveit_msgs is not installed: no planning scene, no planned path")
            return {}
        self._moveit = moveit
        profile = moveit_qos()
        return {"objects": _Taken(n, moveit.CollisionObject, "/collision_object", profile),
                "attached": _Taken(n, moveit.AttachedCollisionObject, "/attached_collision_object", profile),
                "scene": _Taken(n, moveit.PlanningScene, "/planning_scene", profile)}

    # -- the page thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        period = 1.0 / float(self.params.get("page_rate"))
        discover_every = float(self.params.get("discover_period"))
        next_discovery = 0.0
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                if start >= next_discovery:
                    self._discover()
                    next_discovery = start + discover_every
                self.update(start)
            except Exception as exc:   # the view keeps serving its last good state
                if self._throttle.due("update", 10.0):
                    self.get_logger().error(f"page update failed: {type(exc).__name__}: {exc}")
            self._stop.wait(max(0.0, period - (time.monotonic() - start)))

    def update(self, now: float) -> None:
        """Take everything that arrived and update the page once."""
        for sub, static in ((self._tf_static_sub, True), (self._tf_sub, False)):
            batch = sub.take()
            if batch:
                self.status.heard(sub.topic, now, len(batch))
                self.tf.add_batch(batch, static=static)
        if self.tf.bad_messages and self._throttle.due("tf", 10.0):
            self.get_logger().warning(f"{self.tf.bad_messages} TF messages not decoded: {self.tf.last_error}")
        description = self._description.latest()
        if description is not None:
            self.status.heard(self._description.sub.topic_name, now)
            self._load_robot(description.data)
        for m in self._markers:
            arrays = m.take()
            if arrays:
                self.status.heard(m.sub.topic_name, now, len(arrays))
                for array in arrays:
                    self._apply_markers(array)
        self._update_planning_scene(now)
        js = self._joint_states.take()
        if js:
            for msg in js:
                self._joint_positions.update(zip(msg.name, (float(v) for v in msg.position)))
            if self._scene is not None:
                self.page.follow_joints(self._joint_positions, now)
        path = self._path.latest() if self._path else None
        if path is not None:
            self.status.heard(self._path.sub.topic_name, now)
            self._show_path(path)
        for topic, sub in list(self._controller_states.items()):
            state = sub.latest()
            if state is not None:
                action = topic[: -len("controller_state")] + "follow_joint_trajectory"
                self._controllers[action] = list(state.joint_names)
        for topic, sub in list(self._sensors.items()):
            msg = sub.latest()
            if msg is not None:
                self.status.heard(topic, now)
                self._show_sensor(topic, msg, now)
        self.page.tick(self.tf, self.status, now)

    def _discover(self) -> None:
        controller = str(self.params.get("controller")).rstrip("/") + "/"
        for topic, types in self._topics_node.get_topic_names_and_types():
            for t in types:
                if t in SENSOR_TYPES and topic not in self._sensors:
                    known = sum(1 for s in self._sensors.values() if s.sub.msg_type is SENSOR_TYPES[t])
                    if known >= MAX_DISCOVERED:
                        self._report_once(f"more than {MAX_DISCOVERED} {t} topics: {topic} not shown")
                        continue
                    self._sensors[topic] = _Taken(self._topics_node, SENSOR_TYPES[t], topic,
                                                  qos.sensor_data_qos(1))
                    self.status.watch(topic, stale_after=self.stale_after)
                elif t == CONTROLLER_STATE and topic.startswith(controller) \
                        and topic.endswith("controller_state") and topic not in self._controller_states:
                    from control_msgs.msg import JointTrajectoryControllerState

                    self._controller_states[topic] = _Taken(self._topics_node, JointTrajectoryControllerState,
                                                            topic, QoSProfile(depth=1))

    def _report_once(self, text: str) -> None:
        with self._reported_lock:           # the page thread and viser's (refused handshakes, sliders)
            if text in self._reported or len(self._reported) >= 1000:
                return
            self._reported.add(text)
        self.get_logger().warning(text)

    # -- content --------------------------------------------------------------------------------------
    def _load_robot(self, text: str) -> None:
        try:
            scene = robot_scene(text, search_path=list(self.params.get("search_path") or []) or None)
        except (DescriptionError, ValueError) as exc:
            self.get_logger().error(f"robot_description not shown (the last good robot stays): {exc}")
            return
        for note in scene.notes:
            self._report_once(note)
        self._scene = scene
        self.page.set_robot(scene, scene.sliders)
        if self._joint_positions:
            self.page.follow_joints(self._joint_positions, time.monotonic())
        self.get_logger().info(f"robot {scene.name!r}: {len(scene.links)} links, {len(scene.parts)} visuals, "
                               f"{scene.triangles} triangles")

    def _apply_markers(self, array: MarkerArray) -> None:
        add, delete, delete_all = [], [], False
        for m in array.markers:
            key = (m.ns, int(m.id))
            if m.action == Marker.DELETEALL:
                delete_all, add, delete = True, [], []
                continue
            if m.action == Marker.DELETE:
                delete.append(key)
                continue
            kind = MARKER_KINDS.get(m.type)
            if kind is None:
                self._report_once(f"marker type {m.type} ({m.ns}) is not drawn (CUBE, SPHERE, CYLINDER, "
                                  "MESH_RESOURCE, TRIANGLE_LIST are)")
                continue
            shape = MarkerShape(key, m.header.frame_id, kind, _pose(m.pose),
                                np.array([m.scale.x, m.scale.y, m.scale.z], dtype=float),
                                (m.color.r, m.color.g, m.color.b, m.color.a or 1.0))
            if kind == "mesh":
                uri = m.mesh_resource
                if not uri.startswith("file://"):
                    self._report_once(f"marker mesh {uri!r} ({m.ns}) is not drawn (file:// meshes are)")
                    continue
                shape.mesh_path = uri[len("file://"):]
            elif kind == "triangles":
                shape.triangles = np.array([[p.x, p.y, p.z] for p in m.points], dtype=float).reshape(-1, 3)
            add.append(shape)
        try:
            self.page.apply_markers(add, delete, delete_all)
        except DescriptionError as exc:
            self._report_once(f"marker not drawn: {exc}")

    def _update_planning_scene(self, now: float) -> None:
        subs = self._scene_subs
        if not subs:
            return
        changed: set[str] = set()
        ps = self.planning_scene
        for key in ("objects", "attached", "scene"):       # ADDs before attaching, colours after both
            msgs = subs[key].take()
            if not msgs:
                continue
            self.status.heard(subs[key].sub.topic_name, now, len(msgs))
            for msg in msgs:
                if key == "objects":
                    changed |= ps.apply_object(_object_update(msg))
                elif key == "attached":
                    changed |= ps.apply_attached(msg.link_name, _object_update(msg.object), self.tf.poses)
                else:
                    for obj in msg.world.collision_objects:
                        changed |= ps.apply_object(_object_update(obj))
                    octo = msg.world.octomap
                    if octo.octomap.id or len(octo.octomap.data):       # else: a diff without a map
                        changed |= ps.apply_octomap(
                            octo.octomap.id, octo.octomap.resolution, octo.octomap.data,
                            octo.header.frame_id or ps.fixed_frame, _pose(octo.origin),
                            bool(octo.octomap.binary))
                    changed |= ps.apply_colors({c.id: (c.color.r, c.color.g, c.color.b, c.color.a)
                                                for c in msg.object_colors})
        for note in ps.notes:
            self._report_once(note)
        ps.notes.clear()
        if changed:
            self.page.draw_bodies(ps, changed)

    def _show_sensor(self, topic: str, msg, now: float) -> None:
        if isinstance(msg, LaserScan):
            points = scan_points(msg.ranges, msg.angle_min, msg.angle_increment, msg.range_min, msg.range_max)
            self.page.set_scan(topic, msg.header.frame_id, points)
        elif isinstance(msg, Imu):
            a = msg.linear_acceleration
            self.page.set_imu(topic, msg.header.frame_id, (a.x, a.y, a.z))
        elif isinstance(msg, Image):
            if now - self._last_image.get(topic, -math.inf) < 1.0 / float(self.params.get("image_rate")):
                return
            self._last_image[topic] = now
            image, why = image_array(msg)
            if image is None:
                self._report_once(f"{topic}: image not shown: {why}")
                return
            self.page.set_image(topic, image)

    def _show_path(self, msg) -> None:
        """A DisplayTrajectory: its trajectories one after the other, joints they do not name at
        trajectory_start's positions (else 0)."""
        scene = self._scene
        start = dict(zip(msg.trajectory_start.joint_state.name,
                         (float(v) for v in msg.trajectory_start.joint_state.position)))
        rows: list[dict] = []
        for part in msg.trajectory:
            jt = part.joint_trajectory
            for point in jt.points[: max(0, 10000 - len(rows))]:
                rows.append({**(rows[-1] if rows else start), **dict(zip(jt.joint_names, point.positions))})
        if scene is None or not rows:
            self.page.set_path(None)
            return
        names = sorted({n for row in rows for n in row})
        tip, in_root = scene.tip_path(names, [[float(row.get(n, 0.0)) for n in names] for row in rows])
        if not tip:
            self._report_once(f"planned path of joints {names[:5]} moves no link of the robot")
            return
        frame, root_in_frame = scene.anchor(self.page.fixed_frame)
        at = self.tf.poses(self.page.fixed_frame, [frame]).get(frame)
        if at is None:
            return
        self.page.set_path((at @ root_in_frame @ in_root)[:, :3, 3])

    # -- joint goals ------------------------------------------------------------------------------------
    def send_joint_goal(self, values: dict[str, float]) -> str:
        """One FollowJointTrajectory goal per controller that drives some of these joints, naming all its
        joints: the others at their /joint_states positions (a controller refuses a goal without them)."""
        from control_msgs.action import FollowJointTrajectory
        from rclpy.duration import Duration

        scene = self._scene
        if scene is None:
            return "no robot yet"
        controllers = dict(self._controllers) or {     # none seen yet: the refusal names what it drives
            str(self.params.get("controller")).rstrip("/") + "/follow_joint_trajectory":
                [s.name for s in scene.sliders]}
        velocity = {s.name: s.velocity for s in scene.sliders}
        sent = []
        with self._goal_lock:
            for action, joints in controllers.items():
                joints = self._driven.get(action, joints)
                if not any(j in values for j in joints):
                    continue
                target, unknown = hold_others(joints, values, self._joint_positions)
                if unknown:
                    sent.append(f"{action}: no /joint_states position of {unknown[:5]} yet")
                    continue
                names = list(target)
                duration = MIN_GOAL_TIME
                for j in names:
                    v = velocity.get(j) or 1.0
                    delta = abs(target[j] - self._joint_positions.get(j, target[j]))
                    duration = max(duration, delta / (GOAL_SPEED_FRACTION * v))
                goal = FollowJointTrajectory.Goal()
                goal.trajectory.joint_names = names
                goal.trajectory.points = [JointTrajectoryPoint(
                    positions=[target[j] for j in names],
                    time_from_start=Duration(seconds=duration).to_msg())]
                client = self._goal_clients.get(action)
                if client is None:
                    client = self._goal_clients[action] = ActionClient(self, FollowJointTrajectory, action)
                if not client.server_is_ready():
                    sent.append(f"{action}: no action server")
                    continue
                future = client.send_goal_async(goal)
                future.add_done_callback(lambda f, a=action: self._goal_sent(a, f, values))
                sent.append(f"{action}: {len(names)} joints in {duration:.1f} s")
        return "; ".join(sent) or "no controller drives these joints"

    def _goal_sent(self, action: str, future, values: dict) -> None:
        handle = future.result()
        if not handle.accepted:
            self.page.set_goal_result(f"{action}: goal rejected")
            return
        handle.get_result_async().add_done_callback(
            lambda f: self._goal_done(action, f.result().result, values))

    def _goal_done(self, action: str, result, values: dict) -> None:
        """A goal's outcome on the page.  A controller's state topic can name more joints than its action
        drives (controller_node's ``~/controller_state`` names the gripper too): a refusal naming the joints
        it drives teaches them, and the goal is sent again once with those."""
        text = str(result.error_string)
        drives = _DRIVES.search(text) if result.error_code == INVALID_JOINTS else None
        if drives and action not in self._driven:
            self._driven[action] = _QUOTED.findall(drives.group(1))[:10000]
            self.page.set_goal_result(self.send_joint_goal(values))
            return
        outcome = "reached" if result.error_code == 0 else f"error_code {result.error_code} {text}"
        self.page.set_goal_result(f"{action}: {outcome}")
        self.page.targets.ended(values)

    def destroy_node(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.page.close()
        if self._thread.is_alive():
            # still taking from the topics node's subscriptions: destroying them under it can crash the
            # process (rclpy does not support it); the node is left to the process exit instead
            self.get_logger().error("the page thread did not end within 10 s: its topics node is left alive")
        else:
            self._topics_node.destroy_node()
        destroy_actions(self)
        return super().destroy_node()


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(ViewNode, args)


if __name__ == "__main__":
    sys.exit(main())
