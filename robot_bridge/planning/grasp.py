"""hpp grasp geometry (seed 003), numpy only: where the gripper frame goes for a handle.

A grasp puts the gripper frame (``gripper.pose`` in ``gripper.link``) on the handle frame (``handle.pose`` in
``handle.link`` of the body); the handle's ``mask`` says which of its 3 translations and 3 rotations are
constrained (a free rotation about a symmetry axis: any angle will do).  The pre-grasp is the same frame
backed off along the handle's approaching direction (its x axis unless given) by the handle's plus the
gripper's clearance.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from ..model import Gripper, Handle


def grasp_pose(handle: Handle, handle_link_pose: np.ndarray) -> np.ndarray:
    """World pose the gripper frame takes at the grasp: the handle frame."""
    return np.asarray(handle_link_pose, dtype=float) @ np.asarray(handle.pose, dtype=float)


def pregrasp_pose(handle: Handle, gripper: Gripper, handle_link_pose: np.ndarray) -> np.ndarray:
    """The grasp pose moved back by both clearances against the approaching direction (handle frame)."""
    direction = np.asarray(handle.approaching_direction, dtype=float)
    direction = direction / np.linalg.norm(direction)
    back = np.eye(4)
    back[:3, 3] = -(float(handle.clearance) + float(gripper.clearance)) * direction
    return grasp_pose(handle, handle_link_pose) @ back


def masked_error(current: np.ndarray, target: np.ndarray, mask=(True,) * 6) -> np.ndarray:
    """(6,) error of ``current`` from ``target`` in the target frame: translation, then rotation vector;
    unconstrained axes zeroed."""
    current, target = np.asarray(current, dtype=float), np.asarray(target, dtype=float)
    relative = np.linalg.inv(target) @ current
    err = np.concatenate([relative[:3, 3], Rotation.from_matrix(relative[:3, :3]).as_rotvec()])
    return np.where(np.asarray(mask, dtype=bool), err, 0.0)
