"""urdf_tree: the URDF view of a model reproduces forward_kinematics exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("robot_bridge.kinematics.expr", reason="mimic formulas need kinematics/expr.py")

from robot_bridge.kinematics import KinematicModel, forward_kinematics
from robot_bridge.kinematics.urdf_tree import tree_joint_transform, urdf_tree
from robot_bridge.model import Joint, Link, Robot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _load_fixture():
    spec = importlib.util.spec_from_file_location("tricky_robot", FIXTURES / "urdf" / "tricky_robot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_fixture = _load_fixture()
_pose, tricky_robot = _fixture._pose, _fixture.tricky_robot


def tree_poses(robot: Robot, positions) -> dict[str, np.ndarray]:
    """Link poses by composing tree_joint_transform, each TreeJoint fed its source DOF value."""
    values = KinematicModel(robot).joint_values(positions)
    links, joints = urdf_tree(robot)
    poses = {links[0].name: np.eye(4)}
    for j in joints:
        q = values[j.source][j.dof] if j.dof >= 0 else 0.0
        poses[j.child] = poses[j.parent] @ tree_joint_transform(j, q)
    return poses


def test_tree_fk_equals_model_fk_for_every_link():
    robot = tricky_robot()
    rng = np.random.default_rng(0)
    for _ in range(20):
        positions = {j.name: rng.uniform(j.lower, j.upper) if not j.circular[0] else rng.uniform(-9, 9, j.dof)
                     for j in robot.joints.values() if j.is_active}
        expected = forward_kinematics(robot, positions)
        got = tree_poses(robot, positions)
        for link in robot.links:
            np.testing.assert_allclose(got[link], expected[link], atol=1e-12, err_msg=link)


def test_structure_names_types_and_mimic():
    links, joints = urdf_tree(tricky_robot())
    by_name = {j.name: j for j in joints}
    link_names = [link.name for link in links]
    assert len(set(link_names)) == len(link_names)
    assert len(set(by_name)) == len(joints)
    # off-axis anchor: moving joint into a massless frame link, then a fixed offset joint
    assert by_name["j1"].child == "j1_frame" and by_name["j1_offset"].parent == "j1_frame"
    assert by_name["j1_offset"].type == "fixed" and by_name["j1_offset"].source is None
    np.testing.assert_allclose(by_name["j1"].axis, [0, 0, 1])
    assert (by_name["j1"].lower, by_name["j1"].upper, by_name["j1"].velocity, by_name["j1"].effort) \
        == (-2, 2, 1.5, 10)
    # spherical: three revolute joints, the generated link name 'sph_link0' is taken by a model link
    chain = [by_name[f"sph_axis{i}"] for i in range(3)]
    assert [c.type for c in chain] == ["revolute"] * 3 and [c.dof for c in chain] == [0, 1, 2]
    assert chain[0].child == "sph_link0_1" and chain[1].parent == "sph_link0_1"
    assert chain[2].child == "sph_frame"
    assert {link.name: link.source for link in links}["sph_link0_1"] is None
    assert by_name["uni_axis1"].child == "l3"
    np.testing.assert_allclose(by_name["uni_axis1"].axis, [0, 0.6, 0.8])
    np.testing.assert_allclose(by_name["slide"].axis, [0.6, 0.8, 0])
    assert by_name["slide"].type == "prismatic"
    assert by_name["wheel"].type == "continuous"
    assert by_name["frozen"].type == "fixed" and by_name["frozen"].source == "frozen"
    lin = by_name["lin"]
    assert lin.type == "revolute" and not lin.nonlinear_mimic
    assert lin.mimic == ("j1", -2.0, 0.5)
    assert by_name["nonlin"].mimic is None and by_name["nonlin"].nonlinear_mimic
    assert by_name["base_to_other_root"].parent == "base"
    # parent before child
    seen = {links[0].name}
    for j in joints:
        assert j.parent in seen
        seen.add(j.child)


def test_frozen_passive_joint_hand_derived():
    r = Robot("p", links={"a": Link("a"), "b": Link("b")})
    r.joints["p"] = Joint("p", "revolute", "a", "b", origin=_pose([1, 0, 0]), axes=[np.array([0, 0, 1.0])],
                          passive=True, initial=[np.pi / 2])
    (_, (j,)) = urdf_tree(r)
    assert j.type == "fixed"
    expected = np.array([[0, -1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    np.testing.assert_allclose(tree_joint_transform(j, 0.0), expected, atol=1e-15)


def test_child_offset_hand_derived():
    r = Robot("o", links={"a": Link("a"), "b": Link("b")})
    r.joints["h"] = Joint("h", "revolute", "a", "b", axes=[np.array([0, 0, 1.0])],
                          child_offset=_pose([0.5, 0, 0]), lower=[-1], upper=[1])
    _, joints = urdf_tree(r)
    poses = {"a": np.eye(4)}
    for j in joints:
        poses[j.child] = poses[j.parent] @ tree_joint_transform(j, np.pi / 2 if j.dof == 0 else 0.0)
    np.testing.assert_allclose(poses["b"][:3, 3], [0, 0.5, 0], atol=1e-15)   # anchor rotates about z


def test_generated_names_avoid_model_names():
    r = Robot("c", links={n: Link(n) for n in ("base", "l1", "x", "j_frame")})
    r.joints["j"] = Joint("j", "revolute", "base", "l1", child_offset=_pose([0, 0, 1]))
    r.joints["j_offset"] = Joint("j_offset", "fixed", "l1", "x")
    r.joints["k"] = Joint("k", "fixed", "base", "j_frame")
    links, joints = urdf_tree(r)
    assert [link.name for link in links] == ["base", "l1", "x", "j_frame", "j_frame_1"]
    assert sorted(j.name for j in joints) == ["j", "j_offset", "j_offset_1", "k"]
