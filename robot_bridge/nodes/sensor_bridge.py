"""sensor_bridge_node: every attached sensor of a robot file as standard ROS 2 topics.

Per sensor (``sensors.<name>.mode``):
- ``relay``: subscribe the driver's topic(s), validate, fix ``frame_id`` (the
  frame the description node publishes: ``frames.data_frame``), optionally
  restamp and rate-limit, republish.  Invalid messages are dropped, counted
  (``SensorBridge.dropped``) and reported with a throttled warning.
- ``sim``: generate data from the model and its environment at the current
  /joint_states (laser and camera by ray casting, IMU from the frame's motion),
  each sensor on a thread of its own at its own rate; /diagnostics reports asked vs achieved rates.
- ``off``: nothing.

Topics (relative to the node namespace): laser ``<sensor>/scan``; flash lidar ``<sensor>/points``
(organized PointCloud2); camera ``<sensor>/image_raw`` + ``<sensor>/camera_info``; IMU
``<sensor>/imu``; force6d ``<sensor>/wrench``; odometry ``<sensor>/odom``.
"""

from __future__ import annotations

import os

# The bridge's numpy work is many small matrix products; OpenBLAS threads only add overhead to them
# (measured 4x CPU on a loaded 2-core machine).  Effective when this module imports numpy first.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402
import threading  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Callable, Optional  # noqa: E402

import numpy as np  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState, LaserScan, PointCloud2  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from ..kinematics.frames import data_frame  # noqa: E402
from ..model import AttachedSensor, Robot  # noqa: E402
from ..ros import conversions as conv  # noqa: E402
from ..ros.guard import ContainedNode  # noqa: E402
from ..ros.logs import Throttle  # noqa: E402
from ..ros import params, qos  # noqa: E402
from ..ros.params import Param  # noqa: E402
from ..sim.schedule import PeriodicWorker, RateMonitor  # noqa: E402
from ..world.objects import MAX_BODIES  # noqa: E402

MODES = ("relay", "sim", "off")
RAY_BACKENDS = ("auto", "embree", "trimesh", "numpy")
RELIABILITY = ("reliable", "best_effort")
COVARIANCE = "IMU covariance (9 values; empty: description)"


def _mode(value) -> str:
    """A mode parameter's value: YAML and --ros-args read an unquoted ``off`` as the boolean false."""
    return "off" if value is False else str(value)


# The node's parameter schema.  Sensors, topics and QoS are set up at start-up: those parameters are
# read-only; warn_throttle and the relay's restamp/max_rate take effect when set.
PARAMETERS = params.schema(
    Param("description_file", "", "Robot file (.robot.xml, .env.xml, .dae, .zae, .urdf) whose attached "
                                  "sensors are bridged; an .env.xml also gives the environment for "
                                  "simulation", read_only=True, string="text"),
    Param("search_path", params.STRING_ARRAY, "Directories searched for included files and meshes "
                                              "(before $OPENRAVE_DATA)", read_only=True, string="text"),
    Param("xacro_args", "", params.XACRO_ARGS_TEXT,
          read_only=True, string="text"),
    Param("frame_prefix", "", "Prefix of every frame_id (as the description node's frame_prefix)",
          read_only=True, string="prefix"),
    Param("robot_pose", params.DOUBLE_ARRAY, "sim: where the robot stands in the world frame, [x, y, z, "
                                             "roll, pitch, yaw] (m, rad), as the description node's: the "
                                             "simulated sensors see the world's bodies from there; empty: "
                                             "description_file's placement, else the origin",
          lengths=(0, 6), read_only=True),
    Param("default_mode", "sim", "Mode of sensors without sensors.<name>.mode: relay, sim or off",
          choices=MODES, any_type=True, normalize=_mode, read_only=True),
    Param("relay_namespace", "driver", "Relay input topics default to <relay_namespace>/<sensor>/<topic>",
          read_only=True, string="name"),
    Param("joint_states_topic", "joint_states", "JointState topic moving the simulated sensors",
          read_only=True, string="name"),
    Param("ray_backend", "auto", "Triangle-mesh ray casting: auto (embree > trimesh > numpy), embree, "
                                 "trimesh, numpy", choices=RAY_BACKENDS, read_only=True),
    Param("output_reliability", "reliable", "QoS reliability of published topics: reliable or best_effort",
          choices=RELIABILITY, read_only=True),
    Param("output_depth", 5, "QoS history depth of published topics", range=(1, 10000), read_only=True),
    Param("input_reliability", "best_effort", "QoS reliability of relay subscriptions: best_effort (matches "
                                              "any driver, SensorDataQoS) or reliable",
          choices=RELIABILITY, read_only=True),
    Param("relay_fast_path", True, "Relay images on a thread of their own, out of the executor, header "
                                   "rewritten in place (false: through the executor like the rest)",
          read_only=True),
    Param("warn_throttle", 5.0, "Seconds between repeated warnings about dropped messages",
          range=(0.0, 86400.0)),
    Param("seed", -1, "Random seed of the simulated noise (-1: from the OS)", range=(-1, 2**31 - 1),
          read_only=True),
    Param("diagnostics_rate", 1.0, "Hz of /diagnostics: each simulated sensor's asked and achieved rate "
                                   "(0: none)", range=(0.0, 1000.0), read_only=True),
    Param("objects_topic", "world_node/objects", "sim: detected objects (world_node's latched <Environment> "
                                                 "XML) added to, moved in and removed from the simulated "
                                                 "scene; empty: none", read_only=True, string="name"),
    Param("max_objects", MAX_BODIES, "sim: bodies of one objects document simulated at most (as "
                                     "world_node's max_bodies); the rest are left out with one throttled "
                                     "warning", range=(1, 10000)),
    Param("objects_roots", params.STRING_ARRAY, "sim: folders the body files of objects_topic's documents "
                                                "may lie in, besides those of description_file, search_path "
                                                "and this package's data (a body file elsewhere is refused "
                                                "unread)",
          read_only=True, string="text"),
)
OBJECTS_PER_UPDATE = 20       # bodies added or moved per hold of the scene lock (sensor frames in between)

