"""world_node's occupancy map (issue 44): sensor topics in, an ``octomap_msgs/Octomap`` in a /planning_scene
diff out.  A thin adapter over :class:`robot_bridge.world.occupancy.OccupancyMap` (no rules of its own).

Depth images (32FC1 / 16UC1 with the CameraInfo of their camera), laser scans and PointCloud2 (float32 x, y,
z) are placed in the world frame through the node's TF buffer at the message's stamp (the robot's links too,
for the self filter: the URDF of ``robot_description``); a frame whose TF is not known is dropped with a
throttled warning.  At most ``occupancy_rate`` messages per second of each topic are inserted (the rest are
skipped: the map's work is bounded whatever a peer sends).  The map goes out as move_group's monitor
publishes it: ``PlanningScene(is_diff=True, world.octomap)`` in the world frame, at ``occupancy_publish_rate``
when it changed (an insertion or a decay), and at the next tick after a subscription matched (``resend``, set
by world_node's planning scene publisher when it republishes its bodies: the topic is volatile).
"""

from __future__ import annotations

import array
import math
import time
from typing import Callable, Optional

import numpy as np

from ..kinematics import frames
from . import params
from .params import Param
from ..world.occupancy import (MAX_POINTS, BodyFilter, OccupancyConfig, OccupancyError, OccupancyMap,
                               SelfFilter)

MAX_FIELDS = 64
MAX_TOPICS = 64                        # per sensor kind


def _per_topic(kind: str) -> list:
    """``occupancy_<kind>_max_ranges`` and ``_decays``: one value per topic of ``occupancy_<kind>_topics``."""
    out = []
    for name, unit, lo, hi, default in (("max_ranges", "m: max range", 0.05, 100.0, "occupancy_max_range"),
                                        ("decays", "s: decay", 0.0, 86400.0, "occupancy_decay; 0: never")):
        text = f"each in [{lo}, {hi}], at most {MAX_TOPICS}"
        out.append(Param(
            f"occupancy_{kind}_{name}", params.DOUBLE_ARRAY,
            f"{unit} of each of occupancy_{kind}_topics, in order (missing: {default})",
            rule=lambda v, lo=lo, hi=hi, text=text: None if len(v) <= MAX_TOPICS and all(
                math.isfinite(x) and lo <= x <= hi for x in v) else text,
            rule_text=text, read_only=True))
    return out

SENSOR_TOPICS = "read at start-up (a change needs a restart)"
PARAMETERS = params.schema(     # world_node's occupancy_* parameters
    Param("occupancy_depth_topics", params.STRING_ARRAY, "Depth images (32FC1 m / 16UC1 mm) that feed the "
                                                         "occupancy map; all three topic lists empty: no map",
          rule_text=SENSOR_TOPICS, read_only=True, string="name"),
    Param("occupancy_camera_info_topics", params.STRING_ARRAY, "CameraInfo of each depth topic, in order "
                                                               "(missing / empty: camera_info beside it)",
          rule_text=SENSOR_TOPICS, read_only=True, string="name"),
    Param("occupancy_scan_topics", params.STRING_ARRAY, "LaserScans that feed the occupancy map",
          rule_text=SENSOR_TOPICS, read_only=True, string="name"),
    Param("occupancy_cloud_topics", params.STRING_ARRAY, "PointCloud2 (float32 x y z) that feed the "
                                                         "occupancy map", rule_text=SENSOR_TOPICS,
          read_only=True, string="name"),
    Param("occupancy_resolution", 0.02, "m: edge of an occupancy cell", range=(0.005, 1.0), read_only=True),
    Param("occupancy_workspace", [-2.0, -2.0, -0.5, 2.0, 2.0, 2.5], "m: [x y z min, x y z max] of the "
          "box in world_frame the map keeps (points beyond dropped, counted)", lengths=(6,),
          rule=lambda v: None if all(math.isfinite(x) and abs(x) <= 1000.0 for x in v) and
          all(v[i] < v[i + 3] for i in range(3)) else "finite, |x| <= 1000, min < max",
          rule_text="finite, |x| <= 1000, min < max", read_only=True),
    Param("occupancy_max_range", 3.0, "m: returns farther only clear free space up to this",
          range=(0.05, 100.0), read_only=True),
    Param("occupancy_clearing", "projective", "How depth images and scans clear cells: projective (the map's "
          "occupied cells projected into the image, MoveIt's depth image updater; ~9 ms CPU a VGA frame) or "
          "rays (OctoMap traces every ray, free space known; ~0.6 s a frame); clouds are always ray traced",
          choices=("projective", "rays"), read_only=True),
    Param("occupancy_decay", 0.0, "s: a cell not seen again for this long drops out (0: never)",
          range=(0.0, 86400.0), read_only=True),
    Param("occupancy_padding", 0.03, "m: the robot's collision shapes grown by this in the self filter",
          range=(0.0, 1.0), read_only=True),
    Param("occupancy_filter_bodies", True, "Leave out points inside world_node's bodies (environment, "
                                           "detected, held), grown by occupancy_padding (MoveIt's known "
                                           "objects)",
          read_only=True),
    Param("occupancy_rate", 1.0, "Hz: messages of one sensor topic inserted at most (the rest skipped; "
                                 "the node waits while one is inserted)",
          range=(0.01, 100.0)),
    Param("occupancy_publish_rate", 1.0, "Hz: the map on /planning_scene (world.octomap) when it changed",
          range=(0.01, 100.0), read_only=True),
    *_per_topic("depth"), *_per_topic("scan"), *_per_topic("cloud"),
)


