"""Trapezoidal axis and trajectory interpolation against hand-derived profiles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_bridge.hardware.trajectory import TrapezoidalAxis, Trajectory

DT = 0.002


def run(axis, seconds, dt=DT):
    trace = []
    for _ in range(int(round(seconds / dt))):
        axis.step(dt)
        trace.append((axis.position, axis.velocity, axis.acceleration))
    return np.array(trace)


def arrival_time(trace, target, dt=DT):
    return (np.flatnonzero(np.abs(trace[:, 0] - target) < 1e-12)[0] + 1) * dt


@pytest.mark.parametrize("distance, expected", [
    (1.0, 1.0 / 1.0 + 1.0 / 2.0),            # trapezoid: d/v + v/a
    (0.25, 2 * math.sqrt(0.25 / 2.0)),       # triangle (never reaches v): 2 sqrt(d/a)
])
def test_time_optimal_duration(distance, expected):
    axis = TrapezoidalAxis(0.0, velocity=1.0, acceleration=2.0)
    axis.set_target(distance)
    trace = run(axis, expected + 0.5)
    assert arrival_time(trace, distance) == pytest.approx(expected, abs=3 * DT)
    assert trace[-1, 0] == distance and trace[-1, 1] == 0.0 and axis.at_rest


@settings(max_examples=40, deadline=None)
@given(start=st.floats(-2, 2), target=st.floats(-3, 3), vmax=st.floats(0.2, 3), amax=st.floats(0.5, 8))
def test_limits_never_exceeded_and_target_reached_without_overshoot(start, target, vmax, amax):
    axis = TrapezoidalAxis(start, velocity=vmax, acceleration=amax, lower=-2.5, upper=2.5)
    goal = axis.set_target(target)
    assert goal == min(max(target, -2.5), 2.5)
    duration = abs(goal - start) / vmax + vmax / amax + 0.1
    trace = run(axis, duration)
    assert np.all(np.abs(trace[:, 1]) <= vmax * (1 + 1e-12))
    assert np.all(np.abs(trace[:, 2]) <= amax * (1 + 1e-9))
    lo, hi = min(start, goal), max(start, goal)
    assert np.all(trace[:, 0] >= lo - 1e-12) and np.all(trace[:, 0] <= hi + 1e-12)
    assert trace[-1, 0] == pytest.approx(goal, abs=1e-12) and trace[-1, 1] == 0.0


def test_stop_decelerates_at_the_limit():
    axis = TrapezoidalAxis(0.0, velocity=1.0, acceleration=2.0)
    axis.set_target(10.0)
    run(axis, 1.0)
    v0, p0 = axis.velocity, axis.position
    assert v0 == pytest.approx(1.0)
    axis.stop()
    trace = run(axis, 1.0)
    assert axis.at_rest
    assert axis.position - p0 == pytest.approx(v0 ** 2 / (2 * 2.0), abs=v0 * DT)
    assert np.all(np.abs(trace[:, 2]) <= 2.0 * (1 + 1e-9))
    assert arrival_time(trace, axis.position) == pytest.approx(v0 / 2.0, abs=2 * DT)


def test_velocity_mode_stops_at_the_range_end():
    axis = TrapezoidalAxis(0.0, velocity=1.0, acceleration=2.0, lower=-1.0, upper=0.5)
    axis.set_velocity(5.0)                               # capped to 1.0
    trace = run(axis, 2.0)
    assert trace[:, 1].max() == pytest.approx(1.0)
    assert trace[:, 0].max() <= 0.5 and axis.position == pytest.approx(0.5) and axis.velocity == 0.0


def test_feedforward_removes_tracking_lag():
    def track(feedforward):
        axis = TrapezoidalAxis(0.0, velocity=1.0, acceleration=2.0)
        errors = []
        for k in range(1, 1000):
            target = 0.5 * k * DT                         # a set-point moving at 0.5 rad/s
            axis.set_target(target, feedforward=0.5 if feedforward else 0.0)
            axis.step(DT)
            errors.append(target + 0.5 * DT - axis.position)   # the set-point one step on
        return abs(errors[-1])
    # without feed-forward the lag settles where the stopping speed equals 0.5: d = v^2 / 2a
    assert track(False) == pytest.approx(0.5 ** 2 / (2 * 2.0), rel=0.05)
    assert track(True) < 1e-9


def test_trajectory_interpolation_orders():
    linear = Trajectory([0.0, 2.0], [[0.0], [1.0]])
    assert linear.sample(0.5)[0] == pytest.approx([0.25]) and linear.sample(0.5)[1] == pytest.approx([0.5])
    # cubic Hermite midpoint: (p0 + p1)/2 + T (v0 - v1)/8
    cubic = Trajectory([0.0, 2.0], [[0.0], [1.0]], [[1.0], [0.0]])
    assert cubic.sample(1.0)[0] == pytest.approx([0.5 + 2.0 * 1.0 / 8])
    # quintic rest-to-rest: 10 s^3 - 15 s^4 + 6 s^5
    quintic = Trajectory([0.0, 1.0], [[0.0], [1.0]], [[0.0], [0.0]], [[0.0], [0.0]])
    s = 0.25
    assert quintic.sample(s)[0] == pytest.approx([10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5])
    assert quintic.sample(0.0)[2] == pytest.approx([0.0], abs=1e-12)
    p, v, a = quintic.sample(5.0)                          # after the end: last point, at rest
    assert p == pytest.approx([1.0]) and v == pytest.approx([0.0]) and a == pytest.approx([0.0])
    with pytest.raises(ValueError, match="strictly increasing"):
        Trajectory([0.0, 0.0], [[0.0], [1.0]])
    with pytest.raises(ValueError, match="without velocities"):
        Trajectory([0.0, 1.0], [[0.0], [1.0]], None, [[0.0], [0.0]])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_trajectory_equals_scipys_hermite_interpolation(order):
    """The closed-form coefficients match BPoly.from_derivatives (the independent reference) in value and
    derivatives, per joint."""
    from scipy.interpolate import BPoly

    rng = np.random.default_rng(order)
    times = np.cumsum(rng.uniform(0.05, 0.5, 9))
    fields = [rng.normal(size=(9, 3)) for _ in range(order)]
    trajectory = Trajectory(times, *fields)
    instants = np.linspace(times[0], times[-1] - 1e-9, 200)
    samples = [trajectory.sample(t) for t in instants]
    for joint in range(3):
        reference = BPoly.from_derivatives(times, np.stack([f[:, joint] for f in fields], axis=1))
        for nu in range(min(order, 2) + 1):
            got = [s[nu][joint] for s in samples]
            want = reference(instants, nu) if nu < 2 or order > 1 else np.zeros(len(instants))
            assert np.allclose(got, want, rtol=1e-9, atol=1e-9), (joint, nu)


def test_a_trajectory_of_ten_thousand_points_is_built_and_checked_in_bounded_time():
    """A goal at the controller's point limit: building, sampling and peak rates stay well under a second
    each (scipy's from_derivatives took seconds; generous bound for a loaded machine)."""
    import time

    n = 10_000
    rng = np.random.default_rng(0)
    times = np.arange(1, n + 1) * 0.01
    fields = [rng.normal(size=(n, 7)) for _ in range(3)]
    start = time.process_time()
    trajectory = Trajectory(times, *fields)
    trajectory.sample(50.0)
    trajectory.peak_rates()
    assert time.process_time() - start < 2.0
