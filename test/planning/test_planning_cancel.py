"""Issue 42: planning that can be interrupted.  A cancel ends a planning attempt within one search slice with
PlanningCanceled (MoveIt's PREEMPTED, -7), judged by the token's own stamps on a fake clock (no sleeps).

The search cannot succeed: the backend's RRT-Connect is replaced by a fake that spends its whole budget on the
fake clock and finds nothing (as a goal behind a wall would); each call is one slice.  The cancel is asked for
from inside the third slice, as another thread would while the planner searches."""

from __future__ import annotations

import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")

from fixtures.planning import scenes  # noqa: E402

from robot_bridge.planning import JointGoal, Planner, errors  # noqa: E402
from robot_bridge.planning.cancel import PLAN_SLICE, CancelToken  # noqa: E402
from robot_bridge.planning.master import MasterModel  # noqa: E402

GOAL = {"j1": 0.8, "j2": 0.9, "j4": 1.2}


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def planner():
    return Planner(scenes.embedded_robot(), seed=7)


@pytest.fixture
def hopeless(planner, monkeypatch):
    """(clock, budgets of the searches, token): a search that never finds a path, on a fake clock; the
    token is canceled 0.02 s into the third search."""
    from robot_bridge.planning import backend

    clock = FakeClock()
    token = CancelToken(clock)
    budgets: list[float] = []

    def search(q0, q1, group, timeout, step, check_step):
        budgets.append(timeout)
        if len(budgets) == 3:
            clock.t += 0.02
            token.cancel("canceled by the client")
            clock.t += timeout - 0.02
        else:
            clock.t += timeout
        return None

    monkeypatch.setattr(backend, "monotonic", clock)
    monkeypatch.setattr(planner._backend, "plan", search)
    monkeypatch.setattr(planner._backend, "segment_free", lambda *a, **k: False)   # no straight path
    return clock, budgets, token


def test_a_cancel_ends_the_search_within_one_slice_with_preempted(planner, hopeless):
    clock, budgets, token = hopeless
    with pytest.raises(errors.PlanningCanceled) as info:
        planner.plan(JointGoal(GOAL), group="arm", timeout=10.0, cancel=token)
    assert info.value.code == -7                     # moveit_msgs PREEMPTED (checked below)
    assert len(budgets) == 3, "searched on after the cancel"
    assert all(b <= PLAN_SLICE + 1e-12 for b in budgets), budgets
    assert token.requested_at is not None and token.seen_at is not None and token.stopped_at is not None
    assert token.seen_at - token.requested_at <= PLAN_SLICE
    assert token.stopped_at - token.requested_at <= 0.1       # the goal: within 100 ms
    assert "canceled by the client" in str(info.value)


def test_without_a_cancel_the_attempt_runs_its_time_and_times_out(planner, hopeless):
    """The same hopeless search, not canceled: TIMED_OUT after the time allowed (on the fake clock); without
    a token the search is one call of the whole budget, as before."""
    clock, budgets, token = hopeless
    t0 = clock.t
    with pytest.raises(errors.PlanningTimedOut):
        planner.plan(JointGoal(GOAL), group="arm", timeout=1.0)
    assert budgets and budgets[0] > PLAN_SLICE                   # one search, the whole time
    assert clock.t - t0 >= 1.0 - 1e-9
    budgets.clear()
    uncanceled = CancelToken(clock)
    t0 = clock.t
    with pytest.raises(errors.PlanningTimedOut):
        planner.plan(JointGoal(GOAL), group="arm", timeout=1.0, cancel=uncanceled)
    assert len(budgets) >= 1.0 / PLAN_SLICE - 1 and clock.t - t0 >= 1.0 - 1e-9
    assert uncanceled.seen_at is None and uncanceled.stopped_at is None


def test_a_cancel_before_planning_starts_plans_nothing(planner, hopeless):
    clock, budgets, token = hopeless
    token.cancel("preempted by a new goal")
    with pytest.raises(errors.PlanningCanceled) as info:
        planner.plan(JointGoal(GOAL), group="arm", timeout=10.0, cancel=token)
    assert budgets == [] and "preempted" in str(info.value)


def test_master_model_answers_preempted_and_caps_the_time(planner, hopeless, monkeypatch):
    clock, budgets, token = hopeless
    master = MasterModel.__new__(MasterModel)          # only plan() is exercised: the planner given
    master.planner, master.max_planning_time, master.problems = planner, 2.0, []
    result = master.plan(JointGoal(GOAL), group="arm", timeout=10.0, cancel=token)
    assert result.code == -7 and result.plan is None
    budgets.clear()
    t0 = clock.t
    result = master.plan(JointGoal(GOAL), group="arm", timeout=1e9)     # capped at 2 s
    assert result.code == -6
    assert 2.0 - 1e-9 <= clock.t - t0 <= 2.0 + 1e-6


def test_preempted_is_moveit_msgs_value():
    msgs = pytest.importorskip("moveit_msgs.msg")
    assert errors.PlanningCanceled("x").code == msgs.MoveItErrorCodes.PREEMPTED == -7
