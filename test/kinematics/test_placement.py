"""The robot's one placement in the world frame (issue 43): its source (file, robot_pose, identity) and
world -> root on /tf_static for every robot, a URDF one too."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.formats.urdf import read_string
from robot_bridge.kinematics.state_publisher import StatePublisher
from robot_bridge.model.placement import FILE, IDENTITY, PARAMETER, pose_matrix, robot_placement

URDF = """<robot name="arm">
  <link name="{root}"/><link name="l1"/>
  <joint name="j1" type="revolute"><parent link="{root}"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>"""

ENV = """<Environment>
  <Robot name="arm">
    <KinBody>
      <Body name="base" type="dynamic"><Geom type="box"><extents>0.05 0.05 0.05</extents></Geom></Body>
      <Body name="l1" type="dynamic"><offsetfrom>base</offsetfrom></Body>
      <Joint name="j1" type="hinge"><Body>base</Body><Body>l1</Body><axis>0 0 1</axis></Joint>
    </KinBody>
    <translation>0 0 0.1</translation><rotationaxis>0 0 1 90</rotationaxis>
  </Robot>
</Environment>"""

# independent truth: a rotation of 90 degrees about z, then up 0.1
PLACED = np.array([[0.0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0.1], [0, 0, 0, 1]])


def _urdf(root: str = "base"):
    return read_string(URDF.format(root=root), file="<test>")


def _static(robot) -> dict:
    return {(t.parent, t.child): t.matrix for t in StatePublisher(robot, compiled=False).static_transforms()}


def _env(tmp_path):
    path = tmp_path / "placed.env.xml"
    path.write_text(ENV, encoding="utf-8")
    return load(str(path)), str(path)


def test_pose_matrix_is_translation_then_urdf_rpy():
    np.testing.assert_allclose(pose_matrix([0, 0, 0.1, 0, 0, math.pi / 2]), PLACED, atol=1e-12)
    m = pose_matrix([1, 2, 3, 0.3, -0.2, 0.1])
    cr, sr, cp, sp, cy, sy = (math.cos(0.3), math.sin(0.3), math.cos(-0.2), math.sin(-0.2), math.cos(0.1),
                              math.sin(0.1))
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    np.testing.assert_allclose(m[:3, :3], rz @ ry @ rx, atol=1e-12)
    np.testing.assert_allclose(m[:3, 3], [1, 2, 3])


@pytest.mark.parametrize("bad", [[0, 0, 0.1], [0, 0, 0, 0, 0, 0, 0], [0, 0, math.nan, 0, 0, 0],
                                 [0, 0, 0, math.inf, 0, 0]])
def test_pose_matrix_refuses_wrong_length_and_non_finite(bad):
    with pytest.raises(ValueError, match="robot_pose"):
        pose_matrix(bad)


def test_sources_in_order_file_parameter_identity(tmp_path):
    placed, _ = _env(tmp_path)
    p = robot_placement(placed)
    assert p.source == FILE
    np.testing.assert_allclose(p.matrix, PLACED, atol=1e-9)
    with pytest.raises(ValueError, match="places it already"):
        robot_placement(placed, [0, 0, 0.2, 0, 0, 0])
    p = robot_placement(_urdf(), [0, 0, 0.1, 0, 0, math.pi / 2])
    assert p.source == PARAMETER
    np.testing.assert_allclose(p.matrix, PLACED, atol=1e-12)
    for pose in (None, []):
        p = robot_placement(_urdf(), pose)
        assert p.source == IDENTITY
        np.testing.assert_array_equal(p.matrix, np.eye(4))


def test_a_urdf_robot_stands_in_the_world_on_tf_static():
    """Fails on the old code: a URDF robot (no environment, no prefix) had no world -> root at all, so its
    frames were not connected to the world's bodies."""
    robot = _urdf()
    static = _static(robot)
    np.testing.assert_array_equal(static[("world", "base")], np.eye(4))
    robot.placement = pose_matrix([0, 0, 0.1, 0, 0, math.pi / 2])
    static = _static(robot)
    np.testing.assert_allclose(static[("world", "base")], PLACED, atol=1e-12)


def test_a_root_named_like_the_world_frame_gets_no_loop():
    static = StatePublisher(_urdf("world"), compiled=False).static_transforms()
    assert not [t for t in static if t.parent == t.child]


