"""Every link pose of a kinematic tree in one compiled call (numba), from the DOF vector; and the
description node's /tf rows the same way (:func:`_tf_rows`).

A :class:`~robot_bridge.kinematics.fk.KinematicModel` row's local transform is linear in
``(1, cos q, sin q, q)`` (``table[row]``: (4, 16) weights); the kernel evaluates each row and composes
it onto its parent row's pose, parents first, writing each child link's 4x4 into a preallocated
``(links, 4, 4)`` array (root links: identity).  Mimic DOFs are filled in before the call, as for the
numpy path.

numba is optional (``pip install robot_bridge[raycast]``): without it, or when it cannot compile here,
:func:`kernel` returns None and :class:`KinematicModel` composes with numpy.  Compiled code is cached in a
user folder (:mod:`robot_bridge.jit`), so only the first process pays the compilation;
``bench/fk_bench.py`` reports it (``jit_seconds``).  :func:`ready` says whether this process has the kernels
without loading them (the description node starts on the numpy path and loads them on a thread).
"""

from __future__ import annotations

import logging
import math
import threading
import time

import numpy as np

from .. import jit

# numba is imported on the first kernel() call (its import costs ~0.3 s: not for a process that only
# reads files); without it KinematicModel composes with numpy
AVAILABLE = jit.AVAILABLE
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


# _joint_state_rows results
JS_WRITTEN, JS_UPDATED, JS_NOT_LE, JS_NEW_NAMES, JS_COUNT_MISMATCH, JS_TRUNCATED, JS_NON_FINITE = range(7)


def _u32(msg, at):  # pragma: no cover  (compiled)
    return np.int64(msg[at]) | (np.int64(msg[at + 1]) << 8) | (np.int64(msg[at + 2]) << 16) \
        | (np.int64(msg[at + 3]) << 24)


def _joint_state_rows(msg, length, start, key, mask, fields, slots, mimic_index,  # pragma: no cover
                      mimic_coef, q, table, row_slots, half, dest, dest_index, stamps, stamp_index,
                      publish, header):
    """A little-endian XCDR1 JointState at ``msg[start:length]`` applied to ``q`` and, with ``publish``,
    its /tf rows written -- in one compiled call, because per message (a thread woken once a
    millisecond, caches cold) each separate numpy call costs 5-25 us.

    The message's name sequence must equal ``key`` where ``mask`` is set (its CDR bytes, padding
    masked); positions ``[fields[i]]`` go to ``q[slots[i]]``, then the linear mimics
    ``q[mimic_index[m, 0]] = mimic_coef[m, 0] * q[mimic_index[m, 1]] + mimic_coef[m, 1]`` in order; the
    rows are :func:`_tf_rows` into ``dest[dest_index]`` and the stamp into ``stamps[stamp_index]``.
    ``header`` receives (stamp sec, nanosec) (or the position count on ``JS_COUNT_MISMATCH``).
    Returns a ``JS_*`` code: ``JS_WRITTEN`` (rows written),
    ``JS_UPDATED`` (``q`` updated, ``publish`` false), or why nothing was applied."""
    if length - start < 16 or msg[start] != 0 or msg[start + 1] != 1:
        return JS_NOT_LE
    sec = _u32(msg, start + 4)
    if sec >= 2 ** 31:
        sec -= 2 ** 32                                        # int32
    nanosec = _u32(msg, start + 8)
    at = 16 + _u32(msg, start + 12)
    at += -at & 3
    n_key = key.shape[0]
    if start + at + n_key > length:
        return JS_NEW_NAMES
    for i in range(n_key):
        if msg[start + at + i] & mask[i] != key[i]:
            return JS_NEW_NAMES
    at += n_key
    at += -at & 3
    if start + at + 4 > length:
        return JS_TRUNCATED
    count = _u32(msg, start + at)
    at += 4
    at += -(at - 4) & 7
    n_names = _u32(key, 0)
    if count != n_names:
        header[0] = count
        return JS_COUNT_MISMATCH
    if start + at + 8 * count > length:
        return JS_TRUNCATED
    positions = msg[start + at:start + at + 8 * count].view(np.float64)
    for i in range(count):
        if not math.isfinite(positions[i]):
            return JS_NON_FINITE
    for i in range(fields.shape[0]):
        q[slots[i]] = positions[fields[i]]
    for m in range(mimic_index.shape[0]):
        q[mimic_index[m, 0]] = mimic_coef[m, 0] * q[mimic_index[m, 1]] + mimic_coef[m, 1]
    header[0], header[1] = sec, nanosec
    if not publish:
        return JS_UPDATED
    _tf_rows_inline(q, table, row_slots, half, dest, dest_index)
    for r in range(stamp_index.shape[0]):
        stamps[stamp_index[r, 0]] = sec & 0xFFFFFFFF
        stamps[stamp_index[r, 1]] = nanosec
    return JS_WRITTEN


