"""joint_trajectory_controller's goal rules, without ROS.

- :func:`prepare_trajectory`: a trajectory command (joint names, at most ``max_points`` points, stamp)
  checked and in arrays, or refused with the ``FollowJointTrajectory`` error code JTC uses
  (:class:`GoalRejected`); :meth:`PreparedTrajectory.start` places it in time as a
  :class:`~robot_bridge.hardware.trajectory.Trajectory` over a controller's joints (:func:`build_trajectory`:
  both at once).
- :func:`resolve_tolerances`: a goal's ``path_tolerance`` / ``goal_tolerance`` / ``goal_time_tolerance``
  over the controller's defaults (0 keeps the default, a negative value erases it).
- :class:`GoalTracker`: one goal's outcome from desired and measured states: success means arrival through
  the corridor (every state checked within the path tolerance, after the end too, where the path is its
  final point; the final state within the goal tolerance by the end plus ``goal_time``); every outcome
  names the worst position deviation (joint, value).
- :func:`stop_trajectory`: the constant-deceleration stop (within every joint's limit) a cancel runs.
- :func:`move_trajectory` and :class:`GripperTracker`: a GripperCommand goal (gripper_action_controller's
  rules: reached within ``goal_tolerance``, stalled when not moving for ``stall_timeout`` short of it).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..hardware.base import JointLimits
from ..hardware.trajectory import Trajectory


class ErrorCode(enum.IntEnum):
    """control_msgs/action/FollowJointTrajectory Result codes."""

    SUCCESSFUL = 0
    INVALID_GOAL = -1
    INVALID_JOINTS = -2
    OLD_HEADER_TIMESTAMP = -3
    PATH_TOLERANCE_VIOLATED = -4
    GOAL_TOLERANCE_VIOLATED = -5


class GoalRejected(ValueError):
    """A trajectory refused, with its error code and the reason."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class TrajectoryPoint:
    positions: Sequence[float]
    velocities: Sequence[float] = ()
    accelerations: Sequence[float] = ()
    time_from_start: float = 0.0


@dataclass
class TrajectoryCommand:
    """A trajectory_msgs/JointTrajectory as plain values; ``stamp`` 0 means "start now"."""

    joint_names: list[str]
    points: list[TrajectoryPoint]
    stamp: float = 0.0


MAX_POINTS = 10_000            # points a goal may have by default (parameter max_trajectory_points)


def check_point_count(count: int, limit: int) -> None:
    """Refuse a trajectory of more than ``limit`` points before anything is converted (INVALID_GOAL)."""
    if count > limit:
        raise GoalRejected(ErrorCode.INVALID_GOAL, f"{count} points, more than the {limit} a goal may have "
                                                   "(max_trajectory_points)")


@dataclass
class PreparedTrajectory:
    """A trajectory command checked and in arrays over the joints it names, its start not yet fixed: the
    slow part of accepting a goal, done off the control thread; :meth:`start` then places it in time
    (O(points) in numpy, under the control lock)."""

    joints: int                             # the controller's joint count
    index: list[int]                        # of each named joint among them
    tfs: np.ndarray                         # time_from_start of each point
    positions: np.ndarray                   # (points, named joints)
    velocities: np.ndarray | None
    accelerations: np.ndarray | None
    stamp: float                            # header.stamp; 0: start when taken (start's ``now``)

    def start(self, reference: tuple[np.ndarray, np.ndarray], now: float) -> Trajectory:
        """The Trajectory over every joint (joints not named hold ``reference``), starting from the current
        reference when its first point is in the future.  A stamp of 0 starts it at ``now``, the moment the
        control loop takes it, as joint_trajectory_controller does (however long validation took); a stamped
        trajectory already ended is refused (OLD_HEADER_TIMESTAMP)."""
        tfs = self.tfs
        start = self.stamp if self.stamp > 0.0 else now
        if start + tfs[-1] < now:
            raise GoalRejected(ErrorCode.OLD_HEADER_TIMESTAMP,
                               f"trajectory ended {now - start - tfs[-1]:.3f} s in the past")
        ref_p, ref_v = (np.asarray(x, dtype=float) for x in reference)
        count, index = self.joints, self.index
        pos = np.tile(ref_p, (len(tfs), 1))                  # joints not named hold their reference
        pos[:, index] = self.positions
        vel = acc = None
        if self.velocities is not None:
            vel = np.zeros((len(tfs), count))
            vel[:, index] = self.velocities
        if self.accelerations is not None:
            acc = np.zeros((len(tfs), count))
            acc[:, index] = self.accelerations
        times = start + tfs
        if times[0] > now:                                    # start from the current reference
            times = np.concatenate([[now], times])
            pos = np.vstack([ref_p, pos])
            vel = np.vstack([ref_v, vel]) if vel is not None else None
            acc = np.vstack([np.zeros(count), acc]) if acc is not None else None
        return Trajectory(times, pos, vel, acc)