def test_the_description_node_model_places_the_robot(tmp_path):
    """load_model (what description_node publishes): robot_pose places a URDF robot; the file's placement
    places an environment's robot; both given: refused."""
    from robot_bridge.nodes.description import load_model

    urdf = tmp_path / "arm.urdf"
    urdf.write_text(URDF.format(root="base"), encoding="utf-8")
    model = load_model(str(urdf), compiled=False, robot_pose=[0, 0, 0.1, 0, 0, math.pi / 2])
    static = {(t.parent, t.child): t.matrix for t in model.state.static_transforms()}
    np.testing.assert_allclose(static[("world", "base")], PLACED, atol=1e-12)
    _, env = _env(tmp_path)
    model = load_model(env, compiled=False)
    static = {(t.parent, t.child): t.matrix for t in model.state.static_transforms()}
    np.testing.assert_allclose(static[("world", "base")], PLACED, atol=1e-9)
    with pytest.raises(ValueError, match="places it already"):
        load_model(env, compiled=False, robot_pose=[0, 0, 0, 0, 0, 0.5])


WORLD_ROOTED = """<robot name="arm">
  <link name="world"/><link name="base"/><link name="l1"/>
  <joint name="world_joint" type="fixed"><parent link="world"/><child link="base"/>
    <origin xyz="0.1 0 0.2" rpy="0 0 0.3"/></joint>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>"""


def test_a_root_named_like_the_world_frame_is_the_world_its_children_placed():
    """Fails on the old code (world -> base was the joint's origin alone: the placement was lost): a root
    link named ``world`` is the world frame, so the placement goes onto its fixed child joint, world -> base
    = placement @ origin; a prefixed root is an ordinary root again."""
    robot = read_string(WORLD_ROOTED, file="<test>")
    robot.placement = PLACED
    static = _static(robot)
    assert not [key for key in static if key[0] == key[1]]
    # by hand: Rz(pi/2) @ (Rz(0.3), (0.1, 0, 0.2)) then up 0.1: Rz(pi/2 + 0.3) at (0, 0.1, 0.3)
    c, s = math.cos(math.pi / 2 + 0.3), math.sin(math.pi / 2 + 0.3)
    expected = np.array([[c, -s, 0, 0.0], [s, c, 0, 0.1], [0, 0, 1, 0.3], [0, 0, 0, 1]])
    np.testing.assert_allclose(static[("world", "base")], expected, atol=1e-12)
    prefixed = {(t.parent, t.child): t.matrix
                for t in StatePublisher(robot, "r/", compiled=False).static_transforms()}
    np.testing.assert_allclose(prefixed[("world", "r/world")], PLACED, atol=1e-12)
    c, s = math.cos(0.3), math.sin(0.3)
    np.testing.assert_allclose(prefixed[("r/world", "r/base")],
                               [[c, -s, 0, 0.1], [s, c, 0, 0], [0, 0, 1, 0.2], [0, 0, 0, 1]], atol=1e-12)


def test_a_moving_joint_out_of_a_world_root_carries_the_placement_on_tf():
    """j1 turns ``l1`` straight out of the root ``world``: its /tf row is placement @ Rz(q)."""
    robot = _urdf("world")
    robot.placement = PLACED
    moving = StatePublisher(robot, compiled=False).update(["j1"], [0.4])[0]
    assert (moving.parents, moving.children) == (["world"], ["l1"])
    half = (math.pi / 2 + 0.4) / 2                           # Rz(pi/2 + 0.4) at (0, 0, 0.1), quaternion xyzw
    row = moving.values[0] * np.r_[np.ones(3), np.sign(moving.values[0][6]) * np.ones(4)]   # q ~ -q
    np.testing.assert_allclose(row, [0, 0, 0.1, 0, 0, math.sin(half), math.cos(half)], atol=1e-12)


def test_placed_copies_only_for_a_robot_pose():
    from robot_bridge.model.placement import placed

    robot = _urdf()
    assert placed(robot) is robot and placed(robot, []) is robot
    moved = placed(robot, [0, 0, 0.1, 0, 0, math.pi / 2])
    assert moved is not robot and moved.links is robot.links
    np.testing.assert_allclose(moved.placement, PLACED, atol=1e-12)
    np.testing.assert_array_equal(robot.placement, np.eye(4))