_single = None                          # the compiled _link_poses (the batch kernel calls it)
_tf_rows_inline = None                  # the compiled _tf_rows (_joint_state_rows calls it)


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
    global _compiled, _failed, _jit_seconds, _single, _tf_rows_inline, _u32, numba
    if _compiled is not None or _failed or not AVAILABLE:
        return _compiled
    with _lock:
        if _compiled is None and not _failed:
            t = time.perf_counter()
            try:
                numba = jit.load()
                single = _single = jit.njit(nogil=True)(_link_poses)
                batch = jit.njit(nogil=True)(_link_poses_batch)
                table = np.zeros((1, 4, 12))
                index = np.array([[0, -1, 1]], dtype=np.int64)
                single(np.zeros(2), table, index, np.empty((2, 4, 4)))
                batch(np.zeros((1, 2)), table, index, np.empty((1, 2, 4, 4)))
                rows = _tf_rows_inline = jit.njit(nogil=True)(_tf_rows)
                rows(np.zeros(2), np.zeros((1, 4, 7)), np.zeros(1, dtype=np.int64), np.zeros(1), np.empty(7),
                     np.arange(7, dtype=np.int64))
                _u32 = jit.njit(nogil=True, inline="always")(_u32)
                joint_state = jit.njit(nogil=True)(_joint_state_rows)
                _warm_joint_state(joint_state)
            except Exception as exc:  # numba present but unusable on this machine
                _failed = True
                _log.warning("compiled forward kinematics unavailable (%s); using numpy", exc)
                return None
            _jit_seconds = time.perf_counter() - t
            _compiled = (single, batch, rows, joint_state)
    return _compiled


def ready() -> bool:
    """True when :func:`kernel` has the compiled kernels in this process (it then returns at once)."""
    return _compiled is not None


def _warm_joint_state(joint_state) -> None:
    """Compile (or load) both message buffers' signatures: writable (a relay's take buffer) and
    read-only (``bytes`` from an executor)."""
    ints, floats = np.zeros(1, dtype=np.int64), np.zeros(2)
    for msg in (np.zeros(24, dtype=np.uint8), np.frombuffer(bytes(24), np.uint8)):
        joint_state(msg, 24, 0, np.zeros(4, np.uint8), np.zeros(4, np.uint8), ints, ints,
                    np.zeros((0, 2), np.int64), np.zeros((0, 2)), floats, np.zeros((1, 4, 7)), ints,
                    floats[:1], np.zeros(7), np.arange(7, dtype=np.int64), np.zeros(2, np.uint32),
                    np.zeros((1, 2), np.int64), True, np.zeros(2, np.int64))


def exact_entry(dispatcher, args: tuple):
    """The compiled entry of ``dispatcher`` for exactly the types of ``args`` (its arguments on every
    call: the caller guarantees the types), skipping numba's per-call type dispatch -- ~4 us of a call
    made with cold caches; the dispatcher itself when that entry is not at hand."""
    try:
        return dispatcher.overloads[tuple(numba.typeof(a) for a in args)].entry_point
    except (KeyError, AttributeError, TypeError, ValueError):     # not compiled for them / another numba
        return dispatcher


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
