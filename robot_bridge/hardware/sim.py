"""Simulated Schunk-style modules: one trapezoidal-profile axis per joint, brakes, injectable faults.

Time comes from ``clock`` (``time.monotonic`` by default): :meth:`SimHardware.read` advances the
simulation to "now" in fixed internal steps, so behaviour does not depend on how often it is read.  While
the controller streams a trajectory (:meth:`SimHardware.follow`), each internal step takes its target from
the trajectory at the time that step starts (measured on ``clock``, not assumed from the control period):
a control tick that comes late costs no tracking, as with a drive's own interpolation buffer.
Random faults (``fault_rate`` per module and second) and measurement noise draw from one
``numpy.random.Generator`` seeded with ``seed``: a run with the same seed and the same step
sequence is reproduced exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from .base import (
    FaultKind,
    Hardware,
    HardwareError,
    JointLimits,
    JointSample,
    ModuleState,
    ModuleStatus,
)
from .trajectory import TrapezoidalAxis

FAULT_MESSAGES = {
    FaultKind.FOLLOWING_ERROR: "following error exceeded",
    FaultKind.COMMUNICATION_TIMEOUT: "communication timeout",
    FaultKind.EMERGENCY_STOP: "emergency stop",
    FaultKind.POSITION_LIMIT: "position limit reached",
    FaultKind.DRIVE: "drive fault",
}


class _Module:
    def __init__(self, joint: str, limits: JointLimits, position: float):
        self.joint = joint
        self.limits = limits
        self.axis = TrapezoidalAxis(position, velocity=limits.velocity, acceleration=limits.acceleration,
                                    lower=limits.lower, upper=limits.upper)
        self.enabled = False
        self.halting = False
        self.fault: FaultKind | None = None
        self.obstacle: float | None = None     # a body in the way (a gripped object): not passed
        self.obstacle_side = 0.0               # +1: the module is above the obstacle position, -1: below
        self.contact_effort = 0.0              # effort pressed against it
        self.blocked = False

    @property
    def state(self) -> ModuleState:
        if self.fault is not None:
            return ModuleState.FAULT
        if not self.enabled:
            return ModuleState.DISABLED
        return ModuleState.STOPPING if self.halting and not self.axis.at_rest else ModuleState.ENABLED

    def step(self, dt: float) -> None:
        if not self.enabled:
            return                                        # brake holds the joint
        self.axis.step(dt)
        self.blocked = False
        if self.obstacle is not None and (self.axis.position - self.obstacle) * self.obstacle_side < 0.0:
            self.axis.position = self.obstacle                # stopped by the body: no further
            self.axis.velocity = self.axis.acceleration = 0.0
            self.blocked = True
        if self.fault is not None and self.axis.velocity == 0.0:
            self.enabled = False                          # fault reaction done: brake in
            self.axis.hold()
        if self.halting and self.axis.at_rest and self.fault is None:
            self.axis.hold()                              # halted: hold here under control


class SimHardware(Hardware):
    """Per-joint simulated modules with the description's limits."""

    def __init__(self, joint_names: Sequence[str], limits: Sequence[JointLimits],
                 initial: Sequence[float] | None = None, *, seed: int = 0, fault_rate: float = 0.0,
                 noise: float = 0.0, inertia: float = 0.05, period: float = 0.002,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(joint_names, limits)
        start = np.zeros(len(self.joint_names)) if initial is None else self._vector(initial, "initial")
        self.modules = [_Module(j, lim, p) for j, lim, p in zip(self.joint_names, self.limits, start)]
        self.rng = np.random.default_rng(seed)
        self.fault_rate = float(fault_rate)
        self.noise = float(noise)
        self.inertia = float(inertia)
        self.period = float(period)
        self.clock = clock
        self.is_open = False
        self._last: float | None = None
        self._setpoints = None          # Hardware.follow's stream, or None: the last targets hold
        self._max_effort = np.array([lim.effort for lim in self.limits])
        # while no module can change by itself, a read repeats the last sample (new stamp): the control
        # loop reads a resting arm 100 times a second
        self._version = 0               # bumped by every call that can change a module
        self._quiet: tuple | None = None     # (version, sample) to repeat
        self._statuses: list = [(None, None)] * len(self.modules)     # (key, ModuleStatus) per module
        self._status_list: list | None = None       # the last status() result
        self._status_version: int | None = None     # self._version it was read at while resting

    # -- lifecycle ----------------------------------------------------------
    def open(self) -> None:
        self._version += 1
        self._setpoints = None
        self.is_open = True
        self._last = self.clock()

    def close(self) -> None:
        self._version += 1
        self.enable(False) if self.is_open else None
        self.is_open = False

    def enable(self, on: bool = True) -> None:
        self._version += 1
        self._setpoints = None
        self._require_open("enable")
        for m in self.modules:
            if on and m.fault is not None:
                raise HardwareError(f"enable rejected: {m.joint} faulted ({FAULT_MESSAGES[m.fault]})")
        for m in self.modules:
            if on and not m.enabled:
                m.axis.hold()
                m.halting = False
            elif not on:
                m.axis.hold()
            m.enabled = on

    # -- simulation ------------------------------------------------------------
    def advance(self, dt: float, start: float | None = None) -> bool:
        """Advance every module by ``dt`` seconds in steps of at most ``period``; True when no module could
        change (all at rest: the state is what it will stay until a command).  ``start``: the clock time
        the span begins at; with a stream (:meth:`follow`) each step first takes its targets from the
        stream at the time it begins."""
        steps = max(1, math.ceil(dt / self.period - 1e-9))
        h = dt / steps
        stream = None
        if self._setpoints is not None and start is not None:
            stream = self._setpoints(start + h * np.arange(steps))
        # without random faults an idle module stays idle for this dt: only the others are stepped
        moving = self.modules if self.fault_rate > 0.0 or stream is not None else self._settle_idle()
        for k in range(steps):
            if stream is not None:
                positions, velocities = stream[0][k].tolist(), stream[1][k].tolist()
                for m, target, ff in zip(self.modules, positions, velocities):
                    if m.enabled and m.fault is None and not m.halting:
                        m.axis.set_target(target, feedforward=ff)
            if self.fault_rate > 0.0:
                hits = self.rng.random(len(self.modules)) < self.fault_rate * h
                for index in np.flatnonzero(hits):
                    kinds = list(FaultKind)
                    self.inject_fault(self.joint_names[index], kinds[self.rng.integers(len(kinds))])
            for m in moving:
                m.step(h)
        return not moving

    def _settle_idle(self) -> list:
        """The enabled modules that can change; the idle ones get what their steps would do."""
        moving = []
        for m in self.modules:
            if m.enabled and (m.fault is not None or m.obstacle is not None or not m.axis.idle):
                moving.append(m)
            elif m.enabled:
                m.axis.acceleration, m.blocked = 0.0, False
        return moving

    def set_obstacle(self, joint: str, position: float | None, effort: float = math.inf) -> None:
        """A body ``joint`` cannot move past: at ``position`` (from the side it is on now) it stops and
        presses with ``effort`` (capped by its effort limit) while commanded beyond.  None removes it."""
        self._version += 1
        m = self.modules[self.joint_names.index(joint)]
        m.obstacle = None if position is None else float(position)
        m.obstacle_side = 0.0 if position is None else (1.0 if m.axis.position >= position else -1.0)
        m.contact_effort = min(float(effort), m.limits.effort)
        m.blocked = False

    def inject_fault(self, joint: str | None, kind: FaultKind) -> None:
        """Fault one module (emergency stop: all modules); it decelerates to rest, then brakes."""
        self._version += 1
        targets = self.modules if kind is FaultKind.EMERGENCY_STOP or joint is None else \
            [self.modules[self.joint_names.index(joint)]]
        for m in targets:
            if m.fault is None:
                m.fault = kind
                m.axis.stop()

    # -- I/O ----------------------------------------------------------------------
    def read(self) -> JointSample:
        self._require_open("read")
        now = self.clock()
        stamp = now if self.clock is time.monotonic else None     # a test's fake clock is not monotonic()
        quiet = self._quiet
        if quiet is not None and quiet[0] == self._version:
            self._last = max(self._last, now)
            last = quiet[1]
            return JointSample(position=last.position, velocity=last.velocity, effort=last.effort,
                               acceleration=last.acceleration, stamp=stamp)
        settled = now > self._last and self.advance(now - self._last, self._last)
        self._last = now
        axes = [m.axis for m in self.modules]
        p, v, a = np.array([(x.position, x.velocity, x.acceleration) for x in axes]).T.copy()
        if self.noise > 0.0:
            p = p + self.rng.normal(0.0, self.noise, p.size)
        max_effort = self._max_effort
        effort = np.minimum(np.maximum(self.inertia * a, -max_effort), max_effort)     # np.clip, cheaper
        for i, m in enumerate(self.modules):
            if m.blocked and m.axis.target != m.obstacle:      # pressing toward the target, against the body
                effort[i] = -m.obstacle_side * m.contact_effort
        sample = JointSample(position=p, velocity=v, effort=effort, acceleration=a, stamp=stamp)
        self._quiet = None
        if settled and self.noise == 0.0 and self.fault_rate == 0.0:
            for values in (p, v, a, effort):
                values.flags.writeable = False                  # shared by the repeated samples
            self._quiet = (self._version, sample)
        return sample

    def command_position(self, positions: Sequence[float], velocities: Sequence[float] | None = None) -> None:
        self._version += 1
        targets = self._vector(positions, "position command")
        feedforward = np.zeros(targets.size) if velocities is None else self._vector(velocities, "velocity")
        self._require_operational("position command")
        self._setpoints = None
        for m, target, ff in zip(self.modules, targets, feedforward):
            m.halting = False
            m.axis.set_target(target, feedforward=ff)

    def follow(self, setpoints) -> bool:
        """Each internal step of :meth:`read` takes its targets (and velocity feed-forward) from
        ``setpoints`` at the clock time it begins (see :meth:`Hardware.follow`); faulted, halting and
        disabled modules are left alone."""
        self._version += 1
        self._require_open("follow")
        self._setpoints = setpoints
        return True

    def command_velocity(self, velocities: Sequence[float]) -> None:
        self._version += 1
        speeds = self._vector(velocities, "velocity command")
        self._require_operational("velocity command")
        self._setpoints = None
        for m, v in zip(self.modules, speeds):
            m.halting = False
            m.axis.set_velocity(v)

    def halt(self) -> None:
        self._version += 1
        self._require_open("halt")
        self._setpoints = None
        for m in self.modules:
            if m.enabled and m.fault is None:
                m.halting = True
                m.axis.stop()

    def recover(self) -> None:
        self._version += 1
        self._require_open("recover")
        self._setpoints = None
        for m in self.modules:
            if m.fault is not None:
                m.fault = None
                m.axis.hold()
                m.enabled = True
                m.halting = False

    @property
    def online(self) -> bool:
        return self.is_open

    def status(self) -> list[ModuleStatus]:
        """Each module's status.  The control loop reads them every period: a status that did not change
        is the same object, and while nothing changed the same list is returned (read-only)."""
        if self._quiet is not None and self._status_version == self._version:
            return self._status_list                        # resting, no call since: nothing changed
        statuses, changed = self._statuses, False
        for i, m in enumerate(self.modules):
            key = (self.is_open, m.state, m.enabled, m.fault, m.axis.target)
            if statuses[i][0] != key:
                changed = True
                statuses[i] = (key, ModuleStatus(
                    joint=m.joint, state=key[1] if self.is_open else ModuleState.OFFLINE,
                    hardware_id=f"sim:{m.joint}", brake=not m.enabled, fault=m.fault,
                    message=FAULT_MESSAGES[m.fault] if m.fault else key[1].value,
                    details={"target": f"{m.axis.target:.6f}"}))
        if changed or self._status_list is None:
            self._status_list = [status for _key, status in statuses]
        self._status_version = self._version if self._quiet is not None else None
        return self._status_list

    def _require_open(self, what: str) -> None:
        if not self.is_open:
            raise HardwareError(f"{what} rejected: hardware not open")
