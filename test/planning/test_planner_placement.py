"""The planner with the robot standing somewhere in the world (issue 43): a robot read back from
robot_description (a URDF: root at its own origin) placed at z = 0.1 and turned 90 degrees about z, among
boxes given in the world frame.  Independent truth: pinocchio + coal on the URDF with the boxes carried into
the root's frame by the placement (fixtures/planning/pin_checker.py), and pinocchio's forward kinematics
composed with the placement for the pose goal.  On the old code (MasterModel ignoring the placement) the
collision answers swap and the pose goal in the world frame is not reached there."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pin = pytest.importorskip("pinocchio", reason="pinocchio (pin) is needed for the independent checker")

from fixtures.planning.pin_checker import PinChecker  # noqa: E402

from robot_bridge.model import Box, Geometry, Link, Robot  # noqa: E402
from robot_bridge.model.placement import pose_matrix  # noqa: E402
from robot_bridge.planning import PoseGoal, errors  # noqa: E402
from robot_bridge.planning.master import MasterModel  # noqa: E402

# one arm of 0.6 m turning about the root's z; its tip frame at the end
URDF = """<robot name="stick">
  <link name="base"/>
  <link name="l1"><collision><origin xyz="0.35 0 0"/><geometry><box size="0.5 0.04 0.04"/></geometry>
    </collision></link>
  <link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3.2" upper="3.2" effort="10" velocity="1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="l1"/><child link="tip"/><origin xyz="0.6 0 0"/></joint>
