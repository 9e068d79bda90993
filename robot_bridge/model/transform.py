"""Homogeneous-transform helpers (4x4 numpy arrays).

Quaternions in this module's *public* helpers are named by their order:
``quat_wxyz`` (OpenRAVE, hpp text form) or ``quat_xyzw`` (scipy, ROS msgs).

Rotations and quaternions are plain numpy computed as scipy's Rotation computes them (the same
floating-point results): importing scipy costs more than reading a small file (``robot-bridge check``) or
starting a node.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

IDENTITY = np.eye(4)
IDENTITY.setflags(write=False)


def identity() -> np.ndarray:
    return np.eye(4)


def make(rotation: np.ndarray | None = None, translation: Iterable[float] | None = None) -> np.ndarray:
    """Build a 4x4 transform from a 3x3 rotation and a translation."""
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    if translation is not None:
        t[:3, 3] = np.asarray(list(translation), dtype=float)
    return t


def translation(xyz: Iterable[float]) -> np.ndarray:
    return make(translation=xyz)


def rotation_axis_angle(axis: Sequence[float], angle: float) -> np.ndarray:
    """3x3 rotation about ``axis`` (need not be unit) by ``angle`` radians."""
    a = np.asarray(axis, dtype=float)
    if not (np.all(np.isfinite(a)) and np.isfinite(angle)):
        raise ValueError("rotation axis and angle must be finite")
    big = np.max(np.abs(a)) if a.size else 0.0
    if big == 0.0:
        raise ValueError("zero-length rotation axis")
    a = a / big                                  # scaled first: tiny or huge axes normalise too
    x, y, z = (float(v) for v in a / np.linalg.norm(a) * angle)
    turn = math.sqrt(x * x + y * y + z * z)
    if turn <= 1e-3:                    # sin(t / 2) / t by its series near 0 (as scipy's from_rotvec)
        scale = 0.5 - turn * turn / 48 + turn ** 4 / 3840
    else:
        scale = math.sin(turn / 2) / turn
    return _quat_matrix(x * scale, y * scale, z * scale, math.cos(turn / 2))


def _quat_matrix(x: float, y: float, z: float, w: float) -> np.ndarray:
    """3x3 rotation of a unit quaternion (scipy's as_matrix)."""
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    return np.array([[x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw)],
                     [2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw)],
                     [2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2]])


def unit_quat(q: Sequence[float]) -> np.ndarray:
    """The 4 components of ``q`` (any order) scaled to unit length; ValueError when one is not finite or all
    are zero.  Divided by the largest magnitude before the norm, so huge (1e200) and tiny (1e-300) but
    valid components keep their direction instead of overflowing to inf or underflowing to 0."""
    a = np.asarray(q, dtype=float).reshape(-1)
    if a.shape != (4,):
        raise ValueError(f"a quaternion has 4 components, not {a.size}")
    if not np.isfinite(a).all():
        raise ValueError("non-finite quaternion")
    largest = float(np.max(np.abs(a)))
    if largest == 0.0:
        raise ValueError("zero quaternion")
    a = a / largest
    return a / np.linalg.norm(a)


def from_quat_xyzw(q: Sequence[float]) -> np.ndarray:
    """3x3 of a quaternion of any length (ROS messages, scipy order); every quaternion read from a message
    or a file comes through here (ValueError: non-finite or zero, see :func:`unit_quat`)."""
    return _quat_matrix(*(float(v) for v in unit_quat(q)))


def from_quat_wxyz(q: Sequence[float]) -> np.ndarray:
    w, x, y, z = (float(v) for v in q)
    return from_quat_xyzw([x, y, z, w])


def quat_matrices(quat_xyzw) -> np.ndarray:
    """(..., 4) xyzw quaternions of any non-zero length -> (..., 3, 3) rotations (scipy's
    ``Rotation.from_quat(q).as_matrix()``)."""
    q = np.asarray(quat_xyzw, dtype=float)
    norm = np.sqrt((q * q).sum(axis=-1, keepdims=True))
    if not (norm > 0.0).all():
        raise ValueError("Found zero norm quaternions in `quat`.")
    x, y, z, w = np.moveaxis(q / norm, -1, 0)
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    out = np.stack([x2 - y2 - z2 + w2, 2 * (xy - zw), 2 * (xz + yw),
                    2 * (xy + zw), -x2 + y2 - z2 + w2, 2 * (yz - xw),
                    2 * (xz - yw), 2 * (yz + xw), -x2 - y2 + z2 + w2], axis=-1)
    return out.reshape(q.shape[:-1] + (3, 3))


