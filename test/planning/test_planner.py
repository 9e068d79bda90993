"""robot_bridge.planning against independent truth: every path rechecked by pinocchio + coal on the URDF the
description node publishes (fixtures/planning/pin_checker.py, 0.01 rad steps), limits read from that URDF
and the model, grasp frames by pinocchio's own forward kinematics, typed failures with their MoveIt codes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pytest.importorskip("pinocchio", reason="pinocchio (pin) is needed for the independent checker")

from fixtures.planning import scenes  # noqa: E402
from fixtures.planning.pin_checker import PinChecker, interpolated_peaks  # noqa: E402
from lxml import etree  # noqa: E402

from robot_bridge.bringup import DATA_DIR  # noqa: E402
from robot_bridge.formats import load  # noqa: E402
from robot_bridge.model import Handle  # noqa: E402
from robot_bridge.planning import (GraspGoal, JointGoal, NamedGoal, Planner, PoseGoal,  # noqa: E402
                                   errors)

QUERIES = json.loads((Path(__file__).resolve().parents[2] / "bench" / "plan_queries.json").read_text())
STEP = 0.01                 # rad: the independent recheck's largest joint change between two checks
BALL_AT = (0.66, 0.0, 0.79)   # on the table's near edge, within the arm's reach
# A side grasp: the handle's z axis (its approaching direction) along world x, away from the robot; the
# rotation about it is free (mask), as for a ball.
SIDE = np.array([[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])


def side_handle() -> Handle:
    return Handle("side", "ball", pose=SIDE.copy(), mask=[True] * 5 + [False], clearance=0.05,
                  approaching_direction=np.array([0.0, 0.0, 1.0]))


@pytest.fixture(scope="module")
def embedded():
    robot = scenes.embedded_robot()
    planner = Planner(robot, seed=3)
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(robot))
    for name, shape, pose in scenes.world_shapes(robot):
        checker.add_shape(name, shape, pose)
    return robot, planner, checker


@pytest.fixture(scope="module")
def panda():
    if scenes.erd_share() is None:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")
    robot = scenes.panda_robot()
    planner = Planner(robot, seed=3)
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(robot), [str(scenes.erd_share())])
    for name, shape, pose in scenes.world_shapes(robot):
        checker.add_shape(name, shape, pose)
    return robot, planner, checker


@pytest.fixture
def fresh():
    """A planner of the embedded scene of its own (tests that change the world or the state)."""
    return Planner(scenes.embedded_robot(), seed=5)


def urdf_limits(urdf: str) -> dict:
    root = etree.fromstring(urdf.encode())
    out = {}
    for joint in root.iter("joint"):
        limit = joint.find("limit")
        if limit is not None and joint.get("type") in ("revolute", "prismatic"):
            out[joint.get("name")] = (float(limit.get("lower")), float(limit.get("upper")),
                                      float(limit.get("velocity")))
    return out


def check_trajectory(robot, planner, checker, plan, start: dict, goal: dict):
    traj = plan.trajectory
    base = planner.positions(planner.state)
    base.update(start)
    # 1. the path driven (every trajectory sample, straight between them) and the waypoints: no collision
    assert checker.path_collisions(traj.joint_names, traj.positions, base, STEP) == []
    assert checker.path_collisions(traj.joint_names, plan.waypoints, base, STEP) == []
    # 2. it starts at the start and ends at the goal
    assert np.allclose(traj.positions[0], [start[n] for n in traj.joint_names], atol=1e-9)
    assert np.allclose(traj.positions[-1], [goal[n] for n in traj.joint_names], atol=1e-6)
    # 3. within the limits: position and velocity from the URDF, acceleration the controller's (the model's)
    limits = urdf_limits(planner.urdf)
    times = traj.times
    assert np.all(np.diff(times) > 0)
    for k, name in enumerate(traj.joint_names):
        lower, upper, velocity = limits[name]
        joint = robot.joints[name]
        acceleration = float(joint.acceleration[0]) if joint.acceleration[0] > 0 else 2.0
        p, v, a = traj.positions[:, k], traj.velocities[:, k], traj.accelerations[:, k]
        assert p.min() >= lower - 1e-9 and p.max() <= upper + 1e-9, name
        assert np.abs(v).max() <= velocity * (1 + 1e-6), name
        assert np.abs(a).max() <= acceleration * (1 + 1e-6), name
        # the samples' own finite differences agree with the limits too (what a controller interpolates)
        fd_v = np.diff(p) / np.diff(times)
        assert np.abs(fd_v).max() <= velocity * 1.01, name
        # what the controller executes: the quintic through each pair of samples (position, velocity,
        # acceleration at both ends; joint_trajectory_controller's rule), sampled densely
        peak_v, peak_a = interpolated_peaks(times, p, v, a)
        assert peak_v <= velocity * (1 + 1e-6), (name, peak_v, velocity)
        assert peak_a <= acceleration * (1 + 1e-6), (name, peak_a, acceleration)



@pytest.mark.parametrize("k", range(0, 20, 2))
def test_embedded_paths_collision_free_and_within_limits(embedded, k):
    robot, planner, checker = embedded
    query = QUERIES["embedded"][k]
    base = planner.positions(planner.state)
    # the query is a real one: its straight line collides for the independent checker too
    names = list(query["start"])
    straight = np.array([[query["start"][n] for n in names], [query["goal"][n] for n in names]])
    assert checker.path_collisions(names, straight, base, STEP)
    plan = planner.plan(JointGoal(query["goal"]), group="arm", start=query["start"], timeout=5.0)
    check_trajectory(robot, planner, checker, plan, query["start"], query["goal"])


@pytest.mark.parametrize("k", range(1, 20, 4))
def test_panda_paths_collision_free_and_within_limits(panda, k):
    robot, planner, checker = panda
    query = QUERIES["panda"][k]
    plan = planner.plan(JointGoal(query["goal"]), group="arm", start=query["start"], timeout=5.0)
    check_trajectory(robot, planner, checker, plan, query["start"], query["goal"])


def test_named_state_reached(embedded):
    robot, planner, checker = embedded
    plan = planner.plan(NamedGoal("home"), timeout=5.0)
    home = {j: v[0] for j, v in robot.semantics.state("home").values.items()}
    assert plan.group == "arm"
    assert np.allclose(plan.trajectory.positions[-1], [home[n] for n in plan.trajectory.joint_names])
    check_trajectory(robot, planner, checker, plan, planner.positions(planner.state), home)


def test_pose_goal_reached_within_tolerance(embedded):
    robot, planner, checker = embedded
    home = planner.vector({j: v[0] for j, v in robot.semantics.state("home").values.items()})
    target = planner.link_pose("gripper_base", home)         # a reachable, collision-free pose
    plan = planner.plan(PoseGoal("arm", target, frame="gripper_base"), timeout=5.0)
    end = dict(planner.positions(planner.state))
    end.update(zip(plan.trajectory.joint_names, plan.trajectory.positions[-1]))
    pose = pin_frame(checker, end, "gripper_base")
    assert np.linalg.norm(pose[:3, 3] - target[:3, 3]) < 1e-3
    assert rotation_angle(pose, target) < 0.01


def pin_frame(checker: PinChecker, positions: dict, frame: str) -> np.ndarray:
    import pinocchio as pin

    data = checker.model.createData()
    pin.framesForwardKinematics(checker.model, data, checker.q(positions))
    return np.array(data.oMf[checker.model.getFrameId(frame)].homogeneous)


def rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    cos = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1) / 2
    return float(np.arccos(np.clip(cos, -1, 1)))


# -- grasps ------------------------------------------------------------------------------------------------
def ball_body():
    return load(str(DATA_DIR / "objects" / "ball.kinbody.xml"))


def test_grasp_reaches_handle_on_masked_axes_and_attached_body_follows(fresh):
    planner = fresh
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(planner.robot))
    pose = np.eye(4)
    pose[:3, 3] = BALL_AT
    planner.add_body("ball_0", ball_body(), pose)
    handle = side_handle()
    gripper = planner.semantics.grippers["hand"]
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", handle), timeout=5.0)
    start = planner.positions(planner.state)

    def gripper_frame(values) -> np.ndarray:
        positions = dict(start)
        positions.update(zip(grasp.approach.trajectory.joint_names, values))
        return pin_frame(checker, positions, gripper.link) @ gripper.pose

    handle_world = pose @ handle.pose
    at_grasp = gripper_frame(grasp.approach.trajectory.positions[-1])
    # the handle frame in the gripper frame: translation and rotation vector in the handle's axes
    from scipy.spatial.transform import Rotation

    rel = np.linalg.inv(handle_world) @ at_grasp
    err = np.concatenate([rel[:3, 3], Rotation.from_matrix(rel[:3, :3]).as_rotvec()])
    mask = np.array(handle.mask)
    assert np.all(np.abs(err[:3][mask[:3]]) < 1e-3), err
    assert np.all(np.abs(err[3:][mask[3:]]) < 0.01), err
    # pre-grasp: backed off by both clearances against the approach (the handle's z here)
    at_pre = gripper_frame(grasp.reach.trajectory.positions[-1])
    back = np.linalg.inv(handle_world) @ at_pre
    assert np.allclose(back[:3, 3], [0, 0, -(handle.clearance + gripper.clearance)], atol=1e-3)
    assert np.allclose(grasp.reach.trajectory.positions[-1], grasp.approach.trajectory.positions[0])
    # the approach (a straight joint segment) keeps the gripper frame within 3 mm of the straight line
    line = handle_world[:3, 3] - at_pre[:3, 3]
    line /= np.linalg.norm(line)
    for values in grasp.approach.trajectory.positions:
        off = gripper_frame(values)[:3, 3] - at_pre[:3, 3]
        assert np.linalg.norm(off - (off @ line) * line) < 3e-3

    # attach at the grasp, move the arm: the body's pose follows the gripper link (pinocchio's FK)
    q_grasp = planner.full_vector("arm", grasp.approach.waypoints[-1])
    planner.state = q_grasp.copy()
    planner.attach("ball_0", gripper.link)
    assert not planner.in_collision(planner.state)          # resting on the table when picked up: allowed
    link_at_grasp = pin_frame(checker, planner.positions(q_grasp), gripper.link)
    lifted = q_grasp.copy()
    lifted[planner.joint_names.index("j2")] -= 0.3
    link_lifted = pin_frame(checker, planner.positions(lifted), gripper.link)
    expected = link_lifted @ np.linalg.inv(link_at_grasp) @ pose
    assert np.allclose(planner.body_pose("ball_0", lifted), expected, atol=1e-9)
    assert np.linalg.norm(expected[:3, 3] - pose[:3, 3]) > 0.1
    # the carried geometry collides where the ball now is: a box there blocks the lifted state
    assert not planner.in_collision(lifted)
    probe = scenes.box_body("probe", expected[:3, 3] + [0.0, 0.0, 0.07], (0.05, 0.05, 0.05))
    planner.add_body("probe", probe)
    assert planner.in_collision(lifted)
    planner.detach("ball_0")
    planner.state = lifted.copy()
    assert not planner.in_collision(lifted)                 # the ball stayed at the grasp, not in the probe
    planner.remove_body("probe")
    # place: carried to the lifted pose and detached there, it stays there
    planner.state = q_grasp.copy()
    planner.move_body("ball_0", pose)
    planner.attach("ball_0", gripper.link)
    planner.state = lifted.copy()
    placed = planner.detach("ball_0")
    assert np.allclose(placed, expected, atol=1e-9)
    assert np.allclose(planner.body_pose("ball_0"), expected, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grasp_tries_other_ik_solutions_when_the_first_approach_is_blocked(seed):
    """A bar under the upper arm: the IK solution found from the start state reaches the pre-grasp pose
    freely, but its approach drives the upper arm into the bar; the planner tries other seeds."""
    planner = Planner(scenes.embedded_robot(), seed=seed)
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(planner.robot))
    for name, shape, pose in scenes.world_shapes(planner.robot):
        checker.add_shape(name, shape, pose)
    pose = _at(BALL_AT)
    planner.add_body("ball_0", ball_body(), pose)
    bar = scenes.box_body("bar", (0.19, 0.0, 0.78), (0.04, 0.1, 0.04))
    planner.add_body("bar", bar)
    checker.add_shape("bar", bar.links["bar"].collisions[0].shape, bar.links["bar"].collisions[0].origin)
    handle = side_handle()
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", handle), timeout=5.0)
    start = planner.positions(planner.state)
    names = grasp.reach.trajectory.joint_names
    # the whole motion is free of the bar and the world (the ball itself is meant to be touched at the end)
    assert checker.path_collisions(names, grasp.reach.trajectory.positions, start, STEP) == []
    assert checker.path_collisions(names, grasp.approach.trajectory.positions[:-5], start, STEP) == []
    gripper = planner.semantics.grippers["hand"]
    end = dict(start, **dict(zip(names, grasp.approach.trajectory.positions[-1])))
    rel = np.linalg.inv(pose @ handle.pose) @ (pin_frame(checker, end, gripper.link) @ gripper.pose)
    assert np.abs(rel[:3, 3]).max() < 1e-3
    # only the rotation about the approach axis (z) is free (mask): z axes within 0.01 rad
    assert np.arccos(np.clip(rel[2, 2], -1.0, 1.0)) < 0.01


def test_grasp_failures_are_typed(fresh):
    planner = fresh
    with pytest.raises(errors.InvalidObject) as info:
        planner.plan_grasp(GraspGoal("hand", "no_such_body", side_handle()))
    assert info.value.code == errors.INVALID_OBJECT_NAME == -19
    planner.add_body("ball_0", ball_body())
    with pytest.raises(errors.InvalidObject):
        planner.plan_grasp(GraspGoal("hand", "ball_0", "no_such_handle"))
    with pytest.raises(errors.InvalidObject):
        planner.plan_grasp(GraspGoal("no_such_gripper", "ball_0", side_handle()))
    far = np.eye(4)
    far[:3, 3] = (3.0, 0.0, 0.8)                            # out of reach
    planner.move_body("ball_0", far)
    with pytest.raises(errors.NoIKSolution) as info:
        planner.plan_grasp(GraspGoal("hand", "ball_0", side_handle()), timeout=0.5)
    assert info.value.code == -31


# -- bad goals ---------------------------------------------------------------------------------------------
def test_error_codes_are_moveit_msgs_values():
    codes = pytest.importorskip("moveit_msgs.msg", reason="moveit_msgs is not built into this "
                                "environment").MoveItErrorCodes
    ours = {k: v for k, v in vars(errors).items() if k.isupper() and isinstance(v, int) and k != "CODE_NAMES"}
    assert len(ours) >= 20
    for name, value in ours.items():
        assert getattr(codes, name) == value, name
    kinds = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.PlanningError)]
    for kind in kinds:
        assert kind.code in ours.values(), kind


def test_bad_goals_get_typed_failures(fresh):
    planner = fresh
    cases = [
        (lambda: planner.plan(JointGoal({"j1": 0.5}), group="no_such_group"), errors.InvalidGroup, -15),
        (lambda: planner.plan(JointGoal({"no_such_joint": 0.5})), errors.InvalidGoal, -16),
        (lambda: planner.plan(JointGoal({"j1": 10.0}), group="arm"), errors.GoalStateInvalid, -27),
        (lambda: planner.plan(NamedGoal("no_such_state")), errors.InvalidGoal, -16),
        (lambda: planner.plan(JointGoal({"j1": 0.5}), start={"no_such_joint": 0.0}), errors.InvalidRobotState,
         -17),
        (lambda: planner.plan(JointGoal({"j1": 0.5}), start={"j2": 5.0}), errors.StartStateInvalid, -26),
        (lambda: planner.plan(PoseGoal("arm", far_pose())), errors.NoIKSolution, -31),
        (lambda: planner.plan(PoseGoal("arm", np.eye(4), frame="no_such_link")), errors.InvalidLinkName, -18),
    ]
    for call, kind, code in cases:
        with pytest.raises(kind) as info:
            call()
        assert info.value.code == code, info.value
        assert str(info.value)


def test_named_state_of_another_group_says_which_groups_the_states_are_for(fresh):
    """main: ``no group_state 'home' (states: ['home', ...])`` for a group whose states have another name's
    group: a message that contradicted itself.  The states are per group; the message says of which."""
    with pytest.raises(errors.InvalidGoal) as info:
        fresh.plan(NamedGoal("home", group="gripper"))
    text = str(info.value)
    assert "no group_state 'home' of group 'gripper'" in text and "home (arm)" in text, text


def far_pose():
    pose = np.eye(4)
    pose[:3, 3] = (5.0, 0.0, 1.0)
    return pose


def test_goal_and_start_in_collision(fresh):
    planner = fresh
    # j2 = 1.5 with j4 = 0 lays the straight arm on the table (checked independently)
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(planner.robot))
    for name, shape, pose in scenes.world_shapes(planner.robot):
        checker.add_shape(name, shape, pose)
    down = {"j1": 0.0, "j2": 1.5}
    values = planner.positions(planner.state)
    values.update(down)
    assert checker.collides(checker.q(values))
    with pytest.raises(errors.GoalInCollision) as goal_info:
        planner.plan(JointGoal(down), group="arm")
    assert goal_info.value.code == -12
    with pytest.raises(errors.StartInCollision) as info:
        planner.plan(JointGoal({"j2": 0.0}), group="arm", start=down)
    assert info.value.code == -10
    # both messages name what collides, as the checker finds it: links on the table (main: no names)
    pairs = {(a.rsplit("_", 1)[0], b.split("/")[0]) for a, b in checker.colliding_pairs(checker.q(values))
             if "/" in b}
    for err in (info.value, goal_info.value):
        named = {tuple(p.split(" (")[0].split(" / ")) for p in str(err).split(": ", 1)[1].split(", ")}
        assert pairs and named == pairs, (str(err), pairs)


def test_no_path_in_the_time_allowed(fresh, monkeypatch):
    """The planner's clock says 10 s have passed at every reading, so the time allowed is always over (a real
    short timeout is a race with a fast search)."""
    from itertools import count

    from robot_bridge.planning import backend

    planner = fresh
    query = QUERIES["embedded"][0]
    ticks = count(0.0, 10.0)
    monkeypatch.setattr(backend, "monotonic", lambda: next(ticks))
    with pytest.raises(errors.PlanningTimedOut) as info:
        planner.plan(JointGoal(query["goal"]), group="arm", start=query["start"], timeout=1.0)
    assert info.value.code == -6


# -- the world, kept current -------------------------------------------------------------------------------
def test_bodies_added_moved_removed_change_the_answers(fresh):
    planner = fresh
    goal = {"j1": 0.0, "j2": 0.6, "j4": 0.9}
    q = planner.vector(goal)
    tip = planner.link_pose("gripper_base", q)[:3, 3]
    assert not planner.in_collision(q)
    planner.add_body("box_0", scenes.box_body("box_0", (0, 0, 0), (0.1, 0.1, 0.1)), _at(tip))
    assert planner.in_collision(q)
    with pytest.raises(errors.GoalInCollision):
        planner.plan(JointGoal(goal), group="arm")
    planner.move_body("box_0", _at(tip + [0.0, 0.6, 0.0]))
    assert not planner.in_collision(q)
    planner.move_body("box_0", _at(tip))
    assert planner.in_collision(q)
    planner.remove_body("box_0")
    assert not planner.in_collision(q)
    # set_objects: detections come and go; the environment file's bodies stay
    body = scenes.box_body("det", (0, 0, 0), (0.1, 0.1, 0.1))
    planner.set_objects({"det_0": (body, _at(tip))})
    assert planner.in_collision(q) and "table" in planner.bodies
    planner.set_objects({})
    assert not planner.in_collision(q) and "det_0" not in planner.bodies and "table" in planner.bodies


def _at(xyz) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = xyz
    return pose


def test_path_validity_for_replanning(fresh):
    planner = fresh
    plan = planner.plan(NamedGoal("home"), timeout=5.0)
    traj = plan.trajectory
    assert planner.path_valid(traj).valid
    # a body appears on the path, around the gripper at 40 % of the motion
    i = int(0.4 * (len(traj.times) - 1))
    q = planner.full_vector(plan.group, traj.positions[i])
    planner.add_body("box_0", scenes.box_body("box_0", (0, 0, 0), (0.04, 0.04, 0.04)),
                     _at(planner.link_pose("gripper_base", q)[:3, 3]))
    check = planner.path_valid(traj, from_time=0.0)
    assert not check.valid and check.bodies == ["box_0"]
    assert check.collision_time <= traj.times[i] + 1e-9
    # from past the samples in collision on, the rest of the path is free
    hits = [k for k in range(len(traj.times))
            if planner.in_collision(planner.full_vector(plan.group, traj.positions[k]))]
    assert i in hits and hits[-1] + 2 < len(traj.times)
    assert planner.path_valid(traj, from_time=traj.times[hits[-1] + 2]).valid
    planner.remove_body("box_0")
    assert planner.path_valid(traj).valid


# -- the extra is optional ---------------------------------------------------------------------------------
def test_without_the_libraries_one_clear_error(monkeypatch):
    import robot_bridge.planning as planning
    from robot_bridge.planning import backend

    monkeypatch.setattr(backend, "_IMPORT_ERROR", ImportError("No module named 'roboplan'"))
    with pytest.raises(planning.PlanningUnavailable) as info:
        planning.Planner  # noqa: B018
    assert "pip install 'robot_bridge[planning]'" in str(info.value)
    assert not planning.available()
    # goals and results stay importable
    assert planning.JointGoal({"j1": 0.0}).positions == {"j1": 0.0}


def test_only_the_backend_imports_planning_libraries():
    root = Path(__file__).resolve().parents[2] / "robot_bridge"
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "backend.py" and path.parent.name == "planning":
            continue
        text = path.read_text(encoding="utf-8")
        for lib in ("roboplan", "ompl", "toppra", "pinocchio", "coal"):
            if f"import {lib}" in text or f"from {lib}" in text:
                offenders.append(f"{path.relative_to(root)}: {lib}")
    assert offenders == []


# -- from what the bridge publishes ------------------------------------------------------------------------
def test_planner_from_published_strings_and_world_node_objects():
    from robot_bridge.formats.srdf import to_srdf
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.planning.sync import objects_from_xml, robot_from_description
    from robot_bridge.world.reader import WorldReader, trusted_roots
    from robot_bridge.world import load_mapping, to_xml
    from robot_bridge.world.document import PlacedBody

    source = scenes.embedded_robot()
    urdf, _ = to_urdf(source)
    robot = robot_from_description(urdf, to_srdf(source.semantics, source.name))
    accelerations = {j.name: float(j.acceleration[0]) for j in source.active_joints}
    planner = Planner(robot, urdf, acceleration_limits=accelerations)
    assert planner.group_joints("arm") == ["j1", "j2", "j3", "j4", "j5", "j6", "j7"]
    assert np.allclose(planner.acceleration_limits[:7], [accelerations[f"j{i}"] for i in range(1, 8)])
    assert "table" not in planner.bodies                    # a URDF has no environment: world_node's bodies
    mapping = load_mapping(DATA_DIR / "objects.yaml")
    q = planner.vector({"j1": 0.0, "j2": 0.6, "j4": 0.9})
    tip = planner.link_pose("gripper_base", q)[:3, 3]
    files = WorldReader(trusted_roots())
    document = to_xml([PlacedBody("ball_0", "ball", mapping.classes["ball"].file, _at(tip))], stamp=1.0)
    planner.set_objects(objects_from_xml(document, files)[0])
    assert list(planner.bodies) == ["ball_0"] and planner.in_collision(q)
    body = planner.bodies["ball_0"].robot
    moved = to_xml([PlacedBody("ball_0", "ball", mapping.classes["ball"].file, _at(tip + [0, 0.5, 0]))])
    planner.set_objects(objects_from_xml(moved, files)[0])
    assert planner.bodies["ball_0"].robot is body and not planner.in_collision(q)
    planner.set_objects(objects_from_xml('<Environment frame="world"/>', files)[0])
    assert planner.bodies == {}


def test_detections_of_a_class_with_an_srdf_are_graspable_by_its_handle(fresh):
    """Issue 30: the objects file gives the ball class ball.srdf; world_node's document names it, the planner
    grasps the detected ball by the class's handle name."""
    from robot_bridge.planning.sync import objects_from_xml
    from robot_bridge.world.reader import WorldReader, trusted_roots
    from robot_bridge.world import load_mapping, to_xml
    from robot_bridge.world.document import PlacedBody

    planner = fresh
    ball = load_mapping(DATA_DIR / "objects.yaml").classes["ball"]
    pose = _at(BALL_AT)
    document = to_xml([PlacedBody("ball_0", "ball", ball.file, pose, ball.srdf)])
    planner.set_objects(objects_from_xml(document, WorldReader(trusted_roots()))[0])
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", "side_grasp"), timeout=5.0)
    handle = grasp.handle
    assert handle.name == "side_grasp" and handle.mask == [True] * 5 + [False]
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(planner.robot))
    gripper = planner.semantics.grippers["hand"]
    end = dict(planner.positions(planner.state),
               **dict(zip(grasp.approach.trajectory.joint_names, grasp.approach.trajectory.positions[-1])))
    rel = np.linalg.inv(pose @ handle.pose) @ (pin_frame(checker, end, gripper.link) @ gripper.pose)
    assert np.abs(rel[:3, 3]).max() < 1e-3
    assert np.arccos(np.clip(rel[2, 2], -1.0, 1.0)) < 0.01
    with pytest.raises(errors.InvalidObject, match="no handle 'top'.*side_grasp") as info:
        planner.plan_grasp(GraspGoal("hand", "ball_0", "top"))
    assert info.value.code == errors.INVALID_OBJECT_NAME


