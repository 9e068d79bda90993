"""The bridge's node set, defined once, in plain Python (no rclpy, no launch).

``node_set(Options(...))`` returns one :class:`NodeSpec` per process the bridge runs:
package, executable, node name, namespace, parameters (the node's ``config/<node>.yaml``
overlaid with the launch arguments), remappings and command-line arguments.
``launch/bridge.launch.py`` turns the specs into launch_ros ``Node`` actions;
``robot-bridge run`` instantiates the node classes named by ``NodeSpec.factory``
in one process.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from . import node_table

PACKAGE = node_table.PACKAGE
DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_ROBOT = DATA_DIR / "default.env.xml"          # the LWA3-style arm in its world
DEFAULT_SRDF = DATA_DIR / "lwa3_gripper.srdf"
RVIZ_CONFIG = "robot_bridge.rviz"
FASTDDS_PROFILE = "fastdds_large_messages.xml"
FASTDDS2_DISTROS = ("humble", "iron", "jazzy")
MODES = ("sim", "real")
HARDWARE = ("sim", "canopen")

# The launch arguments: (name, default, description).  Defaults are strings, as on a launch command line;
# an empty robot means the embedded default world, an empty srdf the embedded SRDF for it (else none).
ARGUMENTS = [
    ("robot", "", "Robot or environment file (.robot.xml, .env.xml, .dae, .zae, .urdf, .xacro); empty: the "
                  "embedded LWA3-style arm in its world"),
    ("srdf", "", "SRDF of the robot; empty: the embedded SRDF for the embedded robot, none otherwise"),
    ("xacro_args", "", "Arguments of a .xacro robot file, 'name:=value other:=value' as on the xacro command "
                       "line (every node's xacro_args)"),
    ("search_path", "", "Directories searched for included files and meshes, os.pathsep-separated (before "
                        "$OPENRAVE_DATA): every node's search_path"),
    ("params_file", "", "ROS 2 parameters files, os.pathsep-separated (<node name>/ros__parameters, '/**' "
                        "wildcards, namespaced names), applied to the nodes they name after "
                        "config/<node>.yaml and the arguments (later files win)"),
    ("keep_going", "true", "Keep running when the robot file does not load (nodes wait for a good ~/reload); "
                           "false: stop with the error before starting the nodes"),
    ("mode", "sim", "sim: sensors simulated from the model; real: sensors relayed from driver topics"),
    ("hardware", "", "Controller hardware, sim or canopen; empty: sim in sim mode, canopen in real mode"),
    ("namespace", "", "Namespace of every node (robot_description, joint_states and sensor topics move "
                      "with it; /tf and /tf_static stay global)"),
    ("frame_prefix", "", "Prefix of the robot's TF frames and sensor frame_ids (world_frame and the "
                         "environment bodies stay shared)"),
    ("world_frame", "world", "Frame shared by every robot of one world; each robot's root is placed in it"),
    ("robot_pose", "", "Where the robot stands in world_frame, 'x y z roll pitch yaw' (m, rad): the "
                       "description, sensor_bridge, controller and planner nodes' robot_pose; empty: the "
                       "robot file's placement, else the origin"),
    ("environment", "true", "Publish the environment bodies of the robot file on /tf_static (false for every "
                            "robot but one sharing a world)"),
    ("use_sim_time", "false", "Use /clock for every node"),
    ("rviz", "false", "Also start rviz2 with config/robot_bridge.rviz (when rviz2 is not installed: a "
                      "warning, the bridge starts without it)"),
    ("view", "false", "Also start the live browser view (view_node: http://127.0.0.1:8080/, this host only; "
                      "robot-bridge view serves it on other interfaces)"),
    ("allow_control", "false", "With view: its joint sliders send goals to the controller, on the page "
                               "opened with the URL view_node prints (a secret token, new at every start); "
                               "false: a read-only view"),
    ("objects", "", "Object mapping YAML (detection class ids -> body files); given: also start world_node, "
                    "which turns vision_msgs/Detection3DArray on `detections` into environment bodies"),
    ("planner", "true", "Sim mode: also start planner_node (move_group's MoveGroup, Pickup, Place actions "
                        "and plan_kinematic_path service) when the planning extra and moveit_msgs are "
                        "installed"),
]
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")
BOOLEAN_ARGUMENTS = ("use_sim_time", "rviz", "environment", "keep_going", "view", "allow_control",
                     "planner")


def _flag(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise ValueError(f"launch argument {name}={value!r}: expected true or false")


@dataclass(frozen=True)
class Options:
    """The launch arguments, typed and validated."""

    robot: str = ""
    srdf: str = ""
    xacro_args: str = ""
    search_path: str = ""                   # os.pathsep-separated
    params_file: str = ""                   # os.pathsep-separated
    keep_going: bool = True
    mode: str = "sim"
    hardware: str = ""
    namespace: str = ""
    frame_prefix: str = ""
    world_frame: str = "world"
    robot_pose: str = ""                    # 'x y z roll pitch yaw', spaces or commas
    environment: bool = True
    use_sim_time: bool = False
    rviz: bool = False
    view: bool = False
    allow_control: bool = False
    objects: str = ""
    planner: bool = True

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"launch argument mode={self.mode!r}: expected one of {', '.join(MODES)}")
        if self.hardware and self.hardware not in HARDWARE:
            raise ValueError(f"launch argument hardware={self.hardware!r}: expected one of "
                             f"{', '.join(HARDWARE)} (or empty)")
        if self.namespace and not self.namespace.strip("/"):
            raise ValueError(f"launch argument namespace={self.namespace!r}: expected a name")
        self.robot_pose_values      # ValueError for a pose that is not 6 finite numbers

    @property
    def robot_pose_values(self) -> list[float]:
        """robot_pose as numbers ([] when not given); ValueError naming the argument otherwise."""
        from .model.placement import pose_matrix

        text = self.robot_pose.replace(",", " ").split()
        if not text:
            return []
        try:
            values = [float(v) for v in text]
            pose_matrix(values)
        except ValueError as exc:
            raise ValueError(f"launch argument robot_pose={self.robot_pose!r}: expected 'x y z roll pitch "
                             f"yaw' ({exc})") from None
        return values

    @classmethod
    def from_strings(cls, values: Mapping[str, object]) -> "Options":
        """From launch-argument strings (unknown keys are an error, missing ones take the defaults)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown launch arguments: {', '.join(unknown)}")
        typed = {k: _flag(k, v) if k in BOOLEAN_ARGUMENTS else str(v) for k, v in values.items()}
        return cls(**typed)

    @property
    def search_paths(self) -> list[str]:
        return [p for p in self.search_path.split(os.pathsep) if p]

    @property
    def params_files(self) -> list[str]:
        return [p for p in self.params_file.split(os.pathsep) if p]

    @property
    def robot_file(self) -> str:
        return self.robot or str(DEFAULT_ROBOT)

    @property
    def srdf_file(self) -> str:
        if self.srdf:
            return self.srdf
        return str(DEFAULT_SRDF) if not self.robot or Path(self.robot).resolve() == DEFAULT_ROBOT else ""

    @property
    def hardware_kind(self) -> str:
        return self.hardware or ("sim" if self.mode == "sim" else "canopen")

    @property
    def node_namespace(self) -> str:
        return "/" + self.namespace.strip("/") if self.namespace else ""


