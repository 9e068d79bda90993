"""Pick and place as core sequences (issue 43): planning.pick_place run by a fake executor.

The step order, a failing step ending the sequence with its code and no later step run, a gripper without
joints (an hpp gripper that is a frame) getting no gripper command, and -- on the embedded arm's planner, the
fake executor moving the planner's state as a controller would -- the grasp of such a gripper planned and
run, the pre-grasp taken along the handle's approaching_direction."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.planning.errors import CONTROL_FAILED, FAILURE, NO_IK_SOLUTION, PREEMPTED, SUCCESS
from robot_bridge.planning.errors import TIMED_OUT
from robot_bridge.planning.errors import MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE
from robot_bridge.planning.goals import GraspPlan, MotionPlan, PlacePlan, Trajectory
from robot_bridge.planning.pick_place import (PICK_STEPS, PLACE_STEPS, ExecutionFailed, Fingers, GripResult,
                                              Retreat, Step, pick, place, retreat_of)

LINK = "gripper_base"


def _motion(name: str) -> MotionPlan:
    traj = Trajectory(["j"], np.array([0.0, 1.0]), np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)))
    plan = MotionPlan("arm", np.zeros((2, 1)), traj)
    plan.name = name
    return plan


class FakeExecutor:
    """Records every call; ``fail``: (method, nth call of it, code) raises ExecutionFailed there;
    ``stalled``: what a close reports."""

    def __init__(self, fail=None, stalled=True):
        self.calls: list = []
        self.fail, self.stalled = fail, stalled
        self.counts: dict = {}
        self.frames = {"": np.eye(4)}
        self.link = np.eye(4)
        self.link[:3, 3] = (0.5, 0.0, 1.0)

    def _call(self, *call):
        self.calls.append(call)
        n = self.counts[call[0]] = self.counts.get(call[0], 0) + 1
        if self.fail and self.fail[:2] == (call[0], n):
            raise ExecutionFailed(self.fail[2], f"{call[0]} #{n} failed")

    def move(self, plan, monitor=True):
        self._call("move", plan.name, monitor)

    def grip(self, position, joint):
        self._call("grip", position, joint)
        return GripResult(position, self.stalled)

    def attach(self, body, link):
        self._call("attach", body, link)

    def detach(self, body, link):
        self._call("detach", body, link)

    def link_pose(self, link):
        return self.link.copy()

    def frame_pose(self, frame):
        return self.frames[frame]

    def plan_pose(self, goal):
        self._call("plan_pose", goal.frame, tuple(np.round(goal.pose[:3, 3], 9)))
        return _motion("retreat")


def _grasp_plan() -> GraspPlan:
    return GraspPlan(_motion("reach"), _motion("approach"), np.eye(4), np.eye(4), LINK, np.eye(4), "ball_0",
                     None, [True] * 6)


def _place_plan() -> PlacePlan:
    return PlacePlan(_motion("reach"), _motion("approach"), np.eye(4), np.eye(4), LINK, "ball_0", np.eye(4),
                     ["table"])


FINGERS = Fingers("finger_joint", 0.04, 0.0)


def test_pick_opens_reaches_approaches_closes_attaches_and_lifts():
    ex = FakeExecutor()
    result = pick(ex, _grasp_plan(), FINGERS, Retreat(None, 0.05))
    assert result.ok and result.code == SUCCESS
    assert [o.step for o in result.outcomes] == list(PICK_STEPS) == result.steps()
    assert ex.calls == [("grip", 0.04, "finger_joint"), ("move", "reach", True),
                        ("move", "approach", False),                 # the body is meant to be touched
                        ("grip", 0.0, "finger_joint"), ("attach", "ball_0", LINK),
                        ("plan_pose", LINK, (0.5, 0.0, 1.05)), ("move", "retreat", True)]


def test_pick_postures_given_by_the_goal_win():
    ex = FakeExecutor()
    assert pick(ex, _grasp_plan(), FINGERS, Retreat(None, 0.0), opening=0.03, closing=0.01).ok
    assert [c for c in ex.calls if c[0] == "grip"] == [("grip", 0.03, "finger_joint"),
                                                       ("grip", 0.01, "finger_joint")]
    assert ex.calls[-1] == ("attach", "ball_0", LINK)                # distance 0: no retreat


def test_place_reaches_approaches_opens_detaches_and_retreats_along_its_frame():
    ex = FakeExecutor()
    turn = np.eye(4)
    turn[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]                 # +x of the frame is +y of the world
    ex.frames["tool"] = turn
    result = place(ex, _place_plan(), FINGERS, Retreat((2.0, 0.0, 0.0), 0.1, "tool"), opening=0.035)
    assert result.ok and [o.step for o in result.outcomes] == list(PLACE_STEPS)
    assert ex.calls == [("move", "reach", True), ("move", "approach", False),
                        ("grip", 0.035, "finger_joint"), ("detach", "ball_0", LINK),
                        ("plan_pose", LINK, (0.5, 0.1, 1.0)), ("move", "retreat", True)]


PICK_FAILURES = [(Step.OPEN, ("grip", 1, CONTROL_FAILED)), (Step.PRE_GRASP, ("move", 1, PREEMPTED)),
                 (Step.APPROACH, ("move", 2, TIMED_OUT)), (Step.CLOSE, ("grip", 2, CONTROL_FAILED)),
                 (Step.ATTACH, ("attach", 1, FAILURE)), (Step.RETREAT, ("plan_pose", 1, NO_IK_SOLUTION)),
                 (Step.RETREAT, ("move", 3, MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE))]


@pytest.mark.parametrize("step, fail", PICK_FAILURES)
def test_a_failing_pick_step_ends_the_pick_with_its_code(step, fail):
    ex = FakeExecutor(fail=fail)
    result = pick(ex, _grasp_plan(), FINGERS, Retreat(None, 0.05))
    assert not result.ok and result.code == fail[2] and result.failed.step == step
    assert result.outcomes[-1] is result.failed                      # no later step ran ...
    assert ex.calls[-1][0] == fail[0]                                # ... nor any later executor call
    assert [o.step for o in result.outcomes] == list(PICK_STEPS[:PICK_STEPS.index(step) + 1])
    assert f"{fail[0]} #{fail[1]} failed" in result.message
    if fail == ("move", 3, MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE):
        assert result.message.startswith("lift: ")


PLACE_FAILURES = [(Step.PRE_PLACE, ("move", 1, CONTROL_FAILED)), (Step.APPROACH, ("move", 2, TIMED_OUT)),
                  (Step.OPEN, ("grip", 1, CONTROL_FAILED)), (Step.DETACH, ("detach", 1, FAILURE)),
                  (Step.RETREAT, ("move", 3, PREEMPTED))]


@pytest.mark.parametrize("step, fail", PLACE_FAILURES)
def test_a_failing_place_step_ends_the_place_with_its_code(step, fail):
    ex = FakeExecutor(fail=fail)
    result = place(ex, _place_plan(), FINGERS, Retreat(None, 0.05))
    assert result.code == fail[2] and result.failed.step == step and result.outcomes[-1] is result.failed
    assert ex.calls[-1][0] == fail[0]
    assert [o.step for o in result.outcomes] == list(PLACE_STEPS[:PLACE_STEPS.index(step) + 1])


def test_fingers_that_close_without_stalling_grasp_nothing_and_attach_nothing():
    ex = FakeExecutor(stalled=False)
    result = pick(ex, _grasp_plan(), FINGERS, Retreat(None, 0.05))
    assert result.code == FAILURE and result.failed.step == Step.CLOSE
    assert "nothing grasped" in result.message and "'ball_0'" in result.message
    assert not [c for c in ex.calls if c[0] == "attach"]


def test_a_gripper_without_joints_gets_no_gripper_command():
    ex = FakeExecutor()
    frame = Fingers("")
    result = pick(ex, _grasp_plan(), frame, Retreat(None, 0.05))
    assert result.ok and not [c for c in ex.calls if c[0] == "grip"]
    assert result.steps() == [Step.PRE_GRASP, Step.APPROACH, Step.ATTACH, Step.RETREAT]
    assert {o.step for o in result.outcomes if o.skipped} == {Step.OPEN, Step.CLOSE}
    ex = FakeExecutor()
    assert place(ex, _place_plan(), frame, Retreat(None, 0.05)).ok
    assert not [c for c in ex.calls if c[0] == "grip"] and ("detach", "ball_0", LINK) in ex.calls


def test_retreat_of_a_translation_and_its_default():
    assert retreat_of((0, 0, 0), 0.1, "world", 0.05) == Retreat(None, 0.05, "")
    assert retreat_of((0, 0, 1), float("nan"), "world", 0.05) == Retreat(None, 0.05, "")
    assert retreat_of((0, 0, 1), -0.1, "world", 0.05).direction is None
    r = retreat_of((1, 0, 0), 0.2, "tool", 0.05)
    assert list(r.direction) == [1, 0, 0] and (r.distance, r.frame) == (0.2, "tool")


# -- on the embedded arm's planner -----------------------------------------------------------------------
class PlannerExecutor(FakeExecutor):
    """The fake on a real planner: a move puts the planner's state at the plan's end (as a controller that
    reaches its goal), attach / detach are the planner's, a retreat is planned by it."""

    def __init__(self, planner):
        super().__init__()
        self.planner = planner
        self.at: dict = {}                                         # step name -> gripper frame pose reached

    def move(self, plan, monitor=True):
        self._call("move", plan.group, monitor)
        self.planner.state = self.planner.full_vector(plan.group, plan.waypoints[-1])
        self.at[self.counts["move"]] = self.planner.link_pose(LINK)

    def grip(self, position, joint):
        self._call("grip", position, joint)
        self.planner.set_joint_state({joint: position})
        return GripResult(position, True)

    def attach(self, body, link):
        self._call("attach", body, link)
        self.planner.attach(body, link)

    def detach(self, body, link):
        self._call("detach", body, link)
        self.planner.detach(body)

    def link_pose(self, link):
        return self.planner.link_pose(link)

    def plan_pose(self, goal):
        self._call("plan_pose", goal.frame)
        return self.planner.plan(goal, timeout=5.0)


