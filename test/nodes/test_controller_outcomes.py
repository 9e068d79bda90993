"""Issue 29: every terminal state of a goal reaches a real rclpy ActionClient with its code and reason, also
after a goal has succeeded (rclpy refuses a log call site that changes severity: after one success every
failed goal ended ABORTED with error_code 0 and no reason); big goals neither stall /joint_states nor
"succeed" without running their path."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from fixtures.hardware.lwa_fixture import JOINTS, Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")
from fixtures.hardware.controller import ABORTED, CANCELED, FINGER, SUCCEEDED, Client, embedded_robot, goal  # noqa: E402

MAX_POINTS = 10_000 # the documented default of max_trajectory_points
GAP = 3.0           # s: largest gap allowed between /joint_states stamps (50 Hz: 0.02 s; a loaded CI host
                    # stalls a process ~1.5 s at times; main stalled for the whole preparation, 5-30 s)


@pytest.fixture
def harness():
    h = Harness(lwa_robot(), state_rate=50.0)
    clients = []

    def client(spec, *options, action="/controller_node/follow_joint_trajectory"):
        clients.append(Client(spec, action, *options))
        return clients[-1]
    h.client = client
    yield h
    for c in clients:
        c.close()
    h.close()


def check(result: dict, status: int, code: int, *words: str) -> None:
    assert (result["status"], result["error_code"]) == (status, code), result
    assert result["error_string"], result
    for word in words:
        assert word in result["error_string"], result


def succeed(h, target: float, t: float = 1.0) -> None:
    check(h.client(goal([target] + [0.0] * 6, t)).result(), SUCCEEDED, 0, "goal reached")


def test_every_terminal_state_after_a_success_carries_its_code_and_reason(harness, tmp_path):
    h = harness
    succeed(h, 0.3)
    # refused: invalid goal, invalid joints, old header timestamp
    check(h.client(goal([3.5] + [0.0] * 6, 1.0)).result(), ABORTED, -1, "outside limits")
    check(h.client(goal([0.1] * 3, 1.0, joints=JOINTS[:3])).result(), ABORTED, -2, "missing")
    check(h.client(goal([0.1] * 7, 1.0, stamp=100.0)).result(), ABORTED, -3, "in the past")
    # preempted by a newer goal: canceled with JTC's words
    trigger = tmp_path / "send"
    # (4 s: its path from wherever joint 1 is when it arrives -- under load up to ~0.9, moving -- stays well
    # within the joint's 1 rad/s; over 2 s a late start asked up to ~1.1 rad/s and ended behind the goal)
    second = h.client(goal([-0.3] + [0.0] * 6, 4.0), "--send-when", str(trigger))
    second.wait("ready")
    first = h.client(goal([1.0] + [0.0] * 6, 4.0))
    first.wait_moving(0, 0.45)
    trigger.touch()
    check(first.result(), CANCELED, -1, "new incoming action")
    check(second.result(), SUCCEEDED, 0, "goal reached")
    # canceled by the client: stopped within the limits (JTC's code 0) with the reason
    canceled = h.client(goal([2.5] + [0.0] * 6, 5.0), "--cancel-beyond", "0", "0.2")
    assert canceled.wait("cancel_response")[0]["canceling"] == 1
    check(canceled.result(), CANCELED, 0, "canceled")
    # aborted by the path tolerance and by the goal tolerance, naming the joint and its error
    spec = goal([2.5] + [0.0] * 6, 0.5, velocities=False, path_tolerance=[{"name": "lwa_joint_1",
                                                                          "position": 0.05}])
    check(h.client(spec).result(), ABORTED, -4, "path tolerance violated", "lwa_joint_1 position error")
    spec = goal([-1.5] + [0.0] * 6, 0.5, goal_time_tolerance=0.1,
                goal_tolerance=[{"name": "lwa_joint_1", "position": 0.001}])
    check(h.client(spec).result(), ABORTED, -5, "not within goal tolerance", "lwa_joint_1 position error")
    succeed(h, 0.0, 3.0)                                   # and a goal still succeeds after all that


def test_a_gripper_goal_aborted_after_a_success_reports_its_result():
    """allow_stalling false: closing on a body aborts, stalled, at the contact (main: the severity error
    dropped the result, the client saw position 0 and stalled false)."""
    h = Harness(embedded_robot(box=True), state_rate=50.0, **{"gripper.allow_stalling": False})
    clients = []
    try:
        def command(position):
            clients.append(Client({"position": position, "max_effort": 0.0}, "/controller_node/gripper_cmd",
                                  "--gripper"))
            return clients[-1].result(timeout=60.0)
        opened = command(0.04)
        assert opened["status"] == SUCCEEDED and opened["reached_goal"], opened
        closed = command(0.0)
        assert closed["status"] == ABORTED and closed["stalled"] and not closed["reached_goal"], closed
        finger = h.node.joints.index(FINGER)
        assert closed["position"] == pytest.approx(h.latest_position()[finger], abs=1e-3)
        assert closed["position"] > 0.005                 # held open by the box, not closed
    finally:
        for c in clients:
            c.close()
        h.close()


def big_goal(tmp_path, count: int, duration: float, path, **extra) -> str:
    """@FILE of a goal of ``count`` points over ``duration`` s moving lwa_joint_1 along ``path(s)`` (s in
    (0, 1]; position and its first and second derivatives in s), the other joints at 0 (quintic)."""
    s = np.arange(1, count + 1) / count
    position, velocity, acceleration = path(s)
    zero = [0.0] * 6
    points = [{"positions": [float(p)] + zero, "velocities": [float(v) / duration] + zero,
               "accelerations": [float(a) / duration ** 2] + zero, "time_from_start": float(t)}
              for p, v, a, t in zip(position, velocity, acceleration, s * duration)]
    file = tmp_path / f"goal_{count}.json"
    file.write_text(json.dumps({"joint_names": JOINTS, "points": points, **extra}))
    return f"@{file}"


def stamps(messages) -> np.ndarray:
    return np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in messages])


def joint_states_since(h, since: float) -> list:
    """/joint_states received since ``since``, once 10 more have arrived (a stall shows as a gap between the
    stamps before it and those after it, however late the probe receives them)."""
    count = len(h.snapshot(h.joint_states, since))
    h.wait_for(lambda: len(h.snapshot(h.joint_states, since)) >= count + 10, 30.0, "joint states after it")
    return h.snapshot(h.joint_states, since)


def out_and_back(s):
    """0 -> 0.3 -> 0 rad from rest to rest, ends where it starts (a goal that could "succeed" without
    moving); over 2 s within lwa_joint_1's limits (0.47 rad/s, 1.5 rad/s^2)."""
    w = 2.0 * math.pi
    return 0.15 * (1.0 - np.cos(w * s)), 0.15 * w * np.sin(w * s), 0.15 * w * w * np.cos(w * s)