def test_carried_body_checked_against_its_support_once_lifted(fresh):
    planner = fresh
    pose = _at(BALL_AT)
    planner.add_body("ball_0", ball_body(), pose)
    grasp = planner.plan_grasp(GraspGoal("hand", "ball_0", side_handle()), timeout=5.0)
    q_grasp = planner.full_vector("arm", grasp.approach.waypoints[-1])
    planner.state = q_grasp.copy()
    planner.attach("ball_0", "gripper_base")
    assert planner.bodies["ball_0"].resting == ["table"]
    lifted = q_grasp.copy()
    lifted[planner.joint_names.index("j2")] -= 0.3
    arm = planner.group_joints("arm")
    lift = planner.plan(JointGoal({n: planner.positions(lifted)[n] for n in arm}), group="arm", timeout=5.0)
    planner.state = planner.full_vector("arm", lift.waypoints[-1])
    # the next plan starts in the air: the ball is checked against the table again
    planner.plan(JointGoal({n: planner.positions(q_grasp)[n] for n in ("j1",)}), group="arm", timeout=5.0)
    assert planner.bodies["ball_0"].resting == []
    # pushing the carried ball down into the table top is now a collision
    sunk = q_grasp.copy()
    sunk[planner.joint_names.index("j2")] += 0.15
    assert planner.in_collision(sunk)