@dataclass(frozen=True)
class NodeSpec:
    """One node of the bridge, as launch_ros.actions.Node takes it."""

    package: str
    executable: str
    name: str
    namespace: str
    parameters: dict = field(default_factory=dict)        # flat, dotted names (sensors.<s>.mode)
    remappings: tuple = ()                                 # ((from, to), ...)
    arguments: tuple = ()
    factory: str = ""                                      # "module:Class" to build it in-process
    optional: bool = False                                 # a viewer: the bridge starts without it when its
                                                           # package is not installed (with a warning)


def share_dir() -> Path:
    """Where config/ and launch/ are: the source tree, the ament index, or <prefix>/share/robot_bridge."""
    source = Path(__file__).resolve().parents[1]
    if (source / "package.xml").is_file() and (source / "config").is_dir():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE))
    except Exception:      # not a ROS install (ImportError) or package not indexed (PackageNotFoundError)
        pass
    for prefix in (sys.prefix, sys.base_prefix):
        candidate = Path(prefix) / "share" / PACKAGE
        if (candidate / "config").is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find the {PACKAGE} config/ directory (source tree, ament index or "
                            f"{sys.prefix}/share/{PACKAGE})")


def config_file(name: str) -> Path:
    return share_dir() / "config" / name


def flatten(tree: Mapping, prefix: str = "") -> dict:
    """Nested YAML mappings -> dotted parameter names, as ROS 2 reads ros__parameters."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def yaml_parameters(path: Path, node_name: str, namespace: str = "", must_exist: bool = False) -> dict:
    """The ros__parameters of ``node_name`` in a ROS 2 parameter file, as rcl matches them: ``/**``, then
    ``/**/<name>``, then the full name (``/<namespace>/<name>``, the leading slash optional); later wins.

    Empty lists are left out: they carry no type, and the nodes declare array parameters without a value.
    A missing file is no parameters, or a FileNotFoundError with ``must_exist``.
    """
    import yaml

    if not path.is_file():
        if must_exist:
            raise FileNotFoundError(f"parameters file {path} not found")
        return {}
    with open(path, encoding="utf-8") as stream:
        document = yaml.safe_load(stream) or {}
    if not isinstance(document, Mapping):
        raise ValueError(f"{path}: expected a mapping of node names to ros__parameters")
    params = {}
    full = f"/{namespace.strip('/')}/{node_name}" if namespace.strip("/") else "/" + node_name
    for key in ("/**", "**", "/**/" + node_name, full[1:], full):
        section = document.get(key)
        if isinstance(section, Mapping):
            params.update(flatten(section.get("ros__parameters") or {}))
    return {k: v for k, v in params.items() if v is not None and v != []}


def _sensor_modes(params: dict, mode: str) -> dict:
    """The mode argument wins over per-sensor sim/relay modes of the YAML; ``off`` stays off."""
    wanted = "sim" if mode == "sim" else "relay"
    return {k: (wanted if k.startswith("sensors.") and k.endswith(".mode") and v in ("sim", "relay") else v)
            for k, v in params.items()}


def node_set(options: Options | None = None) -> list[NodeSpec]:
    """The nodes of the bridge for these launch arguments, in start order (executable, factory and YAML file
    of each from robot_bridge.node_table)."""
    o = options or Options()
    ns = o.node_namespace
    common = {"use_sim_time": o.use_sim_time}
    placed = {"robot_pose": o.robot_pose_values} if o.robot_pose_values else {}    # else the YAML's / file's

    def node(name: str, **overrides) -> NodeSpec:
        """The spec of the table's node ``name``: its config/ YAML, then ``common``, then ``overrides``."""
        entry = node_table.BY_NAME[name]
        yaml = yaml_parameters(config_file(entry.config), name) if entry.config else {}
        return NodeSpec(PACKAGE, entry.executable, name, ns, {**yaml, **common, **overrides},
                        factory=entry.factory)

    # the objects file's folder: the body files of world_node's documents may lie there (world/reader.py)
    roots = [os.path.dirname(os.path.abspath(os.path.expanduser(o.objects)))] if o.objects else []
    sensors = node("sensor_bridge", description_file=o.robot_file, frame_prefix=o.frame_prefix,
                   default_mode="sim" if o.mode == "sim" else "relay", **placed,
                   **({"objects_roots": roots} if roots else {}))
    specs = [
        node("description_node", description_file=o.robot_file, srdf_file=o.srdf_file,
             frame_prefix=o.frame_prefix, world_frame=o.world_frame, publish_environment=o.environment,
             publish_default_joint_states=False, **placed),
        replace(sensors, parameters=_sensor_modes(sensors.parameters, o.mode)),
        # the controller publishes /joint_states: keep it next to its listeners in the namespace
        replace(node("controller_node", description_file=o.robot_file, srdf_file=o.srdf_file,
                     hardware=o.hardware_kind, frame_prefix=o.frame_prefix, **placed,
                     **({"sim.objects_roots": roots} if roots else {})),
                remappings=(("/joint_states", "joint_states"),)),
    ]
    if o.objects:
        specs.append(node("world_node", objects_file=o.objects, description_file=o.robot_file,
                          environment=o.environment, frame_prefix=o.frame_prefix, world_frame=o.world_frame))
    if o.planner and o.mode == "sim" and planner_unavailable() is None:
        specs.append(node("planner_node", description_file=o.robot_file, frame_prefix=o.frame_prefix,
                          world_frame=o.world_frame, environment=o.environment, **placed,
                          **({"objects_roots": roots} if roots else {})))
    if o.rviz:
        specs.append(NodeSpec("rviz2", "rviz2", "rviz2", ns, dict(common),
                              arguments=("-d", str(config_file(RVIZ_CONFIG))), optional=True))
    if o.view:
        specs.append(node("view_node", **({"allow_control": True} if o.allow_control else {})))
    return [_with_files(spec, o) for spec in specs]


