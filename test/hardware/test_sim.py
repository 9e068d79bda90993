"""Simulated Schunk-style modules on a fake clock."""

from __future__ import annotations


import numpy as np
import pytest

from robot_bridge.hardware import FaultKind, HardwareError, ModuleState, create, limits_from_robot
from robot_bridge.model import Joint, Link, Robot

from fixtures.hardware.lwa_fixture import ACCELERATION, JOINTS, LOWER, UPPER, VELOCITY, lwa_robot  # noqa: E402


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def make_sim(**options):
    robot = lwa_robot()
    clock = Clock()
    sim = create("sim", JOINTS, limits_from_robot(robot, JOINTS), np.zeros(7), clock=clock, **options)
    sim.open()
    return sim, clock


def run(sim, clock, seconds, dt=0.01):
    samples = []
    for _ in range(int(round(seconds / dt))):
        clock.t += dt
        samples.append(sim.read())
    return samples


def test_limits_from_description():
    limits = limits_from_robot(lwa_robot(), JOINTS)
    assert [lim.lower for lim in limits] == list(LOWER) and [lim.upper for lim in limits] == list(UPPER)
    assert [lim.velocity for lim in limits] == list(VELOCITY)
    assert [lim.acceleration for lim in limits] == list(ACCELERATION)
    robot = Robot("r", links={"a": Link("a"), "b": Link("b")},
                  joints={"c": Joint("c", "continuous", "a", "b")})
    (lim,) = limits_from_robot(robot, ["c"], default_velocity=0.7, default_acceleration=1.5)
    assert (lim.lower, lim.upper, lim.velocity, lim.acceleration) == (-np.inf, np.inf, 0.7, 1.5)
    assert any("no velocity limit" in w for w in robot.warnings)


def test_moves_within_limits_only_when_enabled():
    sim, clock = make_sim()
    assert all(s.state is ModuleState.DISABLED and s.brake for s in sim.status())
    with pytest.raises(HardwareError, match="disabled"):
        sim.command_position(np.full(7, 0.5))
    sim.enable(True)
    target = np.array([1.0, -1.0, 2.0, 3.0, 0.0, 0.0, -0.5])        # joint 4 beyond its 2.09 limit
    sim.command_position(target)
    samples = run(sim, clock, 4.0)
    p = np.array([s.position for s in samples])
    v = np.array([s.velocity for s in samples])
    a = np.array([s.acceleration for s in samples])
    assert np.all(np.abs(v) <= VELOCITY * (1 + 1e-12)) and np.all(np.abs(a) <= ACCELERATION * (1 + 1e-9))
    assert np.all(p >= LOWER) and np.all(p <= UPPER)
    assert samples[-1].position == pytest.approx(np.clip(target, LOWER, UPPER), abs=1e-12)
    with pytest.raises(HardwareError, match="7 joints"):
        sim.command_position([0.0])
    sim.enable(False)                                               # brakes in: nothing moves
    before = sim.read().position
    run(sim, clock, 0.5)
    assert np.array_equal(sim.read().position, before)


def test_fault_reaction_brakes_and_recover():
    sim, clock = make_sim()
    sim.enable(True)
    sim.command_position(np.full(7, 1.0))
    run(sim, clock, 0.6)
    sim.inject_fault("lwa_joint_2", FaultKind.FOLLOWING_ERROR)
    status = sim.status()[1]
    assert status.state is ModuleState.FAULT and status.fault is FaultKind.FOLLOWING_ERROR
    v0 = sim.read().velocity[1]
    samples = run(sim, clock, 1.0)
    assert samples[-1].velocity[1] == 0.0 and sim.status()[1].brake          # stopped, then brake
    assert all(abs(s.acceleration[1]) <= ACCELERATION[1] * (1 + 1e-9) for s in samples)
    assert samples[-1].position[1] < 1.0 and v0 > 0
    assert sim.status()[0].state is ModuleState.ENABLED                       # others carry on
    with pytest.raises(HardwareError, match="faulted"):
        sim.command_position(np.zeros(7))
    with pytest.raises(HardwareError, match="faulted"):
        sim.enable(True)
    sim.recover()
    assert all(s.state is ModuleState.ENABLED for s in sim.status())
    sim.command_position(np.zeros(7))
    assert run(sim, clock, 2.0)[-1].position == pytest.approx(np.zeros(7), abs=1e-12)


def test_emergency_stop_faults_every_module():
    sim, clock = make_sim()
    sim.enable(True)
    sim.inject_fault(None, FaultKind.EMERGENCY_STOP)
    assert all(s.fault is FaultKind.EMERGENCY_STOP for s in sim.status())


def test_halt_then_hold():
    sim, clock = make_sim()
    sim.enable(True)
    sim.command_position(np.full(7, 2.0))
    run(sim, clock, 0.8)
    sim.halt()
    assert any(s.state is ModuleState.STOPPING for s in sim.status())
    run(sim, clock, 1.0)
    held = sim.read().position
    assert all(s.state is ModuleState.ENABLED for s in sim.status())
    run(sim, clock, 0.5)
    assert np.array_equal(sim.read().position, held) and np.all(held < 2.0)


