"""kinematics/mimic: formulas evaluated in dependency order on small hand-built robots."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.errors import ExpressionError, KinematicsError
from robot_bridge.kinematics import forward_kinematics
from robot_bridge.kinematics.mimic import MimicEvaluator, dof_variable_names
from robot_bridge.model import Joint, Link, Mimic, Robot

Z = np.array([0.0, 0.0, 1.0])


def chain_robot(formulas: dict[str, str]) -> Robot:
    """base -j1-> l1 -j2-> l2 -j3-> l3, all revolute about z at the parent origin; ``formulas``
    makes joints mimic.  Joints are inserted in reverse order so the dict order is not the
    dependency order."""
    robot = Robot("chain", links={n: Link(n) for n in ("base", "l1", "l2", "l3")})
    for name, parent, child in reversed([("j1", "base", "l1"), ("j2", "l1", "l2"), ("j3", "l2", "l3")]):
        mimic = [Mimic(formulas[name])] if name in formulas else []
        robot.joints[name] = Joint(name, "revolute", parent, child, axes=[Z], lower=[-3], upper=[3],
                                   mimic=mimic, passive=name in formulas)
    return robot


def values_for(robot, **given):
    return {name: np.array([given.get(name, 0.0)]) for name in robot.joints}


def test_chained_mimic_joints_follow_dependency_order():
    robot = chain_robot({"j2": "2*j1 + 0.1", "j3": "j2 - j1"})    # j3 depends on the mimic j2
    evaluator = MimicEvaluator(robot)
    assert [step[0] for step in evaluator.steps] == ["j2", "j3"]
    values = values_for(robot, j1=0.3, j2=99.0, j3=99.0)          # stale mimic values are overwritten
    evaluator.apply(values)
    assert values["j2"][0] == pytest.approx(0.7)                  # 2*0.3 + 0.1
    assert values["j3"][0] == pytest.approx(0.4)                  # 0.7 - 0.3


def test_forward_kinematics_uses_mimic_values():
    robot = chain_robot({"j2": "2*j1 + 0.1", "j3": "j2 - j1"})
    poses = forward_kinematics(robot, {"j1": 0.3})
    # all axes coincide: l3 is rotated by j1 + j2 + j3 = 0.3 + 0.7 + 0.4 about z
    angle = 1.4
    expected = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    np.testing.assert_allclose(poses["l3"][:2, :2], expected, atol=1e-12)
    # a value given for a mimic joint is ignored in favour of its formula
    np.testing.assert_allclose(forward_kinematics(robot, {"j1": 0.3, "j2": 2.0})["l3"], poses["l3"])


def test_mimic_cycle_is_a_kinematics_error():
    robot = chain_robot({"j2": "j3 + 1", "j3": "-j2"})
    with pytest.raises(KinematicsError, match="cycle: j2, j3"):
        MimicEvaluator(robot)


def test_three_joint_cycle_is_reported_even_with_an_independent_mimic():
    robot = chain_robot({"j1": "j3 * 2", "j2": "j1", "j3": "j2 + 0.5"})
    with pytest.raises(KinematicsError, match="j1, j2, j3"):
        MimicEvaluator(robot)


def test_unknown_name_in_formula_names_the_joint():
    robot = chain_robot({"j2": "2*jx"})
    with pytest.raises(ExpressionError) as info:
        MimicEvaluator(robot)
    assert "unknown variable 'jx'" in str(info.value)
    assert "joint[@name='j2']/mimic" in str(info.value)


def test_multi_dof_joint_variables():
    robot = Robot("u", links={n: Link(n) for n in ("base", "a", "b")})
    robot.joints["u"] = Joint("u", "universal", "base", "a", lower=-1, upper=1)
    robot.joints["m"] = Joint("m", "revolute", "a", "b", axes=[Z], mimic=[Mimic("u_1*2 - u")], passive=True)
    assert dof_variable_names(robot) == {"u": ("u", 0), "u_0": ("u", 0), "u_1": ("u", 1), "m": ("m", 0)}
    values = {"u": np.array([0.25, 0.5]), "m": np.zeros(1)}
    MimicEvaluator(robot).apply(values)
    assert values["m"][0] == pytest.approx(0.75)                  # 0.5*2 - 0.25


def test_robot_without_mimic_has_no_steps():
    evaluator = MimicEvaluator(chain_robot({}))
    assert evaluator.steps == []
    values = values_for(chain_robot({}), j1=0.5)
    evaluator.apply(values)
    assert values["j1"][0] == 0.5


def test_self_referencing_formula_is_a_cycle():
    with pytest.raises(KinematicsError, match="refers to itself"):
        MimicEvaluator(chain_robot({"j2": "j2 + 1"}))


class _CountedName(str):
    """A joint name that counts how often it is hashed: the work of building or comparing sets of names."""
    hashes = 0

    def __hash__(self):
        _CountedName.hashes += 1
        return str.__hash__(self)


def _mimic_chains(joints: int) -> Robot:
    """Chains of 10 revolute joints; the second of each mimics the first (one formula per 10 joints)."""
    robot = Robot("chains", links={"base": Link("base")})
    for i in range(joints):
        chain, k = divmod(i, 10)
        name, link = _CountedName(f"c{chain}_j{k}"), f"c{chain}_l{k}"
        robot.links[link] = Link(link)
        mimic = [Mimic(f"0.5*c{chain}_j0 + 0.1")] if k == 1 else []
        robot.joints[name] = Joint(name, "revolute", f"c{chain}_l{k - 1}" if k else "base", link, axes=[Z],
                                   lower=[-3], upper=[3], mimic=mimic, passive=k == 1)
    return robot


def test_names_are_hashed_linearly_in_the_joints():
    """Every formula is compiled against one set of variable names, not a copy per formula (each copy
    hashes every joint name: quadratic in a robot with a mimic per chain; 4,000 joints took 0.2 s more)."""
    from robot_bridge.kinematics.mimic import drop_uncompilable_formulas
    from robot_bridge.kinematics.urdf_tree import urdf_tree

    counts = {}
    for joints in (200, 800):
        robot = _mimic_chains(joints)
        _CountedName.hashes = 0
        evaluator = MimicEvaluator(robot, drop_uncompilable_formulas(robot))
        MimicEvaluator(robot)                                    # compiling its own formulas
        urdf_tree(robot)                                         # the URDF writer's linear mimics
        counts[joints] = _CountedName.hashes
        assert len(evaluator.steps) == joints // 10
    assert counts[800] < 4 * 1.2 * counts[200], counts