BALL_AT = (0.66, 0.0, 0.79)     # resting on the table top (z 0.74), radius 0.05
HPP_BALL = """<robot name="ball">
  <handle name="side_grasp" clearance="0.05" approaching_direction="{direction}">
    <position>0 0 0 0.7071067811865476 0 0.7071067811865476 0</position>
    <link name="ball"/>
    <mask>1 1 1 1 1 0</mask>
  </handle>
</robot>"""


def _embedded_planner(direction=None):
    pytest.importorskip("roboplan", reason="the planning extra is not installed")
    from fixtures.planning import scenes

    from robot_bridge.bringup import DATA_DIR
    from robot_bridge.formats import load, srdf
    from robot_bridge.planning import Planner

    robot = scenes.embedded_robot()
    hand = robot.semantics.grippers["hand"]
    hand.joints = []                                              # an hpp gripper as a frame on its link
    planner = Planner(robot, seed=5)
    ball = load(str(DATA_DIR / "objects" / "ball.kinbody.xml"))
    if direction is None:
        srdf.attach_semantics(ball, srdf.read_srdf(str(DATA_DIR / "ball.srdf"), ball))
    else:                                    # ball.srdf's handle as hpp files write it: the attribute
        text = HPP_BALL.format(direction=" ".join(map(str, direction)))
        srdf.attach_semantics(ball, srdf.read_srdf_string(text, ball))
    pose = np.eye(4)
    pose[:3, 3] = BALL_AT
    planner.add_body("ball_0", ball, pose)
    return planner


