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


_BLOCK_ROWS = 24      # up to this many rows, local transforms are one block-diagonal dot
_EYE = np.eye(4)


class KinematicModel:
    """A compiled robot for repeated forward kinematics.

    Compilation turns the tree into rows, one per DOF (multi-DOF joints become
    a chain of rows) or fixed joint, each with a parent row.  A row's local
    transform ``origin @ motion(q) @ child_offset`` is linear in
    ``(1, cos q, sin q, q)``, so all rows are one matmul of precomputed
    ``(16, 4)`` weights with those coefficients; poses then compose parent
    before child (a Python loop of 4x4 products for small robots, pointer
    jumping -- log(depth) batched products -- for large ones).
    """

    def __init__(self, robot: Robot):
        self.robot = robot
        self.order = topological_joints(robot)
        self.roots = [name for name in robot.links if robot.parent_joint(name) is None]
        self.mimic = MimicEvaluator(robot)
        self._fixed = {j.name: j.origin @ j.child_offset for j in self.order if j.type == "fixed"}
        self._compile()

    # -- compilation ----------------------------------------------------------
    def _compile(self) -> None:
        self.dof_names: list[tuple[str, int]] = []          # flat DOF vector layout
        self._slots: dict[str, tuple[int, int]] = {}        # joint -> (start, dof)
        weights, slots, parents, revolute = [], [], [], []
        link_row: dict[str, int] = {}
        self.link_names = list(self.roots)
        for j in self.order:
            if j.parent not in link_row and j.parent not in self.link_names:
                self.link_names.append(j.parent)            # a parent the file never defined
            parent = link_row.get(j.parent, -1)
            if j.dof == 0:
                weights.append(_row_weights(self._fixed[j.name], None, False, np.eye(4)))
                slots.append(-1)
                revolute.append(False)
                parents.append(parent)
            else:
                self._slots[j.name] = (len(self.dof_names), j.dof)
                for i in range(j.dof):
                    last = i == j.dof - 1
                    axis = np.asarray(j.axes[i], dtype=float)
                    weights.append(_row_weights(j.origin if i == 0 else np.eye(4), axis,
                                                j.type == "prismatic", j.child_offset if last else np.eye(4)))
                    slots.append(len(self.dof_names))
                    revolute.append(j.type != "prismatic")
                    parents.append(parent)
                    parent = len(weights) - 1
                    self.dof_names.append((j.name, i))
            link_row[j.child] = len(weights) - 1
            self.link_names.append(j.child)
        n = len(weights)
        self._weights = np.array(weights).reshape(n, 16, 4)
        self._row_slot = np.array([s if s >= 0 else len(self.dof_names) for s in slots], dtype=np.intp)
        self._has_prismatic = any(s >= 0 and not r for s, r in zip(slots, revolute, strict=True))
        # small robots: one dot with a block-diagonal matrix, rows ordered (1, cos, sin, q) x row
        self._block = None
        if n <= _BLOCK_ROWS:
            terms = 4 if self._has_prismatic else 3
            self._block = np.zeros((terms, n, n, 16))
            for k in range(terms):
                self._block[k, np.arange(n), np.arange(n)] = self._weights[:, :, k]
            self._block = self._block.reshape(terms * n, 16 * n)
            self._ones = np.ones(n)
        self._parents = np.array(parents, dtype=np.intp)
        self._steps = [(i, p) for i, p in enumerate(parents) if p >= 0]
        self._link_rows = [link_row.get(name, -1) for name in self.link_names]
        self._link_index = list(zip(self.link_names, self._link_rows, strict=True))
        self._initial = np.zeros(len(self.dof_names) + 1)       # last slot: constant 0 for fixed rows
        for j in self.order:
            if j.dof:
                start, dof = self._slots[j.name]
                self._initial[start:start + dof] = j.initial
        # pointer jumping tables: ancestors 1, 2, 4, ... rows up (n = identity sentinel)
        anc = np.where(self._parents < 0, n, self._parents)
        self._jumps = []
        while np.any(anc < n):
            self._jumps.append(anc)
            anc = np.append(anc, n)[anc]
        self._jump = n > 24 and len(self._jumps) * 6 < len(self._steps)

    # -- configuration vectors -------------------------------------------------
    def _vector(self, positions: Optional[Mapping[str, object]]) -> np.ndarray:
        q = self._initial.copy()
        for name, value in (positions or {}).items():
            slot = self._slots.get(name)
            if slot is None or value is None:
                continue
            start, dof = slot
            if dof == 1 and isinstance(value, (float, int)):
                q[start] = value
                continue
            arr = np.atleast_1d(np.asarray(value, dtype=float))
            if arr.size != dof:
                raise ValueError(f"joint {name!r} has {dof} DOF, got {arr.size} values")
            q[start:start + dof] = arr.reshape(-1)
        if self.mimic.steps:
            self._apply_mimic(q)
        return q

    def _apply_mimic(self, q: np.ndarray) -> None:
        views = {name: q[start:start + dof] for name, (start, dof) in self._slots.items()}
        self.mimic.apply(views)      # writes through the views into q

    def _values_vector(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        q = self._initial.copy()
        for name, (start, dof) in self._slots.items():
            q[start:start + dof] = np.asarray(values[name], dtype=float).reshape(-1)
        return q

    # -- evaluation -------------------------------------------------------------
    def _locals(self, q: np.ndarray) -> np.ndarray:
        """(rows, 4, 4) local transforms for a DOF vector (or (m, rows, 4, 4) for (m, dof + 1)).

        Revolute rows have no ``q`` weights and prismatic rows no ``cos``/``sin``
        weights, so the coefficients need no masking.
        """
        qa = q[..., self._row_slot]
        if self._block is not None and q.ndim == 1:
            terms = (self._ones, np.cos(qa), np.sin(qa), qa) if self._has_prismatic \
                else (self._ones, np.cos(qa), np.sin(qa))
            return np.concatenate(terms).dot(self._block).reshape(len(qa), 4, 4)
        coef = np.empty(qa.shape + (4,))
        coef[..., 0] = 1.0
        np.cos(qa, out=coef[..., 1])
        np.sin(qa, out=coef[..., 2])
        coef[..., 3] = qa
        return np.matmul(self._weights, coef[..., None]).reshape(qa.shape + (4, 4))

    def _compose(self, local: np.ndarray) -> list[np.ndarray]:
        """Root-frame pose of every row."""
        if self._jump:
            n = len(local)
            poses = np.empty((n + 1, 4, 4))
            poses[n] = np.eye(4)
            poses[:n] = local
            for anc in self._jumps:
                poses[:n] = poses[anc] @ poses[:n]
            return list(poses[:n])
        poses = list(local)
        for i, p in self._steps:
            poses[i] = poses[p].dot(poses[i])       # ndarray.dot: a third of @'s call overhead
        return poses

    def joint_values(self, positions: Optional[Mapping[str, object]] = None) -> dict[str, np.ndarray]:
        """Per-joint DOF values: given ones, else initial values; mimic DOFs computed."""
        q = self._vector(positions)
        return {name: q[start:start + dof].copy() for name, (start, dof) in self._slots.items()}

    def link_poses(self, positions: Optional[Mapping[str, object]] = None,
                   values: Optional[Mapping[str, np.ndarray]] = None) -> dict[str, np.ndarray]:
        """Every link's 4x4 pose in the root frame.

        ``values`` (joint -> DOF array, e.g. from :meth:`joint_values`) is used
        as is; ``positions`` gets defaults and mimic formulas applied.
        """
        q = self._vector(positions) if values is None else self._values_vector(values)
        poses = self._compose(self._locals(q))
        return {name: poses[row] if row >= 0 else _EYE.copy() for name, row in self._link_index}

    def configuration_matrix(self, positions: Sequence[Mapping[str, object]]) -> np.ndarray:
        """(m, dof) DOF vectors (``dof_names`` order) for :meth:`link_poses_batch`."""
        rows = [self._vector(p)[:-1] for p in positions]
        return np.array(rows).reshape(len(rows), len(self.dof_names))

    def link_poses_batch(self, q: np.ndarray) -> np.ndarray:
        """(m, links, 4, 4) poses (``link_names`` order) for m DOF vectors (``dof_names`` order).

        Mimic DOFs are recomputed from their formulas.
        """
        q = np.atleast_2d(np.asarray(q, dtype=float))
        m = len(q)
        if q.shape[1] != len(self.dof_names):
            raise ValueError(f"expected {len(self.dof_names)} DOF values per configuration, got {q.shape[1]}")
        ext = np.zeros((m, len(self.dof_names) + 1))
        ext[:, :-1] = q
        if self.mimic.steps:
            for row in ext:
                self._apply_mimic(row)
        poses = self._locals(ext)
        for i, p in self._steps:
            poses[:, i] = poses[:, p] @ poses[:, i]
        out = np.empty((m, len(self.link_names), 4, 4))
        for k, row in enumerate(self._link_rows):
            out[:, k] = poses[:, row] if row >= 0 else np.eye(4)
        return out


def _row_weights(before: np.ndarray, axis: Optional[np.ndarray], prismatic: bool,
                 after: np.ndarray) -> np.ndarray:
    """(16, 4) W with ``before @ motion(q) @ after`` = (W @ (1, cos q, sin q, q)).reshape(4, 4)."""
    basis = np.zeros((4, 4, 4))          # motion = sum_k coef_k * basis[k]
    basis[0] = np.eye(4)
    if axis is not None and prismatic:
        basis[3][:3, 3] = axis
    elif axis is not None:               # Rodrigues: c I + (1 - c) a a^T + s [a]x
        x, y, z = axis
        outer = np.outer(axis, axis)
        basis[0][:3, :3] = outer
        basis[1][:3, :3] = np.eye(3) - outer
        basis[2][:3, :3] = [[0, -z, y], [z, 0, -x], [-y, x, 0]]
    return np.stack([(before @ b @ after).reshape(16) for b in basis], axis=1)


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
