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

    def step_all(dt):                                   # the reference: every module, every sub-step
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