</robot>"""
SRDF = """<robot name="stick"><group name="arm"><chain base_link="base" tip_link="tip"/></group></robot>"""
PLACEMENT = pose_matrix([0.0, 0.0, 0.1, 0.0, 0.0, math.pi / 2])
# world frame: LOW on the floor along +x (where the unplaced arm lies at j1 = 0), HIGH at the placed arm's
# height along -y (where the placed arm points at j1 = pi)
BOXES = {"low": ((0.4, 0.0, 0.0), (0.1, 0.1, 0.06)), "high": ((0.0, -0.4, 0.1), (0.1, 0.1, 0.06))}


def _box(name: str, size) -> Robot:
    return Robot(name, links={name: Link(name, collisions=[Geometry(Box(np.asarray(size) / 2.0))])},
                 is_robot=False)


def _at(xyz) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = xyz
    return pose


@pytest.fixture(scope="module")
def placed():
    master = MasterModel(acceleration_limits={"j1": 2.0}, placement=PLACEMENT, seed=1)
    assert master.set_description(URDF, SRDF) is None
    assert master.set_objects({name: (_box(name, size), _at(xyz)) for name, (xyz, size) in BOXES.items()}) \
        is None
    checker = PinChecker(URDF)
    for name, (xyz, size) in BOXES.items():          # the world's boxes seen from the placed root
        checker.add_box(name, size, np.linalg.inv(PLACEMENT) @ _at(xyz))
    return master, checker


def test_collisions_judged_where_the_robot_stands(placed):
    master, checker = placed
    planner = master.planner
    free_only_placed = planner.vector({"j1": 0.0})       # unplaced: through LOW; placed: along +y, clear
    hit_only_placed = planner.vector({"j1": math.pi})    # unplaced: along -x, clear; placed: through HIGH
    assert not checker.collides(checker.q({"j1": 0.0}))
    assert checker.collides(checker.q({"j1": math.pi}))
    assert not planner.in_collision(free_only_placed)
    assert planner.in_collision(hit_only_placed)
    # the same robot at the origin gets the opposite answers: the scene above is one that tells them apart
    origin = MasterModel(acceleration_limits={"j1": 2.0}, seed=1)
    assert origin.set_description(URDF, SRDF) is None
    origin.set_objects({name: (_box(name, size), _at(xyz)) for name, (xyz, size) in BOXES.items()})
    assert origin.planner.in_collision(free_only_placed) and not origin.planner.in_collision(hit_only_placed)


def test_a_pose_goal_in_the_world_is_reached_in_the_world(placed):
    master, checker = placed
    theta = 0.3                                  # the tip's heading in the world, at the placed height
    target = np.eye(4)
    target[:3, :3] = pose_matrix([0, 0, 0, 0, 0, theta])[:3, :3]
    target[:3, 3] = (0.6 * math.cos(theta), 0.6 * math.sin(theta), 0.1)
    result = master.plan(PoseGoal("arm", target, frame="tip"), start={"j1": 0.0}, timeout=5.0)
    assert result.code == errors.SUCCESS, result.message
    trajectory = result.plan.trajectory
    end = dict(zip(trajectory.joint_names, trajectory.positions[-1]))
    model = checker.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, checker.q(end))
    reached = PLACEMENT @ np.array(data.oMf[model.getFrameId("tip")].homogeneous)
    np.testing.assert_allclose(reached[:3, 3], target[:3, 3], atol=2e-3)
    np.testing.assert_allclose(reached[:3, :3], target[:3, :3], atol=2e-3)
    for positions in trajectory.positions:               # and the way there stays clear of the boxes
        assert not checker.collides(checker.q(dict(zip(trajectory.joint_names, positions))))


UR5_POSE = [-0.2, 0.4, 0.02, 0.0, 0.0, -0.8]
UR5_Q = {"shoulder_pan_joint": 0.3, "shoulder_lift_joint": -1.2, "elbow_joint": 1.0, "wrist_1_joint": -0.7,
         "wrist_2_joint": 0.5, "wrist_3_joint": 0.9}


def _chain(transforms: dict, frame: str, top: str = "world") -> np.ndarray:
    """``frame`` in ``top`` composed from child -> (parent, matrix) transforms, as a TF listener does."""
    out = np.eye(4)
    while frame != top:
        parent, matrix = transforms[frame]
        out, frame = matrix @ out, parent
    return out


def test_a_root_link_named_world_is_the_world_tf_and_planner_agree_with_pinocchio():
    """example-robot-data's UR5 (root link ``world``, fixed ``world_joint`` of identity origin to
    ``base_link``) at robot_pose x -0.2, y 0.4, z 0.02, yaw -0.8.  Fails on the old code: /tf_static had no
    world -> world and world -> base_link was the joint's identity, so TF stood the arm at the origin while
    the planner stood it at robot_pose.  Truth: the placement written out by hand, and pinocchio's forward
    kinematics on the UR5 file itself composed with it."""
    from fixtures.planning import scenes

    from robot_bridge.nodes.description import load_model
    from robot_bridge.planning.master import robot_file

    share = scenes.erd_share()
    if share is None:
        pytest.skip("example-robot-data is not installed (pip install example-robot-data)")
    urdf_file = str(share / "example-robot-data" / "robots" / "ur_description" / "urdf" / "ur5_robot.urdf")
    c, s = math.cos(-0.8), math.sin(-0.8)
    by_hand = np.array([[c, -s, 0, -0.2], [s, c, 0, 0.4], [0, 0, 1, 0.02], [0, 0, 0, 1]])

    model = load_model(urdf_file, search_path=[str(share)], compiled=False, robot_pose=UR5_POSE)
    static = {(t.parent, t.child): t.matrix for t in model.state.static_transforms()}
    assert not [key for key in static if key[0] == key[1]]
    np.testing.assert_allclose(static[("world", "base_link")], by_hand, atol=1e-12)

    pin_model = pin.buildModelFromUrdf(urdf_file)
    data = pin_model.createData()
    q = pin.neutral(pin_model)
    for name, value in UR5_Q.items():
        q[pin_model.joints[pin_model.getJointId(name)].idx_q] = value
    pin.framesForwardKinematics(pin_model, data, q)
    truth = by_hand @ np.array(data.oMf[pin_model.getFrameId("tool0")].homogeneous)

    moving = model.state.update(list(UR5_Q), list(UR5_Q.values()))[0]
    tf = {child: (parent, m) for (parent, child), m in static.items()}
    for parent, child, value in zip(moving.parents, moving.children, moving.values):
        m = np.eye(4)
        m[:3, :3] = pin.Quaternion(value[6], *value[3:6]).toRotationMatrix()
        m[:3, 3] = value[:3]
        tf[child] = (parent, m)
    np.testing.assert_allclose(_chain(tf, "tool0"), truth, atol=1e-9)

    _, _, placement = robot_file(urdf_file, UR5_POSE, [str(share)], True, pytest.fail)   # as planner_node
    master = MasterModel([str(share)], placement=placement, seed=1)
    assert master.set_description(model.urdf) is None, master.problems
    planner = master.planner
    np.testing.assert_allclose(planner.link_pose("tool0", planner.vector(UR5_Q)), truth, atol=1e-9)
