"""The compiled FK the description node and benches rely on: single and batch, against a scipy reference."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_bridge.kinematics import fk_kernel
from robot_bridge.kinematics.fk import KinematicModel, forward_kinematics
from robot_bridge.model import Joint, Link, Mimic, Robot
from robot_bridge.model.transform import translation

from fixtures.random_trees import TYPES, random_tree  # noqa: F401

# every FK test on both paths: the numba kernel (when numba is installed) and the numpy composition
NO_NUMBA = pytest.mark.skipif(not fk_kernel.AVAILABLE, reason="numba not installed")
PATHS = pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=NO_NUMBA)])

def _reference(robot: Robot, values: dict) -> dict:
    """Direct recursion over the model conventions with scipy rotations."""
    def motion(j, q):
        m = np.eye(4)
        if j.type == "prismatic":
            m[:3, 3] = j.axes[0] * q[0]
        elif j.dof:
            rot = Rotation.identity()
            for axis, v in zip(j.axes, q, strict=True):
                rot = rot * Rotation.from_rotvec(np.asarray(axis) * v)
            m[:3, :3] = rot.as_matrix()
        return m

    def pose(link):
        j = robot.parent_joint(link)
        if j is None:
            return np.eye(4)
        q = values.get(j.name, j.initial)
        return pose(j.parent) @ j.origin @ motion(j, np.atleast_1d(q)) @ j.child_offset
    return {link: pose(link) for link in robot.links}


@PATHS
@pytest.mark.parametrize("n_links", [3, 8, 20, 60])
def test_single_and_batch_fk_match_reference(n_links, compiled):
    rng = np.random.default_rng(n_links)
    robot = random_tree(rng, n_links)
    km = KinematicModel(robot, compiled=compiled)
    assert (km._kernel is not None) == compiled
    configs = []
    for _ in range(4):
        values = {j.name: rng.uniform(-2, 2, j.dof) for j in robot.joints.values() if j.dof}
        poses = km.link_poses(values)
        truth = _reference(robot, values)
        for link in robot.links:
            np.testing.assert_allclose(poses[link], truth[link], atol=1e-10)
        configs.append(values)
    q = km.configuration_matrix(configs)
    batch = km.link_poses_batch(q)
    assert batch.shape == (4, len(km.link_names), 4, 4)
    for k, values in enumerate(configs):
        truth = _reference(robot, values)
        for i, link in enumerate(km.link_names):
            np.testing.assert_allclose(batch[k, i], truth[link], atol=1e-10)


def test_both_composition_strategies_agree():
    robot = random_tree(np.random.default_rng(5), 80, types=("revolute", "prismatic", "fixed"))
    km = KinematicModel(robot, compiled=False)
    values = {j.name: 0.3 for j in robot.joints.values() if j.dof}
    a = km.link_poses(values)
    km._jump = not km._jump
    b = km.link_poses(values)
    for link in robot.links:
        np.testing.assert_allclose(a[link], b[link], atol=1e-12)


@PATHS
def test_hand_derived_prismatic_and_defaults(compiled):
    r = Robot("p")
    for n in ("a", "b", "c"):
        r.links[n] = Link(n)
    r.joints["s"] = Joint("s", "prismatic", "a", "b", origin=translation([1, 0, 0]),
                          axes=[np.array([0.0, 1.0, 0.0])], initial=[0.25])
    r.joints["m"] = Joint("m", "prismatic", "b", "c", axes=[np.array([0.0, 0.0, 1.0])],
                          mimic=[Mimic("2*s+1")])
    pytest.importorskip("robot_bridge.kinematics.expr")
    km = KinematicModel(r, compiled=compiled)
    poses = km.link_poses()                                # s at its initial value, m = 1.5
    np.testing.assert_allclose(poses["c"][:3, 3], [1, 0.25, 1.5])
    poses = km.link_poses({"s": 0.5, "m": 99.0})           # the mimic formula wins
    np.testing.assert_allclose(poses["c"][:3, 3], [1, 0.5, 2.0])
    np.testing.assert_allclose(forward_kinematics(r, {"s": 0.5})["c"][:3, 3], [1, 0.5, 2.0])
    batch = km.link_poses_batch([[0.5, 0.0]])
    np.testing.assert_allclose(batch[0, km.link_names.index("c")][:3, 3], [1, 0.5, 2.0])
    r.joints["m"].mimic = [Mimic("atan2(s, 1) + s^2")]         # nonlinear: evaluated per configuration
    km = KinematicModel(r, compiled=compiled)
    batch = km.link_poses_batch([[0.5, 0.0], [-1.0, 0.0]])
    c = km.link_names.index("c")
    np.testing.assert_allclose(batch[:, c, 2, 3], [np.arctan(0.5) + 0.25, np.arctan(-1.0) + 1.0])
    np.testing.assert_allclose(km.dof_vector({"s": 0.5}), [0.5, np.arctan(0.5) + 0.25])


def test_errors_are_reported():
    r = Robot("u")
    r.links["a"], r.links["b"] = Link("a"), Link("b")
    r.joints["u"] = Joint("u", "universal", "a", "b")
    km = KinematicModel(r)
    with pytest.raises(ValueError, match="2 DOF"):
        km.link_poses({"u": [1.0]})
    with pytest.raises(ValueError, match="expected 2"):
        km.link_poses_batch(np.zeros((3, 5)))