def prepare_trajectory(command: TrajectoryCommand, joints: Sequence[str], limits: Sequence[JointLimits],
                       allow_partial: bool, max_points: int = MAX_POINTS) -> PreparedTrajectory:
    """A trajectory command checked (joint names, point count, sizes, finite values, times, position
    limits) and in arrays.  Raises :class:`GoalRejected`."""
    joints = list(joints)
    names = list(command.joint_names)
    if not names:
        raise GoalRejected(ErrorCode.INVALID_JOINTS, "empty joint_names")
    if len(set(names)) != len(names):
        raise GoalRejected(ErrorCode.INVALID_JOINTS, f"duplicate joint names in {names}")
    unknown = [n for n in names if n not in joints]
    if unknown:
        raise GoalRejected(ErrorCode.INVALID_JOINTS,
                           f"unknown joints {unknown}; this controller drives {joints}")
    if len(names) != len(joints) and not allow_partial:
        missing = [j for j in joints if j not in names]
        raise GoalRejected(ErrorCode.INVALID_JOINTS,
                           f"joints {missing} missing and allow_partial_joints_goal is false")
    points = command.points
    check_point_count(len(points), max_points)
    if not points:
        raise GoalRejected(ErrorCode.INVALID_GOAL, "no points")
    n = len(names)
    has_v, has_a = bool(points[0].velocities), bool(points[0].accelerations)
    for i, pt in enumerate(points):
        if len(pt.positions) != n:
            raise GoalRejected(ErrorCode.INVALID_GOAL,
                               f"point {i}: {len(pt.positions)} positions for {n} joints")
        for name, given in (("velocities", has_v), ("accelerations", has_a)):
            size = len(getattr(pt, name))
            if size != (n if given else 0):
                raise GoalRejected(ErrorCode.INVALID_GOAL,
                                   f"point {i}: {size} {name}; every point must give {n if given else 0}")
    if has_a and not has_v:
        raise GoalRejected(ErrorCode.INVALID_GOAL, "accelerations given without velocities")
    tfs = np.array([pt.time_from_start for pt in points], dtype=float)
    pos = np.array([pt.positions for pt in points], dtype=float).reshape(len(points), n)
    vel = np.array([pt.velocities for pt in points], dtype=float).reshape(len(points), n) if has_v else None
    acc = np.array([pt.accelerations for pt in points], dtype=float).reshape(len(points), n) if has_a \
        else None
    finite = np.isfinite(tfs) & np.isfinite(pos).all(axis=1)
    for extra in (vel, acc):
        if extra is not None:
            finite &= np.isfinite(extra).all(axis=1)
    if not finite.all():
        raise GoalRejected(ErrorCode.INVALID_GOAL, f"point {int(np.argmin(finite))}: non-finite value")
    if tfs[0] < 0.0 or np.any(np.diff(tfs) <= 0.0):
        raise GoalRejected(ErrorCode.INVALID_GOAL,
                           "time_from_start must be non-negative and strictly increasing")
    index = [joints.index(name) for name in names]
    lower = np.array([limits[k].lower for k in index])
    upper = np.array([limits[k].upper for k in index])
    outside = (pos < lower) | (pos > upper)
    if outside.any():
        i, j = (int(x) for x in np.argwhere(outside)[0])
        k = index[j]
        raise GoalRejected(ErrorCode.INVALID_GOAL, f"point {i}: {joints[k]}={pos[i, j]:.6f} outside limits "
                                                   f"[{limits[k].lower}, {limits[k].upper}]")
    return PreparedTrajectory(len(joints), index, tfs, pos, vel, acc, float(command.stamp))


