"""joint_trajectory_controller's goal rules without ROS: validation codes, tolerances, outcomes, stops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.control import (MAX_POINTS, ErrorCode, GoalRejected, GoalState, GoalTracker, JointTolerance,
                                  Tolerances, TrajectoryCommand, TrajectoryPoint, build_trajectory,
                                  check_start, prepare_trajectory, resolve_tolerances, stop_trajectory)
from robot_bridge.hardware.base import JointLimits
from robot_bridge.hardware.trajectory import Trajectory

JOINTS = ["a", "b", "c"]
LIMITS = [JointLimits(-2.0, 2.0, 1.0, 2.0), JointLimits(-1.0, 1.0, 1.5, 3.0), JointLimits(velocity=2.0,
                                                                                        acceleration=4.0)]
ZERO = (np.zeros(3), np.zeros(3))


def cmd(names, *points, stamp=0.0):
    return TrajectoryCommand(list(names), list(points), stamp)


def pt(positions, t, velocities=(), accelerations=()):
    return TrajectoryPoint(list(positions), list(velocities), list(accelerations), t)


def rejected(command, now=10.0, allow_partial=False) -> GoalRejected:
    with pytest.raises(GoalRejected) as info:
        build_trajectory(command, JOINTS, LIMITS, ZERO, now, allow_partial)
    return info.value


@pytest.mark.parametrize("names, why", [
    ([], "empty"), (["a", "a", "b"], "duplicate"), (["a", "b", "nope"], "unknown"),
    (["a", "b"], "allow_partial_joints_goal")])
def test_joint_name_rules_give_invalid_joints(names, why):
    err = rejected(cmd(names, pt([0.1] * len(names), 1.0)))
    assert err.code is ErrorCode.INVALID_JOINTS and why in str(err)


def test_partial_goal_allowed_holds_the_other_joints_at_their_reference():
    reference = (np.array([0.5, -0.2, 3.0]), np.zeros(3))
    traj = build_trajectory(cmd(["b"], pt([0.4], 1.0)), JOINTS, LIMITS, reference, 10.0, True)
    p, _, _ = traj.sample(10.5)
    assert p == pytest.approx([0.5, 0.1, 3.0])


@pytest.mark.parametrize("command, why", [
    (cmd(JOINTS), "no points"),
    (cmd(JOINTS, pt([0.1, 0.1], 1.0)), "positions for 3"),
    (cmd(JOINTS, pt([0.1] * 3, 1.0, [0.0] * 3), pt([0.2] * 3, 2.0)), "velocities"),
    (cmd(JOINTS, pt([0.1] * 3, 1.0, (), [0.0] * 3)), "accelerations"),
    (cmd(JOINTS, pt([0.1] * 3, 1.0), pt([0.2] * 3, 1.0)), "strictly increasing"),
    (cmd(JOINTS, pt([0.1] * 3, 2.0), pt([0.2] * 3, 1.0)), "strictly increasing"),
    (cmd(JOINTS, pt([0.1] * 3, -1.0)), "non-negative"),
    (cmd(JOINTS, pt([0.1, math.nan, 0.0], 1.0)), "non-finite"),
    (cmd(JOINTS, pt([0.1, 1.2, 0.0], 1.0)), "b=1.200000 outside limits"),
    (cmd(JOINTS, pt([-2.5, 0.0, 0.0], 1.0)), "a=-2.500000 outside limits"),
])
def test_trajectory_rules_give_invalid_goal(command, why):
    err = rejected(command)
    assert err.code is ErrorCode.INVALID_GOAL and why in str(err)


def test_unbounded_joint_takes_any_finite_position():
    build_trajectory(cmd(JOINTS, pt([0.0, 0.0, 100.0], 1.0)), JOINTS, LIMITS, ZERO, 10.0, False)


def test_trajectory_in_the_past_is_an_old_header_timestamp():
    err = rejected(cmd(JOINTS, pt([0.1] * 3, 1.0), stamp=5.0), now=10.0)
    assert err.code is ErrorCode.OLD_HEADER_TIMESTAMP and "4.000 s in the past" in str(err)


def test_future_first_point_starts_from_the_reference():
    traj = build_trajectory(cmd(JOINTS, pt([0.4] * 3, 2.0)), JOINTS, LIMITS, ZERO, 10.0, False)
    assert traj.start_time == 10.0 and traj.end_time == 12.0
    assert traj.sample(11.0)[0] == pytest.approx([0.2] * 3)


def test_tolerances_zero_keeps_default_negative_erases_positive_replaces():
    defaults = Tolerances.uniform(3, path_position=0.1, goal_position=0.01, stopped_velocity=0.02,
                                  goal_time=0.5)
    tol = resolve_tolerances(defaults, JOINTS,
                             path=[JointTolerance("a", 0.0), JointTolerance("b", -1.0),
                                   JointTolerance("c", 0.3)],
                             goal=[JointTolerance("a", 0.05, -1.0)], goal_time=0.0)
    assert tol.path[:, 0] == pytest.approx([0.1, 0.0, 0.3])
    assert tol.goal[0] == pytest.approx([0.05, 0.0, 0.0]) and tol.goal[1] == pytest.approx([0.01, 0.02, 0.0])
    assert tol.goal_time == 0.5
    assert resolve_tolerances(defaults, JOINTS, goal_time=2.0).goal_time == 2.0
    assert defaults.path[1, 0] == 0.1                               # defaults untouched
    with pytest.raises(GoalRejected) as info:
        resolve_tolerances(defaults, JOINTS, path=[JointTolerance("zz", 0.1)])
    assert info.value.code is ErrorCode.INVALID_JOINTS
    with pytest.raises(GoalRejected) as info:
        resolve_tolerances(defaults, JOINTS, goal_time=-1.0)
    assert info.value.code is ErrorCode.INVALID_GOAL


def _tracker(path_position=0.0, goal_position=0.01, goal_time=0.5):
    traj = Trajectory([0.0, 1.0], np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5]]))
    return GoalTracker(traj, JOINTS, Tolerances.uniform(3, path_position=path_position,
                                                        goal_position=goal_position, stopped_velocity=0.01,
                                                        goal_time=goal_time))


def state(p, v=(0.0, 0.0, 0.0)):
    return np.array([p, v, [0.0] * 3], dtype=float)


def test_path_tolerance_violation_aborts_naming_joint_and_error():
    tracker = _tracker(path_position=0.05)
    assert tracker.check(0.5, state([0.5, 0.25, -0.25]), state([0.47, 0.25, -0.25])) is None
    out = tracker.check(0.5, state([0.5, 0.25, -0.25]), state([0.5, 0.15, -0.25]))
    assert out.state is GoalState.ABORTED and out.code is ErrorCode.PATH_TOLERANCE_VIOLATED
    assert "b position error +0.100000 exceeds 0.050000" in out.message


def test_an_overshoot_past_the_end_out_of_the_corridor_is_a_path_violation_not_a_success():
    """Issue 42: the arm overshot its goal by 0.068 rad, came back within the goal tolerance and the goal
    reported SUCCESS.  The corridor (the path tolerance's position) holds after the end too, around the final
    point; the outcome names the worst deviation seen."""
    tracker = _tracker(path_position=0.015, goal_position=0.015)
    assert tracker.check(0.5, state([0.5, 0.25, -0.25]), state([0.49, 0.25, -0.25])) is None
    final = state([1, 0.5, -0.5])
    out = tracker.check(1.02, final, state([1.03, 0.5, -0.5], [0.2, 0, 0]))      # past the goal, moving on
    assert out is not None and out.code is ErrorCode.PATH_TOLERANCE_VIOLATED, out
    assert "after the trajectory's end" in out.message and "a position error -0.030000" in out.message
    assert out.worst == ("a", pytest.approx(0.03))
    assert "worst deviation from the path: a 0.030000" in out.message
    # within the corridor all the way: success, its worst deviation stated
    tracker = _tracker(path_position=0.015, goal_position=0.015)
    assert tracker.check(0.5, state([0.5, 0.25, -0.25]), state([0.5, 0.238, -0.25])) is None
    out = tracker.check(1.0, final, state([1.0, 0.5, -0.5]))
    assert out.code is ErrorCode.SUCCESSFUL and out.worst == ("b", pytest.approx(0.012))
    assert "worst deviation from the path: b 0.012000" in out.message


def test_goal_reached_within_tolerance_succeeds():
    tracker = _tracker()
    assert tracker.check(1.0, state([1, 0.5, -0.5]), state([0.995, 0.5, -0.5])).code is ErrorCode.SUCCESSFUL


def test_goal_tolerance_waits_goal_time_then_aborts():
    tracker = _tracker(goal_time=0.5)
    assert tracker.check(1.2, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5])) is None       # still in time
    moving = tracker.check(1.2, state([1, 0.5, -0.5]), state([1.0, 0.5, -0.5], [0.2, 0, 0]))
    assert moving is None                                              # there but not stopped yet
    assert tracker.check(1.51, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5])) is None  # 0.31 s since 1.2
    out = tracker.check(1.71, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5]))
    assert out.state is GoalState.ABORTED and out.code is ErrorCode.GOAL_TOLERANCE_VIOLATED
    assert "a position error +0.100000" in out.message and "0.710 s after the trajectory's end" in out.message


def test_goal_time_counts_from_the_end_when_the_loop_is_on_time():
    tracker = _tracker(goal_time=0.5)
    assert tracker.check(1.0, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5])) is None
    out = tracker.check(1.51, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5]))
    assert out.code is ErrorCode.GOAL_TOLERANCE_VIOLATED


def test_a_control_loop_stalled_past_the_deadline_does_not_judge_a_sample_taken_before_the_final_setpoint():
    # the first step after the end comes 0.6 s late (a loaded host): its sample still moves with the old
    # feed-forward; the hardware gets goal_time from this step, when the final point is commanded
    tracker = _tracker(goal_time=0.5)
    assert tracker.check(1.6, state([1, 0.5, -0.5]), state([1.05, 0.5, -0.5], [0.3, 0, 0])) is None
    assert tracker.check(1.7, state([1, 0.5, -0.5]), state([1.0, 0.5, -0.5])).code is ErrorCode.SUCCESSFUL


def test_goal_time_zero_waits_indefinitely_as_jtc():
    tracker = _tracker(goal_time=0.0)
    assert tracker.check(1000.0, state([1, 0.5, -0.5]), state([0.9, 0.5, -0.5])) is None


def test_stop_decelerates_every_joint_within_its_limit_and_together():
    p0, v0 = np.array([0.0, 0.2, 0.0]), np.array([1.0, -1.5, 0.5])
    traj = stop_trajectory(p0, v0, LIMITS, 3.0)
    duration = traj.end_time - 3.0
    assert duration == pytest.approx(max(1.0 / 2.0, 1.5 / 3.0, 0.5 / 4.0))
    ts = np.linspace(3.0, traj.end_time, 101)
    for t in ts:
        _, v, a = traj.sample(t)
        assert np.all(np.abs(a) <= np.array([2.0, 3.0, 4.0]) + 1e-9)
        assert np.all(np.abs(v) <= np.abs(v0) + 1e-12)
    p_end, v_end, _ = traj.sample(traj.end_time + 1.0)
    assert v_end == pytest.approx(0.0) and p_end == pytest.approx(p0 + v0 * duration / 2)
    # a constant deceleration: v(t) linear, p(T/2) = p0 + 3/8 v0 T
    assert traj.sample(3.0 + duration / 2)[1] == pytest.approx(v0 / 2)
    assert traj.sample(3.0 + duration / 2)[0] == pytest.approx(p0 + 0.375 * v0 * duration)


def test_stop_at_rest_holds():
    traj = stop_trajectory(np.array([0.3, 0.1, 0.0]), np.zeros(3), LIMITS, 1.0)
    assert traj.sample(5.0)[0] == pytest.approx([0.3, 0.1, 0.0])


def test_future_stamp_first_point_due_at_stamp_reached_by_a_cubic_from_the_reference():
    # from the current state (0, 0) to (0.4, 0) due at stamp + 1 s = now + 2 s: at s = t/T the position is
    # 0.4 (3 s^2 - 2 s^3); at the middle (p0 + p1) / 2 at speed 1.5 d / T
    traj = build_trajectory(cmd(JOINTS, pt([0.4] * 3, 1.0, [0.0] * 3), stamp=11.0), JOINTS, LIMITS, ZERO,
                            10.0, False)
    assert traj.sample(10.5)[0] == pytest.approx([0.4 * (3 * 0.25 ** 2 - 2 * 0.25 ** 3)] * 3)
    p, v, _ = traj.sample(11.0)
    assert p == pytest.approx([0.2] * 3) and v == pytest.approx([1.5 * 0.4 / 2.0] * 3)
    assert traj.sample(12.0)[0] == pytest.approx([0.4] * 3)


def test_linear_from_positions_only():
    traj = build_trajectory(cmd(JOINTS, pt([0.4] * 3, 2.0)), JOINTS, LIMITS, ZERO, 10.0, False)
    p, v, _ = traj.sample(11.0)
    assert p == pytest.approx([0.2] * 3) and v == pytest.approx([0.2] * 3)


def test_a_trajectory_beyond_the_rate_limits_names_needed_and_allowed_values():
    """Accepted, not time-scaled: rate_excess gives the node its one warning (needed vs allowed)."""
    from robot_bridge.control import rate_excess

    fast = build_trajectory(cmd(JOINTS, pt([0.4] * 3, 0.1)), JOINTS, LIMITS, ZERO, 10.0, False)
    text = rate_excess(fast, JOINTS, LIMITS)
    assert text is not None and f"a needs velocity 4, its limit is {LIMITS[0].velocity:.4g}" in text
    slow = build_trajectory(cmd(JOINTS, pt([0.4] * 3, 2.0)), JOINTS, LIMITS, ZERO, 10.0, False)
    assert rate_excess(slow, JOINTS, LIMITS) is None


def test_more_points_than_the_limit_are_refused_before_any_point_is_read():
    """The count is checked first: points past the limit (here each one malformed) are never converted."""
    over = cmd(JOINTS, *[pt([0.1], 1.0 + i) for i in range(MAX_POINTS + 1)])
    err = rejected(over)
    assert err.code is ErrorCode.INVALID_GOAL and f"{MAX_POINTS + 1} points" in str(err)
    assert f"more than the {MAX_POINTS}" in str(err) and "max_trajectory_points" in str(err)
    limit = cmd(JOINTS, *[pt([0.1] * 3, 0.01 * (i + 1)) for i in range(5)])
    with pytest.raises(GoalRejected, match="5 points, more than the 4"):
        prepare_trajectory(limit, JOINTS, LIMITS, False, max_points=4)


def test_a_goal_at_the_limit_is_accepted():
    points = [pt([0.5 * math.sin(i / 100.0)] * 3, 0.01 * (i + 1)) for i in range(MAX_POINTS)]
    traj = build_trajectory(cmd(JOINTS, *points), JOINTS, LIMITS, ZERO, 10.0, False)
    assert traj.end_time == pytest.approx(10.0 + 0.01 * MAX_POINTS)
    assert traj.sample(10.0 + 0.01 * 150)[0] == pytest.approx([0.5 * math.sin(149 / 100.0)] * 3)


def test_an_unstamped_goal_starts_when_the_control_loop_takes_it_not_when_it_arrived():
    """As joint_trajectory_controller: header.stamp 0 is "now" at the moment the trajectory is started, so
    however long validation took, the whole path runs (it used to be placed at the arrival time, and a goal
    prepared for longer than it lasts was already over: "goal reached" without moving)."""
    prepared = prepare_trajectory(cmd(JOINTS, pt([0.4] * 3, 1.0), pt([0.0] * 3, 2.0)), JOINTS, LIMITS, False)
    traj = prepared.start(ZERO, 40.0)                      # taken 30 s after it arrived at 10.0
    assert traj.start_time == 40.0 and traj.end_time == 42.0
    assert traj.sample(41.0)[0] == pytest.approx([0.4] * 3)
    stamped = prepare_trajectory(cmd(JOINTS, pt([0.4] * 3, 1.0), stamp=10.0), JOINTS, LIMITS, False)
    with pytest.raises(GoalRejected, match="ended 29.000 s in the past") as info:
        stamped.start(ZERO, 40.0)
    assert info.value.code is ErrorCode.OLD_HEADER_TIMESTAMP


def test_a_trajectory_starting_off_the_measured_joints_is_refused_before_any_step():
    """CI's stop 47: a goal's trajectory began 0.75 rad off the arm; its first step jumped there."""
    tol = Tolerances.uniform(3, path_position=0.015, goal_position=0.015)
    here = np.array([0.1, -0.2, 0.3])
    jump = build_trajectory(cmd(JOINTS, pt([0.1, 0.55, 0.3], 0.0), pt([0.2, 0.6, 0.3], 1.0)), JOINTS, LIMITS,
                            (here, np.zeros(3)), 10.0, False)
    with pytest.raises(GoalRejected) as info:
        check_start(jump, 10.0, here, tol, JOINTS)
    assert info.value.code is ErrorCode.INVALID_GOAL
    assert "b position error +0.750000 exceeds 0.015000" in str(info.value)
    assert "a position" not in str(info.value)
    # within the tolerance, from the reference (a future first point), or with the path unchecked: accepted
    near = build_trajectory(cmd(JOINTS, pt(here + 0.01, 0.0), pt([0.2, 0.6, 0.3], 1.0)), JOINTS, LIMITS,
                            (here, np.zeros(3)), 10.0, False)
    check_start(near, 10.0, here, tol, JOINTS)
    later = build_trajectory(cmd(JOINTS, pt([0.1, 0.55, 0.3], 1.0)), JOINTS, LIMITS, (here, np.zeros(3)),
                             10.0, False)
    check_start(later, 10.0, here, tol, JOINTS)
    check_start(jump, 10.0, here, Tolerances.uniform(3, path_position=0.0, goal_position=0.015), JOINTS)