def test_a_goal_at_the_point_limit_keeps_joint_states_flowing_and_runs_its_whole_path(harness, tmp_path):
    """10,000 quintic points over 2 s: accepted, /joint_states without a gap while it is received, checked
    and started (main: a stall of 5-20 s, then the path already over: SUCCEEDED without moving)."""
    h = harness
    # goal_time_tolerance 3 s: a loaded CI host stalls the control thread, so the sim arm can still be
    # settling (0.019 rad/s) 0.5 s after the end; this test is about the path running, not about settling
    spec = big_goal(tmp_path, MAX_POINTS, 2.0, out_and_back, goal_time_tolerance=3.0)
    since = time.monotonic()
    client = h.client(spec, "--timeout", "120")
    result = client.result(timeout=120.0)
    check(result, SUCCEEDED, 0, "goal reached")
    messages = joint_states_since(h, since)
    gaps = np.diff(stamps(messages))
    assert len(messages) > 50 and gaps.max() < GAP, (len(messages), gaps.max())
    peak = max(m.position[0] for m in messages)
    assert 0.25 < peak < 0.4, peak                        # the path ran: out to 0.3 (as tracked) and back


def test_a_goal_above_the_point_limit_is_refused_with_the_reason_and_the_arm_stays(harness, tmp_path):
    h = harness
    before = h.latest_position()
    spec = big_goal(tmp_path, MAX_POINTS + 1, 2.0, lambda s: (0.5 * s, 0.5 + 0 * s, 0 * s))
    since = time.monotonic()
    result = h.client(spec, "--timeout", "120").result(timeout=120.0)
    check(result, ABORTED, -1, f"{MAX_POINTS + 1} points", f"more than the {MAX_POINTS}",
          "max_trajectory_points")
    messages = joint_states_since(h, since)
    assert np.diff(stamps(messages)).max() < GAP
    assert np.array_equal(h.latest_position(), before)


def test_a_big_goal_whose_end_is_not_reached_reports_goal_tolerance_violated(harness, tmp_path):
    """After a success, 10,000 points reaching 1.5 rad in 0.5 s (the joint's limit allows 1 rad/s): the arm
    lags, and the goal ends aborted naming the joint and its error, not succeeded."""
    h = harness
    succeed(h, 0.1, 0.5)
    spec = big_goal(tmp_path, MAX_POINTS, 0.5, lambda s: (1.5 * s, 1.5 + 0 * s, 0 * s),
                    goal_time_tolerance=0.2)
    result = h.client(spec, "--timeout", "120").result(timeout=120.0)
    check(result, ABORTED, -5, "not within goal tolerance", "lwa_joint_1 position error")
    assert h.latest_position()[0] < 1.4