READS_ROBOT = node_table.READS_ROBOT      # read description_file with xacro_args (robot-bridge run: once)


def _with_files(spec: NodeSpec, o: Options) -> NodeSpec:
    """``spec`` with xacro_args, the search path and every parameters file applied (files last)."""
    parameters = dict(spec.parameters)
    if spec.name in READS_ROBOT and o.xacro_args:
        parameters["xacro_args"] = o.xacro_args
    if o.search_paths and spec.factory:
        parameters["search_path"] = list(o.search_paths)
    for path in o.params_files:
        parameters.update(yaml_parameters(Path(path), spec.name, spec.namespace, must_exist=True))
    return replace(spec, parameters=parameters)


def planner_unavailable() -> str | None:
    """Why planner_node cannot run here (one line naming what to install), or None."""
    import importlib.util

    from . import planning

    if not planning.available():
        return "planner_node not started: the planning extra is not installed (pip install " \
               "'robot_bridge[planning]')"
    if importlib.util.find_spec("moveit_msgs") is None:
        return "planner_node not started: moveit_msgs is not installed (apt install " \
               "ros-$ROS_DISTRO-moveit-msgs, or make setup in a venv)"
    return None


def dds_profile_variables(base: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The environment variables that make Fast DDS read a profiles file, by the Fast DDS installed here:
    3.x (Kilted and later) reads ``FASTDDS_DEFAULT_PROFILES_FILE`` and warns about the old name, 2.x
    (Humble, Jazzy) reads ``FASTRTPS_DEFAULT_PROFILES_FILE`` only.  A venv exports no ROS_DISTRO, so the
    version decides; ROS_DISTRO only when no Fast DDS version is found."""
    from .ros import rcl_layout                      # rclpy-free: package metadata only

    env = os.environ if base is None else base
    major = rcl_layout.fastdds_major()
    if major is None:
        fastdds2 = env.get("ROS_DISTRO") in FASTDDS2_DISTROS
    else:
        fastdds2 = major < 3
    if fastdds2:
        return ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
    return ("FASTDDS_DEFAULT_PROFILES_FILE",)


def dds_profile_environment(profile: Path | str, base: Mapping[str, str] | None = None) -> dict:
    """``profile`` as the Fast DDS profiles file of the processes started with these additions."""
    return {name: str(profile) for name in dds_profile_variables(base)}


def dds_environment(base: Mapping[str, str] | None = None) -> dict:
    """Environment additions for large messages: the Fast DDS profile shipped in config/, under the variable
    names the installed Fast DDS reads (``dds_profile_variables``).  A profile the caller chose wins; chosen
    under the other name only, it is passed on under the one this Fast DDS reads too."""
    env = os.environ if base is None else base
    chosen = env.get("FASTDDS_DEFAULT_PROFILES_FILE") or env.get("FASTRTPS_DEFAULT_PROFILES_FILE")
    if chosen:
        return {name: chosen for name in dds_profile_variables(env) if not env.get(name)}
    try:
        profile = config_file(FASTDDS_PROFILE)
    except FileNotFoundError:
        return {}
    if not profile.is_file():
        return {}
    return dds_profile_environment(profile, env)
