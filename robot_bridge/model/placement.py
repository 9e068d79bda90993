"""Where the robot stands in the world frame (issue 43): one placement, world -> the robot's root link.

Its source, in order: the robot file (an OpenRAVE environment's robot transform, ``Robot.placement``), else
a ``robot_pose`` parameter ``[x, y, z, roll, pitch, yaw]`` (m, rad; URDF roll-pitch-yaw), else the identity.
description_node publishes it on /tf_static for every robot, planner_node plans with it (the robot's
collision geometry stands there among the world's bodies, and poses given in the world frame are turned into
the root's frame with its inverse), the simulated sensors and fingers see the world from there
(:func:`placed`).

A root link named like the world frame (example-robot-data's UR5: ``world`` -> ``base_link``) IS the world:
TF has no world -> world, so the root's child joints carry the placement instead, world -> child =
placement @ the joint's origin (on /tf_static, or /tf for a moving joint) (:func:`root_is_world`, applied by
:class:`robot_bridge.kinematics.state_publisher.StatePublisher`).  Every other reader places the root link
itself at the placement, which puts every link below it at the same pose.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .transform import from_rpy, is_rigid

POSE_LENGTH = 6                 # x y z roll pitch yaw
FILE, PARAMETER, IDENTITY = "file", "parameter", "identity"
TOLERANCE = 1e-12               # a file placement this close to the identity counts as none


@dataclass(frozen=True)
class Placement:
    matrix: np.ndarray          # 4x4 world -> root link
    source: str                 # FILE, PARAMETER or IDENTITY


def pose_matrix(pose: Sequence[float]) -> np.ndarray:
    """``[x, y, z, roll, pitch, yaw]`` -> 4x4; ValueError naming what is wrong (length, non-finite)."""
    values = [float(v) for v in pose]
    if len(values) != POSE_LENGTH:
        raise ValueError(f"robot_pose: expected {POSE_LENGTH} values [x, y, z, roll, pitch, yaw], "
                         f"got {len(values)}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"robot_pose: every value must be finite, got {values}")
    out = np.eye(4)
    out[:3, :3] = from_rpy(values[3:])
    out[:3, 3] = values[:3]
    return out


def file_places(robot) -> bool:
    """Whether the robot file itself places the robot (a placement other than the identity)."""
    return robot is not None and not np.allclose(np.asarray(robot.placement, dtype=float), np.eye(4),
                                                 rtol=0.0, atol=TOLERANCE)


def robot_placement(robot=None, pose: Optional[Sequence[float]] = None) -> Placement:
    """The one placement of ``robot`` (a :class:`robot_bridge.model.Robot` read from its file, or None) with
    the ``robot_pose`` parameter ``pose`` (empty / None: not given).  A file that places the robot and a
    ``pose`` both given is refused (ValueError): two answers to one question."""
    given = pose is not None and len(pose) > 0
    if file_places(robot):
        matrix = np.array(robot.placement, dtype=float)
        if not is_rigid(matrix):
            raise ValueError(f"robot {robot.name!r}: its file's placement is not a rigid transform")
        if given:
            raise ValueError(f"robot_pose {list(pose)} given, but the file of robot {robot.name!r} places it "
                             "already (its environment's robot transform): set one of them")
        return Placement(matrix, FILE)
    if given:
        return Placement(pose_matrix(pose), PARAMETER)
    return Placement(np.eye(4), IDENTITY)


def placed(robot, pose: Optional[Sequence[float]] = None):
    """``robot`` where it stands: itself when its file places it or nothing does, else a copy (the same
    links: a robot read once may serve other nodes too) at the ``robot_pose`` ``pose``.  ValueError as
    :func:`robot_placement`."""
    placement = robot_placement(robot, pose)
    if placement.source != PARAMETER:
        return robot
    robot = copy.copy(robot)
    robot.placement = placement.matrix
    return robot


def root_is_world(root_frame: str, world_frame: str) -> bool:
    """Whether the robot's root frame (prefixed as published) is the world frame itself: then the
    placement goes onto the root's child joints (see the module's docstring)."""
    return bool(world_frame) and root_frame == world_frame
