"""description_node: robot_description, TF and semantics of one robot file.

robot_state_publisher-compatible (topics, QoS, publish_frequency rule) for any
format ``robot_bridge.formats.load`` reads, plus: multi-DOF and nonlinear mimic
joints, tool/sensor/handle/gripper frames and environment bodies on
/tf_static, a semantic description, rviz markers, and ``~/reload``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from ..formats.mesh_cache import MeshCache
from ..formats.resources import ResourceResolver
from ..formats.urdf import ConversionReport, MeshTarget, file_uri, package_uri
from ..kinematics import fk_kernel
from ..kinematics.state_publisher import RateGate, StatePublisher
from ..model import Robot
from ..ros import params, qos
from ..ros.fast_relay import DRAIN_UNAVAILABLE
from ..ros.guard import ContainedNode
from ..ros.markers import robot_markers
from ..ros.params import Param
from ..ros.joint_state_tf import JointStateTF, read_joint_state  # noqa: F401  (read_joint_state: API)
from ..ros.tf import tf_message

if TYPE_CHECKING:                   # imported when mesh_uri is http (its HTTP stack is not for every start)
    from ..mesh_server import MeshServer

RELOADS = "reloads the model when set; refused (old model kept) if it does not load"
MESH_URI_MODES = ("file", "package", "http")
# The one parameter schema.  The files, search path, prefixes and frames reload the model when set
# (refused, keeping the old model, when the new one does not load); files and search path only within the
# folders trusted at launch.  Where meshes are written and served is fixed at launch (read-only).
PARAMETERS = params.schema(
    Param("description_file", "", "Robot file: .robot.xml, .kinbody.xml, .env.xml, .dae, .zae or .urdf",
          rule_text=RELOADS, string="text", confined=True),
    Param("srdf_file", "", "Optional SRDF (MoveIt / hpp); without it one is generated from the model if it "
                           "has manipulators or semantics", rule_text=RELOADS, string="text", confined=True),
    Param("search_path", params.STRING_ARRAY, "Directories searched for included files and meshes "
                                              "(before $OPENRAVE_DATA)", rule_text=RELOADS, string="text",
          confined=True),
    Param("xacro_args", "", params.XACRO_ARGS_TEXT, rule_text=RELOADS,
          string="text"),
    Param("publish_frequency", 20.0, "Maximum /tf rate per joint in Hz, as robot_state_publisher; "
                                     "0 publishes on every JointState", range=(0.0, 10000.0)),
    Param("ignore_timestamp", False, "Publish every JointState regardless of publish_frequency"),
    Param("frame_prefix", "", "Prefix added to the robot's TF frames (not to the shared world_frame and "
                              "environment bodies)", rule_text=RELOADS, string="prefix"),
    Param("world_frame", "world", "Frame shared by every robot in one world: the robot's root is placed in "
                                  "it (at robot_pose or its file's placement, else at its origin) and so are "
                                  "the environment bodies; empty: none",
          rule_text=RELOADS, string="frame"),
    Param("robot_pose", params.DOUBLE_ARRAY, "Where the robot stands in world_frame: [x, y, z, roll, pitch, "
                                             "yaw] (m, rad), published as world_frame -> root; empty: the "
                                             "file's placement (an environment's robot transform), else the "
                                             "origin; refused when the file places the robot too",
          lengths=(0, 6), rule_text=RELOADS),
    Param("publish_environment", True, "Publish the environment bodies of the file under world_frame (false "
                                       "for every robot but one sharing a world)", rule_text=RELOADS),
    Param("environment_prefix", "", "Prefix of the environment bodies' frames (empty: shared names)",
          rule_text=RELOADS, string="prefix"),
    Param("publish_default_joint_states", False, "Publish the initial configuration on joint_states at "
                                                 "10 Hz while no other node publishes there", read_only=True),
    Param("mesh_dir", "", "Override: directory for meshes converted for the URDF, as named files (empty: the "
                          "content-addressed mesh cache)", string="text", read_only=True),
    Param("mesh_cache_dir", "", "Mesh cache directory (empty: $ROS_HOME/robot_bridge/mesh_cache, else "
                                "$XDG_CACHE_HOME/robot_bridge/meshes); safe to delete", string="text",
          read_only=True),
    Param("mesh_cache_max_mb", 512, "Size bound of the mesh cache in MiB (least recently used files go "
                                    "first)",
          range=(1, 1 << 30), rule_text=RELOADS),
    Param("mesh_uri", "file", "How robot_description names mesh files: file (file://, this host), package "
                              "(package://<pkg>/... for files inside a ROS package) or http (this node "
                              "serves the mesh cache)", choices=MESH_URI_MODES, read_only=True),
    Param("mesh_http_host", "", "mesh_uri http: address bound and written into the URIs (empty: "
                                "loopback 127.0.0.1, viewers on this host only; rviz on another host "
                                "needs an address it reaches, or 0.0.0.0 for every interface with URIs "
                                "carrying the host name)", string="text", read_only=True),
    Param("mesh_http_port", 0, "mesh_uri http: TCP port (0: any free port)", range=(0, 65535),
          read_only=True),
    Param("tf_fast_path", True, "Turn /joint_states into /tf on a thread of its own, out of the executor, "
                                "taking and publishing serialized messages (false, or where rclpy lacks what "
                                "it needs: through the executor)", read_only=True),
)
RELOAD_PARAMETERS = {"description_file", "srdf_file", "search_path", "xacro_args", "frame_prefix",
                     "world_frame", "robot_pose", "publish_environment", "environment_prefix", "mesh_dir",
                     "mesh_cache_dir", "mesh_cache_max_mb", "mesh_uri", "mesh_http_host", "mesh_http_port"}
DEFAULT_JOINT_STATES_PERIOD = 0.1      # s
WARN_THROTTLE = 10.0                   # s


def launch_roots(get):
    """Folders run-time description_file, srdf_file and search_path values must lie in."""
    return params.launch_roots([get("description_file"), get("srdf_file")], get("search_path"))


@dataclass
class LoadedModel:
    """Everything published for one successfully read description."""

    robot: Robot
    state: StatePublisher
    urdf: str
    srdf: str | None
    joint_tf: JointStateTF
    report: ConversionReport | None = None


def _semantic_text(robot: Robot, srdf_file: str) -> str | None:
    """SRDF to publish: the given file (attached to the model), else one generated from the model.

    A broken ``srdf_file`` fails the load; a failed generation only costs the
    semantic topic (recorded as a model warning).
    """
    if srdf_file:
        from ..formats import srdf

        srdf.attach_semantics(robot, srdf.read_srdf(srdf_file, robot))
        return Path(srdf_file).read_text(encoding="utf-8")
    if robot.semantics is None and not robot.manipulators:
        return None
    try:
        from ..formats import srdf

        sem = robot.semantics if robot.semantics is not None else srdf.semantics_from_model(robot)
        return srdf.to_srdf(sem, robot.name)
    except Exception as exc:      # generation is best effort: the description itself is still good
        robot.warn(f"no robot_description_semantic: SRDF generation failed: {type(exc).__name__}: {exc}")
        return None


def mesh_target(mode: str, cache: MeshCache, server: MeshServer | None = None,
                served: list | None = None) -> MeshTarget:
    """How the URDF names meshes for ``mesh_uri`` ``mode``: converted ones go to ``cache``; ``http``
    copies every local mesh into the cache ``server`` serves (recorded in ``served``)."""
    if mode == "package":
        return MeshTarget(cache=cache, locate=package_uri)
    if mode == "http":
        def locate(path: Path) -> str:
            adopted = cache.adopt(path)          # every served file lives in the cache directory
            if served is not None:
                served.append(adopted)
            return server.url(adopted)

        return MeshTarget(cache=cache, locate=locate, keep_written_uris=False)
    return MeshTarget(cache=cache, locate=file_uri)


def load_model(description_file: str, srdf_file: str = "", search_path=(), frame_prefix: str = "",
               mesh_dir: str = "", meshes: MeshTarget | None = None, shared_frames: dict | None = None,
               robot: Robot | None = None, compiled: bool | None = None, xacro_args: str = "",
               robot_pose=()) -> LoadedModel:
    """Read and convert everything; raises (DescriptionError, OSError, ...) without side effects
    (converted meshes aside: they land in the mesh cache, where they belong whatever happens next).

    ``meshes`` says where meshes needing conversion go and how files are named (default: the mesh
    cache, ``file://`` URIs); ``mesh_dir`` overrides the cache with a directory of named files.
    ``shared_frames``: StatePublisher's world_frame / environment / environment_prefix.  ``compiled``:
    StatePublisher's (False: the numpy path, see :func:`compiled_model`).  ``robot_pose``: the parameter of
    :func:`robot_bridge.model.placement.robot_placement` (the robot's placement in the world frame)."""
    from ..formats import load
    from ..formats.urdf import to_urdf
    from ..model.placement import placed

    if not description_file:
        raise ValueError("parameter description_file is empty")
    if robot is None:                                   # else: this file, already read (robot-bridge run)
        robot = load(description_file, search_path=list(search_path) or None, xacro_args=xacro_args)
    robot = placed(robot, list(robot_pose or ()))
    srdf_text = _semantic_text(robot, srdf_file)
    urdf_text, report = to_urdf(robot, mesh_dir=mesh_dir or None,
                                target=meshes if meshes is not None else MeshTarget(cache=MeshCache()))
    state = StatePublisher(robot, frame_prefix, **(shared_frames or {}), compiled=compiled)
    return LoadedModel(robot, state, urdf_text, srdf_text, JointStateTF(state), report)


def compiled_model(model: LoadedModel) -> LoadedModel | None:
    """``model`` with /joint_states -> /tf through the compiled kernels, compiled (or loaded from their
    cache) now -- seconds after an install, so the node starts on the numpy path and calls this on a thread
    of its own; None where numba is missing or cannot compile here."""
    if fk_kernel.kernel() is None:
        return None
    s = model.state
    state = StatePublisher(model.robot, s.prefix, s.world_frame, s.environment, s.environment_prefix)
    return dataclasses.replace(model, state=state, joint_tf=JointStateTF(state))


class DescriptionNode(ContainedNode):
    def __init__(self, robot: Robot | None = None, **kwargs):
        """``robot``: the description_file already read (``robot-bridge run`` reads it once for every node);
        used by the first load, later reloads read the file again."""
        super().__init__("description_node", **kwargs)
        self._preloaded = robot
        self.tf_relay = None                                  # the fast path's SerializedRelay
        self.mesh_server: MeshServer | None = None
        self.params = params.NodeParameters(self, PARAMETERS, validate=self._check_parameters,
                                            apply=self._apply_parameters, roots=launch_roots)
        self.model: LoadedModel | None = None
        self._model_lock = threading.Lock()                   # a reload and a compiled upgrade swap it
        self._upgrade: tuple[LoadedModel, LoadedModel] | None = None   # (model, its compiled twin)
        self.semantic_published = False
        self.gate = RateGate(self._param("publish_frequency"), self._param("ignore_timestamp"))

        self.description_pub = self.create_publisher(String, "robot_description", qos.description_qos())
        self.semantic_pub = self.create_publisher(String, "robot_description_semantic", qos.description_qos())
        self.tf_static_pub = self.create_publisher(TFMessage, "/tf_static", qos.tf_static_qos())
        self.tf_pub = self.create_publisher(TFMessage, "/tf", qos.tf_qos())
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", qos.description_qos())
        self._counts = {"joint_states": 0, "tf": 0}           # handled in Python (executor or relay)
        self._in_flight = None                                # keeps the /tf buffer being published alive
        if not (self._param("tf_fast_path") and self._setup_fast_path()):
            self.create_subscription(JointState, "joint_states", self._on_joint_state, qos.joint_states_qos(),
                                     raw=True)             # read in place: see joint_state_tf
        self.create_reload_service(self.reload, lambda: self._param("description_file"), "model")
        self.default_pub = None
        if self._param("publish_default_joint_states"):
            self.default_pub = self.create_publisher(JointState, "joint_states", 10)
            self.create_timer(DEFAULT_JOINT_STATES_PERIOD, self._publish_default_joint_state)

        ok, error = self.reload()
        if not ok:
            self.load_error = f"cannot load the robot description: {error}"
            self.get_logger().error(f"{self.load_error}; waiting for a good ~/reload or description_file "
                                    "change")

    # -- parameters ---------------------------------------------------------
    def _param(self, name: str, overrides: dict | None = None):
        if overrides and name in overrides:
            return overrides[name]
        return self.params.get(name)

    def _check_parameters(self, new: dict) -> str | None:
        """A set naming a file parameter reloads; a model that does not load refuses the set."""
        if RELOAD_PARAMETERS & new.keys():
            ok, error = self.reload(new)
            if not ok:
                return error
        return None

    def _apply_parameters(self, new: dict) -> None:
        if {"publish_frequency", "ignore_timestamp"} & new.keys():
            self.gate = RateGate(float(self._param("publish_frequency")),
                                 bool(self._param("ignore_timestamp")))
            self._invalidate_drain()

    def _invalidate_drain(self) -> None:
        """The fast path's compiled drain runs with the model and gate it started with: restart it."""
        io = self.tf_relay.io if self.tf_relay is not None else None
        if io is not None:
            io.invalidate()

    # -- loading ------------------------------------------------------------
    def reload(self, overrides: dict | None = None) -> tuple[bool, str]:
        """Load the files; on success publish the new model, else keep serving the old one."""
        p = {name: self._param(name, overrides) for name in RELOAD_PARAMETERS}
        started = time.monotonic()
        try:
            if p["mesh_uri"] not in MESH_URI_MODES:
                raise ValueError(f"mesh_uri {p['mesh_uri']!r}: expected one of {', '.join(MESH_URI_MODES)}")
            cache = MeshCache(p["mesh_cache_dir"] or None, max_bytes=int(p["mesh_cache_max_mb"]) << 20)
            server, served = self._mesh_server(p, cache), []
            model = load_model(p["description_file"], p["srdf_file"], p["search_path"], p["frame_prefix"],
                               p["mesh_dir"], mesh_target(p["mesh_uri"], cache, server, served),
                               {"world_frame": p["world_frame"], "environment": p["publish_environment"],
                                "environment_prefix": p["environment_prefix"]}, robot=self._preloaded,
                               compiled=None if fk_kernel.ready() else False, xacro_args=p["xacro_args"],
                               robot_pose=p["robot_pose"])
        except Exception as exc:    # any reader failure must leave the node serving
            return False, f"{type(exc).__name__}: {exc}"
        finally:
            self._preloaded = None
        self._set_mesh_server(server)
        with self._model_lock:
            self.model, self.load_error = model, None
        self._invalidate_drain()
        self._publish_model(model)
        if model.state._rows_kernel is None and fk_kernel.AVAILABLE:
            self._compile_in_background(model)
        elapsed = time.monotonic() - started
        robot, report = model.robot, model.report
        source = robot.source or p["description_file"]
        told = "\n".join(report.warnings)      # a missing mesh once: the report's line says more
        for warning in dict.fromkeys(robot.mesh_warnings_left_out(told) + report.warnings):   # once per load
            self.get_logger().warning(f"{source}: {warning}")
        for path in ResourceResolver.from_parameters(p.__getitem__).untrusted_meshes(model.robot):
            self.get_logger().warning(f"{source}: mesh {path} lies outside the folders the other nodes "
                                      "trust (formats.resources): add its folder to search_path")
        removed = cache.prune(keep=[Path(f) for f in report.mesh_files] + served)
        self.get_logger().info(f"robot {robot.name!r}: {len(robot.links)} links, {len(model.state.moving)} "
                               f"moving URDF joints, {len(model.state.static_transforms())} static frames")
        self.get_logger().info(
            f"meshes: {len(report.meshes_converted)} converted, {len(report.meshes_cached)} from the cache "
            f"{cache.directory}" + (f" ({len(removed)} old files pruned)" if removed else "")
            + (f", served at {server.base_url}" if server else "")
            + f"; robot_description after {elapsed:.2f} s")
        return True, ""

    def _compile_in_background(self, model: LoadedModel) -> None:
        """Build ``model``'s compiled twin on a thread (compiling the kernels nothing on the start-up path
        waited for); the thread that handles JointStates takes it over (:meth:`_joint_state_model`)."""
        started = time.monotonic()

        def run():
            try:
                twin = compiled_model(model)
            except Exception as exc:  # a kernel that does not compile here: the numpy path stays
                self.get_logger().warning(f"compiled /tf path unavailable ({type(exc).__name__}: {exc})")
                return
            if twin is None:
                return
            with self._model_lock:
                if self.model is model:                  # else a reload replaced it (and has its own)
                    self._upgrade = (model, twin)
            self.get_logger().debug(f"compiled /tf path ready after {time.monotonic() - started:.2f} s")

        threading.Thread(target=run, name="robot_bridge.compile", daemon=True).start()

    def _joint_state_model(self) -> LoadedModel | None:
        """The model JointStates apply to; where the compiled twin of the current model is ready it takes
        over here, on the one thread that applies JointStates, with the joint values so far (no message
        between the copy and the swap: no gap, no jump)."""
        upgrade = self._upgrade
        if upgrade is not None:
            self._upgrade = None
            old, twin = upgrade
            with self._model_lock:
                if self.model is old:                    # else a reload replaced it meanwhile
                    twin.state.q[:] = old.state.q
                    self.model = twin
        return self.model

    def _mesh_server(self, p: dict, cache: MeshCache) -> MeshServer | None:
        """The HTTP server mesh_uri http needs (the running one when it already fits), else None."""
        if p["mesh_uri"] != "http":
            return None
        current = self.mesh_server
        if current is not None and current.matches(cache.directory, p["mesh_http_host"], p["mesh_http_port"]):
            return current
        from ..mesh_server import MeshServer

        cache.directory.mkdir(parents=True, exist_ok=True)
        if current is not None and int(p["mesh_http_port"]) == current.port:
            current.stop()               # the same port on another address or directory: free it first
            self.mesh_server = None
        return MeshServer(cache.directory, p["mesh_http_host"], p["mesh_http_port"],
                          log=lambda line: self.get_logger().debug(f"mesh http: {line}"))

    def _set_mesh_server(self, server: MeshServer | None) -> None:
        if self.mesh_server is not None and self.mesh_server is not server:
            self.mesh_server.stop()
        self.mesh_server = server

    def _publish_model(self, model: LoadedModel) -> None:
        stamp = self.get_clock().now().to_msg()
        self.description_pub.publish(String(data=model.urdf))
        if model.srdf is not None or self.semantic_published:
            # a model without semantics replaces a previous SRDF by an empty one
            self.semantic_pub.publish(String(data=model.srdf or ""))
            self.semantic_published = True
        self.tf_static_pub.publish(tf_message(model.state.static_transforms(), stamp))
        self.markers_pub.publish(robot_markers(model.robot, model.state.prefix, stamp))

    # -- joint states -------------------------------------------------------
    def _setup_fast_path(self) -> bool:
        """/joint_states taken by a thread of its own (``fast_relay``); False: use the executor."""
        from ..ros.fast_relay import DetachedCallbackGroup, FastPathUnavailable, SerializedRelay

        subscription = self.create_subscription(JointState, "joint_states", lambda _msg: None,
                                                qos.joint_states_qos(), raw=True,
                                                callback_group=DetachedCallbackGroup())
        try:
            self.tf_relay = SerializedRelay(
                subscription, self.tf_pub, self._tf_in_place, headroom=0, name="joint_states_to_tf",
                context=self.context, on_error=self._warn, as_array=True, drain=self._tf_drain)
        except FastPathUnavailable as exc:
            self.get_logger().info(f"/joint_states -> /tf through the executor ({exc})")
            self.destroy_subscription(subscription)
            return False
        return True

    @property
    def counts(self) -> dict[str, int]:
        """JointStates taken and /tf published so far, on either transport (soak, tests)."""
        io = self.tf_relay.io if self.tf_relay is not None else None
        extra = (io.handled, io.published) if io is not None else (0, 0)
        return {"joint_states": self._counts["joint_states"] + extra[0], "tf": self._counts["tf"] + extra[1]}

    def _tf_drain(self, io, buffer, headroom: int) -> int:
        """Fast path (its own thread): the compiled drain of the current model, while it can run."""
        generation = io.generation                          # before the model and gate it runs with
        model = self._joint_state_model()
        if model is None:
            return DRAIN_UNAVAILABLE
        return model.joint_tf.drain(io, buffer, headroom, self.gate, generation)

    def _tf_in_place(self, view, offset: int):
        """Fast path (its own thread): the taken JointState at ``view[offset:]``; the /tf bytes to publish."""
        self._counts["joint_states"] += 1
        model = self._joint_state_model()                   # one read: a reload swaps it whole
        if model is None:
            return None
        plan = model.joint_tf.process(view, offset, self.gate, self._warn, taken=True)
        if plan is None:
            return None
        self._in_flight = plan                  # published after we return, maybe while a reload swaps
        self._counts["tf"] += 1
        return plan.span

    def _on_joint_state(self, data: bytes) -> None:
        """Executor fallback: the same processing, published through rclpy."""
        self._counts["joint_states"] += 1
        model = self._joint_state_model()
        if model is None:
            return
        plan = model.joint_tf.process(data, 0, self.gate, self._warn)
        if plan is not None:
            self.tf_pub.publish(plan.buffer.tobytes())
            self._counts["tf"] += 1

    def _warn(self, text: str) -> None:
        self.get_logger().warning(text, throttle_duration_sec=WARN_THROTTLE)

    def destroy_node(self) -> None:
        if self.tf_relay is not None:           # off the middleware before the subscription goes
            self.tf_relay.close()
            self.tf_relay = None
        self._set_mesh_server(None)              # the mesh HTTP server stops with the node
        super().destroy_node()

    def _publish_default_joint_state(self) -> None:
        model = self.model
        if model is None or self.count_publishers(self.default_pub.topic_name) > 1:
            return
        names, positions = model.state.default_joint_state()
        msg = JointState(name=names, position=positions)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.default_pub.publish(msg)


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(DescriptionNode, args)


if __name__ == "__main__":
    sys.exit(main())
