"""What the description node publishes on /tf and /tf_static, without rclpy.

``StatePublisher(robot, prefix)`` compiles the URDF tree (``urdf_tree``) once:

- ``static_transforms()``: every fixed transform as ``FrameTransform`` --
  fixed URDF joints (incl. frozen passive joints and generated offsets),
  manipulator tool frames, attached sensor frames (+ camera optical frames),
  hpp handle / gripper frames, world -> robot root (its placement, :mod:`robot_bridge.model.placement`;
  a root that is the world frame itself carries it on its child joints, on /tf_static or /tf as they
  are fixed or move) and, for an environment, world -> every link of the
  other bodies (posed at their initial values); ``world`` and
  the bodies' frames are shared by all robots: not prefixed.
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
from typing import Optional
from dataclasses import dataclass, replace

import numpy as np

from ..model import Robot
from ..model.placement import root_is_world
from ..model.transform import matrix_quats, quat_matrices
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
    values: np.ndarray          # (n, 7): translation x y z, quaternion x y z w

    @property
    def translations(self) -> np.ndarray:
        return self.values[:, :3]

    @property
    def quaternions(self) -> np.ndarray:
        return self.values[:, 3:]

    def matrices(self) -> np.ndarray:
        out = np.tile(np.eye(4), (len(self.children), 1, 1))
        if len(self.children):
            out[:, :3, :3] = quat_matrices(self.quaternions)
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


class RowEvaluation:
    """(k, 7) /tf rows from the DOF vector ``q``: each row is linear in (1, cos h, sin h[, q]), so the
    coefficients are ``exp(1j * h)`` seen as (cos, sin) float pairs -- one ufunc call for all -- with
    the constant as the pair (1, 0) of ``h = 0`` and a prismatic row's ``q`` in its (unused) sin slot;
    the rows are then block products, in chunks of at most ``CHUNK`` rows (a dense product over
    many rows would mostly multiply zeros).  ``evaluate`` works in preallocated buffers: one caller
    at a time, the result valid until the next call."""

    CHUNK = 12

    def __init__(self, index: np.ndarray, angle: np.ndarray, prismatic_at: np.ndarray,
                 prismatic_slots: np.ndarray, block: np.ndarray, kernel=None, table=None):
        """``kernel``/``table``: the compiled row kernel (:func:`fk_kernel._tf_rows`) and its (k, 4, 7)
        weights of (1, cos h, sin h, q) -- :meth:`write` then runs it; None: numpy only."""
        k = block.shape[1] // 7
        self.kernel, self.table = kernel, table
        self.slots = np.ascontiguousarray(index[1:], dtype=np.int64)
        self.half = np.ascontiguousarray(angle[1:].imag)
        self.index, self.angle, self.block = index, angle, block
        self.coef = np.zeros(2 * (k + 1))
        self.trig = self.coef.view(np.complex128)
        self.prismatic = (prismatic_at, prismatic_slots) if len(prismatic_slots) else None
        self.out = np.empty(7 * k)
        if k <= self.CHUNK:
            self.chunks, self.constant = [(self.coef, block, self.out)], None
        else:
            self.chunks = [(self.coef[2 * (1 + a):2 * (1 + b)],
                            np.ascontiguousarray(block[2 * (1 + a):2 * (1 + b), 7 * a:7 * b]),
                            self.out[7 * a:7 * b])
                           for a, b in ((a, min(a + self.CHUNK, k)) for a in range(0, k, self.CHUNK))]
            self.constant = block[0].copy()                       # times the pair (1, 0)

    def evaluate(self, q: np.ndarray) -> np.ndarray:
        """The (7k,) rows (x y z, qx qy qz qw each) at ``q``."""
        np.exp(np.multiply(q.take(self.index), self.angle, out=self.trig), out=self.trig)
        if self.prismatic is not None:
            self.coef[self.prismatic[0]] = q.take(self.prismatic[1])
        for coef, block, out in self.chunks:
            np.dot(coef, block, out=out)
        if self.constant is not None:
            np.add(self.out, self.constant, out=self.out)
        return self.out

    def write(self, q: np.ndarray, dest: np.ndarray, dest_index: np.ndarray) -> None:
        """``dest[dest_index] = evaluate(q)``, in one compiled call when the kernel is loaded (``dest_index``
        int64 for it)."""
        if self.kernel is not None:
            self.kernel(q, self.table, self.slots, self.half, dest, dest_index)
        else:
            dest[dest_index] = self.evaluate(q)


@dataclass(frozen=True)
class Selection:
    """How a JointState with given names maps onto the model."""

    fields: np.ndarray          # message indices of the known names (last occurrence of each)
    slots: np.ndarray           # their DOF slots
    rows: np.ndarray            # moving rows to publish: the named ones, plus every mimic row
    unknown: list[str]
    parents: list[str]          # frames of ``rows``
    children: list[str]
    evaluation: Optional["RowEvaluation"] = None     # the compiled values of ``rows`` only


class StatePublisher:
    MAX_SELECTIONS = 64         # distinct name lists remembered (bounded memory)

    def __init__(self, robot: Robot, prefix: str = "", world_frame: str = frames.WORLD_FRAME,
                 environment: bool = True, environment_prefix: str = "", compiled: Optional[bool] = None):
        """``compiled``: the /tf rows and FK by the numba kernel (None: when numba is available; it is
        loaded here, not on the first message), False: numpy only."""
        self.robot = robot
        self.prefix = prefix
        # Shared by every robot in one world (never prefixed by ``prefix``): the world frame the root is
        # placed in (at ``robot.placement``) and the
        # environment bodies' frames (``environment``: published by this robot).
        self.world_frame, self.environment, self.environment_prefix = world_frame, environment, \
            environment_prefix
        self.links, self.tree = urdf_tree(robot)
        self.root_is_world = root_is_world(frames.link_frame(robot.root, prefix), world_frame)
        if self.root_is_world:        # no world -> world: the root's child joints carry the placement
            placement = np.asarray(robot.placement, dtype=float)
            self.tree = [replace(j, origin=placement @ j.origin) if j.parent == robot.root else j
                         for j in self.tree]
        self.kinematics = KinematicModel(robot, compiled=compiled)
        self._rows_kernel = self.kinematics._kernel[2] if self.kinematics.warm_up() else None
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
        self._selections: dict[tuple[str, ...], Selection] = {}
        self._compile_moving(n)

    def _compile_moving(self, n: int) -> None:
        """Row i's (translation, quaternion) is linear in (1, cos h_i, sin h_i, q_i) with h_i = q_i / 2
        (revolute) or 0 (prismatic): quat = cos h * q_origin + sin h * (q_origin * [axis, 0]),
        translation = t_origin + q * R_origin axis.  One dot with a block matrix evaluates all rows;
        the constant 1 is cos(0 * q - 0) so the coefficients are a single cos call (+ prismatic q)."""
        origins = np.array([j.origin for j in self.moving]).reshape(n, 4, 4)
        axes = np.array([j.axis for j in self.moving], dtype=float).reshape(n, 3)
        revolute = np.array([j.type != "prismatic" for j in self.moving], dtype=bool)
        prismatic = np.flatnonzero(~revolute)
        q_origin = matrix_quats(origins) if n else np.zeros((0, 4))
        q_axis = np.zeros((n, 4))
        q_axis[:, :3] = axes
        rows = np.arange(n)
        block = np.zeros((1 + 2 * n + len(prismatic), n, 7))
        block[0, :, :3] = origins[:, :3, 3]
        block[1 + rows, rows, 3:] = q_origin
        block[1 + n + rows, rows, 3:] = np.where(revolute[:, None], _quat_mul(q_origin, q_axis), 0.0)
        block[1 + 2 * n + np.arange(len(prismatic)), prismatic, :3] = \
            np.einsum("nij,nj->ni", origins[prismatic, :3, :3], axes[prismatic])
        self._block = block.reshape(len(block), 7 * n)
        self._block_rows = block                          # (coefficient, row, 7)
        self._prismatic_rows = prismatic
        first = self._row_slots[:1] if n else np.zeros(0, dtype=np.intp)
        self._trig_slot = np.concatenate([first, self._row_slots, self._row_slots])
        half = np.where(revolute, 0.5, 0.0)
        self._trig_scale = np.concatenate([[0.0] if n else [], half, half])
        self._trig_shift = np.concatenate([[0.0] if n else [], np.zeros(n), np.full(n, np.pi / 2)])
        self._prismatic_slot = self._row_slots[prismatic]

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
        world = self.world_frame
        root = frames.link_frame(robot.root, p)
        if world and not self.root_is_world:     # every robot stands in the world (issue 43): URDF ones too
            out.append(FrameTransform(world, root, robot.placement))
        if world and self.environment:
            for body in robot.environment.values():
                poses = KinematicModel(body, compiled=False).link_poses()   # once: no kernel compile
                for link, pose in poses.items():
                    frame = body_link_frame(body.name, link, self.environment_prefix)
                    out.append(FrameTransform(world, frame, body.placement @ pose))
        return out

    # -- moving -------------------------------------------------------------
    def selection(self, names: Sequence[str]) -> Selection:
        """The compiled handling of one JointState name list (cached: a stream repeats its names)."""
        key = tuple(names)
        sel = self._selections.get(key)
        if sel is not None:
            return sel
        last_of_slot: dict[int, int] = {}         # a repeated name: its last value wins
        unknown, rows = [], []
        for k, name in enumerate(key):
            slot = self.index.get(name)
            if slot is None:
                unknown.append(name)
                continue
            last_of_slot[slot] = k
            row = self._row_of_slot.get(slot)
            if row is not None:
                rows.append(row)
        rows = np.asarray(list(dict.fromkeys(rows)), dtype=np.intp)     # a repeated name: one transform
        if len(self._mimic_rows):
            rows = np.union1d(rows, self._mimic_rows)
        if len(self._selections) >= self.MAX_SELECTIONS:
            self._selections.clear()
        sel = self._selections[key] = Selection(
            np.fromiter(last_of_slot.values(), dtype=np.intp, count=len(last_of_slot)),
            np.fromiter(last_of_slot.keys(), dtype=np.intp, count=len(last_of_slot)), rows, unknown,
            [self.parents[i] for i in rows], [self.children[i] for i in rows], self._compile_rows(rows))
        return sel

    def _compile_rows(self, rows: np.ndarray) -> Optional["RowEvaluation"]:
        """``_values()[rows]`` on its own: only the coefficients of ``rows`` are computed (a JointState
        naming 2 of 40 joints costs 2 rows, not 40)."""
        n, k = len(self.moving), len(rows)
        if not k:
            return None
        blocks = self._block_rows                                    # (1 + 2n + prismatic, n, 7)
        pairs = np.zeros((k + 1, 2, k, 7))
        pairs[0, 0] = blocks[0][rows]                                # constant: (1, 0)
        pairs[1:, 0] = blocks[1 + rows][:, rows]                     # cos h
        pairs[1:, 1] = blocks[1 + n + rows][:, rows]                 # sin h
        prismatic_pos = np.flatnonzero(np.isin(rows, self._prismatic_rows))
        for i in prismatic_pos:                                      # h = 0: the sin slot carries q
            p = int(np.flatnonzero(self._prismatic_rows == rows[i])[0])
            pairs[1 + i, 1] = blocks[1 + 2 * n + p][rows]
        half = np.where(np.isin(rows, self._prismatic_rows), 0.0, 0.5)
        table = None
        if self._rows_kernel is not None:                            # (1, cos h, sin h, q) per row
            table = np.zeros((k, 4, 7))
            table[:, 0] = blocks[0][rows]
            table[:, 1] = blocks[1 + rows, rows]
            table[:, 2] = blocks[1 + n + rows, rows]
            for i in prismatic_pos:
                p = int(np.flatnonzero(self._prismatic_rows == rows[i])[0])
                table[i, 3] = blocks[1 + 2 * n + p][rows[i]]
        return RowEvaluation(np.concatenate([self._row_slots[rows[:1]], self._row_slots[rows]]),
                             1j * np.concatenate([[0.0], half]), 2 * (1 + prismatic_pos) + 1,
                             self._row_slots[rows[prismatic_pos]], pairs.reshape(2 * (k + 1), 7 * k),
                             self._rows_kernel, table)

    def selection_values(self, sel: Selection) -> np.ndarray:
        """(len(sel.rows), 7) current rows of ``sel`` (translation, xyzw quaternion)."""
        if sel.evaluation is None:
            return np.zeros((0, 7))
        return sel.evaluation.evaluate(self.q).reshape(-1, 7).copy()

    def accept_selection(self, names: Sequence[str], positions) -> Selection:
        """Store the positions of known joints; returns the message's compiled selection."""
        if len(names) != len(positions):
            raise ValueError(f"{len(names)} names and {len(positions)} positions")
        sel = self.selection(names)
        self.q[sel.slots] = np.asarray(positions, dtype=float)[sel.fields]
        self.kinematics.apply_mimic(self.q)
        return sel

    def accept(self, names: Sequence[str], positions: Sequence[float]) -> tuple[np.ndarray, list[str]]:
        """Store the positions of known joints; returns (rows to publish, unknown names)."""
        sel = self.accept_selection(names, positions)
        return sel.rows, list(sel.unknown)

    def selected_transforms(self, sel: Selection) -> MovingTransforms:
        """Current transforms of the rows of ``sel``."""
        return MovingTransforms(sel.parents, sel.children, self.selection_values(sel))

    def transforms(self, rows: np.ndarray | None = None) -> MovingTransforms:
        """Current transforms of the moving joints ``rows`` (all when None)."""
        if not len(self.moving):
            return MovingTransforms([], [], np.zeros((0, 7)))
        values = self._values()
        if rows is None:
            return MovingTransforms(self.parents, self.children, values)
        return MovingTransforms([self.parents[i] for i in rows], [self.children[i] for i in rows],
                                values[rows])

    def _values(self) -> np.ndarray:
        """(n, 7) rows of every moving joint from the current DOF values."""
        coef = np.cos(self.q[self._trig_slot] * self._trig_scale - self._trig_shift)
        if len(self._prismatic_slot):
            coef = np.concatenate((coef, self.q[self._prismatic_slot]))
        return coef.dot(self._block).reshape(-1, 7)

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
        if self.ignore_timestamp or self.interval_ns == 0:
            return True                 # every message (no memory needed: a new gate starts empty)
        if stamp_ns < self.last_stamp:
            self.last.clear()
        self.last_stamp = stamp_ns
        oldest = min((self.last.get(n, 0) for n in names), default=0)
        if stamp_ns < oldest + self.interval_ns:
            return False
        for n in names:
            self.last[n] = stamp_ns
        return True