def test_master_model_keeps_the_last_good_state():
    from robot_bridge.formats.srdf import to_srdf
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.planning.master import MasterModel
    from robot_bridge.world import load_mapping, to_xml
    from robot_bridge.world.document import PlacedBody

    source = scenes.embedded_robot()
    urdf, _ = to_urdf(source)
    srdf = to_srdf(source.semantics, source.name)
    master = MasterModel(acceleration_limits={j.name: float(j.acceleration[0]) for j in source.active_joints})
    assert master.plan(NamedGoal("home")).code == errors.FAILURE          # nothing received yet
    ball = load_mapping(DATA_DIR / "objects.yaml").classes["ball"].file
    # objects and joint states before the description are applied once it comes; the SRDF comes first
    master.set_joint_state(["j1", "j4", "unknown_joint"], [0.3, 0.5, 1.0])
    assert master.set_objects_xml(to_xml([PlacedBody("ball_0", "ball", ball, _at((0.0, 0.0, 1.9)))])) is None
    assert master.set_description(srdf=srdf) is None and master.planner is None
    assert master.set_description(urdf=urdf) is None
    planner = master.planner
    assert planner.positions(planner.state)["j1"] == 0.3 and list(planner.bodies) == ["ball_0"]
    result = master.plan(NamedGoal("home"), timeout=5.0)
    assert result.code == errors.SUCCESS and result.plan.group == "arm"
    # bad input: a reason back, the last good planner and world kept
    assert "robot description not used" in master.set_description(urdf="<robot name='x'><link/></robot>")
    assert master.planner is planner
    nameless_file = "<Environment><KinBody name='a'/></Environment>"
    assert "world objects not used" in master.set_objects_xml(nameless_file)
    assert master.set_objects_xml("<not xml") and list(planner.bodies) == ["ball_0"]
    # goals that get no motion: their code, never an exception
    assert master.plan(JointGoal({"j1": 0.1}), group="nope").code == errors.INVALID_GROUP_NAME
    assert master.plan(GraspGoal("hand", "nothing", side_handle())).code == errors.INVALID_OBJECT_NAME
    assert len(master.problems) >= 3


