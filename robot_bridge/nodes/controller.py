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

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTrajectoryControllerState
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import ParameterEvent
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action import server as action_server
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from .. import hardware as hw
from ..control import (MAX_POINTS, ErrorCode, GoalRejected, GoalState, GoalTracker, GripperTracker,
                       JointControl, Outcome, Tolerances, check_point_count, check_start,
                       move_trajectory, prepare_trajectory, rate_excess, resolve_tolerances)
from ..control.groups import TrajectoryWire, gripper_prefix, wiring
from ..control.operation import hardware_options, home_position, not_operational
from ..hardware.base import Hardware, HardwareError, ModuleState
from ..model import Robot
from ..ros import params
from ..ros.actions import destroy_actions
from ..ros.controller_state import (ActiveGoal, ControllerPublishing, Gripper, Rejected, TrajectoryController,
                                    _controller_state, _controller_state_template, _reason)
from ..ros.controller_grasp import SimGrasp
from ..ros.controller_follow import FOLLOWED, FollowDescription
from ..ros.conversions import joint_tolerances, seconds, trajectory_command
from ..ros.guard import ContainedNode
from ..ros.params import Param
from ..ros.stamps import MonotonicStamper
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
    Param("robot_pose", params.DOUBLE_ARRAY, "Sim: where the robot stands in the world frame, [x, y, z, "
                                             "roll, pitch, yaw] (m, rad), as the description node's: the "
                                             "fingers close on the world's bodies there; empty: "
                                             "description_file's placement, else the origin",
          lengths=(0, 6), read_only=True),
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
TIMERS = {"control_rate": "_control", "state_rate": "_publish_state",
          "diagnostics_rate": "_publish_diagnostics"}
THREAD_TIMERS = {"control_rate", "state_rate"}     # hot: on the node's timer thread, not the executor
_GoalEvent = getattr(action_server, "GoalEvent", None) or action_server._rclpy.GoalEvent
__all__ = ["ActiveGoal", "ControllerNode", "Gripper", "PARAMETERS", "Rejected", "TrajectoryController",
           "_controller_state", "_controller_state_template", "main"]


class ControllerNode(ControllerPublishing, SimGrasp, FollowDescription, ContainedNode):
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
            self.init_error = f"controller not ready: {_reason(exc)}"
            self.get_logger().error(self.init_error)
        for rate in TIMERS:
            self._start_timer(rate)

    def readiness(self):
        """robot-bridge run's ready line: ready once a joint state is published; hardware that did not
        initialize is settled (``~/init`` may bring it up later)."""
        from ..ros.readiness import Readiness

        if self.states_published:
            return None
        if getattr(self, "init_error", None):       # logged once above with the hardware's error
            return Readiness("its hardware did not initialize (the error logged above; ~/init retries)", True)
        return Readiness("no joint state published yet")

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
        elif self.robot.semantics is None and self.description["srdf_file"]:
            self.robot = self._with_srdf(self.robot, self.description["srdf_file"])
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
        options = hardware_options(kind, self._param, joints)
        self.hardware = hw.create(kind, joints, limits, initial, **options)
        self.joints, self.limits = joints, limits
        self.control = self._joint_control(self.hardware, limits)

    @staticmethod
    def _with_srdf(robot: Robot, path: str) -> Robot:
        """A robot given without its SRDF (robot-bridge run reads the robot file once for every node) with
        srdf_file attached: the wiring comes from its groups and end effectors.  A copy: the other nodes'
        robot is left as it is."""
        import copy

        from ..formats import srdf

        robot = copy.copy(robot)
        robot.warnings = list(robot.warnings)
        return srdf.attach_semantics(robot, srdf.read_srdf(path, robot))

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
                return f"nothing moving to halt: {not_operational(states)}"
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
        return home_position(self.robot, self.joints, self.limits)

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
        reason = not_operational(hardware.status())
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
                if self.control.sample is not None:
                    check_start(trajectory, now, self.control.sample.position[ctl.index], tolerances,
                                ctl.joints)
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

    def destroy_node(self):
        if not hasattr(self, "_preparation"):    # a constructor that failed (a refused start-up parameter)
            return super().destroy_node()
        templates = self._templates[2] if self._templates else None
        if templates is not None:
            templates.hold_for_test()            # test hook (template_publishers.HOLD_ENV), off by default
        self.stop_thread_timers()                # before the lock: a tick may be waiting for it
        if templates is not None:                # no publish through the raw rcl handles from here on
            templates.close()
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


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(ControllerNode, args)


if __name__ == "__main__":
    sys.exit(main())