# Declared once per sensor as sensors.<sensor>.<name>.
SENSOR_PARAMETERS = params.schema(
    Param("mode", "", "relay, sim or off (empty: default_mode)", choices=("",) + MODES, any_type=True,
          normalize=_mode, read_only=True),
    Param("input_topic", "", "relay: driver topic (default <relay_namespace>/<sensor>/<scan|points|image_raw|"
                             "imu|wrench|odom>)", read_only=True, string="name"),
    Param("input_info_topic", "", "relay cameras: driver CameraInfo topic (default "
                                  "<relay_namespace>/<sensor>/camera_info)", read_only=True, string="name"),
    Param("restamp", False, "relay: replace header.stamp by the time of arrival"),
    Param("max_rate", 0.0, "relay: republish at most this often (Hz); 0 = every valid message",
          range=(0.0, 100000.0)),
    Param("rep117", True, "relay lasers: finite readings beyond range_max / below range_min -> +inf / -inf",
          read_only=True),
    Param("rate", 0.0, "sim: publish rate in Hz (0: from the description, else 10; IMU and force6d 100)",
          range=(0.0, 10000.0), read_only=True),
    Param("width", 0, "sim cameras: image width in pixels, intrinsics scaled to keep the field of view (0: "
                      "the description's; only height given: scaled with it)", range=(0, 16384),
          read_only=True),
    Param("height", 0, "sim cameras: image height in pixels (0: the description's; only width given: scaled "
                       "with it)", range=(0, 16384), read_only=True),
    Param("angle_increment", 0.0, "sim lasers: angle between beams in rad, same angular range (0: the "
                                  "description's)", range=(0.0, 6.2832), read_only=True),
    Param("noise_std", 0.0, "sim lasers and depth images: Gaussian range noise (m)", range=(0.0, 1000.0),
          read_only=True),
    Param("encoding", "", "sim cameras: rgb8 or 32FC1 on image_raw (empty: the description's format, else "
                          "rgb8)", choices=("", "rgb8", "32FC1"), read_only=True),
    Param("depth_topic", "", "sim cameras: also publish the 32FC1 depth image on this topic", read_only=True,
          string="name"),
    Param("gyro_noise_std", 0.0, "sim IMU: angular velocity noise (rad/s)", range=(0.0, 1000.0),
          read_only=True),
    Param("accel_noise_std", 0.0, "sim IMU: linear acceleration noise (m/s^2)", range=(0.0, 1000.0),
          read_only=True),
    Param("gyro_bias", params.DOUBLE_ARRAY, "sim IMU: constant angular velocity bias (3 values)",
          lengths=(0, 3), read_only=True),
    Param("accel_bias", params.DOUBLE_ARRAY, "sim IMU: constant acceleration bias (3 values)", lengths=(0, 3),
          read_only=True),
    Param("orientation_covariance", params.DOUBLE_ARRAY, COVARIANCE, lengths=(0, 9), read_only=True),
    Param("angular_velocity_covariance", params.DOUBLE_ARRAY, COVARIANCE, lengths=(0, 9), read_only=True),
    Param("linear_acceleration_covariance", params.DOUBLE_ARRAY, COVARIANCE, lengths=(0, 9), read_only=True),
)
# The sensor types each sensor parameter applies to (not listed: every type); a sensor declares only these.
IMU_ONLY = ("imu",)
SENSOR_TYPES = {"input_info_topic": ("camera",), "rep117": ("laser",), "width": ("camera",),
                "height": ("camera",), "angle_increment": ("laser",), "noise_std": ("laser", "camera"),
                "encoding": ("camera",), "depth_topic": ("camera",), "gyro_noise_std": IMU_ONLY,
                "accel_noise_std": IMU_ONLY, "gyro_bias": IMU_ONLY, "accel_bias": IMU_ONLY,
                "orientation_covariance": IMU_ONLY, "angular_velocity_covariance": IMU_ONLY,
                "linear_acceleration_covariance": IMU_ONLY}


def sensor_parameters(sensor_type: str) -> tuple:
    """The parameters a sensor of ``sensor_type`` reads."""
    return tuple(p for p in SENSOR_PARAMETERS if sensor_type in SENSOR_TYPES.get(p.name, (sensor_type,)))


