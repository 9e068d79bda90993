"""Issue 42: every trajectory the planner sends carries its corridor -- path and goal tolerance on every joint
equal to the checking step of its collision check plus the stated margin (``Planner.corridor``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pytest.importorskip("moveit_msgs.action", reason="moveit_msgs is not built into this environment")

from fixtures.planning import scenes  # noqa: E402
from robot_bridge.planning import JointGoal, Planner  # noqa: E402
from robot_bridge.planning.planner import CORRIDOR_MARGIN  # noqa: E402


def test_the_planned_goal_carries_the_checked_corridor_on_every_joint():
    from robot_bridge.nodes.planner import trajectory_goal

    planner = Planner(scenes.embedded_robot(), seed=3, check_step=0.01)
    assert planner.corridor() == pytest.approx(0.01 + CORRIDOR_MARGIN)
    assert Planner(scenes.embedded_robot(), seed=3, check_step=0.02).corridor() == \
        pytest.approx(0.02 + CORRIDOR_MARGIN)                  # follows the step the path is checked at
    plan = planner.plan(JointGoal({"j1": 0.5, "j4": 0.7}), group="arm", timeout=10.0)
    trajectory = plan.trajectory
    goal = trajectory_goal(trajectory, planner.corridor())
    names = list(trajectory.joint_names)
    assert list(goal.trajectory.joint_names) == names and len(goal.trajectory.points) == len(trajectory.times)
    for tolerances in (goal.path_tolerance, goal.goal_tolerance):
        assert [t.name for t in tolerances] == names
        assert all(t.position == pytest.approx(0.015) for t in tolerances)
        assert all(t.velocity == 0.0 and t.acceleration == 0.0 for t in tolerances)   # controller defaults
    last = goal.trajectory.points[-1]
    np.testing.assert_allclose(last.positions, trajectory.positions[-1])
    assert goal.goal_time_tolerance.sec == 0 and goal.goal_time_tolerance.nanosec == 0
