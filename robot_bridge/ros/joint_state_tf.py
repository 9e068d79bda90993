"""Serialized JointState in, serialized TFMessage out: the description node's /tf hot path.

One implementation for both of the node's transports (the fast path's relay thread hands over its
reused take buffer, the executor fallback a raw subscription's ``bytes``):

- the JointState is read in place (little-endian XCDR1, what Fast DDS and Cyclone DDS hand over):
  header.stamp, the name sequence and position.  A stream repeats its name list, so the bytes of the
  name sequence (self-delimiting: count, then length-prefixed strings) are compared with the previous
  message's (padding bytes masked out: serializers leave them uninitialised) instead of being decoded;
  a new name list is decoded once and compiled into a ``_Plan``
  (the ``StatePublisher`` selection: fields -> DOF slots, rows to publish, their block product);
  other encodings go through rclpy's deserializer;
- the TFMessage of the plan's frames is serialized once by rclpy with sentinel values
  (``TFBatchBuilder._template``: rclpy's layout, no hand-written CDR) into a buffer the plan keeps;
  a message then writes its 7 doubles per frame and the stamps in place.

With numba (``fk_kernel``), a message of the plan's name list is applied in one compiled call
(``fk_kernel._joint_state_rows``: read, check, positions into the DOF vector, linear mimics, rows and
stamps into the buffer): at 1 kHz the thread is woken with cold caches and each separate numpy call
costs 5-25 us, which made this handler cost ~60 us of a message's ~180 us.  Other messages (a new name
list, another encoding, a rate gate to ask, a nonlinear mimic) take the numpy path below.

On the fast path's eventfd wake, a stream of the last plan's name list is not handed to Python at all:
``JointStateTF.drain`` runs ``_drain_joint_states`` (take, the same compiled call, publish, sleep; see
``fast_relay``) until a message needs this module's Python (then it is left in the buffer for
``process``), the model or gate is swapped, or the relay closes.  Compiled code is cached in a folder
per version of the kernels' sources (:mod:`robot_bridge.jit`).
"""

from __future__ import annotations

import logging
import struct
from typing import Callable, Optional

import numpy as np

from .. import jit
from ..kinematics import fk_kernel
from ..kinematics.state_publisher import RateGate, StatePublisher
from . import fast_relay
from .tf import TFBatchBuilder

MAX_PLANS = 64                  # distinct name lists remembered (bounded memory)
_log = logging.getLogger(__name__)
_HEADER = struct.Struct("<iII")  # stamp sec, nanosec, frame_id length (incl. NUL)
_UINT32 = struct.Struct("<I")