def matrix_quats(rot) -> np.ndarray:
    """(..., 3, 3) rotations (or 4x4 transforms) -> (..., 4) xyzw quaternions, as scipy's
    ``Rotation.from_matrix(m).as_quat()``: a matrix that is not orthogonal is first replaced by the
    nearest rotation (SVD), one that is not right-handed is refused (ValueError); then the largest of
    the diagonal and the trace picks the formula (Markley)."""
    m = np.array(np.asarray(rot, dtype=float)[..., :3, :3])
    shape = m.shape[:-2]
    m = m.reshape(-1, 3, 3)
    if len(m):
        bad = np.flatnonzero(np.linalg.det(m) <= 0)
        if len(bad):
            raise ValueError("Non-positive determinant (left-handed or null coordinate frame) in rotation "
                             f"matrix {bad[0]}: {m[bad[0]]}.")
        orthogonal = np.isclose(m @ m.transpose(0, 2, 1), np.eye(3), rtol=1e-5, atol=1e-12).all(axis=(1, 2))
        if not orthogonal.all():
            u, _s, vt = np.linalg.svd(m[~orthogonal], full_matrices=False)
            m[~orthogonal] = u @ vt
    m00, m01, m02 = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    m10, m11, m12 = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    m20, m21, m22 = m[:, 2, 0], m[:, 2, 1], m[:, 2, 2]
    trace = m00 + m11 + m22
    choice = np.stack([m00, m11, m22, trace], axis=-1).argmax(axis=-1)[:, None]
    q = np.where(choice == 0, np.stack([1 - trace + 2 * m00, m10 + m01, m20 + m02, m21 - m12], axis=-1), 0.0)
    q = np.where(choice == 1, np.stack([m10 + m01, 1 - trace + 2 * m11, m21 + m12, m02 - m20], axis=-1), q)
    q = np.where(choice == 2, np.stack([m20 + m02, m21 + m12, 1 - trace + 2 * m22, m10 - m01], axis=-1), q)
    q = np.where(choice == 3, np.stack([m21 - m12, m02 - m20, m10 - m01, 1 + trace], axis=-1), q)
    q /= np.sqrt((q * q).sum(axis=-1, keepdims=True))
    return q.reshape(shape + (4,))


def to_quat_xyzw(rot: np.ndarray) -> np.ndarray:
    return matrix_quats(np.asarray(rot)[:3, :3])


def to_quat_wxyz(rot: np.ndarray) -> np.ndarray:
    x, y, z, w = to_quat_xyzw(rot)
    return np.array([w, x, y, z])


def from_rpy(rpy: Sequence[float]) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, then Y, then Z) -> 3x3, through the quaternion of
    Rz(yaw) Ry(pitch) Rx(roll)."""
    roll, pitch, yaw = (float(v) / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return _quat_matrix(sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
                        cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


def to_rpy(rot: np.ndarray) -> np.ndarray:
    """3x3 -> URDF roll-pitch-yaw (inverse of :func:`from_rpy`).

    Pitch from atan2 (not asin) and roll fitted to the chosen yaw, so that
    ``from_rpy(to_rpy(R))`` reproduces R to ~1e-15 even at and near gimbal lock
    (scipy's ``as_euler`` loses up to ~1e-8 there)."""
    r = np.asarray(rot, dtype=float)[:3, :3]
    pitch = np.arctan2(-r[2, 0], np.hypot(r[0, 0], r[1, 0]))
    yaw = np.arctan2(r[1, 0], r[0, 0])
    rest = from_rpy([0.0, pitch, yaw]).T @ r          # = Rx(roll)
    return np.array([np.arctan2(rest[2, 1], rest[1, 1]), pitch, yaw])


def inverse(t: np.ndarray) -> np.ndarray:
    r = t[:3, :3]
    out = np.eye(4)
    out[:3, :3] = r.T
    out[:3, 3] = -r.T @ t[:3, 3]
    return out


def is_rigid(t: np.ndarray, tol: float = 1e-6) -> bool:
    """True when ``t`` is a finite proper rigid transform: R R^T = I within ``tol`` (diagonal within
    ``tol + 1e-5``, as np.allclose), det R = 1 within ``tol``, last row (0, 0, 0, 1).  Plain numpy:
    readers check every transform of a model."""
    t = np.asarray(t, dtype=float)
    if t.shape != (4, 4) or not np.isfinite(t).all():
        return False
    r = t[:3, :3]
    if not (np.abs(r @ r.T - _EYE3) <= tol + 1e-5 * _EYE3).all():
        return False
    (a, b, c), (d, e, f), (g, h, i) = r.tolist()
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    return abs(det - 1.0) < tol and bool((np.abs(t[3] - _LAST_ROW) <= 1e-8 + 1e-5 * _LAST_ROW).all())


_EYE3 = np.eye(3)
_LAST_ROW = np.array([0.0, 0.0, 0.0, 1.0])


def rigid_mask(ts, tol: float = 1e-6) -> np.ndarray:
    """:func:`is_rigid` of every transform of an (n, 4, 4) array in one vectorised pass (bool array)."""
    t = np.asarray(ts, dtype=float).reshape(-1, 4, 4)
    finite = np.isfinite(t).all(axis=(1, 2))
    t = np.where(finite[:, None, None], t, np.eye(4))
    r = t[:, :3, :3]
    orthonormal = (np.abs(r @ r.transpose(0, 2, 1) - _EYE3) <= tol + 1e-5 * _EYE3).all(axis=(1, 2))
    proper = np.abs(np.linalg.det(r) - 1.0) < tol
    bottom = (np.abs(t[:, 3] - _LAST_ROW) <= 1e-8 + 1e-5 * _LAST_ROW).all(axis=1)
    return finite & orthonormal & proper & bottom


ROUNDING_TOL = 1e-6     # rotations written with fewer digits than a double holds (CATIA: ~1e-9 off)


def nearest_rotation(rot: np.ndarray, tol: float) -> np.ndarray | None:
    """The rotation nearest to the 3x3 ``rot`` (polar decomposition), when ``rot`` is a proper rotation
    within ``tol`` of orthonormal (max entry of R R^T - I) and not exactly one already; else None.
    Readers apply it to the matrices they read, once, so every product of them stays exact."""
    r = np.asarray(rot, dtype=float)[:3, :3]
    if not np.all(np.isfinite(r)):
        return None
    off = float(np.max(np.abs(r @ r.T - np.eye(3))))
    if off == 0.0 or off > tol or np.linalg.det(r) <= 0.0:
        return None
    u, _, vt = np.linalg.svd(r)
    return u @ vt