_OPENED: list = []


def _audit_open(event: str, args) -> None:
    if _OPENED and event == "open" and args and isinstance(args[0], (str, bytes)):
        _OPENED[-1].append(os.fsdecode(args[0]))


def test_master_model_leaves_out_meshes_outside_the_trusted_roots(tmp_path):
    """Issue 41: a peer's robot_description naming /etc/passwd (file:// and absolute) or /proc/self/environ
    as a mesh made the planner read it.  Now such a mesh is left out unopened, with one generic problem
    line (its URI, never the path's kind or an OS error); a mesh under the trusted roots is kept and the
    planner builds and plans.  Fails on the old code (it opened /etc/passwd)."""
    import trimesh

    from robot_bridge.formats.srdf import to_srdf
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.planning.master import MasterModel
    from robot_bridge.planning.sync import robot_from_description

    source = scenes.embedded_robot()
    urdf, _ = to_urdf(source)
    trimesh.creation.box((0.01, 0.01, 0.01)).export(tmp_path / "small.stl")
    tree = etree.fromstring(urdf.encode())
    link = tree.find("link[@name='%s']" % source.root_links()[0])
    forged = ["file:///etc/passwd", "/etc/passwd", "file:///proc/self/environ", str(tmp_path / "small.stl")]
    for uri in forged:
        collision = etree.SubElement(link, "collision")
        etree.SubElement(etree.SubElement(collision, "geometry"), "mesh", filename=uri)
    text = etree.tostring(tree).decode()
    master = MasterModel(acceleration_limits={j.name: float(j.acceleration[0]) for j in source.active_joints},
                         trusted=[str(tmp_path)])
    opened: list[str] = []
    if not getattr(sys, "_robot_bridge_open_audit", False):
        sys.addaudithook(_audit_open)
        sys._robot_bridge_open_audit = True
    _OPENED.append(opened)
    try:
        assert master.set_description(urdf=text, srdf=to_srdf(source.semantics, source.name)) is None
        result = master.plan(NamedGoal("home"), timeout=5.0)
    finally:
        _OPENED.remove(opened)
    assert [p for p in opened if p.startswith(("/etc", "/proc"))] == []
    assert master.planner is not None and result.code == errors.SUCCESS
    left_out = [p for p in master.problems if "outside the trusted roots" in p]
    assert len(left_out) == 3, master.problems
    for uri, line in zip(forged, left_out):
        assert line == f"robot description: mesh {uri!r} left out: outside the trusted roots"
    for word in ("No such file", "Permission", "not a regular", "directory", "environ variables"):
        assert not [p for p in master.problems if word in p], master.problems
    # the trusted mesh is kept; the others are not geometry of the link
    robot = robot_from_description(text, None, (), [str(tmp_path)])
    uris = [g.shape.uri for g in robot.links[source.root_links()[0]].collisions if hasattr(g.shape, "uri")]
    assert uris == [str(tmp_path / "small.stl")]