def test_a_frame_gripper_without_fingers_is_planned_and_picked_without_a_gripper_command():
    """An hpp gripper naming no joint, and no controller gripper on its body (the wiring stands in: which
    one the wiring finds is test_planner_wiring's): gripper_positions finds no finger, the grasp is planned
    all the same (main refused it: -15 "drives no joint"), the pick runs its moves, the ball is attached and
    lifted, the place puts it down -- and no gripper command is ever sent."""
    from types import SimpleNamespace

    from robot_bridge.planning.goals import GraspGoal, PlaceGoal
    from robot_bridge.planning.pick_place import gripper_positions

    planner = _embedded_planner()
    gripper = planner.semantics.grippers["hand"]
    no_gripper = SimpleNamespace(gripper_for=lambda link, robot: None)
    fingers = gripper_positions(planner, gripper, lambda: no_gripper)
    assert fingers.joint == ""
    planner.set_joint_state({"finger_joint": 0.04})              # the fingers' links: fixed, open
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", "side_grasp"), timeout=5.0)
    ex = PlannerExecutor(planner)
    result = pick(ex, grasp, fingers, Retreat(None, 0.05))
    assert result.ok, result.message
    assert planner.bodies["ball_0"].attached == LINK
    assert not [c for c in ex.calls if c[0] == "grip"]
    lifted = planner.body_pose("ball_0")
    assert np.allclose(lifted[:3, 3], np.add(BALL_AT, (0, 0, 0.05)), atol=2e-3), lifted[:3, 3]
    down = np.eye(4)
    down[:3, 3] = BALL_AT
    plan = planner.plan_place(PlaceGoal("ball_0", down), timeout=5.0)
    assert place(ex, plan, fingers, Retreat(None, 0.05)).ok
    assert planner.bodies["ball_0"].attached is None
    assert np.allclose(planner.body_pose("ball_0")[:3, 3], BALL_AT, atol=2e-3)
    assert not [c for c in ex.calls if c[0] == "grip"]