def camera_info_topic(image_topic: str) -> str:
    """The CameraInfo beside an image topic (image_transport's convention): ``a/b/image`` ->
    ``a/b/camera_info``."""
    head, _, _ = image_topic.rpartition("/")
    return f"{head}/camera_info" if head else "camera_info"


def image_array(msg) -> np.ndarray:
    """(H, W) pixels of a 32FC1 / 16UC1 Image (its endianness, rows of ``step`` bytes)."""
    from .conversions import validate_image

    reason = validate_image(msg)
    if reason:
        raise OccupancyError("depth image", reason)
    dtype = {"32FC1": np.float32, "16UC1": np.uint16}.get(msg.encoding)
    if dtype is None:
        raise OccupancyError("depth image", f"encoding {msg.encoding!r}: 32FC1 or 16UC1 only")
    dtype = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    rows = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)
    rows = np.ascontiguousarray(rows[:, :msg.width * dtype.itemsize])
    return rows.view(dtype).reshape(msg.height, msg.width).astype(dtype.newbyteorder("="))


def cloud_points(msg) -> np.ndarray:
    """(N, 3) float64 x, y, z of a PointCloud2 whose x, y, z are FLOAT32 (NaN rows kept: no return)."""
    from .conversions import validate_pointcloud2

    if len(msg.fields) > MAX_FIELDS:
        raise OccupancyError("point cloud", f"{len(msg.fields)} fields, over {MAX_FIELDS}")
    reason = validate_pointcloud2(msg)
    if reason:
        raise OccupancyError("point cloud", reason)
    if msg.width * msg.height > MAX_POINTS:
        raise OccupancyError("point cloud", f"{msg.width * msg.height} points, over {MAX_POINTS}")
    fields = {f.name: f for f in msg.fields}
    if any(n not in fields or fields[n].datatype != 7 for n in "xyz"):       # PointField.FLOAT32
        raise OccupancyError("point cloud", "needs FLOAT32 fields x, y, z")
    n = msg.width * msg.height
    rows = np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.row_step)
    raw = np.ascontiguousarray(rows[:, :msg.width * msg.point_step]).reshape(n, msg.point_step)
    order = ">" if msg.is_bigendian else "<"
    out = np.empty((n, 3))
    for i, name in enumerate("xyz"):
        off = fields[name].offset
        out[:, i] = raw[:, off:off + 4].copy().view(order + "f4").reshape(-1)
    return out


