"""controller_node: carries joint commands to Schunk-style modules (simulated or CiA 402 over CAN).

Interfaces follow ros2_control's joint_trajectory_controller and gripper_action_controller, so MoveIt
drives it: per trajectory controller a ``control_msgs/action/FollowJointTrajectory`` server and a
``control_msgs/msg/JointTrajectoryControllerState`` topic, per gripper a ``control_msgs/action/
GripperCommand`` server; plus the topic / service interface of Schunk's drivers.  The rules (goal
validation, tolerances, preemption, cancel, faults) live in :mod:`robot_bridge.control`; this node maps
topics, services and actions onto a :class:`~robot_bridge.control.JointControl`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from builtin_interfaces.msg import Time as TimeMsg
from control_msgs.msg import JointTrajectoryControllerState
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterEvent
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action import server as action_server
from rclpy.parameter import parameter_value_to_python
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, Header
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from .. import hardware as hw
from ..control import (MAX_POINTS, ErrorCode, GoalRejected, GoalState, GoalTracker, GripperTracker,
                       JointControl, Outcome, Tolerances, check_point_count, move_trajectory,
                       prepare_trajectory, rate_excess, resolve_tolerances)
from ..control.groups import TrajectoryWire, gripper_prefix, wiring
from ..hardware.base import Hardware, HardwareError, ModuleState
from ..model import Robot
from ..ros import params
from ..ros.actions import destroy_actions
from ..ros.conversions import joint_tolerances, seconds, trajectory_command, trajectory_point
from ..ros.guard import ContainedNode
from ..ros.params import Param
from ..ros.cdr_template import CdrTemplate, TemplateUnavailable
from ..ros.stamps import MonotonicStamper, stamp_fields
from ..ros.template_publishers import TemplatePublishers, state_source, state_views
from ..ros.thread_timers import ThreadTimer

RATE = (0.1, 10000.0)          # Hz: accepted range of the loop and publishing rates
# tolerances as a joint can mean them: a few tenths of a radian (or metre, or per second) at most -- a
# wider one is no check at all (0 is the way to say "not checked"); a peer cannot loosen them further
TOLERANCE = (0.0, 0.5)
GOAL_TIME = (0.0, 60.0)             # s
# The one parameter schema (names, defaults, descriptions, constraints); read-only where a change needs a
# restart (the hardware, the joint set and the action servers are built at start-up).
PARAMETERS = params.schema(
    Param("description_file", "", "Robot file read with robot_bridge.formats.load (unused when a Robot is "
                                  "given)", read_only=True, string="text"),
    Param("search_path", params.STRING_ARRAY, "Directories searched for included files", read_only=True,
          string="text"),
    Param("xacro_args", "", params.XACRO_ARGS_TEXT,
          read_only=True, string="text"),
    Param("srdf_file", "", "SRDF whose groups name the controllers' joints and give the home state "
                           "(optional)", read_only=True, string="text"),
    Param("hardware", "sim", "Modules: 'sim' (simulated) or 'canopen' (CiA 402 drives)", choices=hw.KINDS,
          read_only=True),
    Param("joints", params.STRING_ARRAY, "Joints driven, in command order (default: the description's "
                                         "active 1-DOF joints)", read_only=True,
          rule=lambda v: "duplicate joint names" if len(set(v)) != len(v) else None,
          rule_text="distinct joints of the description", string="text"),
    Param("controllers", params.STRING_ARRAY,
          "Trajectory controllers, each an SRDF group or a manipulator (its arm chain): "
          "~/<name>/follow_joint_trajectory and ~/<name>/controller_state; empty: derived from the SRDF "
          "(one per planning group, else per manipulator, else one of every driven joint but the "
          "grippers'; a single one at ~/follow_joint_trajectory)", read_only=True,
          rule=lambda v: "duplicate controller names" if len(set(v)) != len(v) else None,
          rule_text="distinct SRDF groups / manipulators sharing no joint", string="name"),
    Param("frame_prefix", "", "Prefix of the robot's TF frames (as the description node's): the sim gripper "
                              "names its links so on world_node/attach", read_only=True, string="prefix"),
    Param("state_rate", 50.0, "Hz of /joint_states, the controller states and the action feedback",
          range=RATE),
    Param("control_rate", 100.0, "Hz of the control loop (trajectory sampling, hardware read/write, goal "
                                 "checks)", range=RATE),
    Param("diagnostics_rate", 2.0, "Hz of /diagnostics (also published on every module state change)",
          range=RATE),
    Param("max_trajectory_points", MAX_POINTS, "Most points a trajectory (goal or ~/joint_trajectory) may "
                                               "have; more are refused with INVALID_GOAL before being read",
          range=(1, 100_000), read_only=True),
    Param("allow_partial_joints_goal", False, "Accept trajectories naming a subset of a controller's joints "
                                              "(the others hold their position)"),
    Param("constraints.goal_time", 0.5, "Seconds after a trajectory's end to be within the goal tolerances "
                                        "(a goal's goal_time_tolerance overrides it; 0: wait indefinitely)",
          range=GOAL_TIME),
    Param("constraints.goal_position", 0.01, "Default goal tolerance of every joint's position (0: not "
                                             "checked)", range=TOLERANCE),
    Param("constraints.stopped_velocity_tolerance", 0.01, "Default goal tolerance of every joint's velocity "
                                                          "(0: not checked)", range=TOLERANCE),
    Param("constraints.path_position", 0.0, "Default path tolerance of every joint's position (0: not "
                                            "checked)", range=TOLERANCE),
    Param("gripper.goal_tolerance", 1e-3, "A gripper goal is reached within this distance of its position",
          range=(1e-9, 1e6)),
    Param("gripper.stall_velocity_threshold", 1e-3, "A gripper slower than this is not moving",
          range=(1e-9, 1e6)),
    Param("gripper.stall_timeout", 0.2, "Seconds not moving short of the goal before a gripper reports "
                                        "stalled", range=(0.0, 60.0)),
    Param("gripper.allow_stalling", True, "A stalled gripper goal succeeds (stalled=true) instead of "
                                          "aborting"),
    Param("auto_init", True, "Open and enable the hardware at start-up (otherwise call ~/init)",
          read_only=True),
    Param("default_velocity", 1.0, "Velocity limit (rad/s or m/s) for joints whose description has none",
          range=(1e-6, 1e6), read_only=True),
    Param("default_acceleration", 2.0, "Acceleration limit for joints whose description has none",
          range=(1e-6, 1e6), read_only=True),
    Param("sim.seed", 0, "Seed of the simulation's random generator (faults, noise)", range=(0, 2**31 - 1),
          read_only=True),
    Param("sim.fault_rate", 0.0, "Random faults per module and second (1/s; 0: none)", range=(0.0, 1.0)),
    Param("sim.noise", 0.0, "Standard deviation of the simulated position measurement noise",
          range=(0.0, 1.0)),
    Param("sim.grasp_objects", True, "Simulated fingers stop on the environment's bodies (collision "
                                     "geometry)"),
    Param("sim.objects_topic", "world_node/objects", "Sim: world_node's latched <Environment> document; its "
                                                     "detected bodies also stop the fingers (empty: none)",
          read_only=True, string="name"),
    Param("sim.objects_roots", params.STRING_ARRAY, "Sim: folders the body files of sim.objects_topic's "
                                                    "documents may lie in, besides those of "
                                                    "description_file, srdf_file, search_path and this "
                                                    "package's data (a body file elsewhere: refused unread)",
          read_only=True, string="text"),
    Param("canopen.interface", "socketcan", "python-can interface (socketcan, pcan, virtual, ...)",
          read_only=True),
    Param("canopen.channel", "can0", "python-can channel", read_only=True),
    Param("canopen.bitrate", 500000, "CAN bit rate", range=(10000, 1000000), read_only=True),
    Param("canopen.node_ids", params.INTEGER_ARRAY, "CANopen node id per joint (default 1, 2, ...)",
          range=(1, 127), read_only=True),
    Param("canopen.eds", "", "Object dictionary of the drives (default: config/cia402_drive.eds)",
          read_only=True, string="text"),
    Param("canopen.counts_per_radian", 1e6, "Drive position units per radian (or metre)", range=(1e-6, 1e12),
          read_only=True),
    Param("canopen.heartbeat_ms", 50, "Heartbeat producer time written to each drive (0x1017)",
          range=(0, 65535), read_only=True),
    Param("canopen.heartbeat_timeout", 0.5, "Seconds without heartbeat before a module is reported faulted",
          range=(0.001, 60.0), read_only=True),
)
WARN_THROTTLE = 5.0
# rate parameter -> the method its timer runs
FOLLOWED = ("description_file", "srdf_file", "search_path", "xacro_args")    # the description node's too
TIMERS = {"control_rate": "_control", "state_rate": "_publish_state",
          "diagnostics_rate": "_publish_diagnostics"}
THREAD_TIMERS = {"control_rate", "state_rate"}     # hot: on the node's timer thread, not the executor
_GoalEvent = getattr(action_server, "GoalEvent", None) or action_server._rclpy.GoalEvent


class Rejected(ValueError):
    """A command refused, with the reason given to the caller."""


@dataclass
class TrajectoryController:
    """One FollowJointTrajectory server over some of the driven joints."""

    name: str
    joints: list[str]
    index: np.ndarray                   # into ControllerNode.joints
    prefix: str                         # "~/" or "~/<name>/"
    server: ActionServer | None = None
    state_pub: object = None


@dataclass
class Gripper:
    """One GripperCommand server for a manipulator's driving gripper joint."""

    name: str
    joint: str
    index: int
    prefix: str
    closing: float = -1.0               # sign of the joint's closing direction
    server: ActionServer | None = None
    touching: str = ""                  # sim: the body the closing fingers meet (this goal)
    holding: str = ""                   # sim: the body they stalled on, attached at world_node


