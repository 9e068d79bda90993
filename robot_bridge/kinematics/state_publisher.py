"""What the description node publishes on /tf and /tf_static, without rclpy.

``StatePublisher(robot, prefix)`` compiles the URDF tree (``urdf_tree``) once:

- ``static_transforms()``: every fixed transform as ``FrameTransform`` --
  fixed URDF joints (incl. frozen passive joints and generated offsets),
  manipulator tool frames, attached sensor frames (+ camera optical frames),
  hpp handle / gripper frames, and, for an environment, world -> robot root and
  world -> every link of the other bodies (posed at their initial values).
- ``update(names, positions)``: apply one JointState (robot_state_publisher
  semantics: the joints named in the message, plus every mimic joint, are
  published); returns a ``MovingTransforms`` batch (translations and xyzw
  quaternions as numpy arrays) computed in one vectorised pass.

Joint names accepted on input: the URDF joint names (multi-DOF joints expand to
``<joint>_axis0..2``), plus the model's DOF variable names (``<joint>`` and
``<joint>_0..2`` for multi-DOF joints).  Mimic DOFs always follow their
formulas (linear or not) from the latest known values of the other joints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from ..model import Robot
from . import frames
from .fk import KinematicModel
from .mimic import dof_variable_names
from .urdf_tree import TreeJoint, urdf_tree


@dataclass(frozen=True)
class FrameTransform:
    parent: str
    child: str
    matrix: np.ndarray          # child frame in parent frame (4x4)


@dataclass
class MovingTransforms:
    """One /tf batch: row i moves ``children[i]`` relative to ``parents[i]``."""

    parents: list[str]
    children: list[str]
    translations: np.ndarray    # (n, 3)
    quaternions: np.ndarray     # (n, 4) x y z w

    def matrices(self) -> np.ndarray:
        out = np.tile(np.eye(4), (len(self.children), 1, 1))
        if len(self.children):
            out[:, :3, :3] = Rotation.from_quat(self.quaternions).as_matrix()
            out[:, :3, 3] = self.translations
        return out


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Hamilton product of xyzw quaternions."""
    ax, ay, az, aw = a.T
    bx, by, bz, bw = b.T
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def body_link_frame(body: str, link: str, prefix: str = "") -> str:
    """Frame of a link of an environment body other than the robot."""
    return f"{prefix}{body}_{link}" if link != body else f"{prefix}{body}"


