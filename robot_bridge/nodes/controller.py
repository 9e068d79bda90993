"""controller_node: carries joint commands to Schunk-style modules (simulated or CiA 402 over CAN).

Topics, services and trajectory rules follow ros2_control's joint_trajectory_controller and Schunk's
drivers.  ``~/state`` is a ``trajectory_msgs/JointTrajectory`` standing in for control_msgs'
JointTrajectoryControllerState (not available here): ``points`` are always exactly
``[reference, feedback, error]`` -- desired, actual and desired minus actual positions /
velocities / accelerations (feedback also carries effort); ``time_from_start`` of each is the time
into the active trajectory (0 when none).
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, Header
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from .. import hardware as hw
from ..hardware.base import Hardware, HardwareError, JointLimits, ModuleState
from ..hardware.trajectory import Trajectory
from ..model import Robot
from ..ros import params
from ..ros.conversions import seconds, trajectory_point
from ..ros.guard import ContainedNode
from ..ros.params import Param

RATE = (0.1, 10000.0)          # Hz: accepted range of the loop and publishing rates
# The one parameter schema (names, defaults, descriptions, constraints); read-only where a change needs a
# restart (the hardware and the joint set are built at start-up).
PARAMETERS = params.schema(
    Param("description_file", "", "Robot file read with robot_bridge.formats.load (unused when a Robot is "
                                  "given)", read_only=True),
    Param("search_path", params.STRING_ARRAY, "Directories searched for included files", read_only=True),
    Param("hardware", "sim", "Modules: 'sim' (simulated) or 'canopen' (CiA 402 drives)", choices=hw.KINDS,
          read_only=True),
    Param("joints", params.STRING_ARRAY, "Joints driven, in command order (default: the description's "
                                         "active 1-DOF joints)", read_only=True,
          rule=lambda v: "duplicate joint names" if len(set(v)) != len(v) else None,
          rule_text="distinct joints of the description"),
    Param("state_rate", 50.0, "Hz of /joint_states and ~/state", range=RATE),
    Param("control_rate", 100.0, "Hz of the control loop (trajectory sampling, hardware read/write)",
          range=RATE),
    Param("diagnostics_rate", 2.0, "Hz of /diagnostics (also published on every module state change)",
          range=RATE),
    Param("allow_partial_joints_goal", False, "Accept trajectories naming a subset of the joints (the others "
                                              "hold their position)"),
    Param("auto_init", True, "Open and enable the hardware at start-up (otherwise call ~/init)",
          read_only=True),
    Param("default_velocity", 1.0, "Velocity limit (rad/s or m/s) for joints whose description has none",
          range=(1e-6, 1e6), read_only=True),
    Param("default_acceleration", 2.0, "Acceleration limit for joints whose description has none",
          range=(1e-6, 1e6), read_only=True),
    Param("sim.seed", 0, "Seed of the simulation's random generator (faults, noise)", range=(0, 2**31 - 1),
          read_only=True),
    Param("sim.fault_rate", 0.0, "Random faults per module and second (0: none)", range=(0.0, 1000.0)),
    Param("sim.noise", 0.0, "Standard deviation of the simulated position measurement noise",
          range=(0.0, 1.0)),
    Param("canopen.interface", "socketcan", "python-can interface (socketcan, pcan, virtual, ...)",
          read_only=True),
    Param("canopen.channel", "can0", "python-can channel", read_only=True),
    Param("canopen.bitrate", 500000, "CAN bit rate", range=(10000, 1000000), read_only=True),
    Param("canopen.node_ids", params.INTEGER_ARRAY, "CANopen node id per joint (default 1, 2, ...)",
          range=(1, 127), read_only=True),
    Param("canopen.eds", "", "Object dictionary of the drives (default: config/cia402_drive.eds)",
          read_only=True),
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


class Rejected(ValueError):
    """A command refused, with the reason given to the caller."""


class ControllerNode(ContainedNode):
    def __init__(self, robot: Robot | None = None, hardware: Hardware | None = None, **kwargs):
        super().__init__("controller_node", **kwargs)
        self.lock = threading.RLock()          # hardware access: executor callbacks and tests
        self.hardware: Hardware | None = hardware
        self.timers_by_rate = {}
        self.params = params.NodeParameters(self, PARAMETERS, apply=self._on_parameters_set)
        self.robot = robot
        self.joints: list[str] = list(hardware.joint_names) if hardware else []
        self.limits: list[JointLimits] = list(hardware.limits) if hardware else []
        self.trajectory: Trajectory | None = None
        self.hold: np.ndarray | None = None    # position target while no trajectory runs
        self.sample = None
        self.sample_stamp = None
        self.last_states: list | None = None
        self.fault_reported = False
        self.bus_error: str | None = None      # hardware communication failure, until ~/recover
        self.internal_error: str | None = None  # a callback raised: halted, until ~/recover

        self.joint_state_pub = self.create_publisher(JointState, "/joint_states", 10)
        self.state_pub = self.create_publisher(JointTrajectory, "~/state", 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory, 10)
        self.create_subscription(Float64MultiArray, "~/commands", self._on_commands, 10)
        self.create_service(Trigger, "~/init", self._srv(self.init))
        self.create_service(Trigger, "~/halt", self._srv(self.halt))
        self.create_service(Trigger, "~/recover", self._srv(self.recover))
        self.create_service(Trigger, "~/home", self._srv(self.home))
        self.create_service(SetBool, "~/enable", self._on_enable)

        try:
            if self.hardware is None:
                self._setup()
            if self._param("auto_init"):
                self.get_logger().info(self.init())
        except Exception as exc:  # bad description / bus: keep the node up, report, allow ~/init
            self.get_logger().error(f"controller not ready: {type(exc).__name__}: {exc}")
        for rate in TIMERS:
            self._start_timer(rate)

    # -- set-up -------------------------------------------------------------------
    def _param(self, name: str):
        return self.params.get(name)

    def _start_timer(self, rate_parameter: str) -> None:
        old = self.timers_by_rate.pop(rate_parameter, None)
        if old is not None:
            self.destroy_timer(old)
        callback = getattr(self, TIMERS[rate_parameter])
        self.timers_by_rate[rate_parameter] = self.create_timer(1.0 / self._param(rate_parameter), callback)

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
            from ..formats import load
            path = self._param("description_file")
            if not path:
                raise ValueError("parameter description_file is empty and no Robot was given")
            self.robot = load(path, search_path=list(self._param("search_path")) or None)
        robot = self.robot
        joints = list(self._param("joints")) or [j.name for j in robot.active_joints if j.dof == 1]
        skipped = [j.name for j in robot.active_joints if j.dof != 1 and j.name not in joints]
        if skipped:
            self.get_logger().warning(f"multi-DOF joints not driven: {', '.join(skipped)}")
        if not joints:
            raise ValueError(f"robot {robot.name!r} has no active 1-DOF joints to drive")
        limits = hw.limits_from_robot(robot, joints, self._param("default_velocity"),
                                      self._param("default_acceleration"))
        for warning in robot.warnings:
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
            self._read()
            self.hold = self.sample.position.copy()
            return f"{len(self.joints)} modules open and enabled ({self._param('hardware')})"

    def halt(self) -> str:
        with self.lock:
            self._ready().halt()
            self.trajectory = self.hold = None       # reference follows the stopping modules
            return "halting"

    def recover(self) -> str:
        with self.lock:
            self._ready().recover()
            self._read()
            self.trajectory, self.hold = None, self.sample.position.copy()
            self.fault_reported = False
            self.bus_error = self.internal_error = None
            return "faults cleared, modules enabled"

    def home(self) -> str:
        with self.lock:
            target = self.home_position()
            self._command(target)
            return "moving to " + ", ".join(f"{j}={p:.4f}" for j, p in zip(self.joints, target))

    def home_position(self) -> np.ndarray:
        """SRDF group state 'home' where it names a joint, else the description's initial value."""
        self._ready()
        state = self.robot.semantics.state("home") if self.robot and self.robot.semantics else None
        values = state.values if state else {}
        return np.array([float(np.clip(values[j][0] if j in values else self.robot.joints[j].initial[0],
                                       lim.lower, lim.upper)) for j, lim in zip(self.joints, self.limits)])

    def _on_enable(self, request, response):
        try:
            with self.lock:
                self._ready().enable(request.data)
                self.trajectory = None
                if request.data:
                    self._read()
                    self.hold = self.sample.position.copy()
            response.success, response.message = True, "enabled" if request.data else "disabled (brakes in)"
        except Exception as exc:  # a service never takes the node down
            response.success, response.message = False, _reason(exc)
            self.get_logger().warning(response.message)
        return response

    # -- commands ---------------------------------------------------------------------------
    def _check_operational(self) -> Hardware:
        hardware = self._ready()
        if self.internal_error is not None:
            raise Rejected(f"controller halted after an internal error ({self.internal_error}); "
                           "call ~/recover")
        if self.bus_error is not None:
            raise Rejected(f"hardware communication lost ({self.bus_error}); call ~/recover")
        for s in hardware.status():
            if s.state in (ModuleState.FAULT, ModuleState.DISABLED, ModuleState.OFFLINE):
                what = "faulted" if s.state is ModuleState.FAULT else s.state.value
                raise Rejected(f"{s.joint} is {what} ({s.message}); call ~/recover or ~/init")
        return hardware

    def _command(self, positions: np.ndarray) -> None:
        hardware = self._check_operational()
        for j, p, lim in zip(self.joints, positions, self.limits):
            if not lim.contains(p):
                raise Rejected(f"{j}: target {p:.6f} outside limits [{lim.lower}, {lim.upper}]")
        hardware.command_position(positions)
        self.trajectory, self.hold = None, np.asarray(positions, dtype=float).copy()

    def _on_commands(self, msg: Float64MultiArray) -> None:
        try:
            with self.lock:
                if len(msg.data) != len(self.joints):
                    raise Rejected(f"{len(msg.data)} values for {len(self.joints)} joints "
                                   f"({', '.join(self.joints)})")
                if not all(math.isfinite(x) for x in msg.data):
                    raise Rejected("non-finite value")
                self._command(np.array(msg.data, dtype=float))
        except (Rejected, HardwareError) as exc:
            self.get_logger().warning(f"~/commands rejected: {exc}", throttle_duration_sec=WARN_THROTTLE)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            with self.lock:
                self._check_operational()
                self.trajectory = self.build_trajectory(msg, self._now())
                self.hold = None
        except (Rejected, HardwareError) as exc:
            self.get_logger().warning(f"trajectory rejected: {exc}")

    def build_trajectory(self, msg: JointTrajectory, now: float) -> Trajectory:
        """A Trajectory over all driven joints, following joint_trajectory_controller's rules."""
        names = list(msg.joint_names)
        if not names:
            raise Rejected("empty joint_names")
        if len(set(names)) != len(names):
            raise Rejected("duplicate joint names")
        unknown = [n for n in names if n not in self.joints]
        if unknown:
            raise Rejected(f"unknown joints {unknown}; this controller drives {self.joints}")
        if len(names) != len(self.joints) and not self._param("allow_partial_joints_goal"):
            raise Rejected(f"names {len(names)} of {len(self.joints)} joints and allow_partial_joints_goal "
                           "is false")
        if not msg.points:
            raise Rejected("no points")
        n = len(names)
        has_v, has_a = bool(msg.points[0].velocities), bool(msg.points[0].accelerations)
        for i, pt in enumerate(msg.points):
            if len(pt.positions) != n:
                raise Rejected(f"point {i}: {len(pt.positions)} positions for {n} joints")
            for field, given in (("velocities", has_v), ("accelerations", has_a)):
                size = len(getattr(pt, field))
                if size != (n if given else 0):
                    raise Rejected(f"point {i}: {size} {field}; every point must give {n if given else 0}")
        if has_a and not has_v:
            raise Rejected("accelerations given without velocities")
        tfs = np.array([seconds(pt.time_from_start) for pt in msg.points])
        if tfs[0] < 0.0 or np.any(np.diff(tfs) <= 0.0):
            raise Rejected("time_from_start must be non-negative and strictly increasing")
        stamp = seconds(msg.header.stamp)
        start = stamp if stamp > 0.0 else now
        if start + tfs[-1] < now:
            raise Rejected(f"trajectory ended {now - start - tfs[-1]:.3f} s in the past")
        index = [self.joints.index(name) for name in names]
        for i, pt in enumerate(msg.points):
            for k, p in zip(index, pt.positions):
                if not self.limits[k].contains(p):
                    raise Rejected(f"point {i}: {self.joints[k]}={p:.6f} outside limits "
                                   f"[{self.limits[k].lower}, {self.limits[k].upper}]")
        ref_p, ref_v, _ = self.reference()
        count = len(self.joints)
        pos = np.tile(ref_p, (len(tfs), 1))               # joints not named hold their reference
        vel = np.zeros((len(tfs), count)) if has_v else None
        acc = np.zeros((len(tfs), count)) if has_a else None
        for i, pt in enumerate(msg.points):
            pos[i, index] = pt.positions
            if has_v:
                vel[i, index] = pt.velocities
            if has_a:
                acc[i, index] = pt.accelerations
        times = start + tfs
        if times[0] > now:                                 # start from the current reference
            times = np.concatenate([[now], times])
            pos = np.vstack([ref_p, pos])
            vel = np.vstack([ref_v, vel]) if has_v else None
            acc = np.vstack([np.zeros(count), acc]) if has_a else None
        return Trajectory(times, pos, vel, acc)

    # -- control loop ------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _read(self) -> None:
        sample = self.hardware.read()
        if len(sample.position) != len(self.joints):
            raise HardwareError(f"hardware read {len(sample.position)} positions for {len(self.joints)} "
                                "joints")
        self.sample = sample
        self.sample_stamp = self.get_clock().now()

    def reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired positions, velocities, accelerations now."""
        count = len(self.joints)
        if self.trajectory is not None:
            return self.trajectory.sample(self._now())
        if self.hold is not None:
            return self.hold.copy(), np.zeros(count), np.zeros(count)
        if self.sample is not None:
            return np.asarray(self.sample.position, dtype=float), np.zeros(count), np.zeros(count)
        return np.zeros(count), np.zeros(count), np.zeros(count)

    def _control(self) -> None:
        with self.lock:
            if self.hardware is None or self.hardware.status()[0].state is ModuleState.OFFLINE:
                return
            try:
                self._read()
                states = self.hardware.status()
                faulted = [s for s in states if s.state is ModuleState.FAULT]
                if faulted and not self.fault_reported:
                    self.fault_reported = True
                    self.trajectory = self.hold = None
                    self.hardware.halt()                  # the healthy modules stop too
                    self.get_logger().error("fault: " + "; ".join(f"{s.joint}: {s.message}"
                                                                  for s in faulted))
                elif self.trajectory is not None and not faulted:
                    now = self._now()        # one instant: past the end, the sample is the final point
                    p, v, _ = self.trajectory.sample(now)
                    lower = [lim.lower for lim in self.limits]
                    upper = [lim.upper for lim in self.limits]
                    self.hardware.command_position(np.clip(p, lower, upper), v)
                    if now >= self.trajectory.end_time:
                        self.trajectory, self.hold = None, p
                if self.last_states is None or [(s.state, s.fault) for s in states] != \
                        [(s.state, s.fault) for s in self.last_states]:
                    self.last_states = states
                    self._publish_diagnostics()
            except Exception as exc:  # bus errors etc.: halt, report, keep looping until ~/recover
                self.get_logger().error(f"hardware: {_reason(exc)}", throttle_duration_sec=WARN_THROTTLE)
                if self.bus_error is None:
                    self.bus_error = _reason(exc)
                    self.trajectory = self.hold = None
                    try:
                        self.hardware.halt()
                    except Exception:  # the bus may be gone: the drives' own timeouts stop them
                        pass
                    self._publish_diagnostics()

    # -- publishing --------------------------------------------------------------------------------
    def _publish_state(self) -> None:
        with self.lock:
            if self.sample is None:
                return
            sample, stamp = self.sample, self.sample_stamp.to_msg()
            ref_p, ref_v, ref_a = self.reference()
            elapsed = max(0.0, self._now() - self.trajectory.start_time) if self.trajectory else 0.0
        self.joint_state_pub.publish(JointState(
            header=_header(stamp), name=self.joints, position=list(map(float, sample.position)),
            velocity=list(map(float, sample.velocity)), effort=list(map(float, sample.effort))))
        actual = np.array([sample.position, sample.velocity, sample.acceleration], dtype=float)
        self.state_pub.publish(JointTrajectory(header=_header(stamp), joint_names=self.joints, points=[
            trajectory_point(ref_p, ref_v, ref_a, time_from_start=elapsed),
            trajectory_point(actual[0], actual[1], actual[2], sample.effort, elapsed),
            trajectory_point(ref_p - actual[0], ref_v - actual[1], ref_a - actual[2],
                             time_from_start=elapsed),
        ]))

    def on_callback_error(self, where: str, exc: BaseException) -> None:
        """Safe state after a callback raised: no motion (modules halted), ERROR on /diagnostics."""
        with self.lock:
            self.internal_error = f"{where} raised {type(exc).__name__}: {exc}"
            self.trajectory = self.hold = None
            if self.hardware is not None:
                try:
                    self.hardware.halt()
                except Exception as halt_error:  # e.g. the bus is gone: the drives' own timeouts stop them
                    self.get_logger().error(f"halt after the internal error failed: {_reason(halt_error)}")
        self._publish_diagnostics()

    def _publish_diagnostics(self) -> None:
        with self.lock:
            states = []
            if self.hardware is None and self.internal_error is None:
                return
            try:
                states = self.hardware.status() if self.hardware is not None else []
            except Exception as exc:  # status itself needs the bus
                states, self.bus_error = [], self.bus_error or _reason(exc)
            sample, bus_error, internal_error = self.sample, self.bus_error, self.internal_error
        name = self.get_fully_qualified_name()
        msg = DiagnosticArray(header=_header(self.get_clock().now().to_msg()))
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
        with self.lock:
            if self.hardware is not None:
                try:
                    self.hardware.close()
                except Exception as exc:  # closing must not prevent shutdown
                    self.get_logger().warning(f"closing the hardware: {exc}")
        return super().destroy_node()


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, (Rejected, HardwareError)) else f"{type(exc).__name__}: {exc}"


def _header(stamp) -> Header:
    return Header(stamp=stamp)


def main(args=None) -> int:
    from ..ros.runner import spin_node

    return spin_node(ControllerNode, args)


if __name__ == "__main__":
    sys.exit(main())