# sensor type -> [(topic suffix, message type)]; the first stream's frame_id is the sensor's data frame.
STREAMS = {
    "laser": [("scan", LaserScan)],
    "flash_lidar": [("points", PointCloud2)],
    "camera": [("image_raw", Image), ("camera_info", CameraInfo)],
    "imu": [("imu", Imu)],
    "force6d": [("wrench", WrenchStamped)],
    "odometry": [("odom", Odometry)],
}
SIMULATED = ("laser", "flash_lidar", "camera", "imu", "force6d")


@dataclass
class RelayStream:
    sensor: str
    topic: str
    validate: Callable[[object], Optional[str]]
    publisher: object
    frame_id: str
    restamp: bool
    min_period_ns: int
    fix_rep117: bool = False
    serialized: bool = False          # Images: relayed as CDR bytes, pixels never decoded
    last_ns: Optional[int] = None
    last_warning_ns: Optional[int] = None    # per stream, so one noisy driver cannot mute the others
    counts: Counter = field(default_factory=Counter)
    drain: object = None              # ImageDrain of the fast path (images it relays are counted there)
    relay_io: object = None           # its relay's RelayIO

    def relayed(self) -> int:
        """Messages relayed so far, by the Python handler and by the fast path's compiled drain."""
        return self.counts["relayed"] + (self.relay_io.published if self.relay_io is not None else 0)