def build_trajectory(command: TrajectoryCommand, joints: Sequence[str], limits: Sequence[JointLimits],
                     reference: tuple[np.ndarray, np.ndarray], now: float, allow_partial: bool,
                     max_points: int = MAX_POINTS) -> Trajectory:
    """:func:`prepare_trajectory` and :meth:`PreparedTrajectory.start` at once (raises GoalRejected)."""
    return prepare_trajectory(command, joints, limits, allow_partial, max_points).start(reference, now)


RATE_TOLERANCE = 1e-3          # relative: sampling and rounding of a trajectory planned at the limit


def rate_excess(trajectory: Trajectory, joints: Sequence[str], limits: Sequence[JointLimits]) -> str | None:
    """What of a trajectory exceeds its joints' velocity / acceleration limits ("<joint> needs velocity 2,
    its limit is 1; ..."), or None.  Such a trajectory is accepted, not time-scaled: the modules move at
    their limits and lag behind it, and the path and goal tolerances judge the result (the caller warns
    once, naming the values, so the planner can be fixed)."""
    peak_v, peak_a = trajectory.peak_rates()
    excess = []
    for k, joint in enumerate(joints):
        for what, need, allowed in (("velocity", peak_v[k], limits[k].velocity),
                                    ("acceleration", peak_a[k], limits[k].acceleration)):
            if math.isfinite(allowed) and need > allowed * (1.0 + RATE_TOLERANCE):
                excess.append(f"{joint} needs {what} {need:.4g}, its limit is {allowed:.4g}")
    return "; ".join(excess) or None


COMPONENTS = ("position", "velocity", "acceleration")


@dataclass
class Tolerances:
    """Per joint (rows) and component (position, velocity, acceleration); 0 = not checked.
    ``goal_time``: seconds after the trajectory's end to be within ``goal`` (0 = no limit, as in JTC)."""

    path: np.ndarray
    goal: np.ndarray
    goal_time: float = 0.0

    @classmethod
    def uniform(cls, count: int, *, path_position: float = 0.0, goal_position: float = 0.0,
                stopped_velocity: float = 0.0, goal_time: float = 0.0) -> Tolerances:
        path = np.zeros((count, 3))
        path[:, 0] = path_position
        goal = np.zeros((count, 3))
        goal[:, 0], goal[:, 1] = goal_position, stopped_velocity
        return cls(path, goal, goal_time)


@dataclass
class JointTolerance:
    """control_msgs/JointTolerance as plain values."""

    name: str
    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0


def resolve_tolerances(defaults: Tolerances, joints: Sequence[str], path: Sequence[JointTolerance] = (),
                       goal: Sequence[JointTolerance] = (), goal_time: float = 0.0) -> Tolerances:
    """A goal's tolerances over the defaults: a value > 0 replaces the default, 0 keeps it, < 0 erases it
    (that component is not checked).  A joint the controller does not drive is refused (INVALID_JOINTS)."""
    out = Tolerances(defaults.path.copy(), defaults.goal.copy(), defaults.goal_time)
    joints = list(joints)
    for given, table, what in ((path, out.path, "path_tolerance"), (goal, out.goal, "goal_tolerance")):
        for tol in given:
            if tol.name not in joints:
                raise GoalRejected(ErrorCode.INVALID_JOINTS,
                                   f"{what} names {tol.name!r}, not driven by this controller ({joints})")
            row = joints.index(tol.name)
            for column, value in enumerate((tol.position, tol.velocity, tol.acceleration)):
                if not math.isfinite(value):
                    raise GoalRejected(ErrorCode.INVALID_GOAL, f"{what} of {tol.name!r}: non-finite value")
                if value > 0.0:
                    table[row, column] = value
                elif value < 0.0:
                    table[row, column] = 0.0
    if not math.isfinite(goal_time) or goal_time < 0.0:
        raise GoalRejected(ErrorCode.INVALID_GOAL, f"goal_time_tolerance {goal_time} must be >= 0")
    if goal_time > 0.0:
        out.goal_time = float(goal_time)
    return out


class GoalState(enum.Enum):
    SUCCEEDED = "succeeded"
    ABORTED = "aborted"
    CANCELED = "canceled"