class StatePublisher:
    def __init__(self, robot: Robot, prefix: str = ""):
        self.robot = robot
        self.prefix = prefix
        self.links, self.tree = urdf_tree(robot)
        self.kinematics = KinematicModel(robot)
        self.moving = [j for j in self.tree if j.type != "fixed"]
        self.fixed = [j for j in self.tree if j.type == "fixed"]
        n = len(self.moving)
        self.parents = [frames.link_frame(j.parent, prefix) for j in self.moving]
        self.children = [frames.link_frame(j.child, prefix) for j in self.moving]
        km = self.kinematics
        # input name -> index in the DOF vector (URDF names, model variable names)
        self.index: dict[str, int] = {var: km.dof_slot[key] for var, key in dof_variable_names(robot).items()
                                      if key in km.dof_slot}
        for j in self.moving:
            self.index[j.name] = km.dof_slot[(j.source, j.dof)]
        self._row_of_slot = {km.dof_slot[(j.source, j.dof)]: i for i, j in enumerate(self.moving)}
        self._row_slots = np.array([km.dof_slot[(j.source, j.dof)] for j in self.moving], dtype=np.intp)
        self._mimic_rows = np.array([i for i, j in enumerate(self.moving)
                                     if robot.joints[j.source].mimic[j.dof] is not None], dtype=np.intp)
        self.q = km.dof_vector()                          # current DOF values (initial until told)
        # vectorised per-row constants
        origins = np.array([j.origin for j in self.moving]).reshape(n, 4, 4)
        axes = np.array([j.axis for j in self.moving], dtype=float).reshape(n, 3)
        self._revolute = np.array([j.type != "prismatic" for j in self.moving], dtype=bool)
        self._axes = axes
        self._origin_t = origins[:, :3, 3].copy()
        self._origin_q = Rotation.from_matrix(origins[:, :3, :3]).as_quat() if n else np.zeros((0, 4))
        self._slide = np.einsum("nij,nj->ni", origins[:, :3, :3], axes) if n else np.zeros((0, 3))

    # -- static -------------------------------------------------------------
    def static_transforms(self) -> list[FrameTransform]:
        p = self.prefix
        robot = self.robot
        out = [FrameTransform(frames.link_frame(j.parent, p), frames.link_frame(j.child, p), j.origin)
               for j in self.fixed]
        for m in robot.manipulators.values():
            out.append(FrameTransform(frames.link_frame(m.effector, p), frames.tool_frame(m, p), m.tool))
        for s in robot.sensors.values():
            out.append(FrameTransform(frames.link_frame(s.link, p), frames.sensor_frame(s, p), s.origin))
            if s.type == "camera":
                out.append(FrameTransform(frames.sensor_frame(s, p), frames.optical_frame(s, p),
                                          frames.optical_offset(s)))
        sem = robot.semantics
        if sem is not None:
            for h in sem.handles.values():
                out.append(FrameTransform(frames.link_frame(h.link, p), frames.handle_frame(h.name, p),
                                          h.pose))
            for g in sem.grippers.values():
                out.append(FrameTransform(frames.link_frame(g.link, p), frames.gripper_frame(g.name, p),
                                          g.pose))
        if robot.environment:
            world = p + frames.WORLD_FRAME
            out.append(FrameTransform(world, frames.link_frame(robot.root, p), robot.placement))
            for body in robot.environment.values():
                poses = KinematicModel(body).link_poses()
                for link, pose in poses.items():
                    out.append(FrameTransform(world, body_link_frame(body.name, link, p),
                                              body.placement @ pose))
        return out

    # -- moving -------------------------------------------------------------
    def accept(self, names: Sequence[str], positions: Sequence[float]) -> tuple[np.ndarray, list[str]]:
        """Store the positions of known joints; returns (rows to publish, unknown names)."""
        unknown = []
        rows = []
        for name, value in zip(names, positions, strict=True):
            slot = self.index.get(name)
            if slot is None:
                unknown.append(name)
                continue
            self.q[slot] = value
            row = self._row_of_slot.get(slot)
            if row is not None:
                rows.append(row)
        self.kinematics.apply_mimic(self.q)
        if len(self._mimic_rows):
            return np.union1d(np.asarray(rows, dtype=np.intp), self._mimic_rows), unknown
        return np.asarray(rows, dtype=np.intp), unknown

    def transforms(self, rows: np.ndarray | None = None) -> MovingTransforms:
        """Current transforms of the moving joints ``rows`` (all when None)."""
        if rows is None:
            rows = np.arange(len(self.moving))
        q = self.q[self._row_slots[rows]]
        rev = self._revolute[rows]
        half = np.where(rev, 0.5 * q, 0.0)
        motion = np.empty((len(rows), 4))
        motion[:, :3] = self._axes[rows] * np.sin(half)[:, None]
        motion[:, 3] = np.cos(half)
        quats = _quat_mul(self._origin_q[rows], motion)
        trans = self._origin_t[rows] + self._slide[rows] * np.where(rev, 0.0, q)[:, None]
        return MovingTransforms([self.parents[i] for i in rows], [self.children[i] for i in rows],
                                trans, quats)

    def update(self, names: Sequence[str], positions: Sequence[float]) -> tuple[MovingTransforms, list[str]]:
        rows, unknown = self.accept(names, positions)
        return self.transforms(rows), unknown

    def default_joint_state(self) -> tuple[list[str], list[float]]:
        """Names and initial positions of every moving URDF joint (for /joint_states)."""
        initial = self.kinematics.dof_vector()
        return [j.name for j in self.moving], initial[self._row_slots].tolist()

    def tree_joint(self, name: str) -> TreeJoint:
        return next(j for j in self.tree if j.name == name)


class RateGate:
    """robot_state_publisher's publish_frequency rule on JointState stamps.

    A message is published when ``ignore_timestamp`` is set, when
    ``interval_ns`` is 0 (publish_frequency 0: every message), or when its stamp
    is at least ``interval_ns`` after the least recently published joint it
    names.  A stamp going backwards (bag replay) resets the memory.
    """

    def __init__(self, publish_frequency: float, ignore_timestamp: bool = False):
        if publish_frequency < 0.0:
            raise ValueError("publish_frequency must be >= 0")
        self.interval_ns = 0 if publish_frequency == 0.0 else int(1e9 / publish_frequency)
        self.ignore_timestamp = ignore_timestamp
        self.last: dict[str, int] = {}
        self.last_stamp = -1

    def admit(self, names: Sequence[str], stamp_ns: int) -> bool:
        if stamp_ns < self.last_stamp:
            self.last.clear()
        self.last_stamp = stamp_ns
        if not (self.ignore_timestamp or self.interval_ns == 0):
            oldest = min((self.last.get(n, 0) for n in names), default=0)
            if stamp_ns < oldest + self.interval_ns:
                return False
        for n in names:
            self.last[n] = stamp_ns
        return True