def test_random_faults_reproducible_with_seed():
    def faults(seed):
        sim, clock = make_sim(seed=seed, fault_rate=0.5)
        sim.enable(True)
        history = []
        for _ in range(300):
            clock.t += 0.01
            sim.read()
            history.append(tuple(s.fault for s in sim.status()))
        return history
    a, b, c = faults(1), faults(1), faults(2)
    assert a == b and a != c
    assert any(f is not None for f in a[-1])


def test_idle_modules_skipped_by_advance_read_exactly_as_stepped_ones():
    """advance() steps only the modules that can change; the samples equal stepping every module."""
    fast, clock_a = make_sim()
    full, clock_b = make_sim()

    def step_all(dt, start=None):                       # the reference: every module, every sub-step
        steps = max(1, int(np.ceil(dt / full.period - 1e-9)))
        for _ in range(steps):
            for m in full.modules:
                m.step(dt / steps)
    full.advance = step_all
    script = [(0.3, lambda s: s.enable(True)),
              (0.6, lambda s: s.command_position([0.2, 0, 0, 0, 0, 0, 0.1])),     # two move, five rest
              (0.4, lambda s: s.set_obstacle(JOINTS[1], 0.05)),
              (0.5, lambda s: s.command_position([0.2, 0.3, 0, 0, 0, 0, 0.1])),   # presses on the obstacle
              (0.7, lambda s: s.inject_fault(JOINTS[6], FaultKind.FOLLOWING_ERROR)),
              (0.5, lambda s: s.recover())]
    for seconds, action in script:
        action(fast)
        action(full)
        for a, b in zip(run(fast, clock_a, seconds), run(full, clock_b, seconds), strict=True):
            for field in ("position", "velocity", "acceleration", "effort"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        assert [s.state for s in fast.status()] == [s.state for s in full.status()]


def test_a_streamed_trajectory_is_sampled_at_the_time_reached_however_late_the_read():
    """Issue 42: the modules take each internal step's target from the stream at the time that step begins
    (the fake clock's), so a read 0.43 s late finds the arm where the trajectory is at the time reached --
    as a read every 10 ms does -- not lagging behind the last command and then overshooting."""
    from robot_bridge.hardware.trajectory import Trajectory

    q = np.array([[0.0] * 7, [0.4, -0.3, 0.5, 0.6, -0.2, 0.3, 0.8], [0.8, -0.6, 0.2, 1.0, 0.1, 0.5, 1.2]])
    v = np.array([[0.0] * 7, [0.35, -0.3, 0.0, 0.4, 0.15, 0.15, 0.3], [0.0] * 7])
    trajectory = Trajectory([0.0, 1.2, 2.4], q, v)
    runs = {}
    late_ticks = [0.01] * 80 + [0.43] + [0.01] * 177
    for name, ticks in (("every 10 ms", [0.01] * 300), ("one read late", late_ticks)):
        sim, clock = make_sim()
        sim.enable(True)
        assert sim.follow(trajectory.sample_many)
        samples = {}
        for dt in ticks:
            clock.t += dt
            samples[round(clock.t, 6)] = sim.read()
        runs[name] = samples
    late, regular = runs["one read late"], runs["every 10 ms"]
    assert 1.23 in late and not any(1.0 < t < 1.23 for t in late)          # nothing read during the gap
    for t, sample in late.items():
        expected = trajectory.sample(t)[0]
        np.testing.assert_allclose(sample.position, expected, atol=1e-4, err_msg=f"t={t}")
        np.testing.assert_allclose(sample.position, regular[t].position, atol=1e-9, err_msg=f"t={t}")
        assert np.all(np.abs(sample.velocity) <= VELOCITY * (1 + 1e-9))
    np.testing.assert_allclose(late[3.0].position, q[-1], atol=1e-9)         # arrived, no overshoot left
    worst = max(float(np.max(np.abs(s.position - trajectory.sample(t)[0]))) for t, s in late.items())
    print(f"\nsim_stream_tracking: worst |position - trajectory| {worst:.2e} rad")


def test_any_other_command_ends_the_stream():
    from robot_bridge.hardware.trajectory import Trajectory

    sim, clock = make_sim()
    sim.enable(True)
    sim.follow(Trajectory([0.0, 2.0], np.array([[0.0] * 7, [1.0] * 7])).sample_many)
    run(sim, clock, 0.5)
    sim.command_position(np.zeros(7))
    samples = run(sim, clock, 2.5)
    np.testing.assert_allclose(samples[-1].position, np.zeros(7), atol=1e-9)      # back home, not at 1.0
    sim.follow(Trajectory([clock.t, clock.t + 1.0], np.array([[0.0] * 7, [0.5] * 7])).sample_many)
    run(sim, clock, 0.3)
    sim.halt()
    samples = run(sim, clock, 1.0)
    assert np.all(samples[-1].velocity == 0.0) and np.all(samples[-1].position < 0.5)
