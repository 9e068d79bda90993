"""The numba FK kernel against the numpy composition, hand-derived poses and pinocchio."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import KinematicsError
from robot_bridge.formats import load
from robot_bridge.kinematics import fk_kernel
from robot_bridge.kinematics.fk import KinematicModel
from robot_bridge.model import Joint, Link, Mimic, Robot
from robot_bridge.model.transform import translation

from fixtures.random_trees import random_tree

needs_numba = pytest.mark.skipif(not fk_kernel.AVAILABLE, reason="numba not installed")
EMBEDDED = "robot_bridge/data/lwa3_gripper.robot.xml"


def _both(robot):
    return KinematicModel(robot, compiled=True), KinematicModel(robot, compiled=False)


def _assert_same(a: dict, b: dict, atol=1e-12):
    assert list(a) == list(b)
    for link in a:
        np.testing.assert_allclose(a[link], b[link], atol=atol, rtol=0, err_msg=link)


@needs_numba
@pytest.mark.parametrize("seed", range(6))
def test_kernel_equals_numpy_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    robot = random_tree(rng, [4, 12, 30, 90, 7, 25][seed])
    robot.links["lonely"] = Link("lonely")                 # a second root: identity in both
    fast, slow = _both(robot)
    assert fast._kernel is not None and slow._kernel is None
    for _ in range(3):
        values = {j.name: rng.uniform(-3, 3, j.dof) for j in robot.joints.values() if j.dof}
        _assert_same(fast.link_poses(values), slow.link_poses(values))
        _assert_same(fast.link_poses(values=fast.joint_values(values)), slow.link_poses(values))
    np.testing.assert_array_equal(fast.link_poses()["lonely"], np.eye(4))
    q = rng.uniform(-3, 3, (5, len(fast.dof_names)))
    np.testing.assert_allclose(fast.link_poses_batch(q), slow.link_poses_batch(q), atol=1e-12, rtol=0)


@needs_numba
def test_kernel_hand_derived_planar_arm_prismatic_mimic_and_nan():
    r = Robot("planar")
    for n in ("base", "upper", "fore", "tip", "finger"):
        r.links[n] = Link(n)
    z = [np.array([0.0, 0.0, 1.0])]
    r.joints["shoulder"] = Joint("shoulder", "revolute", "base", "upper", axes=z)
    r.joints["elbow"] = Joint("elbow", "revolute", "upper", "fore", origin=translation([1, 0, 0]), axes=z,
                              mimic=[Mimic("-2*shoulder")])
    r.joints["tool"] = Joint("tool", "fixed", "fore", "tip", origin=translation([1, 0, 0]))
    r.joints["slide"] = Joint("slide", "prismatic", "tip", "finger", axes=[np.array([1.0, 0.0, 0.0])])
    fast, slow = _both(r)
    values = {"shoulder": np.pi / 2, "slide": 0.5}
    poses = fast.link_poses(values)                        # elbow = -pi: the forearm points back along -y
    np.testing.assert_allclose(poses["fore"][:3, 3], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(poses["tip"][:3, 3], [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(poses["finger"][:3, 3], [0, -0.5, 0], atol=1e-12)
    np.testing.assert_allclose(poses["finger"][:3, :3], [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=1e-12)
    _assert_same(poses, slow.link_poses(values))
    # NaN: the link it moves (and its subtree) is NaN on both paths; the kernel leaves the other links
    # finite (numpy's block product spreads it to every row; the nodes drop non-finite values before FK)
    a, b = fast.link_poses({"shoulder": 0.1, "slide": float("nan")}), slow.link_poses({"slide": float("nan")})
    assert np.isnan(a["finger"][:3]).all() and np.isnan(b["finger"][:3]).all()
    finite = slow.link_poses({"shoulder": 0.1})
    _assert_same({k: a[k] for k in ("base", "upper", "fore", "tip")},
                 {k: finite[k] for k in ("base", "upper", "fore", "tip")})


@needs_numba
def test_kernel_warm_up_and_results_independent():
    km = KinematicModel(load(EMBEDDED))
    assert km.warm_up() and fk_kernel.jit_seconds() is not None
    first = km.link_poses({})
    second = km.link_poses({name: 0.4 for name, _ in km.dof_names})
    assert not any(np.shares_memory(first[k], second[k]) for k in first)   # fresh arrays per call


def test_compiled_requested_without_numba_is_an_error(monkeypatch):
    monkeypatch.setattr(fk_kernel, "kernel", lambda: None)
    robot = load(EMBEDDED)
    with pytest.raises(KinematicsError, match="numba"):
        KinematicModel(robot, compiled=True)
    km = KinematicModel(robot)
    assert not km.warm_up()                                 # default: numpy, same results
    np.testing.assert_allclose(km.link_poses({})[km.link_names[0]], np.eye(4))


@needs_numba
@pytest.mark.parametrize("which", ["embedded", "pr2"])
def test_kernel_equals_pinocchio(which, request):
    pin = pytest.importorskip("pinocchio")
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.kinematics.urdf_tree import urdf_tree

    if which == "embedded":
        robot = load(EMBEDDED)
    else:
        src = request.getfixturevalue("corpus") / "openrave" / "src"
        robot = load(src / "robots" / "pr2-beta-static.zae", search_path=[src])
    urdf, _report = to_urdf(robot)
    _links, tree = urdf_tree(robot)
    by_name = {j.name: j for j in tree}
    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    km = KinematicModel(robot, compiled=True)
    rng = np.random.default_rng(3)
    values = {j.name: rng.uniform(-1, 1, j.dof) for j in robot.joints.values() if j.is_active}
    joint_values = km.joint_values(values)
    q = pin.neutral(model)
    for jid in range(1, model.njoints):
        tj = by_name[model.names[jid]]
        v = float(joint_values[tj.source][tj.dof])
        i, nq = model.idx_qs[jid], model.nqs[jid]
        q[i:i + nq] = [np.cos(v), np.sin(v)] if nq == 2 else [v]
    pin.forwardKinematics(model, data, q)
    pin.updateFramePlacements(model, data)
    ours = km.link_poses(values)
    for link in robot.links:
        theirs = data.oMf[model.getFrameId(link, pin.FrameType.BODY)].homogeneous
        np.testing.assert_allclose(ours[link], theirs, atol=1e-12, rtol=0, err_msg=link)