@dataclass(frozen=True)
class Outcome:
    state: GoalState
    code: ErrorCode
    message: str
    reached_goal: bool = False             # GripperCommand result flags
    stalled: bool = False
    worst: tuple[str, float] | None = None  # FollowJointTrajectory: the largest |position error| seen


PREEMPTED = "Current goal cancelled due to new incoming action."      # joint_trajectory_controller's words


def _violations(error: np.ndarray, tolerance: np.ndarray, joints: Sequence[str]) -> list[str]:
    """'joint component error |e| > tol' for every checked component outside its tolerance."""
    out = []
    for row, column in zip(*np.nonzero((tolerance > 0.0) & (np.abs(error) > tolerance))):
        out.append(f"{joints[row]} {COMPONENTS[column]} error {error[row, column]:+.6f} "
                   f"exceeds {tolerance[row, column]:.6f}")
    return out


@dataclass
class GoalTracker:
    """Decides one goal's outcome each control step from desired and measured states of its joints.

    Stricter than joint_trajectory_controller in one way: the path tolerance's position component still
    holds after the trajectory's end, around its final point (an arm overshooting its goal by more than the
    corridor left it, even if it comes back within the goal tolerance)."""

    trajectory: Trajectory
    joints: list[str]
    tolerances: Tolerances
    final: np.ndarray = field(init=False)
    settling_since: float | None = field(init=False, default=None)
    deviation: np.ndarray = field(init=False)       # largest |position error| of each joint so far

    def __post_init__(self):
        self.final = self.trajectory.positions[-1].copy()
        self.deviation = np.zeros(len(self.joints))

    def worst(self) -> tuple[str, float]:
        k = int(np.argmax(self.deviation)) if len(self.joints) else 0
        return (self.joints[k], float(self.deviation[k])) if len(self.joints) else ("", 0.0)

    def _outcome(self, state: GoalState, code: ErrorCode, message: str) -> Outcome:
        joint, value = self.worst()
        return Outcome(state, code, f"{message} (worst deviation from the path: {joint} {value:.6f})",
                       worst=(joint, value))

    def check(self, now: float, desired: np.ndarray, actual: np.ndarray) -> Outcome | None:
        """``desired`` / ``actual``: (3, joints) positions, velocities, accelerations at ``now`` (the time
        the measured state was taken)."""
        end = self.trajectory.end_time
        error = (desired - actual).T
        np.maximum(self.deviation, np.abs(error[:, 0]), out=self.deviation)
        path = self.tolerances.path
        if now >= end:                              # the corridor ends at the final point: position only
            path = path.copy()
            path[:, 1:] = 0.0
        bad = _violations(error, path, self.joints)
        if bad:
            return self._outcome(GoalState.ABORTED, ErrorCode.PATH_TOLERANCE_VIOLATED,
                                 "path tolerance violated" + (" after the trajectory's end" if now >= end
                                                              else "") + ": " + "; ".join(bad))
        if now < end:
            return None
        target = np.vstack([self.final, np.zeros_like(self.final), np.zeros_like(self.final)])
        bad = _violations((target - actual).T, self.tolerances.goal, self.joints)
        if not bad:
            return self._outcome(GoalState.SUCCEEDED, ErrorCode.SUCCESSFUL, "goal reached")
        # goal_time counts from the end or, when the control loop first gets past the end later than that
        # (a loaded host), from that step: its sample predates the final setpoint, which it commands now
        if self.settling_since is None:
            self.settling_since = now
        late = now - end
        settling = now - max(end, self.settling_since)
        if self.tolerances.goal_time > 0.0 and settling > self.tolerances.goal_time:
            return self._outcome(GoalState.ABORTED, ErrorCode.GOAL_TOLERANCE_VIOLATED,
                                 f"not within goal tolerance {late:.3f} s after the trajectory's end "
                                 f"(goal_time_tolerance {self.tolerances.goal_time:.3f} s): "
                                 + "; ".join(bad))
        return None


