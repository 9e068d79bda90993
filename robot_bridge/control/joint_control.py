"""The control loop of a set of modules, without ROS: references, running trajectories, their goals.

:class:`JointControl` drives one :class:`~robot_bridge.hardware.base.Hardware`.  Each running trajectory
(a :class:`Motion`) covers some of its joints -- those of one controller, or all of them for the topic
interface -- and may carry a goal (any hashable key, e.g. an action goal handle).  Joints without a
motion hold their last reference.  :meth:`JointControl.step` reads the hardware, streams the references
and returns the goals that ended this step with their :class:`~.goals.Outcome`, following
joint_trajectory_controller:

- a new trajectory on some joints preempts every motion sharing one of them: that goal ends canceled
  (``INVALID_GOAL``, JTC's "Current goal cancelled due to new incoming action."), its other joints hold;
- a tolerance violation aborts the goal; the joints stop from their measured state within the limits and
  hold;
- a cancel replaces the motion by a stop within the acceleration limits; the goal ends canceled at rest;
- a module fault halts every module and aborts every goal with the module and its fault named.

A step judges the sample it read at the time it was measured (its stamp, in the caller's time), not at the
``now`` it was called with: references are sampled there, tolerances checked there.  Hardware that streams
(:meth:`~robot_bridge.hardware.base.Hardware.follow`: the simulation) gets the running trajectories as a
stream of set-points it samples at the times it actually reaches between two steps.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from ..hardware.base import Hardware, HardwareError, JointLimits, JointSample, ModuleState
from ..hardware.trajectory import Trajectory
from .goals import PREEMPTED, ErrorCode, GoalState, GoalTracker, Outcome, stop_trajectory


@dataclass
class Motion:
    index: np.ndarray                      # joint indices into JointControl.joints
    trajectory: Trajectory
    goal: Hashable | None = None
    tracker: GoalTracker | None = None
    canceling: bool = False                # a cancel's stop: the goal ends canceled when it is done


class JointControl:
    """References and goals of the joints of ``hardware`` (call under one lock from any thread)."""

    def __init__(self, hardware: Hardware, limits: Sequence[JointLimits] | None = None,
                 clock: Callable[[float | None], object] | None = None):
        self.hardware = hardware
        self.clock = clock                      # sample_time = clock(sample.stamp), in the caller's time
        self.sample_time = None
        self.offset = 0.0                       # caller's time minus the hardware's (0 without a clock)
        self.states = None                  # module statuses read by the last step()
        self.joints = list(hardware.joint_names)
        self.limits = list(limits if limits is not None else hardware.limits)
        self.lower = np.array([lim.lower for lim in self.limits])
        self.upper = np.array([lim.upper for lim in self.limits])
        self.motions: list[Motion] = []
        self.hold: np.ndarray | None = None     # position targets; None: follow the modules (after halt)
        self.sample: JointSample | None = None
        self.fault_reported = False
        self._still: np.ndarray | None = None       # reference() velocities/accelerations while holding

    # -- references -----------------------------------------------------------------------
    def reference(self, now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired positions, velocities and accelerations of every joint at ``now``."""
        count = len(self.joints)
        if self.hold is not None:
            p = self.hold.copy()
        elif self.sample is not None:
            p = np.array(self.sample.position, dtype=float)
        else:
            p = np.zeros(count)
        if not self.motions:                    # holding: no velocity, no acceleration (shared zeros)
            if self._still is None or len(self._still) != count:
                self._still = np.zeros(count)
                self._still.flags.writeable = False
            return p, self._still, self._still
        v, a = np.zeros(count), np.zeros(count)
        for m in self.motions:
            p[m.index], v[m.index], a[m.index] = m.trajectory.sample(now)
        return p, v, a

    def reference_many(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Desired (positions, velocities), each (len(times), joints), at ``times`` (the caller's time),
        within the position limits."""
        times = np.asarray(times, dtype=float)
        p, _, _ = self.reference(float(times[0]))
        positions, velocities = np.tile(p, (times.size, 1)), np.zeros((times.size, len(self.joints)))
        for m in self.motions:
            positions[:, m.index], velocities[:, m.index] = m.trajectory.sample_many(times)
        return np.clip(positions, self.lower, self.upper), velocities

    def _stream(self, hardware_times: np.ndarray):
        """The set-points of the running motions at the hardware's ``times`` (Hardware.follow), None when
        nothing runs.  Called by the hardware inside :meth:`read`, under the caller's lock."""
        if not self.motions:
            return None
        return self.reference_many(np.asarray(hardware_times, dtype=float) + self.offset)

    def measured_time(self, now: float) -> float:
        """When the last sample was measured, in the caller's time (``now`` when the hardware gives no
        stamp: a test's fake clock, shared with the caller)."""
        stamp = self.sample.stamp if self.sample is not None else None
        return now if stamp is None else stamp + self.offset

    def actual(self) -> np.ndarray:
        """(3, joints) measured positions, velocities, accelerations."""
        s = self.sample
        return np.array([s.position, s.velocity, s.acceleration], dtype=float)

    def motion_of(self, goal: Hashable) -> Motion | None:
        return next((m for m in self.motions if m.goal is not None and m.goal == goal), None)

    # -- commands ---------------------------------------------------------------------------
    def read(self) -> JointSample:
        sample = self.hardware.read()
        if len(sample.position) != len(self.joints):
            raise HardwareError(f"hardware read {len(sample.position)} positions for {len(self.joints)} "
                                "joints")
        self.sample = sample
        if self.clock is not None:
            self.sample_time = self.clock(self.sample.stamp)
            if sample.stamp is not None:
                self.offset = self.sample_time * 1e-9 - sample.stamp
        return self.sample

    def hold_here(self) -> None:
        """Hold the measured positions (after init / enable / recover)."""
        self.read()
        self.motions, self.hold = [], np.asarray(self.sample.position, dtype=float).copy()

    def release(self) -> None:
        """No reference of our own: the modules stop / stay by themselves (halt, disable, faults)."""
        self.motions, self.hold = [], None
        self._unfollow()

    def _unfollow(self) -> None:
        try:
            self.hardware.follow(None)
        except HardwareError:                   # not open: nothing streams
            pass

    def command(self, positions: np.ndarray, now: float, reason: str = PREEMPTED) -> list[tuple]:
        """Move every joint to ``positions`` (the modules' own profile); preempts every motion."""
        ended = self._preempt(range(len(self.joints)), now, reason)
        self.hardware.command_position(positions)
        self.hold = np.asarray(positions, dtype=float).copy()
        return ended

    def start(self, index: Sequence[int], trajectory: Trajectory, now: float, goal: Hashable | None = None,
              tracker: GoalTracker | None = None, reason: str = PREEMPTED) -> list[tuple]:
        """Run ``trajectory`` on the joints ``index``; returns the (goal, Outcome) of preempted goals.  The
        hardware streams it from now on, not from the next control step: a step that comes late (a loaded
        host) would otherwise find the modules still holding where the trajectory began, far behind it."""
        ended = self._preempt(index, now, reason)
        self.motions.append(Motion(np.asarray(list(index), dtype=int), trajectory, goal, tracker))
        try:
            self.hardware.follow(self._stream)
        except HardwareError:                   # not open: the goal checks refuse it first
            pass
        return ended

    def cancel(self, goal: Hashable, now: float) -> bool:
        """Stop the goal's motion within the limits; the goal ends canceled once at rest (see step)."""
        m = self.motion_of(goal)
        if m is None:
            return False
        if not m.canceling:
            p, v, _ = m.trajectory.sample(now)
            m.trajectory = stop_trajectory(p, v, [self.limits[i] for i in m.index], now)
            m.tracker, m.canceling = None, True
        return True

    def _preempt(self, index, now: float, reason: str) -> list[tuple]:
        index = set(int(i) for i in index)
        p, _, _ = self.reference(now)
        ended, kept = [], []
        for m in self.motions:
            if index.isdisjoint(m.index.tolist()):
                kept.append(m)
                continue
            self._freeze(m, p)
            if m.goal is not None:
                ended.append((m.goal, Outcome(GoalState.CANCELED, ErrorCode.INVALID_GOAL, reason)))
        self.motions = kept
        return ended

    def _freeze(self, motion: Motion, positions: np.ndarray) -> None:
        if self.hold is None:
            self.hold = np.asarray(self.sample.position if self.sample is not None else positions,
                                   dtype=float).copy()
        self.hold[motion.index] = positions[motion.index]

    def end_all(self, outcome: Outcome) -> list[tuple]:
        ended = [(m.goal, outcome) for m in self.motions if m.goal is not None]
        self.release()
        return ended

    # -- control loop --------------------------------------------------------------------------
    def step(self, now: float) -> list[tuple]:
        """One control period: read, supervise faults, stream references, decide goals (at the sample's
        measured time, see :meth:`measured_time`).  Returns the goals that ended as (goal, Outcome)."""
        self.read()
        now = self.measured_time(now)
        self.states = states = self.hardware.status()
        faulted = [s for s in states if s.state is ModuleState.FAULT]
        if faulted:
            if self.fault_reported:
                return []
            self.fault_reported = True
            reason = "hardware fault: " + "; ".join(f"{s.joint} ({s.hardware_id}): {s.message}"
                                                    for s in faulted)
            ended = self.end_all(Outcome(GoalState.ABORTED, ErrorCode.PATH_TOLERANCE_VIOLATED, reason))
            self.hardware.halt()                                  # the healthy modules stop too
            return ended
        if not self.motions:
            return []
        p, v, a = self.reference(now)              # one instant: past the end, the sample is the final point
        self.hardware.command_position(np.clip(p, self.lower, self.upper), v)
        self.hardware.follow(self._stream)
        actual = self.actual()
        desired = np.array([p, v, a])
        ended, kept = [], []
        for m in self.motions:
            outcome = m.tracker.check(now, desired[:, m.index], actual[:, m.index]) if m.tracker else None
            if outcome is None and now >= m.trajectory.end_time and m.tracker is None:
                if m.canceling:
                    outcome = Outcome(GoalState.CANCELED, ErrorCode.SUCCESSFUL,
                                      "canceled: stopped and holding")
                elif m.goal is None:
                    self._freeze(m, p)                            # topic trajectory done: hold its end
                    continue
            if outcome is None:
                kept.append(m)
                continue
            ended.append((m.goal, outcome))
            if outcome.state is GoalState.ABORTED:     # stop from where the joints are, then hold there
                limits = [self.limits[i] for i in m.index]
                stop = stop_trajectory(actual[0, m.index], actual[1, m.index], limits, now)
                kept.append(Motion(m.index, stop))
            else:
                self._freeze(m, p)
        self.motions = kept
        if not kept:
            self._unfollow()                       # holding the final point commanded above
        return ended