@dataclass
class ActiveGoal:
    handle: object
    future: Future
    controller: object
    feedback: bool = True
    extra: dict = field(default_factory=dict)


class ControllerNode(ContainedNode):
    def __init__(self, robot: Robot | None = None, hardware: Hardware | None = None, **kwargs):
        super().__init__("controller_node", **kwargs)
        self.lock = threading.RLock()          # hardware access: executor callbacks and tests
        self.hardware: Hardware | None = hardware
        self.timers_by_rate = {}
        self.control: JointControl | None = None
        self.controllers: list[TrajectoryController] = []
        self.grippers: list[Gripper] = []
        self.params = params.NodeParameters(self, PARAMETERS, apply=self._on_parameters_set)
        self.robot = robot
        self.reads_description = robot is None
        # the robot driven: these values, switched with the description node's (see _on_parameter_event)
        self.description = {name: self._param(name) for name in FOLLOWED}
        self.joints_given = list(self._param("joints"))
        self.description_refusal: str | None = None      # a description switch not followed: commands refused
        self.joints: list[str] = list(hardware.joint_names) if hardware else []
        self.limits = list(hardware.limits) if hardware else []
        # ROS time now, ns.  Without use_sim_time that is the system clock: read directly (rclpy's
        # Clock.now() costs a tick ~90 us with cold caches).  Read once: use_sim_time is not dynamic here.
        self._now_ns = time.time_ns if not self.get_parameter("use_sim_time").value else \
            (lambda: self.get_clock().now().nanoseconds)
        self.control = self._joint_control(hardware) if hardware else None
        self.last_states: list | None = None
        self.bus_error: str | None = None      # hardware communication failure, until ~/recover
        self.internal_error: str | None = None  # a callback raised: halted, until ~/recover
        self.goals: dict[bytes, ActiveGoal] = {}
        self.refusals: dict[str, str] = {}     # source -> why it is refused (/diagnostics)
        self.refusals_once: set[str] = set()   # of those, said in one /diagnostics message only
        self._scene = None                     # sim: the world the fingers close on (built on first use)
        self._templates = None                 # (joints list, its names, serialized state templates)
        self._source: np.ndarray | None = None  # the state messages' numbers without templates, reused
        # held by a state tick while it publishes (templates through raw rcl handles, goal feedback) and by
        # a robot switch while it destroys those publishers and servers: never one under the other
        self._state_lock = threading.Lock()
        # goals are checked and converted here, never on the control / state thread nor under self.lock
        self._preparation = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="controller_goals")

        self.joint_state_pub = self.create_publisher(JointState, "/joint_states", 10)
        self.state_pub = self.create_publisher(JointTrajectoryControllerState, "~/controller_state", 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory, 10)
        self.create_subscription(Float64MultiArray, "~/commands", self._on_commands, 10)
        self.create_service(Trigger, "~/init", self._srv(self.init))
        self.create_service(Trigger, "~/halt", self._srv(self.halt))
        self.create_service(Trigger, "~/recover", self._srv(self.recover))
        self.create_service(Trigger, "~/home", self._srv(self.home))
        self.create_service(SetBool, "~/enable", self._on_enable)
        # the description node's switches of the robot file (ros2 param set /description_node ...)
        self.create_subscription(ParameterEvent, "/parameter_events", self._on_parameter_event, 10)
        self._world_objects: dict = {}                         # sim: name -> (body, pose) of world_node
        self.attach_pub = None             # sim: world_node's ~/attach (a body the fingers stall on)
        self.objects_worker = None         # sim: reads world_node's documents, off the control / goal threads
        if self._param("hardware") == "sim" and self._param("sim.objects_topic"):
            from std_msgs.msg import String

            from ..ros import qos
            from ..world.reader import LatestWorker, WorldReader, trusted_roots
            topic = self._param("sim.objects_topic")
            search = list(self._param("search_path"))
            self.objects_reader = WorldReader(
                trusted_roots([self._param("description_file"), self._param("srdf_file")],
                              search + list(self._param("sim.objects_roots"))), search, source=topic)
            self.objects_worker = LatestWorker(self._apply_objects, "controller_node.objects",
                                               lambda exc: self.on_callback_error("objects document", exc))
            self.create_subscription(String, topic, lambda msg: self.objects_worker.submit(msg.data),
                                     qos.description_qos())
            try:
                from moveit_msgs.msg import AttachedCollisionObject
            except ImportError:
                self.get_logger().info("moveit_msgs is not installed: grasped bodies are not attached")
            else:
                from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

                from ..world.planning_scene import attach_topic
                self.attach_pub = self.create_publisher(
                    AttachedCollisionObject, attach_topic(topic),
                    QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.VOLATILE))

        try:
            if self.hardware is None:
                self._setup()
            self._setup_controllers()
            self._state_templates()                # compiled (or loaded) now, not on the first tick
            if self.joints and list(self._param("joints")) != self.joints:
                self.params.hold("joints", list(self.joints))     # `ros2 param get ... joints`: those driven
            self._hold_controllers()
        except Exception as exc:  # bad description or parameters: keep the node up (diagnostics), report
            self.load_error = f"controller not set up: {type(exc).__name__}: {exc}"
            self.get_logger().error(self.load_error)
        try:
            if self.hardware is not None and self._param("auto_init"):
                self.get_logger().info(self.init())
        except Exception as exc:  # e.g. no bus: keep the node up, report, allow ~/init
            self.get_logger().error(f"controller not ready: {_reason(exc)}")
        for rate in TIMERS:
            self._start_timer(rate)

    # -- set-up -------------------------------------------------------------------
    def _param(self, name: str):
        return self.params.get(name)

    def _start_timer(self, rate_parameter: str) -> None:
        old = self.timers_by_rate.pop(rate_parameter, None)
        if isinstance(old, ThreadTimer):
            old.destroy()
        elif old is not None:
            self.destroy_timer(old)
        callback = getattr(self, TIMERS[rate_parameter])
        create = self.create_thread_timer if rate_parameter in THREAD_TIMERS else self.create_timer
        self.timers_by_rate[rate_parameter] = create(1.0 / self._param(rate_parameter), callback)

    def _on_parameters_set(self, changes: dict) -> None:
        """Accepted changes of dynamic parameters take effect here (read-only ones never get here)."""
        for name in TIMERS.keys() & changes.keys():
            self._start_timer(name)
        with self.lock:
            for name, attribute in (("sim.fault_rate", "fault_rate"), ("sim.noise", "noise")):
                if name in changes and hasattr(self.hardware, attribute):
                    setattr(self.hardware, attribute, float(changes[name]))

    def _setup(self) -> None:
        """Robot, joints, limits and hardware from the parameters."""
        if self.robot is None:
            self.robot = self._read_robot(self.description)
        robot = self.robot
        joints = list(self.joints_given) or [j.name for j in robot.active_joints if j.dof == 1]
        skipped = [j.name for j in robot.active_joints if j.dof != 1 and j.name not in joints]
        if skipped:
            self.get_logger().warning(f"multi-DOF joints not driven: {', '.join(skipped)}")
        if not joints:
            raise ValueError(f"robot {robot.name!r} has no active 1-DOF joints to drive")
        limits = hw.limits_from_robot(robot, joints, self._param("default_velocity"),
                                      self._param("default_acceleration"))
        if self.reads_description:          # a Robot handed in was read (and its warnings logged) elsewhere
            for warning in dict.fromkeys(robot.mesh_warnings_left_out()):    # meshes: description_node's
                self.get_logger().warning(warning)
        initial = [float(np.clip(robot.joints[j].initial[0], lim.lower, lim.upper))
                   for j, lim in zip(joints, limits)]
        kind = self._param("hardware")
        if kind == "sim":
            options = {"seed": self._param("sim.seed"), "fault_rate": self._param("sim.fault_rate"),
                       "noise": self._param("sim.noise")}
        elif kind == "canopen":
            node_ids = list(self._param("canopen.node_ids")) or list(range(1, len(joints) + 1))
            options = {"node_ids": node_ids, "interface": self._param("canopen.interface"),
                       "channel": self._param("canopen.channel"), "bitrate": self._param("canopen.bitrate"),
                       "counts_per_radian": self._param("canopen.counts_per_radian"),
                       "heartbeat_ms": self._param("canopen.heartbeat_ms"),
                       "heartbeat_timeout": self._param("canopen.heartbeat_timeout")}
            if self._param("canopen.eds"):
                options["eds"] = self._param("canopen.eds")
        else:
            raise ValueError(f"parameter hardware={kind!r}: expected one of {', '.join(hw.KINDS)}")
        self.hardware = hw.create(kind, joints, limits, initial, **options)
        self.joints, self.limits = joints, limits
        self.control = self._joint_control(self.hardware, limits)

    @staticmethod
    def _read_robot(description: dict) -> Robot:
        """The robot of ``description`` (FOLLOWED values), its SRDF attached."""
        from ..formats import load
        path = description["description_file"]
        if not path:
            raise ValueError("parameter description_file is empty and no Robot was given")
        robot = load(path, search_path=list(description["search_path"]) or None,
                     xacro_args=description["xacro_args"])
        if description["srdf_file"]:
            from ..formats import srdf
            srdf.attach_semantics(robot, srdf.read_srdf(description["srdf_file"], robot))
        return robot

    # -- following the description node --------------------------------------------------------
    def _description_node(self) -> str:
        return self.get_namespace().rstrip("/") + "/description_node"

    def _on_parameter_event(self, event) -> None:
        """The description node switched its robot (a reload it accepted): follow it when safe."""
        if not self.description["description_file"] or event.node != self._description_node():
            return
        changed = {p.name: parameter_value_to_python(p.value)
                   for p in event.changed_parameters if p.name in FOLLOWED}     # not its start-up values
        if not changed or (self.description_refusal is None and
                           all(self.description.get(k) == v for k, v in changed.items())):
            return
        self.follow_description({**self.description, **changed})

    def follow_description(self, description: dict) -> bool:
        """Re-read the robot of ``description`` and drive it, when nothing moves (no goal, no trajectory,
        hardware simulated); else refuse with the reason (logged, on /diagnostics) and refuse commands until
        the controller is restarted or the description node switches back.  True when followed."""
        name = description["description_file"]
        back = all(self.description.get(k) == v for k, v in description.items())
        try:
            with self.lock:
                reason = self._unsafe_to_switch()
            if back:
                reason = None
            elif reason is None:
                robot = self._read_robot(description)
                with self.lock:
                    reason = self._unsafe_to_switch()
                    if reason is None:
                        self._switch_robot(robot, description)
        except Exception as exc:  # a file that does not load here, joints the hardware cannot drive
            reason = f"{type(exc).__name__}: {exc}"
        if reason is None:
            self.description_refusal = None
            self._refused("description", None)
            if not back:
                self.get_logger().info(f"following the description node: robot {self.robot.name!r} from "
                                       f"{name}, joints {', '.join(self.joints)}")
            return True
        self.description_refusal = (f"the description node switched to {name}, not followed: {reason}; "
                                    "commands refused (switch it back, or restart the controller)")
        self.get_logger().error(self.description_refusal)
        self._refused("description", self.description_refusal)
        return False

    def _unsafe_to_switch(self) -> str | None:
        if self.goals:
            return f"{len(self.goals)} goal(s) active"
        if self.control is not None and self.control.motions:
            return "a trajectory is running"
        if self.control is not None and self.control.sample is not None and \
                np.any(np.abs(np.asarray(self.control.sample.velocity)) > 1e-6):
            return "joints are moving"
        if self._param("hardware") != "sim":
            return f"{self._param('hardware')} hardware is wired for its robot"
        return None

    def _switch_robot(self, robot: Robot, description: dict) -> None:
        """Under the lock, nothing moving: the old robot's servers and hardware go, the new robot's come
        (after a state tick publishing on them has finished: _state_lock)."""
        with self._state_lock:
            self._replace_robot(robot, description)

    def _replace_robot(self, robot: Robot, description: dict) -> None:
        for server in [c.server for c in self.controllers] + [g.server for g in self.grippers]:
            if server is not None:
                server.destroy()
        for ctl in self.controllers:
            if ctl.state_pub is not None:
                self.destroy_publisher(ctl.state_pub)
        if self.hardware is not None:
            self.hardware.close()
        old = (self.robot, self.hardware, self.control, self.joints, self.limits)
        self.controllers, self.grippers, self._templates, self._source = [], [], None, None
        self.robot, self.hardware, self.control, self.last_states = robot, None, None, None
        try:
            self._setup()
            self._setup_controllers()
            self._state_templates()
        except Exception:
            self.robot, self.hardware, self.control, self.joints, self.limits = old
            self.hardware.open()
            self._setup_controllers()
            raise
        self.description = dict(description)
        if self._param("auto_init"):
            self.hardware.open()
            self.hardware.enable(True)
            self.control.hold_here()
        self.params.hold("joints", list(self.joints))
        self._hold_controllers()

    def _hold_controllers(self) -> None:
        """`ros2 param get ... controllers`: the named trajectory controllers in use ([]: the one at ~/)."""
        self.params.hold("controllers", [c.name for c in self.controllers if c.prefix != "~/"])

    def _joint_control(self, hardware: Hardware, limits=None) -> JointControl:
        stamper = MonotonicStamper(self.get_clock(), self._now_ns)
        return JointControl(hardware, limits, clock=stamper)                  # measurement times, ns

    def _setup_controllers(self) -> None:
        """The FollowJointTrajectory and GripperCommand servers of the controller wiring (control.groups)."""
        robot = self.robot
        if robot is None:                                   # hardware given without a description
            wires, specs, notes = [TrajectoryWire("", list(self.joints))], [], []
        else:
            wired = wiring(robot, self.joints, list(self._param("controllers")))
            wires, specs, notes = wired.controllers, wired.grippers, wired.notes
        for note in notes:
            self.get_logger().warning(note)
        for wire in wires:
            prefix = "~/" + wire.prefix
            ctl = TrajectoryController(wire.name or "controller_node", wire.joints,
                                       np.array([self.joints.index(j) for j in wire.joints]), prefix)
            ctl.server = ActionServer(self, FollowJointTrajectory, prefix + "follow_joint_trajectory",
                                      execute_callback=functools.partial(self._execute_trajectory, ctl=ctl),
                                      goal_callback=lambda _req: GoalResponse.ACCEPT,
                                      cancel_callback=self._on_cancel)
            if wire.prefix:
                ctl.state_pub = self.create_publisher(JointTrajectoryControllerState,
                                                      prefix + "controller_state", 10)
            self.controllers.append(ctl)
        for spec in specs:
            prefix = "~/" + gripper_prefix(spec, specs)
            grip = Gripper(spec.name, spec.joint, self.joints.index(spec.joint), prefix, spec.closing)
            grip.server = ActionServer(self, GripperCommand, prefix + "gripper_cmd",
                                       execute_callback=functools.partial(self._execute_gripper, grip=grip),
                                       goal_callback=lambda _req: GoalResponse.ACCEPT,
                                       cancel_callback=self._on_cancel)
            self.grippers.append(grip)

    # -- services -------------------------------------------------------------------------
    def _srv(self, action):
        def callback(_request, response):
            try:
                response.message = action()
                response.success = True
            except Exception as exc:  # a service never takes the node down
                response.success, response.message = False, _reason(exc)
                self.get_logger().warning(response.message)
            return response
        return callback

    def _ready(self) -> Hardware:
        if self.hardware is None:
            raise Rejected("no hardware: the controller is not set up (see the log)")
        return self.hardware

    def init(self) -> str:
        with self.lock:
            hardware = self._ready()
            hardware.open()
            hardware.enable(True)
            self._end_goals("controller re-initialised (~/init)")
            self.control.hold_here()
            return f"{len(self.joints)} modules open and enabled ({self._param('hardware')})"

    def halt(self) -> str:
        with self.lock:
            hardware = self._ready()
            states = hardware.status()
            hardware.halt()
            self._end_goals("halted (~/halt)")          # reference follows the stopping modules
            if all(s.state in (ModuleState.DISABLED, ModuleState.OFFLINE, ModuleState.FAULT) for s in states):
                return f"nothing moving to halt: {_not_operational(states)}"
            return "halting"

    def recover(self) -> str:
        with self.lock:
            self._ready().recover()
            self._end_goals("recovered (~/recover)")
            self.control.hold_here()
            self.control.fault_reported = False
            self.bus_error = self.internal_error = None
            return "faults cleared, modules enabled"

    def home(self) -> str:
        with self.lock:
            target = self.home_position()
            self._command(target, "preempted by ~/home")
            return "moving to " + ", ".join(f"{j}={p:.4f}" for j, p in zip(self.joints, target))

    def home_position(self) -> np.ndarray:
        """SRDF group state 'home' where it names a joint, else the description's initial value."""
        self._ready()
        values = {}
        for state in (self.robot.semantics.group_states if self.robot and self.robot.semantics else []):
            if state.name == "home":
                values.update(state.values)
        return np.array([float(np.clip(values[j][0] if j in values else self.robot.joints[j].initial[0],
                                       lim.lower, lim.upper)) for j, lim in zip(self.joints, self.limits)])

    def _on_enable(self, request, response):
        try:
            with self.lock:
                self._ready().enable(request.data)
                self._end_goals("disabled (~/enable)" if not request.data else "re-enabled (~/enable)")
                if request.data:
                    self.control.hold_here()
            response.success, response.message = True, "enabled" if request.data else "disabled (brakes in)"
        except Exception as exc:  # a service never takes the node down
            response.success, response.message = False, _reason(exc)
            self.get_logger().warning(response.message)
        return response

    # -- commands ---------------------------------------------------------------------------
    def _check_operational(self) -> Hardware:
        hardware = self._ready()
        if self.description_refusal is not None:
            raise Rejected(self.description_refusal)
        if self.internal_error is not None:
            raise Rejected(f"controller halted after an internal error ({self.internal_error}); "
                           "call ~/recover")
        if self.bus_error is not None:
            raise Rejected(f"hardware communication lost ({self.bus_error}); call ~/recover")
        reason = _not_operational(hardware.status())
        if reason:
            raise Rejected(reason)
        return hardware

    def _command(self, positions: np.ndarray, reason: str) -> None:
        self._check_operational()
        for j, p, lim in zip(self.joints, positions, self.limits):
            if not lim.contains(p):
                raise Rejected(f"{j}: target {p:.6f} outside limits [{lim.lower}, {lim.upper}]")
        self._finish(self.control.command(np.asarray(positions, dtype=float), self._now(), reason))

    def _on_commands(self, msg: Float64MultiArray) -> None:
        try:
            with self.lock:
                if len(msg.data) != len(self.joints):
                    raise Rejected(f"{len(msg.data)} values for {len(self.joints)} joints "
                                   f"({', '.join(self.joints)})")
                if not all(math.isfinite(x) for x in msg.data):
                    raise Rejected("non-finite value")
                self._command(np.array(msg.data, dtype=float), "preempted by a command on ~/commands")
        except (Rejected, HardwareError) as exc:
            self.get_logger().warning(f"~/commands rejected: {exc}", throttle_duration_sec=WARN_THROTTLE)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            with self.lock:
                self._check_operational()
            limit = self._param("max_trajectory_points")
            check_point_count(len(msg.points), limit)           # before a point is read
            joints, index = self._trajectory_joints(list(msg.joint_names))
            limits = [self.limits[i] for i in index]
            prepared = prepare_trajectory(trajectory_command(msg), joints, limits,
                                          self._param("allow_partial_joints_goal"), limit)
            with self.lock:                                     # placed in time when taken (bounded)
                self._check_operational()
                now = self._now()
                ref_p, ref_v, _ = self.control.reference(now)
                trajectory = prepared.start((ref_p[index], ref_v[index]), now)
                self._finish(self.control.start(index, trajectory, now,
                                                reason="preempted by a trajectory on ~/joint_trajectory"))
            self._warn_rates("~/joint_trajectory", trajectory, joints, limits)
            self._refused("~/joint_trajectory", None)
        except (Rejected, HardwareError, GoalRejected) as exc:
            self.get_logger().warning(f"trajectory rejected: {exc}")
            self._refused("~/joint_trajectory", f"trajectory rejected: {exc}", once=True)

    def _trajectory_joints(self, names: list[str]) -> tuple[list[str], np.ndarray]:
        """The joints a ~/joint_trajectory drives: exactly one controller's joints (e.g. the arm of an arm
        with a gripper: the others hold, as that controller's FollowJointTrajectory action does), else all."""
        for ctl in self.controllers:
            if len(names) == len(ctl.joints) and set(names) == set(ctl.joints):
                return list(ctl.joints), np.asarray(ctl.index)
        return list(self.joints), np.arange(len(self.joints))

    def _refused(self, source: str, reason: str | None, once: bool = False) -> None:
        """A refusal of ``source`` on /diagnostics, published at once: in every message until cleared (None),
        or ``once`` (a request refused: the next message no longer carries it)."""
        with self.lock:
            changed = self.refusals.get(source) != reason or once
            if reason is None:
                self.refusals.pop(source, None)
            else:
                self.refusals[source] = reason
                if once:
                    self.refusals_once.add(source)
        if changed:
            self._publish_diagnostics()

    def _warn_rates(self, source: str, trajectory, joints, limits) -> None:
        excess = rate_excess(trajectory, joints, limits)
        if excess:
            self.get_logger().warning(f"{source}: trajectory accepted beyond the joint limits ({excess}): "
                                      "the modules move at their limits and lag behind it (no time scaling; "
                                      "the path and goal tolerances judge the result)")

    # -- actions ------------------------------------------------------------------------------
    def _default_tolerances(self, count: int) -> Tolerances:
        return Tolerances.uniform(count, path_position=self._param("constraints.path_position"),
                                  goal_position=self._param("constraints.goal_position"),
                                  stopped_velocity=self._param("constraints.stopped_velocity_tolerance"),
                                  goal_time=self._param("constraints.goal_time"))

    async def _execute_trajectory(self, handle, ctl: TrajectoryController):
        key = bytes(handle.goal_id.uuid)
        goal = handle.request
        limits = [self.limits[i] for i in ctl.index]
        try:
            with self.lock:
                self._goal_operational()
            if goal.multi_dof_trajectory.joint_names:
                raise GoalRejected(ErrorCode.INVALID_JOINTS, "multi-DOF trajectories are not supported")
            check_point_count(len(goal.trajectory.points), self._param("max_trajectory_points"))
            prepared, tolerances = await self._off_control_thread(
                self._prepare_goal, goal, ctl, limits, self._param("max_trajectory_points"),
                self._param("allow_partial_joints_goal"), self._default_tolerances(len(ctl.joints)))
            with self.lock:                 # placed in time when taken: numpy over the points (bounded)
                self._goal_operational()
                now = self._now()
                ref_p, ref_v, _ = self.control.reference(now)
                trajectory = prepared.start((ref_p[ctl.index], ref_v[ctl.index]), now)
                future = Future()
                self.goals[key] = ActiveGoal(handle, future, ctl)
                self._finish(self.control.start(ctl.index, trajectory, now, key,
                                                GoalTracker(trajectory, ctl.joints, tolerances)))
        except GoalRejected as exc:
            self.get_logger().warning(f"{ctl.name}: goal refused ({exc.code.name}): {exc}")
            handle.abort()
            return FollowJointTrajectory.Result(error_code=int(exc.code), error_string=str(exc))
        self._preparation.submit(self._warn_rates, ctl.name, trajectory, ctl.joints, limits)
        outcome: Outcome = await future
        self._terminate(handle, outcome)
        return FollowJointTrajectory.Result(error_code=int(outcome.code), error_string=outcome.message)

    def _goal_operational(self) -> None:
        try:
            self._check_operational()
        except (Rejected, HardwareError) as exc:
            raise GoalRejected(ErrorCode.INVALID_GOAL, f"controller not operational: {exc}") from exc

    @staticmethod
    def _prepare_goal(goal, ctl: TrajectoryController, limits, max_points: int, allow_partial: bool,
                      defaults: Tolerances):
        """(PreparedTrajectory, Tolerances) of a FollowJointTrajectory goal (on the preparation thread)."""
        prepared = prepare_trajectory(trajectory_command(goal.trajectory), ctl.joints, limits, allow_partial,
                                      max_points)
        tolerances = resolve_tolerances(defaults, ctl.joints, joint_tolerances(goal.path_tolerance),
                                        joint_tolerances(goal.goal_tolerance),
                                        seconds(goal.goal_time_tolerance))
        return prepared, tolerances

    async def _off_control_thread(self, function, *args):
        """``function(*args)`` on the preparation thread, awaited (its exception raised here)."""
        done = Future(executor=self.executor)
        done.add_done_callback(lambda _future: None)       # its completion wakes the executor

        def run():
            try:
                done.set_result(function(*args))
            except Exception as exc:  # handed to the awaiting goal
                done.set_exception(exc)
        self._preparation.submit(run)
        return await done

    async def _execute_gripper(self, handle, grip: Gripper):
        key = bytes(handle.goal_id.uuid)
        command = handle.request.command
        with self.lock:
            position = float(self.control.sample.position[grip.index]) if self.control.sample is not None \
                else math.nan
            try:
                self._check_operational()
                lim = self.limits[grip.index]
                if not math.isfinite(command.position) or not lim.contains(command.position):
                    raise Rejected(f"{grip.joint}: position {command.position} outside "
                                   f"[{lim.lower}, {lim.upper}]")
                now = self._now()
                ref_p, _, _ = self.control.reference(now)
                self._place_obstacle(grip, ref_p, command.position, command.max_effort)
                index = [grip.index]
                trajectory = move_trajectory(ref_p[index], np.array([command.position]), [lim], now)
                tracker = GripperTracker(command.position, now, self._param("gripper.goal_tolerance"),
                                         self._param("gripper.stall_velocity_threshold"),
                                         self._param("gripper.stall_timeout"),
                                         self._param("gripper.allow_stalling"))
            except (Rejected, HardwareError) as exc:
                self.get_logger().warning(f"{grip.name}: gripper goal refused: {exc}")
                handle.abort()
                return GripperCommand.Result(position=position)
            future = Future()
            self.goals[key] = ActiveGoal(handle, future, grip)
            self._finish(self.control.start(index, trajectory, now, key, tracker))
        outcome: Outcome = await future
        if outcome.stalled and grip.touching and not grip.holding and self._movable(grip.touching):
            grip.holding = grip.touching
            self._publish_attach(grip, True)
        self._terminate(handle, outcome)
        with self.lock:
            sample = self.control.sample
        return GripperCommand.Result(position=float(sample.position[grip.index]),
                                     effort=float(sample.effort[grip.index]), stalled=outcome.stalled,
                                     reached_goal=outcome.reached_goal)

    def _place_obstacle(self, grip: Gripper, reference: np.ndarray, target: float, max_effort: float) -> None:
        """Sim: the environment body the closing fingers would touch stops them (sim.grasp_objects)."""
        if not hasattr(self.hardware, "set_obstacle"):
            return
        contact = None
        closing = (target - reference[grip.index]) * grip.closing > 0.0
        bodies = self.robot is not None and (self.robot.environment or self._world_objects)
        if closing and self._param("sim.grasp_objects") and bodies:
            from ..sim.grasp import contact as first_contact
            if self._scene is None:
                self._build_scene()
            positions = dict(zip(self.joints, map(float, self.control.sample.position)))
            found = first_contact(self._scene, positions, grip.joint, target)
            if found is not None:
                contact, grip.touching = found
        elif not closing and grip.holding:
            self._publish_attach(grip, False)          # opening: the held body is let go
            grip.holding = ""
        if contact is None:
            grip.touching = ""
        effort = max_effort if max_effort > 0.0 else math.inf
        self.hardware.set_obstacle(grip.joint, contact, effort)
        if contact is not None:
            self.get_logger().info(f"{grip.name}: fingers meet {grip.touching} at {grip.joint}={contact:.6f}")

    def _movable(self, name: str) -> bool:
        """A body the fingers may carry away: not made of static links only (OpenRAVE type="static": a
        table the fingers pressed on stays a table)."""
        body = self.robot.environment.get(name) if self.robot is not None else None
        if body is None:
            body = self._world_objects.get(name, (None, None))[0]
        return body is not None and not all(link.static for link in body.links.values())

    def _publish_attach(self, grip: Gripper, add: bool) -> None:
        """Sim: tell world_node that ``grip`` holds (add) or let go of its body: an AttachedCollisionObject
        on the gripper joint's parent link, touching it and every link below it (the fingers)."""
        if self.attach_pub is None or self.robot is None or grip.joint not in self.robot.joints:
            return
        from moveit_msgs.msg import AttachedCollisionObject, CollisionObject

        link = self.robot.joints[grip.joint].parent
        touch, todo = [], [link]
        while todo:
            current = todo.pop()
            touch.append(current)
            todo += [j.child for j in self.robot.child_joints(current)]
        prefix = str(self._param("frame_prefix"))
        msg = AttachedCollisionObject(link_name=prefix + link,
                                      touch_links=[prefix + t for t in touch] if add else [])
        msg.object.id = grip.holding
        msg.object.header.frame_id = prefix + link
        msg.object.header.stamp = self.get_clock().now().to_msg()
        msg.object.operation = CollisionObject.ADD if add else CollisionObject.REMOVE
        self.attach_pub.publish(msg)
        self.get_logger().info(f"{grip.name}: {'holds' if add else 'lets go of'} {grip.holding}")

    def _build_scene(self) -> None:
        from ..sim.scene import Scene

        self._scene = Scene(self.robot)
        if self._world_objects:
            self._scene.set_objects(self._world_objects)

    def _apply_objects(self, text: str) -> None:
        """Sim: world_node's detected bodies, which the closing fingers also stop on (on the objects worker:
        body files are read there, never on the control or goal threads)."""
        from ..errors import DescriptionError

        try:
            read = self.objects_reader.objects(text)
        except DescriptionError as exc:
            self.get_logger().warning(f"objects document ignored: {exc}", throttle_duration_sec=5.0)
            return
        if read.problems:
            self.get_logger().warning(f"objects document: {read.summary()}", throttle_duration_sec=5.0)
        objects = {name: value for name, value in read.objects.items()
                   if self.robot is None or name not in self.robot.environment}
        if self.objects_worker.stopped:
            return
        with self.lock:
            self._world_objects = objects
            if self._scene is not None:
                try:
                    self._scene.set_objects(objects)
                except ValueError as exc:
                    self.get_logger().warning(f"objects document ignored: {exc}", throttle_duration_sec=5.0)

    def _on_cancel(self, handle):
        with self.lock:
            key = bytes(handle.goal_id.uuid)
            if key in self.goals and self.control.cancel(key, self._now()):
                return CancelResponse.ACCEPT
        return CancelResponse.REJECT

    def _terminate(self, handle, outcome: Outcome) -> None:
        """The goal's terminal state; a preempted goal ends canceled as in joint_trajectory_controller."""
        if not handle.is_active:
            return
        if outcome.state is GoalState.SUCCEEDED:
            handle.succeed()
        elif outcome.state is GoalState.CANCELED:
            try:
                if not handle.is_cancel_requested:
                    handle._update_state(_GoalEvent.CANCEL_GOAL)
                handle.canceled()
            except Exception:  # not cancelable any more (rcl_action's state machine): aborted instead
                handle.abort()
        else:
            handle.abort()
        # one call site per severity: rclpy refuses a call site that logs at more than one (ValueError)
        text = f"goal {outcome.state.value} ({outcome.code.name}): {outcome.message}"
        if outcome.state is GoalState.SUCCEEDED:
            self.get_logger().info(text)
        else:
            self.get_logger().warning(text)

    def _finish(self, ended: list[tuple]) -> None:
        for key, outcome in ended:
            goal = self.goals.pop(key, None)
            if goal is not None and not goal.future.done():
                goal.future.set_result(outcome)

    def _end_goals(self, reason: str) -> None:
        self.control.release()
        outcome = Outcome(GoalState.ABORTED, ErrorCode.INVALID_GOAL, f"goal ended: {reason}")
        self._finish([(key, outcome) for key in list(self.goals)])

    # -- control loop ------------------------------------------------------------------------------
    def _now(self) -> float:
        """ROS time now, s."""
        return self._now_ns() * 1e-9

    def reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired positions, velocities, accelerations now."""
        return self.control.reference(self._now())

    def _control(self) -> None:
        with self.lock:
            if self.hardware is None or not self.hardware.online:
                return
            try:
                now = self._now()
                ended = self.control.step(now)
                self._finish(ended)
                states = self.control.states              # read by this period's step
                for _, outcome in ended:
                    if outcome.message.startswith("hardware fault"):
                        self.get_logger().error(outcome.message)
                previous, self.last_states = self.last_states, states
                if states is not previous and (previous is None or [(s.state, s.fault) for s in states]
                                               != [(s.state, s.fault) for s in previous]):
                    if any(s.state is ModuleState.FAULT for s in states):
                        faulted = [f"{s.joint}: {s.message}" for s in states if s.state is ModuleState.FAULT]
                        self.get_logger().error("fault: " + "; ".join(faulted))
                    self._publish_diagnostics()
            except Exception as exc:  # bus errors etc.: halt, report, keep looping until ~/recover
                self.get_logger().error(f"hardware: {_reason(exc)}", throttle_duration_sec=WARN_THROTTLE)
                if self.bus_error is None:
                    self.bus_error = _reason(exc)
                    outcome = Outcome(GoalState.ABORTED, ErrorCode.PATH_TOLERANCE_VIOLATED,
                                      f"hardware communication lost: {self.bus_error}")
                    self._finish([(key, outcome) for key in list(self.goals)])
                    self.control.release()
                    try:
                        self.hardware.halt()
                    except Exception:  # the bus may be gone: the drives' own timeouts stop them
                        pass
                    self._publish_diagnostics()

    # -- publishing --------------------------------------------------------------------------------
    def _publish_state(self) -> None:
        with self.lock:
            control = self.control
            sample = control.sample if control else None
            if sample is None or control.sample_time is None:
                return
            stamp = control.sample_time
            reference = control.reference(self._now())
            goals = [(g.handle, g.controller) for g in self.goals.values()] if self.goals else None
        with self._state_lock:
            self._publish_sample(sample, stamp, reference, goals)

    def _publish_sample(self, sample, stamp: int, reference, goals) -> None:
        """/joint_states, the controller states and the goals' feedback of one sample (under _state_lock)."""
        actual_rows = (sample.position, sample.velocity, sample.acceleration)
        templates = self._state_templates()
        if templates is not None:              # the messages' numbers written into serialized templates
            source = templates.publish_state(reference, actual_rows, sample.effort, stamp)
            if not goals:
                return
        else:
            source = state_source(reference, actual_rows, sample.effort, self._source)
            self._source = source
        desired, actual, effort, error = state_views(source, len(sample.position))
        sec, nanosec = stamp_fields(stamp)
        header = Header(stamp=TimeMsg(sec=sec, nanosec=nanosec))
        if templates is None:
            self.joint_state_pub.publish(JointState(
                header=header, name=self.joints, position=list(map(float, sample.position)),
                velocity=list(map(float, sample.velocity)), effort=list(map(float, sample.effort))))
            everything = np.arange(len(self.joints))
            self.state_pub.publish(_controller_state(header, self.joints, everything, desired, actual, effort,
                                                     error))
            for ctl in self.controllers:
                if ctl.state_pub is not None:
                    ctl.state_pub.publish(_controller_state(header, ctl.joints, ctl.index, desired, actual,
                                                            effort, error))
        for handle, ctl in goals or ():
            if isinstance(ctl, TrajectoryController) and handle.is_active:
                i = ctl.index
                handle.publish_feedback(FollowJointTrajectory.Feedback(
                    header=header, joint_names=ctl.joints,
                    desired=trajectory_point(*desired[:, i]),
                    actual=trajectory_point(*actual[:, i], effort[i]),
                    error=trajectory_point(*error[:, i])))
            elif isinstance(ctl, Gripper) and handle.is_active:
                handle.publish_feedback(GripperCommand.Feedback(
                    position=float(actual[0, ctl.index]), effort=float(effort[ctl.index])))

    def _state_templates(self):
        """The :class:`TemplatePublishers` of /joint_states and each controller state, built once per joint
        list; their doubles are gathered from a tick's source (``template_publishers``: desired, actual,
        effort, error).  None: publish messages."""
        if self._templates is not None and self._templates[0] is self.joints:   # replaced, never edited
            return self._templates[2]
        key = tuple(self.joints)
        n, built = len(key), []
        everything = np.arange(n)
        try:
            js_gather = np.concatenate([3 * n + everything, 4 * n + everything, 6 * n + everything])
            built.append((self.joint_state_pub, CdrTemplate(lambda slot, stamp: JointState(
                header=Header(stamp=stamp()), name=list(key), position=slot(n), velocity=slot(n),
                effort=slot(n))), js_gather))
            states = [(self.state_pub, key, everything)]
            states += [(c.state_pub, c.joints, c.index) for c in self.controllers if c.state_pub is not None]
            for publisher, joints, index in states:
                built.append((publisher, *_controller_state_template(joints, index, n)))
            publishers = TemplatePublishers(built)
        except TemplateUnavailable:
            publishers = None
        self._templates = (self.joints, key, publishers)
        return publishers

    def on_callback_error(self, where: str, exc: BaseException) -> None:
        """Safe state after a callback raised: no motion (goals aborted, modules halted), ERROR on
        /diagnostics."""
        with self.lock:
            self.internal_error = f"{where} raised {type(exc).__name__}: {exc}"
            if self.control is not None:
                self._end_goals(f"controller halted after an internal error ({self.internal_error})")
            if self.hardware is not None:
                try:
                    self.hardware.halt()
                except Exception as halt_error:  # e.g. the bus is gone: the drives' own timeouts stop them
                    self.get_logger().error(f"halt after the internal error failed: {_reason(halt_error)}")
        self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        with self.lock:
            states = []
            if self.hardware is None and self.internal_error is None and not self.refusals:
                return
            try:
                states = self.hardware.status() if self.hardware is not None else []
            except Exception as exc:  # status itself needs the bus
                states, self.bus_error = [], self.bus_error or _reason(exc)
            sample = self.control.sample if self.control else None
            bus_error, internal_error = self.bus_error, self.internal_error
            refusals = dict(self.refusals)
            for source in self.refusals_once:
                self.refusals.pop(source, None)
            self.refusals_once.clear()
        name = self.get_fully_qualified_name()
        msg = DiagnosticArray(header=Header(stamp=self.get_clock().now().to_msg()))
        for source, reason in refusals.items():
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.WARN, name=f"{name}: {source}",
                                               message=reason[:500]))
        if internal_error is not None:
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{name}: controller",
                                               message=f"halted after an internal error: {internal_error}; "
                                                       "call ~/recover"))
        if bus_error is not None:
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{name}: bus",
                                               message=f"hardware communication lost: {bus_error}"))
        for i, s in enumerate(states):
            level = {ModuleState.FAULT: DiagnosticStatus.ERROR, ModuleState.OFFLINE: DiagnosticStatus.STALE,
                     ModuleState.DISABLED: DiagnosticStatus.WARN}.get(s.state, DiagnosticStatus.OK)
            values = {"state": s.state.value, "brake": "engaged" if s.brake else "released",
                      "fault": s.fault.value if s.fault else "none", "error_code": f"0x{s.error_code:04X}"}
            if sample is not None:
                values.update(position=f"{sample.position[i]:.6f}", velocity=f"{sample.velocity[i]:.6f}")
            values.update(s.details)
            msg.status.append(DiagnosticStatus(
                level=level, name=f"{name}: {s.joint}", message=s.message,
                hardware_id=s.hardware_id,
                values=[KeyValue(key=k, value=str(v)) for k, v in values.items()]))
        self.diagnostics_pub.publish(msg)

    def destroy_node(self):
        if not hasattr(self, "_preparation"):    # a constructor that failed (a refused start-up parameter)
            return super().destroy_node()
        self.stop_thread_timers()                # before the lock: a tick may be waiting for it
        if getattr(self, "objects_worker", None) is not None:
            self.objects_worker.stop()
        self._preparation.shutdown(wait=True, cancel_futures=True)
        with self.lock:
            if self.control is not None:
                self._end_goals("controller shutting down")
            for server in [c.server for c in self.controllers] + [g.server for g in self.grippers]:
                if server is not None:
                    server.destroy()
            if self.hardware is not None:
                try:
                    self.hardware.close()
                except Exception as exc:  # closing must not prevent shutdown
                    self.get_logger().warning(f"closing the hardware: {exc}")
        destroy_actions(self)
        return super().destroy_node()