class _Plan:
    """One JointState name list compiled for one model, with its reused TFMessage buffer."""

    __slots__ = ("names", "key", "mask", "key_len", "selection", "buffer", "span", "values", "value_index",
                 "stamps", "stamp_index", "direct_fields", "stamp", "fused_args", "fused_taken")

    def __init__(self, names: tuple[str, ...], state: StatePublisher, fused=None, header=None, mimic=None):
        """``fused``: the compiled kernel (None: numpy only), ``header`` its (sec, nanosec) output,
        ``mimic``: the model's linear mimics as arrays (``KinematicModel.linear_mimic``, None: some are
        nonlinear)."""
        self.names = names
        # the name sequence's CDR bytes as an int, alignment padding masked out
        key, mask = bytearray(_UINT32.pack(len(names))), bytearray(b"\xff" * 4)
        for n in names:
            if len(key) % 4:
                pad = -len(key) & 3
                key += bytes(pad)
                mask += bytes(pad)
            field = _UINT32.pack(len(n.encode()) + 1) + n.encode() + b"\0"
            key += field
            mask += b"\xff" * len(field)
        self.key_len = len(key)
        self.mask = int.from_bytes(mask, "little")
        self.key = key = int.from_bytes(key, "little")
        sel = self.selection = state.selection(names)
        # positions copied straight into the DOF vector when the message lists exactly its slots in order
        self.direct_fields = bool(len(sel.fields)) and len(sel.fields) == len(names) \
            and bool((sel.fields == np.arange(len(names))).all())
        self.buffer = self.span = self.fused_args = self.fused_taken = None
        if not len(sel.rows):
            return
        self.stamp = np.zeros(2, "<u4")
        data, value_idx, stamp_idx, order = TFBatchBuilder._template(sel.parents, sel.children)
        self.buffer = data                              # uint8, owned here: its address is published
        self.span = (data.ctypes.data, len(data))
        starts = value_idx[::8]
        if order == "<" and not ((starts - 4) % 8).any() and not (stamp_idx[:, 0] % 4).any():
            # aligned as CDR aligns them relative to the body (offset 4): typed views, index per value
            self.values = np.frombuffer(data, "<f8", (len(data) - 4) // 8, 4)
            self.value_index = ((starts - 4) // 8).astype(np.int64)
            self.stamps = np.frombuffer(data, "<u4", len(data) // 4)
            self.stamp_index = np.stack([stamp_idx[:, 0] // 4, stamp_idx[:, 0] // 4 + 1], axis=1)
        else:                                           # big-endian template: byte scatters
            self.values = self.stamps = None
            self.value_index, self.stamp_index = value_idx, stamp_idx
        evaluation = sel.evaluation
        if fused is not None and self.values is not None and evaluation.kernel is not None:
            no_mimic = (np.zeros((0, 2), np.int64), np.zeros((0, 2)))
            self.fused_args = (
                np.frombuffer(key.to_bytes(self.key_len, "little"), np.uint8).copy(),    # writable: the
                np.frombuffer(self.mask.to_bytes(self.key_len, "little"), np.uint8).copy(),  # warmed types
                sel.fields.astype(np.int64), sel.slots.astype(np.int64), *(mimic or no_mimic), state.q,
                evaluation.table, evaluation.slots, evaluation.half, self.values, self.value_index,
                self.stamps, self.stamp_index)
            # a relay's take buffer: always a writable C-contiguous uint8 array (JointStateTF.process)
            taken = (np.zeros(1, np.uint8), 1, 0, *self.fused_args, True, header)
            self.fused_taken = fk_kernel.exact_entry(fused, taken)


def _drain_joint_states(take_fn, publish_fn, read_fn, ints, words, output, control,  # pragma: no cover
                        generation, msg, headroom, key, mask, fields, slots, mimic_index, mimic_coef, q,
                        table, row_slots, half, dest, dest_index, stamps, stamp_index, publish, header):
    """A relay's compiled drain (``fast_relay``; the output words point at the plan's /tf buffer): each
    message of the plan's name list taken, applied by ``fk_kernel._joint_state_rows`` (the plan's
    arrays) and its /tf published, without returning; any other message is left taken for Python
    (``DRAIN_PENDING``).  ``publish`` is True (an argument: the kernel keeps one compiled variant for
    Python's calls and this one)."""
    while True:
        got = _next_message(take_fn, read_fn, ints, words, control, generation)
        if got != fast_relay.MESSAGE_TAKEN:
            return got
        code = _rows(msg, headroom + np.int64(words[1]), headroom, key, mask, fields, slots, mimic_index,
                     mimic_coef, q, table, row_slots, half, dest, dest_index, stamps, stamp_index, publish,
                     header)
        if code != fk_kernel.JS_WRITTEN:
            return fast_relay.DRAIN_PENDING
        control[fast_relay.HANDLED] += 1
        if not _publish_output(publish_fn, ints, control):
            return fast_relay.DRAIN_PUBLISH_ERROR


_rows = _next_message = _publish_output = None      # compiled callees, set by _drainer()
_drainer_state: list = []                           # [compiled drain or None]


def _drainer():
    """The compiled ``_drain_joint_states`` (numba cache), None where numba is missing."""
    global _rows, _next_message, _publish_output
    if not _drainer_state:
        kernels, io = fk_kernel.kernel(), fast_relay.compiled_io()
        if kernels is None or io is None:
            _drainer_state.append(None)
        else:
            _rows, (_next_message, _publish_output) = kernels[3], io
            _drainer_state.append(jit.njit(nogil=True)(_drain_joint_states))
    return _drainer_state[0]


class JointStateTF:
    """Compiled JointState -> /tf of one loaded model (``state``); not thread safe (one caller)."""

    def __init__(self, state: StatePublisher):
        self.state = state
        self._plans: dict[tuple[str, ...], _Plan] = {}
        self._last: Optional[_Plan] = None
        compiled = fk_kernel.kernel() if state._rows_kernel is not None else None
        self._fused = compiled[3] if compiled else None
        self._mimic = state.kinematics.linear_mimic()
        self._nonlinear_mimic = self._mimic is None
        self._header = np.zeros(2, np.int64)
        if self._fused is not None:
            self._warm_drain()

    def drain(self, io, buffer: np.ndarray, headroom: int, gate: RateGate, generation: int) -> int:
        """A relay's drain (``SerializedRelay(drain=...)``) for the last plan: ``DRAIN_UNAVAILABLE``
        unless its messages need no Python (compiled, every known name, linear mimics, no rate gate to
        consult); ``generation``: ``io.generation`` read before this model and ``gate`` were."""
        plan, drain = self._last, _drainer() if self._fused is not None else None
        if drain is None or plan is None or plan.fused_args is None or plan.selection.unknown \
                or self._nonlinear_mimic or not (gate.ignore_timestamp or gate.interval_ns == 0):
            return fast_relay.DRAIN_UNAVAILABLE
        io.set_output(*plan.span)
        return drain(*io.prefix(generation, buffer, headroom), *plan.fused_args, True, self._header)

    def _warm_drain(self) -> None:
        """Compile (or load) the drain for this model's plan types now, not on the first message: with
        the plan of the model's own joint names (also the first guess: such a stream runs compiled at
        once)."""
        drain = _drainer()
        if drain is None:
            return
        plan = self._plan(tuple(self.state.default_joint_state()[0]))
        if plan.fused_args is None:
            return
        try:
            fast_relay.warm(drain, *plan.fused_args, True, self._header)
        except Exception as exc:  # numba unable to compile it here: relay threads run the Python loop
            _log.warning("compiled /joint_states drain unavailable (%s); relaying in Python", exc)
            _drainer_state[:] = [None]

    def process(self, data, start: int, gate: RateGate, warn: Callable[[str], None],
                taken: bool = False) -> Optional[_Plan]:
        """Apply the serialized JointState at ``data[start:]`` (bytes-like, or with ``taken`` a relay's
        take buffer: a writable C-contiguous uint8 array); the plan whose ``buffer`` (``span``:
        address, length) now holds the /tf message to publish, or None (nothing to publish).
        ``warn(text)`` reports what was ignored."""
        plan = self._last
        if plan is not None and plan.fused_args is not None:
            fused = plan.fused_taken if taken else self._fused
            msg = data if taken else np.frombuffer(data, np.uint8)
            code = fused(msg, len(data), start, *plan.fused_args,
                         not self._nonlinear_mimic and bool(gate.ignore_timestamp or gate.interval_ns == 0),
                         self._header)
            if code == fk_kernel.JS_WRITTEN:
                if plan.selection.unknown:
                    warn(f"JointState names unknown joints (ignored): {', '.join(plan.selection.unknown)}")
                return plan
            if code == fk_kernel.JS_UPDATED:
                return self._after_update(plan, int(self._header[0]), int(self._header[1]), gate, warn)
            if code == fk_kernel.JS_NON_FINITE:
                warn("ignored a JointState with non-finite positions")
                return None
            if code == fk_kernel.JS_COUNT_MISMATCH:
                warn(f"ignored a JointState with {len(plan.names)} names and {self._header[0]} positions")
                return None
            # another encoding, another name list or a short message: the general path says which
        try:
            plan, positions, sec, nanosec = self._read(data, start, warn)
        except Exception as exc:          # undecodable bytes: nothing to publish
            warn(f"ignored an undecodable JointState: {exc}")
            return None
        if plan is None:
            return None
        if not np.isfinite(positions).all():      # NaN/inf would poison /tf
            warn("ignored a JointState with non-finite positions")
            return None
        state, sel = self.state, plan.selection
        if plan.direct_fields:
            state.q[sel.slots] = positions
        else:
            state.q[sel.slots] = positions[sel.fields]
        return self._after_update(plan, sec, nanosec, gate, warn, mimic=True)

    def _after_update(self, plan: _Plan, sec: int, nanosec: int, gate: RateGate, warn: Callable[[str], None],
                      mimic: bool = False) -> Optional[_Plan]:
        """Positions are in the DOF vector: mimics (all, or what the fused kernel left: the nonlinear),
        the gate, the rows."""
        state, sel = self.state, plan.selection
        if mimic or self._nonlinear_mimic:
            state.kinematics.apply_mimic(state.q)
        if sel.unknown:
            warn(f"JointState names unknown joints (ignored): {', '.join(sel.unknown)}")
        if plan.buffer is None or not gate.admit(plan.names, sec * 1_000_000_000 + nanosec):
            return None
        if plan.values is not None:
            sel.evaluation.write(state.q, plan.values, plan.value_index)     # straight into the message
            stamp = plan.stamp
            stamp[0], stamp[1] = sec & 0xFFFFFFFF, nanosec       # int32 sec, uint32 nanosec
            plan.stamps[plan.stamp_index] = stamp
        else:
            values = sel.evaluation.evaluate(state.q)        # in its preallocated buffer
            plan.buffer[plan.value_index] = values.astype(">f8").view(np.uint8)
            plan.buffer[plan.stamp_index] = np.frombuffer(struct.pack(">iI", sec, nanosec), np.uint8)
        return plan

    def _read(self, data, start: int, warn: Callable[[str], None]):
        """(plan, positions, sec, nanosec); plan None after a warning."""
        if data[start] != 0 or data[start + 1] != 1:          # not little-endian XCDR1
            return self._read_generic(bytes(data[start:]), warn)
        sec, nanosec, frame_len = _HEADER.unpack_from(data, start + 4)
        at = 16 + frame_len
        at += -at & 3
        names_at = start + at
        plan = self._last
        if plan is None or int.from_bytes(data[names_at:names_at + plan.key_len], "little") & plan.mask \
                != plan.key:
            plan = self._plan_at(data, names_at)
        at += plan.key_len
        at += -at & 3
        (count,) = _UINT32.unpack_from(data, start + at)
        at += 4
        at += -(at - 4) & 7
        if count != len(plan.names):
            warn(f"ignored a JointState with {len(plan.names)} names and {count} positions")
            return None, None, 0, 0
        if start + at + 8 * count > len(data):
            raise ValueError("JointState positions run past the end of the message")
        return plan, np.frombuffer(data, "<f8", count, start + at), sec, nanosec

    def _plan_at(self, data, names_at: int) -> _Plan:
        """The plan of the name sequence at ``data[names_at:]`` (decoded once per distinct list)."""
        (count,) = _UINT32.unpack_from(data, names_at)
        at, names = names_at + 4, []
        for _ in range(count):
            at += -(at - names_at) & 3
            (length,) = _UINT32.unpack_from(data, at)
            if length == 0 or at + 4 + length > len(data):
                raise ValueError("JointState name runs past the end of the message")
            names.append(bytes(data[at + 4:at + 3 + length]).decode())
            at += 4 + length
        return self._plan(tuple(names))

    def _plan(self, names: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(names)
        if plan is None:
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            plan = self._plans[names] = _Plan(names, self.state, self._fused, self._header, self._mimic)
        self._last = plan
        return plan

    def _read_generic(self, data: bytes, warn: Callable[[str], None]):
        """Any other encoding, through rclpy."""
        names, positions, sec, nanosec = read_joint_state(data)
        if len(names) != len(positions):
            warn(f"ignored a JointState with {len(names)} names and {len(positions)} positions")
            return None, None, 0, 0
        plan = self._plan(names)
        return plan, positions, sec, nanosec


def read_joint_state(data: bytes) -> tuple[tuple[str, ...], np.ndarray, int, int]:
    """(names, positions, stamp sec, stamp nanosec) of a serialized JointState.

    Little-endian XCDR1 is read in place -- header.stamp, header.frame_id, name (strings: uint32 length
    incl. NUL, chars, each aligned to 4), position (uint32 count, doubles aligned to 8 from the body
    start); anything else goes through rclpy.
    """
    if data[:2] == b"\x00\x01":
        try:
            sec, nanosec, frame_len = _HEADER.unpack_from(data, 4)
            pos = 16 + frame_len
            pos += -pos & 3
            (count,) = _UINT32.unpack_from(data, pos)
            pos += 4
            names = []
            for _ in range(count):
                pos += -pos & 3
                (length,) = _UINT32.unpack_from(data, pos)
                names.append(data[pos + 4:pos + 3 + length].decode())
                pos += 4 + length
            pos += -pos & 3
            (count,) = _UINT32.unpack_from(data, pos)
            pos += 4
            pos += -(pos - 4) & 7
            if pos + 8 * count <= len(data):
                return tuple(names), np.frombuffer(data, "<f8", count, pos), sec, nanosec
        except (struct.error, UnicodeDecodeError):
            pass
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    msg = deserialize_message(data, JointState)     # other encodings; raises on garbage
    return tuple(msg.name), np.asarray(msg.position, dtype=float), msg.header.stamp.sec, \
        msg.header.stamp.nanosec