def test_a_frame_gripper_takes_the_fingers_of_its_end_effector():
    from robot_bridge.control.groups import wiring
    from robot_bridge.model.groups import driven_joints
    from robot_bridge.planning.pick_place import gripper_positions

    planner = _embedded_planner()
    fingers = gripper_positions(planner, planner.semantics.grippers["hand"],
                                lambda: wiring(planner.robot, driven_joints(planner.robot)))
    assert fingers.joint == "finger_joint"
    assert (fingers.open, fingers.closed) == (pytest.approx(0.04), pytest.approx(0.0))   # lwa3_gripper.srdf


@pytest.mark.parametrize("direction", [(0.0, 0.0, 1.0), (0.3, 0.0, 1.0)])
def test_the_pre_grasp_lies_back_along_the_handles_approaching_direction(direction):
    """The gripper frame at the end of the pre-grasp move sits the two clearances back from the handle along
    the handle's approaching_direction, read from the handle's attribute as hpp files write it (hpp_tutorial's
    box.srdf; ball.srdf's z, and a tilted one that moves the pre-grasp)."""
    from robot_bridge.planning.goals import GraspGoal

    planner = _embedded_planner(direction=direction)
    handle = planner.bodies["ball_0"].robot.semantics.handles["side_grasp"]
    gripper = planner.semantics.grippers["hand"]
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", "side_grasp"), start={"finger_joint": 0.04},
                               timeout=5.0)
    ex = PlannerExecutor(planner)
    assert pick(ex, grasp, Fingers("finger_joint", 0.04, 0.0), Retreat(None, 0.0)).ok
    at_pre = ex.at[1] @ gripper.pose                              # the gripper frame after the pre-grasp move
    at_grasp = ex.at[2] @ gripper.pose                            # ... after the approach
    d = np.asarray(direction) / np.linalg.norm(direction)
    back = (float(handle.clearance) + float(gripper.clearance)) * d
    ball = np.eye(4)
    ball[:3, 3] = BALL_AT
    handle_world = ball @ handle.pose                             # the ball's frame is its link's
    offset = np.linalg.inv(handle_world)[:3, :3] @ (at_pre[:3, 3] - handle_world[:3, 3])
    assert np.allclose(offset, -back, atol=2e-3), (offset, -back)
    assert np.allclose(at_grasp[:3, 3], handle_world[:3, 3], atol=2e-3)
