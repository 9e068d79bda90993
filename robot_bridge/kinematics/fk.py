"""Forward kinematics over the model's joint tree.

``KinematicModel(robot)`` compiles the tree once (joint order, mimic formulas);
``link_poses(positions)`` then costs one small matrix product per joint.
"""

from __future__ import annotations

import operator
from collections import deque
from typing import Mapping, Optional, Sequence

import numpy as np

from ..errors import KinematicsError
from ..model import Joint, Robot
from . import fk_kernel
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

    def __init__(self, robot: Robot, compiled: Optional[bool] = None):
        """``compiled``: compose with the numba kernel (:mod:`.fk_kernel`; None: when it is available,
        loaded by :meth:`warm_up` or the first evaluation -- reading a file never imports numba; True:
        loaded now, KinematicsError without numba; False: numpy only)."""
        self.robot = robot
        self.order = topological_joints(robot)
        self.roots = robot.root_links()
        self.mimic = MimicEvaluator(robot)
        self._compiled_wanted = compiled
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
        self._terms = np.ascontiguousarray(self._weights.transpose(2, 0, 1))
        prismatic_slots = {sl for sl, rev in zip(slots, revolute, strict=True) if sl >= 0 and not rev}
        self._has_prismatic = bool(prismatic_slots)
        # small robots: every row's local transform from one dot of the DOF vector's exp(1j * q), seen
        # as (cos q, sin q) float pairs -- the constant-0 slot gives (1, 0), a prismatic slot's sin
        # position carries q itself -- with a matrix mapping each pair onto the rows it drives
        self._block = None
        if n <= _BLOCK_ROWS:
            # (a row n more: the root's identity, so the root links need no copy of their own; with
            # prismatic joints the coefficients go on with q itself, the linear terms)
            const = len(self.dof_names)
            pairs = np.zeros((const + 1, 2, n + 1, 16))
            linear = np.zeros((const + 1, n + 1, 16))
            pairs[const, 0, n] = np.eye(4).reshape(16)
            for row, (sl, rev) in enumerate(zip(slots, revolute, strict=True)):
                w = self._weights[row]
                pairs[const, 0, row] += w[:, 0]
                if sl >= 0 and rev:
                    pairs[sl, 0, row] += w[:, 1]
                    pairs[sl, 1, row] += w[:, 2]
                elif sl >= 0:
                    linear[sl, row] += w[:, 3]
            self._block = pairs.reshape(2 * (const + 1), 16 * (n + 1))
            if self._has_prismatic:
                self._block = np.concatenate([self._block, linear.reshape(const + 1, 16 * (n + 1))])
            self._angle = np.where([sl in prismatic_slots for sl in range(const + 1)], 0.0, 1j)
            self._angle[const] = 0.0
        self._parents = np.array(parents, dtype=np.intp)
        self._steps = [(i, p) for i, p in enumerate(parents) if p >= 0]
        self._chains = _chains(parents)
        self.dof_slot = {name: k for k, name in enumerate(self.dof_names)}     # (joint, dof) -> index
        self._link_rows = [link_row.get(name, -1) for name in self.link_names]
        named_rows = list(zip(self.link_names, self._link_rows, strict=True))
        self._root_names = [name for name, row in named_rows if row < 0]
        self._child_names = [name for name, row in named_rows if row >= 0]
        self._child_rows = [row for row in self._link_rows if row >= 0]
        picker = operator.itemgetter(*self._link_rows)
        self._pick = picker if len(self._link_rows) > 1 else (lambda poses: (picker(poses),))
        self._scalar_index: dict = {}                          # _set_scalars cache
        self._initial = np.zeros(len(self.dof_names) + 1)       # last slot: constant 0 for fixed rows
        for j in self.order:
            if j.dof:
                start, dof = self._slots[j.name]
                self._initial[start:start + dof] = j.initial
        self._compile_mimic()
        # pointer jumping tables: ancestors 1, 2, 4, ... rows up (n = identity sentinel)
        anc = np.where(self._parents < 0, n, self._parents)
        self._jumps = []
        while np.any(anc < n):
            self._jumps.append(anc)
            anc = np.append(anc, n)[anc]
        self._jump = n > 24 and len(self._jumps) * 6 < len(self._steps)
        self._kernel = None
        self._kernel_pending = self._compiled_wanted is not False  # warm_up() or the first evaluation
        if self._compiled_wanted:
            self.warm_up()

    def warm_up(self) -> bool:
        """Compile (or load from numba's cache) the FK kernel now, not in the first evaluation; True when
        the kernel is used, False for the numpy path (no numba, or ``compiled=False``)."""
        if self._kernel_pending:
            self._kernel_pending = False
            self._kernel = fk_kernel.kernel()
            if self._kernel is None and self._compiled_wanted:
                raise KinematicsError("compiled forward kinematics requested but numba is unavailable")
            if self._kernel is not None:
                self._table, self._index = fk_kernel.tables(self._weights, self._row_slot, self._parents,
                                                            self._link_rows)
        return self._kernel is not None

    # -- configuration vectors -------------------------------------------------
    def _vector(self, positions: Optional[Mapping[str, object]]) -> np.ndarray:
        q = self._initial.copy()
        if positions and self._set_scalars(q, positions):
            if self._mimic_plan:
                self.apply_mimic(q)
            return q
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
        if self._mimic_plan:
            self.apply_mimic(q)
        return q

    def _set_scalars(self, q: np.ndarray, positions: Mapping[str, object]) -> bool:
        """The common case in one numpy assignment: every name a known 1-DOF joint, every value a float
        (the slot indices are cached per name tuple); False leaves ``q`` to the general loop."""
        key = tuple(positions)
        index = self._scalar_index.get(key)
        if index is None:
            slots = [self._slots.get(name, (0, 0)) for name in key]
            index = np.array([start for start, dof in slots], dtype=np.intp) \
                if all(dof == 1 for _start, dof in slots) else False
            if len(self._scalar_index) >= 64:
                self._scalar_index.clear()
            self._scalar_index[key] = index
        if index is False:
            return False
        try:
            values = np.array(list(positions.values()))
        except ValueError:                  # ragged: some value is a sequence
            return False
        if values.dtype != np.float64 or values.shape != index.shape:
            return False                    # None, ints, arrays: the general loop handles them
        q[index] = values
        return True

    def _compile_mimic(self) -> None:
        """The mimic evaluator's steps as DOF-vector operations: linear formulas become
        ``q[t] = a * q[s] + b`` (vectorised in batches), others read only their own variables."""
        slot_of = {var: self._slots[joint][0] + i for var, (joint, i) in self.mimic.variables.items()
                   if joint in self._slots}
        self._mimic_plan = []
        for joint, dof, expr, limits in self.mimic.steps:
            if joint not in self._slots:
                continue                                  # a loop-closing joint: no value in FK
            target = self._slots[joint][0] + dof
            lin = None if expr.is_multi else expr.as_linear()
            if lin is not None and lin[0] in slot_of:
                self._mimic_plan.append((target, (slot_of[lin[0]], lin[1], lin[2]), None, ({}, []), None))
                continue
            loop_values = getattr(self.mimic, "_loop_values", {})
            env = {var: float(loop_values[jn][i]) for var, (jn, i) in self.mimic.variables.items()
                   if var in expr.variables and var not in slot_of}
            reads = [(var, slot_of[var]) for var in expr.variables if var in slot_of]
            self._mimic_plan.append((target, None, expr, (env, reads), limits))

    def linear_mimic(self) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """:meth:`apply_mimic` as arrays when every mimic is linear: ``(index, coef)``, row m meaning
        ``q[index[m, 0]] = coef[m, 0] * q[index[m, 1]] + coef[m, 1]`` in order; None otherwise."""
        if any(lin is None for _target, lin, *_ in self._mimic_plan):
            return None
        index = np.array([(target, lin[0]) for target, lin, *_ in self._mimic_plan], dtype=np.int64)
        coef = np.array([(lin[1], lin[2]) for _target, lin, *_ in self._mimic_plan], dtype=float)
        return index.reshape(-1, 2), coef.reshape(-1, 2)

    def apply_mimic(self, q: np.ndarray) -> None:
        """Overwrite mimic DOFs of ``q`` (``dof_names`` layout, shape (dof,) or (m, dof)) from their
        formulas, in dependency order."""
        single = q.ndim == 1
        for target, lin, expr, (env, reads), limits in self._mimic_plan:
            if lin is not None:
                if single:
                    q[target] = lin[1] * float(q[lin[0]]) + lin[2]
                else:
                    q[:, target] = lin[1] * q[:, lin[0]] + lin[2]
                continue
            for row in q.reshape(-1, q.shape[-1]):
                values = {**env, **{var: float(row[slot]) for var, slot in reads}}
                # a multi-valued formula (polyroots) picks its value by the joint limits (MimicEvaluator rule)
                row[target] = (expr.evaluate_within(values, *limits) if expr.is_multi
                               else expr.evaluate(values))

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
        if self._block is not None and q.ndim == 1:         # rows + the root's identity last
            coef = np.exp(q * self._angle).view(np.float64)
            if self._has_prismatic:
                coef = np.concatenate((coef, q))
            return coef.dot(self._block).reshape(-1, 4, 4)
        qa = q[..., self._row_slot]
        w = self._terms                     # (4, rows, 16): constant, cos, sin and q weights
        flat = w[0] + np.cos(qa)[..., None] * w[1] + np.sin(qa)[..., None] * w[2]
        if self._has_prismatic:
            flat += qa[..., None] * w[3]
        return flat.reshape(qa.shape + (4, 4))

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
        for parent, chain in self._chains:          # ndarray.dot: a third of @'s call overhead
            acc = poses[parent]
            for i in chain:
                acc = poses[i] = acc.dot(poses[i])
        return poses

    def dof_vector(self, positions: Optional[Mapping[str, object]] = None) -> np.ndarray:
        """(dof,) vector in ``dof_names`` order: given values, else initial ones; mimic DOFs computed."""
        return self._vector(positions)[:-1]

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
        if self._kernel_pending:
            self.warm_up()
        if self._kernel is not None:
            out = np.empty((len(self.link_names), 4, 4))
            self._kernel[0](q, self._table, self._index, out)
            return dict(zip(self.link_names, out))
        if self._block is not None and len(self._root_names) == 1:        # the small robots' hot path
            poses = list(self._locals(q))           # row -1: the root's identity
            for parent, chain in self._chains:      # ndarray.dot: a third of @'s call overhead
                acc = poses[parent]
                for i in chain:
                    acc = poses[i] = acc.dot(poses[i])
            return dict(zip(self.link_names, self._pick(poses)))
        poses = self._compose(self._locals(q))
        if self._block is None:
            poses.append(_EYE.copy())               # row -1: the root links
        if len(self._root_names) > 1:               # no shared identity between several roots
            poses[-1:] = []
            out = {name: _EYE.copy() for name in self._root_names}
            out.update(zip(self._child_names, [poses[row] for row in self._child_rows], strict=True))
            return out
        return dict(zip(self.link_names, self._pick(poses), strict=True))

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
        if self._mimic_plan:
            self.apply_mimic(ext)
        if self._kernel_pending:
            self.warm_up()
        if self._kernel is not None:
            out = np.empty((m, len(self.link_names), 4, 4))
            self._kernel[1](ext, self._table, self._index, out)
            return out
        poses = self._locals(ext)
        for i, p in self._steps:
            poses[:, i] = poses[:, p] @ poses[:, i]
        out = np.empty((m, len(self.link_names), 4, 4))
        for k, row in enumerate(self._link_rows):
            out[:, k] = poses[:, row] if row >= 0 else np.eye(4)
        return out


def _chains(parents: list[int]) -> list[tuple[int, list[int]]]:
    """Rows grouped into (parent row, chain of rows each the child of the previous), in an
    order where every parent row is computed before its chains."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    out = []
    pending = [(root, kid) for root in children.get(-1, []) for kid in children.get(root, [])]
    while pending:
        parent, row = pending.pop(0)
        chain = [row]
        while children.get(chain[-1]):
            first, *others = children[chain[-1]]
            pending += [(chain[-1], o) for o in others]
            chain.append(first)
        out.append((parent, chain))
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
