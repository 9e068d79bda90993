"""model.transform computes rotations in numpy exactly as scipy's Rotation does (the same floats), so the
readers and the description node start without importing scipy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_bridge.model import transform as tf

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(33)


def _special_angles(rng, n):
    """Right angles and their multiples (exact 0/1 entries, gimbal lock) mixed with random ones."""
    right = rng.choice([0.0, np.pi / 2, np.pi, -np.pi / 2, 2 * np.pi], size=(n, 3))
    return np.where(rng.random((n, 3)) < 0.5, right, rng.uniform(-7, 7, (n, 3)))


def test_rpy_quaternions_and_axis_angle_equal_scipy(rng):
    for rpy in _special_angles(rng, 3000):
        np.testing.assert_array_equal(tf.from_rpy(rpy), Rotation.from_euler("xyz", rpy).as_matrix())
    for q in np.concatenate([rng.normal(size=(2000, 4)) * rng.uniform(1e-3, 1e3, (2000, 1)),
                             np.eye(4), -np.eye(4)]):
        truth = Rotation.from_quat(q).as_matrix()        # to the last bit but one: the components are
        np.testing.assert_allclose(tf.from_quat_xyzw(q), truth, rtol=0, atol=1e-15)   # scaled by the
        np.testing.assert_allclose(tf.from_quat_wxyz([q[3], *q[:3]]), truth, rtol=0, atol=1e-15)   # largest
    small = 10.0 ** rng.uniform(-9, -2, 500)                  # scipy's series branch near 0
    for axis, angle in zip(rng.normal(size=(1500, 3)), np.concatenate([small, rng.uniform(-7, 7, 1000)])):
        rotvec = axis / np.linalg.norm(axis) * angle
        np.testing.assert_allclose(tf.rotation_axis_angle(axis, angle),
                                   Rotation.from_rotvec(rotvec).as_matrix(), rtol=0, atol=1e-14)


def test_matrix_to_quaternion_equals_scipy_also_off_orthogonal(rng):
    exact = Rotation.random(3000, random_state=5).as_matrix()
    right = np.array([tf.from_rpy(a) for a in _special_angles(rng, 500)])
    noisy = exact[:1000] + rng.normal(scale=1e-9, size=(1000, 3, 3))      # CATIA-like: SVD first
    for m in (exact, right, noisy):
        np.testing.assert_array_equal(tf.matrix_quats(m), Rotation.from_matrix(m).as_quat())
    for m in noisy[:100]:
        np.testing.assert_array_equal(tf.to_quat_xyzw(m), Rotation.from_matrix(m).as_quat())
    q = rng.normal(size=(500, 4))
    np.testing.assert_array_equal(tf.quat_matrices(q), Rotation.from_quat(q).as_matrix())
    assert tf.matrix_quats(np.zeros((0, 4, 4))).shape == (0, 4)


def test_bad_rotations_are_refused_as_scipy_refuses_them():
    for bad in (np.diag([1.0, 1.0, -1.0]), np.zeros((3, 3))):
        with pytest.raises(ValueError, match="determinant"):
            Rotation.from_matrix(bad)
        with pytest.raises(ValueError, match="determinant"):
            tf.to_quat_xyzw(bad)
    for bad in ([0, 0, 0, 0], [np.nan, 0, 0, 1]):
        with pytest.raises(ValueError, match="zero quaternion|non-finite quaternion"):
            tf.from_quat_xyzw(bad)
        with pytest.raises(ValueError, match="zero norm"):
            tf.quat_matrices([bad])


def test_reading_a_file_and_the_state_publisher_import_no_scipy():
    code = ("import sys\n"
            "from robot_bridge.formats import load\n"
            "from robot_bridge.kinematics.state_publisher import StatePublisher\n"
            "from robot_bridge.model import transform as tf\n"
            "robot = load('robot_bridge/data/lwa3_gripper.robot.xml')\n"
            "state = StatePublisher(robot, compiled=False)\n"
            "state.update(*state.default_joint_state())\n"
            "[tf.to_quat_xyzw(t.matrix) for t in state.static_transforms()]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'numba')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
