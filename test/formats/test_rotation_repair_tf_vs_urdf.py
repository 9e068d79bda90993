"""Rotations written with 9 decimals (off orthonormal by ~1e-9, as CATIA writes them) are made
orthonormal once, where they are read: the /tf of such a robot and the /tf of its exported URDF (read
back) then agree to rounding (issue 33: they differed by 1.6e-9 m), for OpenRAVE XML ``rotationmat``
and COLLADA ``<matrix>`` alike.  Files from test/fixtures/large_files.py and large_collada.py."""

from __future__ import annotations

import numpy as np
import pytest

from fixtures import large_collada, large_files
from robot_bridge.formats import load, urdf
from robot_bridge.kinematics.state_publisher import StatePublisher


def _link_poses(robot, q: dict[str, float]) -> dict[str, np.ndarray]:
    """Every frame's pose in the root frame, composed from what /tf_static and /tf carry."""
    publisher = StatePublisher(robot)
    names, _ = publisher.default_joint_state()
    moving, unknown = publisher.update(names, [q.get(n, 0.0) for n in names])
    assert not unknown
    edges = {t.child: (t.parent, t.matrix) for t in publisher.static_transforms()}
    edges.update({c: (p, m) for p, c, m in zip(moving.parents, moving.children, moving.matrices())})
    poses: dict[str, np.ndarray] = {}

    def pose(frame: str) -> np.ndarray:
        if frame not in poses:
            parent, m = edges[frame] if frame in edges else (None, np.eye(4))
            poses[frame] = m if parent is None else pose(parent) @ m
        return poses[frame]

    for frame in edges:
        pose(frame)
    return poses


@pytest.mark.parametrize("fmt", ["openrave", "collada"])
def test_tf_and_the_exported_urdf_agree_for_rotations_off_by_1e9(tmp_path, fmt):
    if fmt == "openrave":
        path = tmp_path / "r.robot.xml"
        large_files.write(path, 30, "openrave")
        written = large_files._rotationmat(large_files.ROTATION_DEG)
    else:
        path = tmp_path / "r.dae"
        large_collada.write(path, 30)
        written = large_collada._matrix(large_collada.ROTATION_DEG, (0, 0, 0))
    r = np.array([float(v) for v in written.split()][:11]).reshape(-1)
    r = r.reshape(3, 3) if r.size == 9 else np.array([r[0:3], r[4:7], r[8:11]])
    assert 1e-10 < np.abs(r @ r.T - np.eye(3)).max() < 1e-8          # the file's rotation really is off
    robot = load(path)
    assert not [w for w in robot.warnings if "orthonormal" in w]     # below 1e-6: repaired silently
    text, _ = urdf.to_urdf(robot)
    exported = urdf.read_string(text)
    rng = np.random.default_rng(3)
    q = {j.name: float(rng.uniform(-1, 1)) for j in robot.joints.values() if j.dof and not j.is_mimic}
    ours, theirs = _link_poses(robot, q), _link_poses(exported, q)
    common = sorted(set(ours) & set(theirs))
    assert set(robot.links) <= set(common)
    worst = max(float(np.abs(ours[f] - theirs[f]).max()) for f in common)
    assert worst < 1e-14, worst           # chains of 10 joints: without the repair, ~1e-9
    for j in robot.joints.values():
        rot = j.origin[:3, :3]
        np.testing.assert_allclose(rot @ rot.T, np.eye(3), rtol=0, atol=1e-15)
