"""Motion primitives shared by the simulated modules, the simulated CiA 402 drive and the controller.

- :class:`TrapezoidalAxis`: online trapezoidal profile generator (what a Schunk module or a CiA 402
  drive in profile-position mode does with a new target): tracks a position target within the
  velocity / acceleration limits, stops with a given deceleration, never leaves its position range.
- :class:`Trajectory`: joint_trajectory_controller-style interpolation of waypoints (linear from
  positions, cubic with velocities, quintic with accelerations) through scipy's ``BPoly``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.interpolate import BPoly

PEAK_SAMPLES = 20_000        # instants peak_rates samples at most (bounded time for any point count)


class TrapezoidalAxis:
    """One axis moved in discrete steps by a time-optimal trapezoidal velocity profile.

    The speed command each step is the largest one from which the axis can still stop on the
    target decelerating at ``acceleration`` in the same discrete steps, so it arrives exactly,
    never overshoots a reachable target and never exceeds ``velocity`` or ``acceleration``.
    """

    def __init__(self, position: float = 0.0, *, velocity: float, acceleration: float,
                 lower: float = -math.inf, upper: float = math.inf):
        if velocity <= 0.0 or acceleration <= 0.0:
            raise ValueError("velocity and acceleration limits must be positive")
        self.max_velocity = float(velocity)
        self.max_acceleration = float(acceleration)
        self.lower, self.upper = float(lower), float(upper)
        self.position = float(np.clip(position, self.lower, self.upper))
        self.velocity = 0.0
        self.acceleration = 0.0
        self.target = self.position
        self.profile_velocity = self.max_velocity
        self.profile_acceleration = self.max_acceleration
        self._stopping: float | None = None        # deceleration while halting / quick stopping
        self._velocity_command: float | None = None  # velocity mode when set
        self.feedforward = 0.0

    def set_target(self, position: float, velocity: float | None = None,
                   acceleration: float | None = None, feedforward: float = 0.0) -> float:
        """New position target (clipped to the range); profile limits capped by the axis limits.

        ``feedforward`` is the target's own velocity (a moving set-point, as in cyclic synchronous
        position mode): added to the speed command, it removes the lag of tracking a moving target.
        """
        self.target = _clip(float(position), self.lower, self.upper)
        self.feedforward = float(feedforward)
        self.profile_velocity = min(velocity or self.max_velocity, self.max_velocity)
        self.profile_acceleration = min(acceleration or self.max_acceleration, self.max_acceleration)
        self._stopping = self._velocity_command = None
        return self.target

    def set_velocity(self, velocity: float) -> None:
        """Velocity mode: reach ``velocity`` (capped) at full acceleration, stopping at the range ends."""
        self._velocity_command = float(np.clip(velocity, -self.max_velocity, self.max_velocity))
        self.profile_acceleration = self.max_acceleration
        self._stopping = None

    def stop(self, deceleration: float | None = None) -> None:
        """Decelerate to rest (``deceleration`` capped by the axis limit), then hold there."""
        self._stopping = min(deceleration or self.max_acceleration, self.max_acceleration)

    def hold(self) -> None:
        """Stop immediately (brake): velocity drops to zero."""
        self.velocity = self.acceleration = 0.0
        self.target = self.position
        self.feedforward = 0.0
        self._stopping = self._velocity_command = None

    @property
    def at_rest(self) -> bool:
        if self.velocity != 0.0:
            return False
        return self._stopping is not None or (self._velocity_command is None and self.position == self.target)

    @property
    def idle(self) -> bool:
        """At rest on its target with nothing commanded: a step only zeroes the acceleration."""
        return self.velocity == 0.0 and self._stopping is None and self._velocity_command is None \
            and self.position == self.target and self.feedforward == 0.0

    @staticmethod
    def _stoppable_speed(distance: float, accel: float, dt: float) -> float:
        """Largest speed for this step after which steps of ``accel * dt`` less speed stop exactly
        within ``distance``: with n = floor(k), k(k+1)/2 = distance / (accel dt^2), the n+1 steps
        v, v - accel dt, ..., v - n accel dt travel dt ((n+1) v - accel dt n(n+1)/2) = distance.
        """
        unit = accel * dt * dt
        n = math.floor((math.sqrt(1.0 + 8.0 * distance / unit) - 1.0) / 2.0)
        return (distance / dt + accel * dt * n * (n + 1) / 2.0) / (n + 1)

    def step(self, dt: float) -> None:
        if dt <= 0.0:
            return
        if self.idle:
            self.acceleration = 0.0                        # at rest on target: what a step computes
            return
        v = self.velocity
        if self._stopping is not None:
            accel = self._stopping
            desired = 0.0
        elif self._velocity_command is not None:
            accel = self.profile_acceleration
            end = self.upper if self._velocity_command > 0.0 else self.lower
            room = abs(end - self.position)
            speed = min(abs(self._velocity_command), self._stoppable_speed(room, accel, dt))
            desired = math.copysign(speed, self._velocity_command)
        else:
            accel = self.profile_acceleration
            d = self.target - self.position
            speed = min(self.profile_velocity, self._stoppable_speed(abs(d), accel, dt))
            desired = _clip(self.feedforward + math.copysign(speed, d), -self.profile_velocity,
                            self.profile_velocity)
            if abs(v) > self.max_velocity:                 # limits lowered while moving
                desired = math.copysign(self.max_velocity, v)
        new_v = _clip(desired, v - accel * dt, v + accel * dt)
        new_p = self.position + new_v * dt
        if not self.lower <= new_p <= self.upper:          # end of the range (rounding or hard stop)
            new_p = _clip(new_p, self.lower, self.upper)
            new_v = _clip((new_p - self.position) / dt, v - accel * dt, v + accel * dt)
        if (self._stopping is not None or self._velocity_command is not None) and new_v == 0.0:
            self.target = new_p
        self.acceleration = (new_v - v) / dt
        self.position, self.velocity = new_p, new_v


class Trajectory:
    """Waypoints of several joints, interpolated like ros2_controllers' joint_trajectory_controller.

    ``times`` are absolute (seconds, strictly increasing); the polynomial degree follows the fields
    given: positions only -> linear, + velocities -> cubic, + accelerations -> quintic.  Before the
    first point the first point is held, after the last one the last point (at rest).
    """

    def __init__(self, times: Sequence[float], positions: np.ndarray,
                 velocities: np.ndarray | None = None, accelerations: np.ndarray | None = None):
        self.times = np.asarray(times, dtype=float)
        self.positions = np.atleast_2d(np.asarray(positions, dtype=float))
        if np.any(np.diff(self.times) <= 0.0):
            raise ValueError("time_from_start must be strictly increasing")
        if accelerations is not None and velocities is None:
            raise ValueError("accelerations given without velocities")
        fields = [self.positions]
        for extra in (velocities, accelerations):
            if extra is not None:
                fields.append(np.atleast_2d(np.asarray(extra, dtype=float)))
        self.order = len(fields)                # 1 linear, 2 cubic, 3 quintic
        # one piecewise Bernstein polynomial of every joint (what BPoly.from_derivatives builds, in closed
        # form for whole arrays: from_derivatives loops in Python per interval, seconds for 10,000 points)
        self._spline = None if len(self.times) == 1 else BPoly(_hermite_bernstein(self.times, fields),
                                                                self.times)

    @property
    def start_time(self) -> float:
        return float(self.times[0])

    @property
    def end_time(self) -> float:
        return float(self.times[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (positions, velocities, accelerations) at absolute time ``t``."""
        n = self.positions.shape[1]
        if self._spline is None or t >= self.times[-1]:
            return self.positions[-1].copy(), np.zeros(n), np.zeros(n)
        t = max(t, float(self.times[0]))
        p = self._spline(t)
        v = self._spline(t, 1)
        a = self._spline(t, 2) if self.order > 1 else np.zeros(n)
        return p, v, a

    def sample_many(self, times) -> tuple[np.ndarray, np.ndarray]:
        """Desired (positions, velocities), each (len(times), joints), at the absolute ``times`` (one array
        operation: :meth:`sample` at each instant)."""
        t = np.asarray(times, dtype=float).reshape(-1)
        n = self.positions.shape[1]
        if self._spline is None:
            return np.tile(self.positions[-1], (t.size, 1)), np.zeros((t.size, n))
        inside = np.clip(t, self.times[0], self.times[-1])
        p, v = self._spline(inside), self._spline(inside, 1)
        after = t >= self.times[-1]
        p[after], v[after] = self.positions[-1], 0.0
        return p, v

    def peak_rates(self, samples_per_segment: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """Largest |velocity| and |acceleration| of each joint along the trajectory (sampled densely, at most
        PEAK_SAMPLES instants in all; the acceleration of a linear trajectory, infinite at its corners, is
        reported as 0)."""
        n = self.positions.shape[1]
        if self._spline is None:
            return np.zeros(n), np.zeros(n)
        start, span = self.times[:-1], np.diff(self.times)
        per = max(2, min(samples_per_segment, PEAK_SAMPLES // len(span)))
        inside = start[:, None] + span[:, None] * (np.arange(per) / per)
        t = np.concatenate([inside.ravel(), self.times[-1:]])
        v = np.max(np.abs(self._spline(t, 1)), axis=0)
        a = np.max(np.abs(self._spline(t, 2)), axis=0) if self.order > 1 else np.zeros(n)
        return v, a


def _hermite_bernstein(times: np.ndarray, fields: list[np.ndarray]) -> np.ndarray:
    """Bernstein coefficients (degree 2 * len(fields) - 1, intervals, joints) of the polynomials matching
    position (, velocity (, acceleration)) at both ends of every interval."""
    h = np.diff(times)[:, None]
    p0, p1 = fields[0][:-1], fields[0][1:]
    if len(fields) == 1:
        return np.stack([p0, p1])
    v0, v1 = fields[1][:-1] * h, fields[1][1:] * h
    if len(fields) == 2:
        return np.stack([p0, p0 + v0 / 3.0, p1 - v1 / 3.0, p1])
    a0, a1 = fields[2][:-1] * h * h, fields[2][1:] * h * h
    return np.stack([p0, p0 + v0 / 5.0, p0 + 2.0 * v0 / 5.0 + a0 / 20.0, p1 - 2.0 * v1 / 5.0 + a1 / 20.0,
                     p1 - v1 / 5.0, p1])


def _clip(value: float, lower: float, upper: float) -> float:
    """``float(np.clip(value, lower, upper))`` for floats, without numpy's per-call cost (the sim steps
    every module every 2 ms)."""
    return min(max(value, lower), upper)
