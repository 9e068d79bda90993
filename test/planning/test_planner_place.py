"""Planner.plan_place (MoveIt's Place) against independent truth: the ball picked from the table and put
back where it was, its placed pose from pinocchio's forward kinematics of the published URDF and the grip
derived by hand; the table top (0.74 m) and the ball's radius (0.05 m) from default.env.xml and
ball.kinbody.xml; the motion rechecked by the independent pinocchio + coal checker (pin_checker.py)."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pytest.importorskip("pinocchio", reason="pinocchio (pin) is needed for the independent checker")

from fixtures.planning import scenes  # noqa: E402
from fixtures.planning.pin_checker import PinChecker  # noqa: E402

from robot_bridge.bringup import DATA_DIR  # noqa: E402
from robot_bridge.formats import load  # noqa: E402
from robot_bridge.model import Handle  # noqa: E402
from robot_bridge.planning import GraspGoal, PlaceGoal, Planner, PoseGoal, errors  # noqa: E402

BALL_AT = (0.66, 0.0, 0.79)     # resting on the table top (z 0.74), radius 0.05
TABLE_TOP = 0.74
RADIUS = 0.05
LINK = "gripper_base"           # the hand gripper's link: what carries the ball
SIDE = np.array([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def _at(xyz) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = xyz
    return pose


def pin_link(checker: PinChecker, positions: dict) -> np.ndarray:
    import pinocchio as pin

    data = checker.model.createData()
    pin.framesForwardKinematics(checker.model, data, checker.q(positions))
    return np.array(data.oMf[checker.model.getFrameId(LINK)].homogeneous)


@pytest.fixture
def held():
    """The ball picked from the table (resting on it) and lifted 5 cm: (planner, checker, pick pose, grip)
    with grip = the ball's pose in the gripper link, from pinocchio's FK at the grasp."""
    planner = Planner(scenes.embedded_robot(), seed=5)
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(planner.robot))
    for name, shape, pose in scenes.world_shapes(planner.robot):
        checker.add_shape(name, shape, pose)
    pose = _at(BALL_AT)
    planner.add_body("ball_0", load(str(DATA_DIR / "objects" / "ball.kinbody.xml")), pose)
    handle = Handle("side", "ball", pose=SIDE.copy(), mask=[True] * 5 + [False], clearance=0.05,
                    approaching_direction=np.array([0.0, 0.0, 1.0]))
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", handle), timeout=5.0)
    planner.state = planner.full_vector("arm", grasp.approach.waypoints[-1])
    planner.attach("ball_0", LINK)
    assert planner.bodies["ball_0"].resting == ["table"]
    grip = np.linalg.inv(pin_link(checker, planner.positions(planner.state))) @ pose
    up = planner.link_pose(LINK)
    up[2, 3] += 0.05
    lift = planner.plan(PoseGoal("arm", up, frame=LINK), timeout=5.0)
    planner.state = planner.full_vector("arm", lift.waypoints[-1])
    return planner, checker, pose, grip


@pytest.mark.parametrize("sunk", [0.0, 0.0005])
def test_ball_put_back_where_it_was_picked_up_rests_on_the_table(held, sunk):
    """Exactly the pick pose (resting contact), and 0.5 mm lower (within the 1 mm bound): planned, the body
    on the table; main refused both with NO_IK_SOLUTION -31 (the ball touching the table was a collision)."""
    planner, checker, pose, grip = held
    goal = pose.copy()
    goal[2, 3] -= sunk
    start = planner.positions(planner.state)
    plan = planner.plan_place(PlaceGoal("ball_0", goal), timeout=5.0)
    assert plan.supports == ["table"]                   # what it rested on when picked up
    names = plan.approach.trajectory.joint_names
    assert np.allclose(plan.reach.trajectory.positions[-1], plan.approach.trajectory.positions[0])

    def ball_at(values) -> np.ndarray:                  # pinocchio's FK, the grip derived at the grasp
        return pin_link(checker, dict(start, **dict(zip(names, values)))) @ grip

    placed = ball_at(plan.approach.trajectory.positions[-1])
    assert np.linalg.norm(placed[:3, 3] - goal[:3, 3]) < 3e-4, placed[:3, 3]
    cos = (np.trace(placed[:3, :3].T @ goal[:3, :3]) - 1) / 2
    assert np.arccos(np.clip(cos, -1, 1)) < 0.01
    # resting on the table top: touching it, sunk at most the bound (ball bottom vs 0.74, by hand)
    assert -1e-3 <= placed[2, 3] - RADIUS - TABLE_TOP < 4e-4
    # pre-place: 5 cm straight above; the approach comes down, never deeper than 1 mm into the table
    above = ball_at(plan.reach.trajectory.positions[-1])
    assert np.allclose(above[:3, 3], goal[:3, 3] + [0, 0, 0.05], atol=3e-4)
    lowest = min(ball_at(v)[2, 3] for v in plan.approach.trajectory.positions)
    assert lowest - RADIUS - TABLE_TOP >= -1e-3
    assert 0.0 <= plan.depth <= 1e-3
    # the robot's links stay clear of the world (the independent checker, every 0.01 rad)
    for stage in (plan.reach, plan.approach):
        assert checker.path_collisions(names, stage.trajectory.positions, start, 0.01) == []
    # detached at the place state, the ball stays there
    planner.state = planner.full_vector("arm", plan.approach.waypoints[-1])
    down = planner.detach("ball_0")
    assert np.allclose(down[:3, 3], placed[:3, 3], atol=1e-6)


def test_allow_gripper_support_collision_keeps_the_arm_checked(held):
    """With allow_gripper_support_collision the supports are checked against the arm's other links by coal
    (the scene sees the robot alone): the resting place is still planned, and the independent checker finds
    the arm clear of the world on the whole motion."""
    planner, checker, pose, grip = held
    start = planner.positions(planner.state)
    plan = planner.plan_place(PlaceGoal("ball_0", pose, allow_gripper_support_collision=True), timeout=5.0)
    names = plan.approach.trajectory.joint_names
    for stage in (plan.reach, plan.approach):
        assert checker.path_collisions(names, stage.trajectory.positions, start, 0.01) == []
    end = pin_link(checker, dict(start, **dict(zip(names, plan.approach.trajectory.positions[-1])))) @ grip
    assert np.linalg.norm(end[:3, 3] - pose[:3, 3]) < 3e-4
    # the arm's wrist (not the gripper) would sink into a support under it: refused, naming the link
    plate = scenes.box_body("plate", (0.50, 0.0, 0.745), (0.12, 0.2, 0.01))
    planner.add_body("plate", plate)
    with pytest.raises(errors.PlanningError) as info:
        planner.plan_place(PlaceGoal("ball_0", pose, support="plate", allow_gripper_support_collision=True),
                           timeout=1.0)
    assert info.value.code == errors.PLANNING_FAILED, info.value
    assert "'link6 / plate'" in str(info.value)


def test_place_sunk_5mm_into_the_table_is_refused(held):
    planner, _checker, pose, _grip = held
    sunk = pose.copy()
    sunk[2, 3] -= 0.005
    for support in ("", "table"):
        with pytest.raises(errors.GoalInCollision, match=r"sinks 'ball_0' 5 mm into its support 'table' "
                                                          r"\(at most 1 mm\)") as info:
            planner.plan_place(PlaceGoal("ball_0", sunk, support=support))
        assert info.value.code == errors.GOAL_IN_COLLISION == -12
    assert planner.bodies["ball_0"].attached == LINK           # still held


def test_place_into_another_body_is_refused(held):
    """A box on the table next to the place pose, overlapping the ball by 5 mm: the ball may touch the
    table, not the box (a support named explicitly: the table is then another body)."""
    planner, _checker, pose, _grip = held
    edge = BALL_AT[1] + RADIUS - 0.005                              # the box's -y face, 5 mm into the ball
    planner.add_body("box", scenes.box_body("box", (BALL_AT[0], edge + 0.05, TABLE_TOP + 0.05),
                                            (0.1, 0.1, 0.1)))
    with pytest.raises(errors.GoalInCollision, match=r"puts 'ball_0' 5 mm into 'box'") as info:
        planner.plan_place(PlaceGoal("ball_0", pose))
    assert info.value.code == -12
    higher = pose.copy()
    higher[2, 3] += 0.001                                          # 1 mm above the table: apart from it
    with pytest.raises(errors.GoalInCollision, match="into 'box'"):
        planner.plan_place(PlaceGoal("ball_0", higher))
    planner.remove_body("box")
    sunk = pose.copy()
    sunk[2, 3] -= 0.0005
    with pytest.raises(errors.GoalInCollision, match=r"puts 'ball_0' 0.5 mm into 'table'"):
        planner.plan_place(PlaceGoal("ball_0", sunk, support="crate"))


def test_place_failures_are_typed(held):
    planner, _checker, pose, _grip = held
    with pytest.raises(errors.InvalidObject, match="support surface 'shelf'") as info:
        planner.plan_place(PlaceGoal("ball_0", pose, support="shelf"))
    assert info.value.code == errors.INVALID_OBJECT_NAME
    with pytest.raises(errors.InvalidObject, match="'can' is not held"):
        planner.plan_place(PlaceGoal("can", pose))
    with pytest.raises(errors.InvalidGoal):
        planner.plan_place(PlaceGoal("ball_0", pose, direction=(0.0, 0.0, 0.0)))


def test_a_refused_place_leaves_the_collision_scene_sound(held):
    """A lid over the place pose blocks the approach; the lid removed and detected again blocks it again
    (no "internal error within coal": the place checks move geometry, they never toggle collision pairs),
    and once it is gone the place is planned."""
    planner, _checker, pose, _grip = held
    up = planner.link_pose(LINK)
    up[2, 3] += 0.15                                   # the ball above the lid's height
    planner.state = planner.full_vector("arm", planner.plan(PoseGoal("arm", up, frame=LINK),
                                                            timeout=5.0).waypoints[-1])
    lid = (BALL_AT[0] + 0.01, 0.0, 0.865)              # between the place pose (top 0.84) and the pre-place
    for _ in range(2):
        planner.add_body("lid", scenes.box_body("lid", lid, (0.04, 0.04, 0.01)))
        with pytest.raises(errors.PlanningError) as info:
            planner.plan_place(PlaceGoal("ball_0", pose, distance=0.15), timeout=0.5)
        assert info.value.code in (errors.PLANNING_FAILED, errors.NO_IK_SOLUTION), info.value
        planner.remove_body("lid")
    plan = planner.plan_place(PlaceGoal("ball_0", pose, distance=0.15), timeout=5.0)
    assert plan.supports == ["table"]