def _controller_state(header, joints, index, desired, actual, effort, error):
    """JointTrajectoryControllerState of the joints ``index``: reference (desired), feedback (measured, with
    effort), error (reference - feedback); output is the position command, the reference."""
    return JointTrajectoryControllerState(
        header=header, joint_names=list(joints), reference=trajectory_point(*desired[:, index]),
        feedback=trajectory_point(*actual[:, index], effort[index]), error=trajectory_point(*error[:, index]),
        output=trajectory_point(desired[0, index]), speed_scaling_factor=1.0)


def _controller_state_template(joints, index, n: int):
    """(CdrTemplate, gather) of :func:`_controller_state` for the joints ``index`` of ``n`` (see
    ``template_publishers`` for the source layout)."""
    gather: list[int] = []

    def build(slot, stamp):
        def take(offsets):
            gather.extend(offsets)
            return slot(len(offsets))

        def rows(base):
            return [take([base + d * n + int(i) for i in index]) for d in range(3)]
        reference, feedback = rows(0), rows(3 * n)
        effort = take([6 * n + int(i) for i in index])
        error = rows(7 * n)
        output = take([int(i) for i in index])
        return JointTrajectoryControllerState(
            header=Header(stamp=stamp()), joint_names=list(joints), reference=trajectory_point(*reference),
            feedback=trajectory_point(*feedback, effort), error=trajectory_point(*error),
            output=trajectory_point(output), speed_scaling_factor=1.0)
    template = CdrTemplate(build)
    return template, np.array(gather, dtype=np.int64)


def _not_operational(states) -> str:
    """What keeps the modules from moving and what the operator must call, or '' when they can move."""
    def joints(state):
        return ", ".join(s.joint for s in states if s.state is state)
    faulted = [s for s in states if s.state is ModuleState.FAULT]
    if faulted:
        return (f"modules faulted ({'; '.join(f'{s.joint}: {s.message}' for s in faulted)}): call ~/recover")
    if any(s.state is ModuleState.OFFLINE for s in states):
        return f"modules not open ({joints(ModuleState.OFFLINE)}): call ~/init"
    if any(s.state is ModuleState.DISABLED for s in states):
        return f"modules disabled, brakes engaged ({joints(ModuleState.DISABLED)}): call ~/enable true"
    return ""


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, (Rejected, HardwareError)) else f"{type(exc).__name__}: {exc}"


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(ControllerNode, args)


if __name__ == "__main__":
    sys.exit(main())