def test_mesh_bodies_collide_like_their_triangles(fresh, tmp_path):
    import trimesh

    from robot_bridge.model import Geometry, Link, Mesh, Robot

    planner = fresh
    q = planner.vector({"j1": 0.0, "j2": 0.6, "j4": 0.9})
    tip = planner.link_pose("gripper_base", q)[:3, 3]
    box = trimesh.creation.box((0.1, 0.1, 0.1))
    path = tmp_path / "cube.stl"
    box.export(path)
    from_file = Mesh(uri=path.as_uri(), path=str(path))
    inline = Mesh(uri="inline", vertices=np.array(box.vertices), triangles=np.array(box.faces))
    for k, mesh in enumerate((from_file, inline)):
        body = Robot(f"m{k}", links={"m": Link("m", collisions=[Geometry(mesh)])}, is_robot=False)
        planner.add_body(f"mesh_{k}", body, _at(tip))
        assert planner.in_collision(q), mesh.uri
        planner.move_body(f"mesh_{k}", _at(tip + [0.0, 0.0, 0.14]))    # 9 cm above the link's origin
        assert not planner.in_collision(q), mesh.uri
        planner.remove_body(f"mesh_{k}")
    missing = Geometry(Mesh(uri="missing.stl"))
    broken = Robot("b", links={"b": Link("b", collisions=[missing])}, is_robot=False)
    planner.add_body("broken", broken)
    assert any("broken" in note for note in planner.notes)


