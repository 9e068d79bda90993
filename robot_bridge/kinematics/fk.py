"""Forward kinematics over the model's joint tree.

``KinematicModel(robot)`` compiles the tree once (joint order, mimic formulas);
``link_poses(positions)`` then costs one small matrix product per joint.
"""

from __future__ import annotations

from collections import deque
from typing import Mapping, Optional, Sequence

import numpy as np

from ..errors import KinematicsError
from ..model import Joint, Robot
from .mimic import MimicEvaluator


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues rotation for a unit axis (hot path: no scipy call overhead)."""
    x, y, z = axis
    c, s = np.cos(angle), np.sin(angle)
    C = 1.0 - c
    return np.array([[c + x * x * C, x * y * C - z * s, x * z * C + y * s],
                     [y * x * C + z * s, c + y * y * C, y * z * C - x * s],
                     [z * x * C - y * s, z * y * C + x * s, c + z * z * C]])


def joint_motion(joint: Joint, q: Sequence[float]) -> np.ndarray:
    """The 4x4 motion of ``joint`` at DOF values ``q`` (see model.robot docs)."""
    m = np.eye(4)
    t = joint.type
    if t == "fixed":
        return m
    if t == "prismatic":
        m[:3, 3] = np.asarray(joint.axes[0]) * float(q[0])
        return m
    r = np.eye(3)
    for axis, value in zip(joint.axes, q):
        r = r @ _rotation(np.asarray(axis, dtype=float), float(value))
    m[:3, :3] = r
    return m


def topological_joints(robot: Robot) -> list[Joint]:
    """Joints ordered parent-before-child; raises KinematicsError on loops."""
    by_parent: dict[str, list[Joint]] = {}
    child_count: dict[str, int] = {}
    for j in robot.joints.values():
        by_parent.setdefault(j.parent, []).append(j)
        child_count[j.child] = child_count.get(j.child, 0) + 1
    for link, n in child_count.items():
        if n > 1:
            raise KinematicsError(f"link {link!r} is the child of {n} joints (kinematic loop)")
    roots = [name for name in robot.links if name not in child_count]
    roots += [j.parent for j in robot.joints.values()
              if j.parent not in robot.links and j.parent not in child_count and j.parent not in roots]
    order: list[Joint] = []
    queue = deque(roots)
    seen = set(roots)
    while queue:
        link = queue.popleft()
        for j in by_parent.get(link, ()):
            if j.child in seen:
                raise KinematicsError(f"joint {j.name!r} closes a loop at link {j.child!r}")
            seen.add(j.child)
            order.append(j)
            queue.append(j.child)
    if len(order) != len(robot.joints):
        missing = sorted(set(robot.joints) - {j.name for j in order})
        raise KinematicsError(f"joints not reachable from a root link (loop?): {', '.join(missing)}")
    return order


class KinematicModel:
    """A compiled robot for repeated forward kinematics."""

    def __init__(self, robot: Robot):
        self.robot = robot
        self.order = topological_joints(robot)
        self.roots = [name for name in robot.links if robot.parent_joint(name) is None]
        self.mimic = MimicEvaluator(robot)
        self._fixed = {j.name: j.origin @ j.child_offset for j in self.order if j.type == "fixed"}

    def joint_values(self, positions: Optional[Mapping[str, object]] = None) -> dict[str, np.ndarray]:
        """Per-joint DOF values: given ones, else initial values; mimic DOFs computed."""
        values: dict[str, np.ndarray] = {}
        positions = positions or {}
        for j in self.order:
            if j.dof == 0:
                continue
            given = positions.get(j.name)
            if given is None:
                values[j.name] = np.array(j.initial, dtype=float)
            else:
                arr = np.atleast_1d(np.asarray(given, dtype=float))
                if arr.size != j.dof:
                    raise ValueError(f"joint {j.name!r} has {j.dof} DOF, got {arr.size} values")
                values[j.name] = arr
        self.mimic.apply(values)
        return values

    def link_poses(self, positions: Optional[Mapping[str, object]] = None,
                   values: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
        """Every link's 4x4 pose in the root frame."""
        if values is None:
            values = self.joint_values(positions)
        poses = {root: np.eye(4) for root in self.roots}
        for j in self.order:
            parent = poses.get(j.parent)
            if parent is None:
                parent = poses[j.parent] = np.eye(4)
            if j.type == "fixed":
                poses[j.child] = parent @ self._fixed[j.name]
            else:
                poses[j.child] = parent @ j.origin @ joint_motion(j, values[j.name]) @ j.child_offset
        return poses


def forward_kinematics(robot: Robot, positions: Optional[Mapping[str, object]] = None
                       ) -> dict[str, np.ndarray]:
    """Every link's pose (4x4) in the robot's root frame.

    ``positions`` maps joint name -> float (or a sequence for multi-DOF joints);
    missing joints use their initial value; mimic joints follow their formulas.
    """
    model = robot.__dict__.get("_kinematic_model")
    if model is None or model.robot is not robot:
        model = KinematicModel(robot)
        robot.__dict__["_kinematic_model"] = model
    return model.link_poses(positions)