def check_start(trajectory: Trajectory, now: float, measured: np.ndarray, tolerances: Tolerances,
                joints: Sequence[str]) -> None:
    """Refuse (INVALID_GOAL) a trajectory whose set-point at ``now`` is outside its path tolerance around the
    ``measured`` positions: its first control step would command that jump, and the goal would end at once
    with PATH_TOLERANCE_VIOLATED after moving the arm off any path that was checked (a plan from a stale
    state, or a trajectory meant for another arm)."""
    if not len(joints):
        return
    position = trajectory.sample(now)[0]
    bad = _violations(np.vstack([position - np.asarray(measured, dtype=float),
                                 np.zeros_like(position), np.zeros_like(position)]).T,
                      tolerances.path, joints)
    if bad:
        raise GoalRejected(ErrorCode.INVALID_GOAL, "the trajectory starts away from where the joints are, "
                                                   "outside its path tolerance: " + "; ".join(bad))


def stop_trajectory(position: np.ndarray, velocity: np.ndarray, limits: Sequence[JointLimits],
                    now: float) -> Trajectory:
    """From (position, velocity) to rest at constant deceleration, all joints stopping together, none
    decelerating faster than its acceleration limit; a cubic through (p, v) and (p + v T / 2, 0) is exactly
    that ramp.  At rest already: a one-point trajectory holding ``position``."""
    position = np.asarray(position, dtype=float)
    velocity = np.asarray(velocity, dtype=float)
    accel = np.array([lim.acceleration for lim in limits], dtype=float)
    duration = float(np.max(np.abs(velocity) / accel)) if velocity.size else 0.0
    if duration <= 1e-9:
        return Trajectory([now], position[None, :])
    end = position + velocity * duration / 2.0
    lower = np.array([lim.lower for lim in limits])
    upper = np.array([lim.upper for lim in limits])
    end = np.clip(end, lower, upper)
    return Trajectory([now, now + duration], np.vstack([position, end]),
                      np.vstack([velocity, np.zeros_like(velocity)]))


def move_trajectory(start: np.ndarray, target: np.ndarray, limits: Sequence[JointLimits],
                    now: float) -> Trajectory:
    """A rest-to-rest cubic from ``start`` to ``target``, as short as every joint's limits allow (a cubic over
    T peaks at 1.5 d / T in velocity and 6 d / T^2 in acceleration)."""
    start, target = np.asarray(start, dtype=float), np.asarray(target, dtype=float)
    distance = np.abs(target - start)
    velocity = np.array([lim.velocity for lim in limits])
    accel = np.array([lim.acceleration for lim in limits])
    duration = float(np.max(np.maximum(1.5 * distance / velocity, np.sqrt(6.0 * distance / accel))))
    if duration <= 1e-9:
        return Trajectory([now], target[None, :])
    zero = np.zeros_like(start)
    return Trajectory([now, now + duration], np.vstack([start, target]), np.vstack([zero, zero]))


@dataclass
class GripperTracker:
    """A GripperCommand goal on one joint: reached when within ``goal_tolerance`` of the target and at rest;
    stalled when slower than ``stall_velocity`` for ``stall_timeout`` short of it (gripping an object):
    succeeded with ``stalled`` when ``allow_stalling``, else aborted."""

    target: float
    start_time: float
    goal_tolerance: float = 1e-3
    stall_velocity: float = 1e-3
    stall_timeout: float = 0.2
    allow_stalling: bool = True
    _still_since: float | None = None

    def check(self, now: float, desired: np.ndarray, actual: np.ndarray) -> Outcome | None:
        position, velocity = float(actual[0, 0]), float(actual[1, 0])
        error = abs(self.target - position)
        at_rest = abs(velocity) < self.stall_velocity
        if error <= self.goal_tolerance and at_rest:
            return Outcome(GoalState.SUCCEEDED, ErrorCode.SUCCESSFUL, "goal reached", reached_goal=True)
        if not at_rest:
            self._still_since = None
            return None
        if self._still_since is None:
            self._still_since = now
        if now - self._still_since < self.stall_timeout or now - self.start_time < self.stall_timeout:
            return None
        message = f"stalled at {position:.6f}, {error:.6f} short of the goal"
        if self.allow_stalling:
            return Outcome(GoalState.SUCCEEDED, ErrorCode.SUCCESSFUL, message, stalled=True)
        return Outcome(GoalState.ABORTED, ErrorCode.GOAL_TOLERANCE_VIOLATED, message, stalled=True)