def planning_scene_diff(fields: dict, frame: str, stamp):
    """A PlanningScene diff carrying the map (``OccupancyMap.to_message_fields``) as ``world.octomap`` in
    ``frame``, origin the identity: what move_group's monitor publishes."""
    from moveit_msgs.msg import PlanningScene

    scene = PlanningScene(is_diff=True)
    with_pose = scene.world.octomap
    with_pose.header.frame_id = frame
    with_pose.header.stamp = stamp
    with_pose.origin.orientation.w = 1.0
    octo = with_pose.octomap
    octo.header.frame_id = frame
    octo.header.stamp = stamp
    octo.binary, octo.id, octo.resolution = True, fields["id"], float(fields["resolution"])
    octo.data = array.array("b", fields["data"].tobytes())
    return scene


class OccupancyFeed:
    """Subscriptions, the map and its publication for one node (``get``: the node's parameter getter)."""

    def __init__(self, node, tf, world_frame: str, frame_prefix: str, get: Callable, scene_pub, warn,
                 bodies: Optional[Callable[[], list]] = None):
        from sensor_msgs.msg import CameraInfo, Image, LaserScan, PointCloud2
        from std_msgs.msg import String

        from . import qos

        self.node, self.tf, self.world_frame, self.prefix = node, tf, world_frame, frame_prefix
        self.get, self.scene_pub, self.warn = get, scene_pub, warn
        # (body, world pose) of the world's bodies, whose inside is left out of the map
        self.world_bodies = bodies if get("occupancy_filter_bodies") else None
        self.body_filter = BodyFilter(float(get("occupancy_padding")))
        lo_hi = list(get("occupancy_workspace"))
        self.map = OccupancyMap(OccupancyConfig(
            resolution=float(get("occupancy_resolution")), workspace_min=tuple(lo_hi[:3]),
            workspace_max=tuple(lo_hi[3:]), max_range=float(get("occupancy_max_range")),
            decay=float(get("occupancy_decay")), clearing=str(get("occupancy_clearing"))))
        self._info: dict[str, np.ndarray] = {}              # camera_info topic -> K
        self._last: dict[str, float] = {}                   # topic -> monotonic time of its last insertion
        self._published = -1
        self.resend = False                                 # a subscriber matched: send it unchanged
        self.dropped = 0
        infos = list(get("occupancy_camera_info_topics"))
        depth = list(get("occupancy_depth_topics"))
        self.limits: dict[str, dict] = {}                  # topic -> its own max_range / decay
        for kind in ("depth", "scan", "cloud"):
            ranges, decays = list(get(f"occupancy_{kind}_max_ranges")), list(get(f"occupancy_{kind}_decays"))
            for i, topic in enumerate(get(f"occupancy_{kind}_topics")):
                limit = self.limits.setdefault(topic, {})
                if i < len(ranges):
                    limit["max_range"] = float(ranges[i])
                if i < len(decays):
                    limit["decay"] = float(decays[i])
        sensor_qos = qos.sensor_data_qos(1)        # best effort matches every publisher; the latest only
        for i, topic in enumerate(depth):
            info = infos[i] if i < len(infos) and infos[i] else camera_info_topic(topic)
            node.create_subscription(CameraInfo, info, lambda m, t=info: self._on_info(t, m), sensor_qos)
            node.create_subscription(Image, topic, lambda m, t=topic, i=info: self._on_depth(t, i, m),
                                     sensor_qos)
        for topic in get("occupancy_scan_topics"):
            node.create_subscription(LaserScan, topic, lambda m, t=topic: self._on_scan(t, m), sensor_qos)
        for topic in get("occupancy_cloud_topics"):
            node.create_subscription(PointCloud2, topic, lambda m, t=topic: self._on_cloud(t, m), sensor_qos)
        node.create_subscription(String, "robot_description", self._on_description, qos.description_qos())
        self.timer = node.create_timer(1.0 / float(get("occupancy_publish_rate")), self.publish)

    # -- input -------------------------------------------------------------------------------------
    def _on_description(self, msg) -> None:
        from ..formats.urdf import read_string

        try:
            robot = read_string(msg.data)
            self.map.self_filter = SelfFilter(robot, float(self.get("occupancy_padding")))
        except Exception as exc:      # a description that does not read leaves the filter as it was
            self.warn("occupancy:description", f"occupancy self filter: robot_description not read: {exc}")
            return
        if self.map.self_filter.skipped:
            self.warn("occupancy:meshes", "occupancy self filter leaves out unreadable meshes: "
                                          + "; ".join(self.map.self_filter.skipped[:3]))

    def _on_info(self, topic: str, msg) -> None:
        from .conversions import validate_camera_info

        if validate_camera_info(msg) is None:
            self._info[topic] = np.array(msg.k, dtype=float)

    def _due(self, topic: str) -> bool:
        now = time.monotonic()
        if now - self._last.get(topic, -1e9) < 1.0 / float(self.get("occupancy_rate")):
            self.dropped += 1
            return False
        self._last[topic] = now
        return True

    def _placed(self, topic: str, header) -> Optional[tuple[np.ndarray, float, dict]]:
        """(sensor pose, stamp, filter arguments) at the header's stamp, or None (warned)."""
        stamp = header.stamp.sec + header.stamp.nanosec * 1e-9
        at = stamp or None
        try:
            pose = self.tf.lookup(self.world_frame, header.frame_id, at)
            links = {}
            if self.map.self_filter is not None:
                for link in self.map.self_filter.links:
                    links[link] = self.tf.lookup(self.world_frame, frames.link_frame(link, self.prefix), at)
        except LookupError as exc:
            self.warn(f"occupancy:tf:{topic}", f"occupancy: {topic} dropped: {exc}")
            return None
        now = self.node.get_clock().now().nanoseconds * 1e-9
        filters = {"link_poses": links} if self.map.self_filter is not None else {}
        if self.world_bodies is not None:
            filters["bodies"] = self.body_filter.bodies(self.world_bodies())
        return pose, stamp or now, filters

    def _insert(self, topic: str, header, insert) -> None:
        if not self._due(topic):
            return
        placed = self._placed(topic, header)
        if placed is None:
            return
        pose, stamp, filters = placed
        filters.update(self.limits.get(topic, {}))
        try:
            insert(pose, stamp, filters)
        except OccupancyError as exc:
            self.warn(f"occupancy:input:{topic}", f"occupancy: {topic} dropped: {exc}")

    def _on_depth(self, topic: str, info: str, msg) -> None:
        K = self._info.get(info)
        if K is None:
            self.warn(f"occupancy:info:{topic}", f"occupancy: {topic} dropped: no CameraInfo on {info} yet")
            return
        self._insert(topic, msg.header, lambda pose, stamp, f: self.map.insert_depth(
            image_array(msg), K, msg.encoding, pose, stamp, **f))

    def _on_scan(self, topic: str, msg) -> None:
        def insert(pose, stamp, f):
            from .conversions import validate_laser_scan

            reason = validate_laser_scan(msg)       # angles and ranges that disagree: beams placed wrong
            if reason:
                raise OccupancyError("laser scan", reason)
            return self.map.insert_scan(np.asarray(msg.ranges, float), msg.angle_min, msg.angle_increment,
                                        msg.range_min, msg.range_max, pose, stamp, **f)

        self._insert(topic, msg.header, insert)

    def _on_cloud(self, topic: str, msg) -> None:
        self._insert(topic, msg.header, lambda pose, stamp, f: self.map.insert_points(
            cloud_points(msg), pose, stamp, **f))

    # -- output ------------------------------------------------------------------------------------
    def message(self):
        return planning_scene_diff(self.map.to_message_fields(), self.world_frame,
                                   self.node.get_clock().now().to_msg())

    def publish(self, force: bool = False) -> None:
        self.map.expire(self.node.get_clock().now().nanoseconds * 1e-9)
        resend, self.resend = self.resend and self._published >= 0, False
        if self.map.updates == self._published and not (force or resend):
            return
        self._published = self.map.updates
        self.scene_pub.publish(self.message())