class SensorBridge(ContainedNode):
    """The sensor bridge; ``robot`` may be given directly (embedding, tests) instead of description_file."""

    def __init__(self, robot: Optional[Robot] = None, **kwargs):
        super().__init__("sensor_bridge", **kwargs)
        self.relays: dict[tuple[str, str], RelayStream] = {}
        self.fast_relays: dict[tuple[str, str], object] = {}      # (sensor, topic) -> SerializedRelay
        self._count_lock = threading.Lock()     # fast relays count from their own threads
        self.sim_sensors: dict[str, SimSensor] = {}
        self._sim_lock = threading.Lock()       # sensors started (a thread may start the cameras) or stopped
        self._sim_stopped = False
        self._throttle = Throttle()             # repeated warnings, per kind, every warn_throttle s at most
        self.params = params.NodeParameters(self, PARAMETERS, apply=self._apply_parameters)
        self.robot: Optional[Robot] = robot
        self.dropped: dict[str, Counter] = defaultdict(Counter)   # sensor -> reason -> count
        self._published: Counter = Counter()                        # sensor -> messages out (Python)
        self.scene = None
        self._joint_positions: dict[str, float] = {}
        self._joints_dirty = False
        self._scene_lock = threading.Lock()     # joint_states intake and scene moves vs sensor threads
        seed = self._p("seed")
        self.rng = np.random.default_rng(None if seed < 0 else seed)
        if self.robot is None:
            self.robot = self._load()
        if self.robot is not None:
            self._setup(self.robot)

    @property
    def published(self) -> Counter:
        """Messages out per sensor (simulated, relayed in Python, relayed by compiled drains)."""
        counts = Counter(self._published)
        for stream in list(self.relays.values()):
            if stream.relay_io is not None and stream.relay_io.published:
                counts[stream.sensor] += stream.relay_io.published
        return counts

    # -- set-up ------------------------------------------------------------------
    def _p(self, name: str):
        """A parameter's value ([] for an array left without a value)."""
        return self.params.get(name)

    def _due(self, kind: str) -> bool:
        """Whether a repeated warning of this kind may be logged now (warn_throttle, changeable at run time:
        rclpy's own throttle filter raises when a call site's period changes)."""
        return self._throttle.due(kind, float(self._p("warn_throttle")))

    def _apply_parameters(self, changes: dict) -> None:
        """Relay restamp / max_rate changes take effect on the sensor's streams."""
        for (sensor, _topic), stream in list(self.relays.items()):
            restamp = changes.get(f"sensors.{sensor}.restamp")
            if restamp is not None:
                stream.restamp = bool(restamp)
            max_rate = changes.get(f"sensors.{sensor}.max_rate")
            if max_rate is not None:
                with self._count_lock:
                    stream.min_period_ns = int(1e9 / max_rate) if max_rate > 0 else 0
                    stream.last_ns = None
            if stream.relay_io is not None and (restamp is not None or max_rate is not None):
                stream.relay_io.invalidate()          # its compiled drain runs only without these rules

    def _load(self) -> Optional[Robot]:
        path = self._p("description_file")
        if not path:
            self.load_error = "no description_file given: no sensors to bridge"
            self.get_logger().error(self.load_error)
            return None
        from ..formats import load

        try:
            return load(path, search_path=list(self._p("search_path") or []),
                        xacro_args=self._p("xacro_args"))
        except Exception as exc:  # any reader failure: report, stay up without sensors
            self.load_error = f"cannot read {path}: {exc}"
            self.get_logger().error(self.load_error)
            return None

    def _sensor_params(self, sensor: AttachedSensor) -> dict:
        """The sensor's parameters: those its type reads declared, the others at their defaults; a value
        given for one its type does not read is said once."""
        prefix = f"sensors.{sensor.name}."
        wanted = sensor_parameters(sensor.type)
        names = {p.name for p in wanted}
        unread = sorted(name[len(prefix):] for name in getattr(self, "_parameter_overrides", {})
                        if name.startswith(prefix) and name[len(prefix):] in SENSOR_TYPES
                        and name[len(prefix):] not in names)
        if unread:
            self.get_logger().warning(f"sensor {sensor.name!r} ({sensor.type}) reads no {', '.join(unread)}: "
                                      "ignored")
        return {**params.values(SENSOR_PARAMETERS), **self.params.declare(wanted, prefix=prefix)}

    def _output_qos(self) -> QoSProfile:
        policy = (ReliabilityPolicy.BEST_EFFORT if self._p("output_reliability") == "best_effort"
                  else ReliabilityPolicy.RELIABLE)
        return QoSProfile(depth=int(self._p("output_depth")), reliability=policy)

    def _input_qos(self) -> QoSProfile:
        profile = qos.sensor_data_qos()
        if self._p("input_reliability") == "reliable":
            profile.reliability = ReliabilityPolicy.RELIABLE
        return profile

    def _setup(self, robot: Robot) -> None:
        prefix = self._p("frame_prefix")
        sim_sensors = []
        for sensor in robot.sensors.values():
            try:
                self._setup_sensor(sensor, prefix, sim_sensors)
            except Exception as exc:  # e.g. a sensor name that is no valid ROS name: skip that sensor only
                self.get_logger().error(f"sensor {sensor.name!r} not bridged: {exc}")
        if sim_sensors:
            self._setup_sim(robot, sim_sensors, prefix)

    def _setup_sensor(self, sensor: AttachedSensor, prefix: str, sim_sensors: list) -> None:
        params = self._sensor_params(sensor)
        mode = _mode(params["mode"] if params["mode"] not in ("", None) else self._p("default_mode"))
        if sensor.type not in STREAMS:
            self.get_logger().warning(f"sensor {sensor.name!r}: type {sensor.type!r} has no ROS message "
                                      "mapping; not bridged")
            return
        if mode == "relay":
            self._setup_relay(sensor, params, prefix)
        elif mode == "sim":
            if sensor.type not in SIMULATED:
                self.get_logger().error(f"sensor {sensor.name!r}: {sensor.type} cannot be simulated "
                                        "(use mode relay); sensor disabled")
                return
            sim_sensors.append((sensor, params))

    # -- relay ---------------------------------------------------------------------
    def _setup_relay(self, sensor: AttachedSensor, params: dict, prefix: str) -> None:
        frame_id = data_frame(sensor, prefix)
        period = int(1e9 / params["max_rate"]) if params["max_rate"] > 0 else 0
        for suffix, msg_type in STREAMS[sensor.type]:
            default_in = f"{self._p('relay_namespace')}/{sensor.name}/{suffix}"
            given = params["input_info_topic"] if suffix == "camera_info" else params["input_topic"]
            stream = RelayStream(
                sensor=sensor.name, topic=suffix, validate=self._validator(sensor, msg_type),
                publisher=self.create_publisher(msg_type, f"{sensor.name}/{suffix}", self._output_qos()),
                frame_id=frame_id, restamp=params["restamp"], min_period_ns=period,
                fix_rep117=msg_type is LaserScan and params["rep117"], serialized=msg_type is Image)
            self.relays[(sensor.name, suffix)] = stream
            topic = given or default_in
            fast = stream.serialized and self._p("relay_fast_path")
            if fast and self._setup_fast_relay(stream, msg_type, topic):
                continue
            self.create_subscription(msg_type, topic, lambda msg, s=stream: self._relay(s, msg),
                                     self._input_qos(), raw=stream.serialized)

    def _setup_fast_relay(self, stream: RelayStream, msg_type, topic: str) -> bool:
        from ..ros.fast_relay import DetachedCallbackGroup, FastPathUnavailable, SerializedRelay
        from ..ros.image_drain import ImageDrain

        subscription = self.create_subscription(msg_type, topic, lambda _msg: None, self._input_qos(),
                                                raw=True, callback_group=DetachedCallbackGroup())
        label = f"{stream.sensor}/{stream.topic}"
        drain = ImageDrain(stream.frame_id, lambda: not stream.restamp and not stream.min_period_ns)
        try:
            relay = SerializedRelay(
                subscription, stream.publisher,
                lambda view, offset: self._relay_in_place(stream, view, offset),
                headroom=conv.serialized_header_size(stream.frame_id), name=label,
                on_published=lambda: self._count_relayed(stream), context=self.context,
                on_error=lambda text: self._due(label) and self.get_logger().error(f"{label}: {text}"),
                drain=drain)
        except FastPathUnavailable as exc:
            self.get_logger().info(f"{label}: relayed through the executor ({exc})")
            self.destroy_subscription(subscription)
            return False
        if relay.io is not None:
            stream.drain, stream.relay_io = drain, relay.io
        self.fast_relays[(stream.sensor, stream.topic)] = relay
        self.get_logger().debug(f"{label}: relayed on its own thread ({relay.wake.name} wake-up)")
        return True

    @staticmethod
    def _validator(sensor: AttachedSensor, msg_type) -> Callable[[object], Optional[str]]:
        if msg_type is CameraInfo:
            w, h = sensor.params.get("width"), sensor.params.get("height")
            return lambda msg: conv.validate_camera_info(msg, w, h)
        return {LaserScan: conv.validate_laser_scan, Image: conv.validate_image, Imu: conv.validate_imu,
                WrenchStamped: conv.validate_wrench, Odometry: conv.validate_odometry,
                PointCloud2: conv.validate_pointcloud2}[msg_type]

    def _admit(self, stream: RelayStream, reason: Optional[str]):
        """Drop accounting and rate limit shared by both relay paths: the arrival time, or None to drop."""
        now = self.get_clock().now()
        with self._count_lock:
            if reason is not None:
                self.dropped[stream.sensor][reason] += 1
                stream.counts["invalid"] += 1
                throttle_ns = int(float(self._p("warn_throttle")) * 1e9)
                if stream.last_warning_ns is None or now.nanoseconds - stream.last_warning_ns >= throttle_ns:
                    stream.last_warning_ns = now.nanoseconds
                    stream.counts["warned"] += 1
                    self.get_logger().warning(
                        f"{stream.sensor}/{stream.topic}: dropped an invalid message ({reason}); "
                        f"{stream.counts['invalid']} dropped so far")
                return None
            if stream.min_period_ns:
                if stream.last_ns is not None and now.nanoseconds - stream.last_ns < stream.min_period_ns:
                    stream.counts["rate_limited"] += 1
                    return None
                stream.last_ns = now.nanoseconds
        return now

    def _count_relayed(self, stream: RelayStream) -> None:
        with self._count_lock:
            stream.counts["relayed"] += 1
            self._published[stream.sensor] += 1

    def _relay(self, stream: RelayStream, msg) -> None:
        if stream.serialized:
            image = conv.parse_serialized_image(msg)
            reason = conv.validate_serialized_image(image)
        else:
            reason = stream.validate(msg)
        now = self._admit(stream, reason)
        if now is None:
            return
        stamp = now.to_msg() if stream.restamp else None
        if stream.serialized:
            msg = conv.rewrite_serialized_header(msg, image, stream.frame_id, stamp)
        else:
            if stream.fix_rep117:
                stream.counts["rep117_fixed"] += conv.rep117_normalize(msg)
            msg.header.frame_id = stream.frame_id      # in place: the message is republished as is
            if stamp is not None:
                msg.header.stamp = stamp
        stream.publisher.publish(msg)
        self._count_relayed(stream)

    def _relay_in_place(self, stream: RelayStream, view: memoryview, offset: int) -> Optional[int]:
        """Fast path (relay thread): the serialized image at ``view[offset:]``; the start to publish from."""
        image = conv.parse_serialized_image(view[offset:])
        now = self._admit(stream, conv.validate_serialized_image(image))
        if now is None:
            return None
        start = conv.rewrite_serialized_header_in_place(view, offset, image, stream.frame_id,
                                                        now.to_msg() if stream.restamp else None)
        if stream.drain is not None:
            stream.drain.learn(image)           # images of this shape: relayed by the compiled drain
        return start

    def destroy_node(self) -> None:
        for relay in self.fast_relays.values():     # off the middleware before the subscriptions go
            relay.close()
        self.fast_relays.clear()
        if getattr(self, "objects_worker", None) is not None:
            self.objects_worker.stop()
        if hasattr(self, "_sim_lock"):
            with self._sim_lock:                    # no camera started after this
                self._sim_stopped = True
        for sim in self.sim_sensors.values():       # sensor threads end before their publishers go
            sim.stop()
        super().destroy_node()

    # -- simulation ----------------------------------------------------------------
    def _setup_sim(self, robot: Robot, sensors, prefix: str) -> None:
        from ..model.placement import placed
        from ..sim import Scene

        try:       # the robot where it stands (a robot_pose its file contradicts: ValueError, no scene)
            robot = placed(robot, list(self._p("robot_pose") or ()))
            self.scene = Scene(robot, backend=self._p("ray_backend"))
        except Exception as exc:  # bad geometry / backend: report, keep the node up
            self.get_logger().error(f"cannot build the simulation scene: {exc}")
            return
        for message in self.scene.warnings:
            self.get_logger().warning(message)
        self._dof_names = self._joint_state_names(robot)
        self.objects_seen = 0                       # ~/objects documents applied to the scene
        self._objects_applied: dict[str, tuple] = {}      # the scene's objects: name -> (model, pose)
        if self._p("objects_topic"):
            from ..world.reader import LatestWorker, WorldReader, trusted_roots

            search = list(self._p("search_path") or [])
            self.objects_reader = WorldReader(
                trusted_roots([self._p("description_file")], search + list(self._p("objects_roots") or [])),
                search, source=self._p("objects_topic"))
            self.objects_worker = LatestWorker(self._apply_objects, "sensor_bridge.objects",
                                               self._objects_error)
            self.create_subscription(String, self._p("objects_topic"),
                                     lambda msg: self.objects_worker.submit(msg.data), qos.description_qos())
        self.create_subscription(JointState, self._p("joint_states_topic"), self._on_joint_states,
                                 qos.sensor_data_qos())
        for sensor, values in sensors:
            try:
                self.sim_sensors[sensor.name] = SimSensor(self, sensor, values, data_frame(sensor, prefix))
            except Exception as exc:  # bad intrinsics, or a sensor name that is no valid topic name
                self.get_logger().error(f"sensor {sensor.name!r}: cannot simulate: {exc}")
        rate = float(self._p("diagnostics_rate"))
        if self.sim_sensors and rate > 0:
            self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
            self.create_timer(1.0 / rate, self._publish_diagnostics)
        cameras = [s for s in self.sim_sensors.values() if s.sensor.type == "camera"] if self.scene.raster \
            else []
        for sim in self.sim_sensors.values():       # every sensor on its own thread, once all are set up
            if sim not in cameras:
                sim.start()
        if cameras:     # the z-buffer compiled (fresh install) or loaded off the start-up path
            threading.Thread(target=self._start_cameras_when_warm, args=(cameras,),
                             name="robot_bridge.compile", daemon=True).start()

    def _start_cameras_when_warm(self, cameras: list) -> None:
        self._warm_up_camera_zbuffer()
        with self._sim_lock:
            if not self._sim_stopped:
                for sim in cameras:
                    sim.start()

    def _warm_up_camera_zbuffer(self) -> None:
        """Compile (first run) or load the cached camera z-buffer before the cameras' first frame, so frames
        never pay it; if numba cannot compile it here, cameras cast rays as without numba."""
        from ..sim import raster

        try:
            seconds = raster.warm_up()
        except Exception as exc:  # numba present but unusable on this machine
            self.scene.raster = False
            self.get_logger().warning(f"camera z-buffer unavailable ({exc}); cameras cast rays (slower)")
        else:
            self.get_logger().debug(f"camera z-buffer ready in {seconds:.2f} s")

    def _publish_diagnostics(self) -> None:
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [sim.diagnostic_status() for sim in self.sim_sensors.values()]
        self.diagnostics_pub.publish(msg)

    def _on_joint_states(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            if self._due("joint_states lengths"):
                self.get_logger().warning("JointState with names and positions of different lengths ignored")
            return
        finite = [(n, p) for n, p in zip(msg.name, msg.position) if np.isfinite(p)]
        if len(finite) != len(msg.name) and self._due("joint_states non-finite"):
            self.get_logger().warning("non-finite joint positions ignored")
        with self._scene_lock:
            self._joint_positions.update(finite)
            self._joints_dirty = True

    def _objects_error(self, exc: BaseException) -> None:
        self.get_logger().error(f"objects document not applied: {type(exc).__name__}: {exc}")

    def _apply_objects(self, text: str) -> None:
        """world_node's environment document, on the objects worker (body files are read there, never on
        the executor nor the sensor threads): the scene's detected objects become exactly its bodies (at
        most ``max_objects``; the change logged as one line)."""
        from ..errors import DescriptionError

        limit = int(self._p("max_objects"))
        try:
            read = self.objects_reader.objects(text, max_bodies=limit)
        except DescriptionError as exc:
            if self._due("objects document"):
                self.get_logger().warning(f"objects document ignored: {exc}")
            return
        if read.problems and self._due("objects document bodies"):
            self.get_logger().warning(f"objects document: {read.summary()}")
        objects = read.objects
        if self.objects_worker.stopped:
            return
        clash = sorted(n for n in objects if n in self.scene.bodies and n not in self._objects_applied)
        if clash:
            if self._due("objects document"):
                self.get_logger().warning(f"objects document ignored: object names already used by the "
                                          f"scene's bodies: {', '.join(clash[:5])}")
            return
        applied = self._objects_applied
        changed = [n for n, (model, pose) in objects.items() if n not in applied or applied[n][0] is not model
                   or not np.array_equal(applied[n][1], pose)]
        state = {n: v for n, v in applied.items() if n in objects}
        added, removed = [], []
        for start in range(0, max(1, len(changed)), OBJECTS_PER_UPDATE):     # the lock held briefly each
            state.update((n, objects[n]) for n in changed[start:start + OBJECTS_PER_UPDATE])
            with self._scene_lock:
                try:
                    more, _moved, gone = self.scene.set_objects(state)
                except ValueError as exc:
                    if self._due("objects document"):
                        self.get_logger().warning(f"objects document ignored: {exc}")
                    return
            self._objects_applied = dict(state)
            added += more
            removed += gone
        self.objects_seen += 1
        if added or removed:
            self.get_logger().info(f"simulated scene: {len(added)} objects added{_names(added)}, "
                                   f"{len(removed)} removed{_names(removed)}; {len(objects)} in the scene")

    def _joint_state_names(self, robot: Robot) -> dict[str, tuple[str, int]]:
        """JointState name -> (model joint, DOF index): the URDF joint names the description node uses
        (multi-DOF joints as ``<joint>_axis<i>``), plus the model's own joint names."""
        names = {j.name: (j.name, 0) for j in robot.joints.values() if j.dof == 1}
        try:
            from ..kinematics.urdf_tree import urdf_tree

            names.update({j.name: (j.source, j.dof) for j in urdf_tree(robot)[1] if j.source and j.dof >= 0})
        except Exception as exc:  # an odd tree: single-DOF names still work
            self.get_logger().warning(f"multi-DOF joint names unavailable: {exc}")
        return names

    def scene_snapshot(self):
        """The scene at the latest joint states, frozen for one sensor frame on the sensor's thread."""
        with self._scene_lock:
            self.update_scene()
            return self.scene.snapshot()

    def update_scene(self) -> None:
        """Move the simulated robot to the latest joint states (joints not given keep their initial value).
        Callers hold ``_scene_lock``."""
        if not self._joints_dirty or self.scene is None:
            return
        positions: dict[str, np.ndarray] = {}
        for name, value in self._joint_positions.items():
            target = self._dof_names.get(name)
            if target is None:
                continue
            joint, dof = target
            values = positions.setdefault(joint, np.array(self.robot.joints[joint].initial, dtype=float))
            values[dof] = value
        try:
            self.scene.set_joint_positions(positions)
        except Exception as exc:  # e.g. a mimic formula failing on odd values: keep the last pose
            if self._due("joint states not applied"):
                self.get_logger().warning(f"joint states not applied: {exc}")
        self._joints_dirty = False


def _names(names: list, shown: int = 5) -> str:
    """`` (a, b, c and 7 more)`` ('' for none)."""
    if not names:
        return ""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f" ({', '.join(names[:shown])}{more})"


def _resized(model, width: int, height: int):
    """The camera at the resolution the parameters ask for (0: the description's; one of them: the other
    scaled alike)."""
    if width < 0 or height < 0:
        raise ValueError(f"width and height must be >= 0, not {width}x{height}")
    if not width and not height:
        return model
    width = width or max(1, round(model.width * height / model.height))
    height = height or max(1, round(model.height * width / model.width))
    return model.resized(width, height)


class SimSensor:
    """One simulated sensor on a thread of its own: each frame takes a snapshot of the node's scene at
    the latest joint states, renders it and publishes, at its own rate, whatever the other sensors do.

    ``frame_hook`` (tests) is called at the start of every frame on the sensor's thread."""

    def __init__(self, node: SensorBridge, sensor: AttachedSensor, params: dict, frame_id: str):
        from ..sim import FlashLidarModel, ImuSimulator, LaserModel, PinholeModel, WrenchSimulator
        from ..sim.imu import covariance

        self.node, self.sensor, self.frame_id = node, sensor, frame_id
        self.exclude = [(node.robot.name, sensor.link)]
        self.rng = node.rng.spawn(1)[0]          # one generator per thread; seeded by the node's seed
        self.frame_hook: Optional[Callable[[], None]] = None
        out = node._output_qos()
        p = sensor.params
        rate = params["rate"]
        if sensor.type == "laser":
            overrides = {k: params[k] for k in ("noise_std", "angle_increment") if params[k]}
            self.model = LaserModel.from_sensor(sensor, overrides)
            self.pub = node.create_publisher(LaserScan, f"{sensor.name}/scan", out)
            rate = rate or (1.0 / self.model.scan_time if self.model.scan_time > 0 else 10.0)
            self._produce = self._laser
        elif sensor.type == "flash_lidar":
            self.model = FlashLidarModel.from_sensor(sensor)
            self.pub = node.create_publisher(PointCloud2, f"{sensor.name}/points", out)
            rate = rate or (1.0 / self.model.scan_time if self.model.scan_time > 0 else 10.0)
            self._produce = self._flash_lidar
        elif sensor.type == "force6d":
            self.sim = WrenchSimulator(node.robot, sensor)
            self.pub = node.create_publisher(WrenchStamped, f"{sensor.name}/wrench", out)
            rate = rate or float(p.get("rate") or 100.0)
            self._produce = self._wrench
        elif sensor.type == "camera":
            overrides = {"noise_std": params["noise_std"]} if params["noise_std"] else None
            self.model = _resized(PinholeModel.from_sensor(sensor, overrides), params["width"],
                                  params["height"])
            encoding = params["encoding"] or p.get("format") or ("32FC1" if p.get("depth") else "rgb8")
            if encoding not in ("rgb8", "32FC1"):
                raise ValueError(f"simulated cameras produce rgb8 or 32FC1, not {encoding!r}")
            self.encoding = encoding
            self.pub = node.create_publisher(Image, f"{sensor.name}/image_raw", out)
            self.info_pub = node.create_publisher(CameraInfo, f"{sensor.name}/camera_info", out)
            self.depth_pub = (node.create_publisher(Image, params["depth_topic"], out)
                              if params["depth_topic"] else None)
            if any(float(v) != 0.0 for v in p.get("distortion") or ()):
                node.get_logger().warning(f"sensor {sensor.name!r}: simulated images are undistorted; "
                                          "camera_info carries zero distortion")
            rate = rate or float(p.get("frame_rate") or 10.0)
            self._produce = self._camera
        else:
            self.sim = ImuSimulator(gyro_bias=list(params["gyro_bias"] or [0.0] * 3),
                                    accel_bias=list(params["accel_bias"] or [0.0] * 3),
                                    gyro_noise_std=params["gyro_noise_std"],
                                    accel_noise_std=params["accel_noise_std"], rng=self.rng)
            self.covariances = [
                covariance(list(params[k] or []) or p.get(k), noise)
                for k, noise in (("orientation_covariance", 0.0),
                                 ("angular_velocity_covariance", params["gyro_noise_std"]),
                                 ("linear_acceleration_covariance", params["accel_noise_std"]))]
            self.pub = node.create_publisher(Imu, f"{sensor.name}/imu", out)
            rate = rate or float(p.get("rate") or 100.0)
            self._produce = self._imu
        if not (rate > 0 and np.isfinite(rate)):
            raise ValueError(f"rate must be > 0 Hz, not {rate}")
        self.rate = float(rate)
        self.monitor = RateMonitor(self.rate)
        self._warned_slow = False
        clock = node.get_clock()
        self.worker = PeriodicWorker(sensor.name, self.monitor, self._frame,
                                     now_ns=lambda: clock.now().nanoseconds, on_error=self._on_error,
                                     keep_going=node.context.ok)

    def start(self) -> None:
        self.worker.start()

    def stop(self) -> None:
        if not self.worker.stop():
            self.node.get_logger().warning(f"sensor {self.sensor.name!r}: its thread did not end in time")

    def _frame(self) -> int:
        if self.frame_hook is not None:
            self.frame_hook()
        scene = self.node.scene_snapshot()
        now = self.node.get_clock().now()
        self._produce(scene, now)
        with self.node._count_lock:
            self.node._published[self.sensor.name] += 1
        self._check_rate()
        return now.nanoseconds

    def _check_rate(self) -> None:
        if self._warned_slow:
            return
        report = self.monitor.report()
        if report.keeping_up() is False:
            self._warned_slow = True
            self.node.get_logger().warning(
                f"sensor {self.sensor.name!r}: cannot keep {report.asked_hz:g} Hz; publishing at "
                f"{report.achieved_hz:.2f} Hz (a frame takes {report.mean_frame_ms:.0f} ms); lower "
                f"sensors.{self.sensor.name}.rate or its resolution")

    def _on_error(self, exc: BaseException) -> None:
        if not self.node.context.ok():
            return
        if self.node._due(f"sensor {self.sensor.name} failed"):
            self.node.get_logger().error(f"sensor {self.sensor.name!r}: simulation failed: {exc}")

    def diagnostic_status(self) -> DiagnosticStatus:
        report = self.monitor.report()
        ok = report.keeping_up()
        if ok is None:
            level, message = DiagnosticStatus.OK, f"starting ({report.frames} frames so far)"
        else:
            level = DiagnosticStatus.OK if ok else DiagnosticStatus.WARN
            message = f"{report.achieved_hz:.2f} Hz of {report.asked_hz:g} Hz" + ("" if ok else
                                                                               ": cannot keep its rate")

        def value(v, digits=3):
            return "" if v is None else str(round(v, digits))
        return DiagnosticStatus(
            level=level, name=f"{self.node.get_fully_qualified_name()}: {self.sensor.name}", message=message,
            hardware_id=self.sensor.name, values=[
                KeyValue(key="asked_rate_hz", value=value(report.asked_hz)),
                KeyValue(key="achieved_rate_hz", value=value(report.achieved_hz)),
                KeyValue(key="frames", value=str(report.frames)),
                KeyValue(key="late_frames", value=str(report.late_frames)),
                KeyValue(key="mean_frame_ms", value=value(report.mean_frame_ms)),
                KeyValue(key="max_frame_ms", value=value(report.max_frame_ms)),
                KeyValue(key="mean_cpu_ms", value=value(report.mean_cpu_ms))])

    def _laser(self, scene, now) -> None:
        m = self.model
        ranges = m.scan(scene, scene.sensor_pose(self.sensor), self.exclude, rng=self.rng)
        self.pub.publish(conv.laser_scan_msg(
            ranges, angle_min=m.angle_min, angle_increment=m.angle_increment, range_min=m.range_min,
            range_max=m.range_max, frame_id=self.frame_id, stamp=now.to_msg(), scan_time=m.scan_time,
            time_increment=m.time_increment))

    def _flash_lidar(self, scene, now) -> None:
        points = self.model.scan(scene, scene.sensor_pose(self.sensor), self.exclude, rng=self.rng)
        self.pub.publish(conv.pointcloud2_msg(points, self.frame_id, now.to_msg()))

    def _wrench(self, scene, now) -> None:
        force, torque = self.sim.wrench(scene)
        self.pub.publish(conv.wrench_msg(force, torque, self.frame_id, now.to_msg()))

    def _camera(self, scene, now) -> None:
        m = self.model
        depth, rgb = m.render(scene, scene.sensor_pose(self.sensor), self.exclude,
                              color=self.encoding == "rgb8", rng=self.rng)
        stamp = now.to_msg()
        self.pub.publish(conv.image_msg(rgb if self.encoding == "rgb8" else depth, self.encoding,
                                        self.frame_id, stamp))
        if self.depth_pub is not None:
            self.depth_pub.publish(conv.image_msg(depth, "32FC1", self.frame_id, stamp))
        self.info_pub.publish(conv.camera_info_msg(
            width=m.width, height=m.height, fx=m.fx, fy=m.fy, cx=m.cx, cy=m.cy, frame_id=self.frame_id,
            stamp=stamp, distortion_model=self.sensor.params.get("distortion_model") or "plumb_bob"))

    def _imu(self, scene, now) -> None:
        reading = self.sim.update(now.nanoseconds * 1e-9, scene.sensor_pose(self.sensor))
        self.pub.publish(conv.imu_msg(
            frame_id=self.frame_id, stamp=now.to_msg(), orientation_xyzw=reading.orientation_xyzw,
            angular_velocity=reading.angular_velocity, linear_acceleration=reading.linear_acceleration,
            orientation_covariance=self.covariances[0], angular_velocity_covariance=self.covariances[1],
            linear_acceleration_covariance=self.covariances[2]))


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(SensorBridge, args)


if __name__ == "__main__":
    sys.exit(main())