def test_master_model_plans_around_the_robot_files_environment():
    """A URDF carries no environment: the node hands the robot file's bodies to the model; they stay through
    world_node's documents, which may not take their names."""
    from robot_bridge.formats.srdf import to_srdf
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.planning.master import MasterModel
    from robot_bridge.world import load_mapping, to_xml
    from robot_bridge.world.document import PlacedBody

    source = scenes.embedded_robot()
    urdf, _ = to_urdf(source)
    master = MasterModel(environment=source.environment)
    assert master.set_description(urdf, to_srdf(source.semantics, source.name)) is None
    assert set(master.planner.bodies) == set(source.environment) >= {"table", "crate"}
    ball = load_mapping(DATA_DIR / "objects.yaml").classes["ball"].file
    assert master.set_objects_xml(to_xml([PlacedBody("ball_0", "ball", ball, _at((0.0, 0.0, 1.9)))])) is None
    assert set(master.planner.bodies) == set(source.environment) | {"ball_0"}
    assert master.set_objects_xml(to_xml([])) is None
    assert set(master.planner.bodies) == set(source.environment)
    assert "names of environment bodies" in master.set_objects_xml(
        to_xml([PlacedBody("table", "ball", ball, _at((0.0, 0.0, 1.9)))]))
    # states where the arm meets the table are collisions with the table (random states, fixed seed)
    bare = MasterModel()
    bare.set_description(urdf, to_srdf(source.semantics, source.name))
    rng = np.random.default_rng(1)
    planner = master.planner
    hits = 0
    for _ in range(300):
        q = rng.uniform(planner.lower, planner.upper)
        if planner.in_collision(q) and planner._colliding_bodies(q) == ["table"]:
            hits += 1
            assert not bare.planner.in_collision(q)
    assert hits >= 3


def test_scaled_trajectory_keeps_the_path_within_the_factors(embedded):
    from robot_bridge.planning.master import scale_trajectory

    _robot, planner, _checker = embedded
    plan = planner.plan(NamedGoal("home"), start={"j1": 0.8, "j2": 0.2}, timeout=5.0)
    traj = plan.trajectory
    slow = scale_trajectory(traj, 0.5, 0.1)
    assert np.array_equal(slow.positions, traj.positions)
    assert np.abs(slow.velocities).max() <= 0.5 * np.abs(traj.velocities).max() + 1e-12
    assert np.abs(slow.accelerations).max() <= 0.1 * np.abs(traj.accelerations).max() + 1e-12
    def rates(t):
        return np.abs(np.diff(t.positions, axis=0) / np.diff(t.times)[:, None]).max()

    assert rates(slow) <= 0.5 * rates(traj) + 1e-9
    assert scale_trajectory(traj, 0.0, 2.0) is traj          # outside (0, 1]: as planned
