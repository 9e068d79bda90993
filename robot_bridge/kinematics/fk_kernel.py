"""Every link pose of a kinematic tree in one compiled call (numba), from the DOF vector; and the
description node's /tf rows the same way (:func:`_tf_rows`).

A :class:`~robot_bridge.kinematics.fk.KinematicModel` row's local transform is linear in
``(1, cos q, sin q, q)`` (``table[row]``: (4, 16) weights); the kernel evaluates each row and composes
it onto its parent row's pose, parents first, writing each child link's 4x4 into a preallocated
``(links, 4, 4)`` array (root links: identity).  Mimic DOFs are filled in before the call, as for the
numpy path.

numba is optional (``pip install robot_bridge[raycast]``): without it, or when it cannot compile here,
:func:`kernel` returns None and :class:`KinematicModel` composes with numpy.  Compiled code is cached
(``cache=True``: next to this module, or in numba's user cache directory when that is read-only), so
only the first process pays the compilation; ``bench/fk_bench.py`` reports it (``jit_seconds``).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import threading
import time

import numpy as np

# numba is imported on the first kernel() call (its import costs ~0.3 s: not for a process that only
# reads files); without it KinematicModel composes with numpy
AVAILABLE = importlib.util.find_spec("numba") is not None
numba = None

_log = logging.getLogger(__name__)


def _link_poses(q, table, index, out):  # pragma: no cover  (compiled; tested through both paths)
    """``index[row]`` = (DOF slot or -1, parent row or -1, output link or -1), rows parents first."""
    for k in range(out.shape[0]):
        for a in range(4):
            for b in range(4):
                out[k, a, b] = 1.0 if a == b else 0.0
    n = table.shape[0]
    poses = np.empty((n, 12))           # rows 0..2 of each pose (row 3 is 0 0 0 1)
    local = np.empty(12)
    for i in range(n):
        slot, parent, link = index[i, 0], index[i, 1], index[i, 2]
        v, c, s = 0.0, 1.0, 0.0
        if slot >= 0:
            v = q[slot]
            c, s = math.cos(v), math.sin(v)
        for e in range(12):
            local[e] = table[i, 0, e] + c * table[i, 1, e] + s * table[i, 2, e] + v * table[i, 3, e]
        if parent < 0:
            for e in range(12):
                poses[i, e] = local[e]
        else:
            for a in range(3):
                p0, p1, p2, p3 = (poses[parent, 4 * a], poses[parent, 4 * a + 1], poses[parent, 4 * a + 2],
                                  poses[parent, 4 * a + 3])
                for b in range(4):
                    poses[i, 4 * a + b] = p0 * local[b] + p1 * local[4 + b] + p2 * local[8 + b]
                poses[i, 4 * a + 3] += p3
        if link >= 0:
            for a in range(3):
                for b in range(4):
                    out[link, a, b] = poses[i, 4 * a + b]


def _tf_rows(q, table, slots, half, dest, dest_index):  # pragma: no cover
    """/tf rows (x y z, qx qy qz qw) of :class:`~robot_bridge.kinematics.state_publisher.RowEvaluation`:
    row i is ``table[i] @ (1, cos h, sin h, q)`` with ``q = q[slots[i]]``, ``h = half[i] * q``, written to
    ``dest[dest_index[7 i + e]]`` (e.g. straight into a serialized TFMessage)."""
    for i in range(table.shape[0]):
        v = q[slots[i]]
        h = half[i] * v
        c, s = math.cos(h), math.sin(h)
        for e in range(7):
            dest[dest_index[7 * i + e]] = table[i, 0, e] + c * table[i, 1, e] + s * table[i, 2, e] \
                + v * table[i, 3, e]


_single = None                          # the compiled _link_poses (the batch kernel calls it)


def _link_poses_batch(q, table, index, out):  # pragma: no cover
    """:func:`_link_poses` for each of ``q``'s rows into ``out[m]``."""
    for m in range(q.shape[0]):
        _single(q[m], table, index, out[m])


_compiled = None
_failed = False
_jit_seconds = None
_lock = threading.Lock()


def kernel():
    """``(single, batch, tf_rows)`` compiled functions, compiled (or loaded from the cache) on first use and
    warmed up; None without numba or when compiling fails here (logged once)."""
    global _compiled, _failed, _jit_seconds, _single, numba
    if _compiled is not None or _failed or not AVAILABLE:
        return _compiled
    with _lock:
        if _compiled is None and not _failed:
            t = time.perf_counter()
            try:
                import numba

                single = _single = numba.njit(cache=True, nogil=True)(_link_poses)
                batch = numba.njit(cache=True, nogil=True)(_link_poses_batch)
                table = np.zeros((1, 4, 12))
                index = np.array([[0, -1, 1]], dtype=np.int64)
                single(np.zeros(2), table, index, np.empty((2, 4, 4)))
                batch(np.zeros((1, 2)), table, index, np.empty((1, 2, 4, 4)))
                rows = numba.njit(cache=True, nogil=True)(_tf_rows)
                rows(np.zeros(2), np.zeros((1, 4, 7)), np.zeros(1, dtype=np.int64), np.zeros(1), np.empty(7),
                     np.arange(7, dtype=np.int64))
            except Exception as exc:  # numba present but unusable on this machine
                _failed = True
                _log.warning("compiled forward kinematics unavailable (%s); using numpy", exc)
                return None
            _jit_seconds = time.perf_counter() - t
            _compiled = (single, batch, rows)
    return _compiled


def jit_seconds():
    """Seconds the first :func:`kernel` call took in this process (compile or cache load), None before."""
    return _jit_seconds


def tables(weights: np.ndarray, slots, parents, link_rows) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's per-model arrays: ``weights`` (rows, 16, 4) of ``(1, cos, sin, q)``; ``slots`` a
    row's DOF slot (< 0 or >= dof: fixed); ``parents`` a row's parent row (-1 root); ``link_rows`` each
    output link's row (-1: a root link)."""
    n = len(weights)
    table = np.ascontiguousarray(weights.transpose(0, 2, 1)[:, :, :12])         # (rows, 4, 12)
    index = np.full((n, 3), -1, dtype=np.int64)
    index[:, 0] = slots
    index[:, 1] = parents
    for link, row in enumerate(link_rows):
        if row >= 0:
            index[row, 2] = link
    return table, index
