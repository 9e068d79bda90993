"""Joint-state messages of one tick, filled from serialized templates and published in one compiled call.

A periodic state publisher (the controller's /joint_states and controller states at 50 Hz) pays for
every Python step of its tick with cold caches (a tick is ~10x dearer than the same code run warm on
the 2-core machine): the source vector (numpy concatenate + subtract), per message a gather, the
template's scatter, the stamp, a ctypes publish.  Here the templates' bytes live in one arena and one
numba function (GIL released, its argument types fixed so one compile serves read-only and writable
arrays alike) builds the source, writes every message's doubles (``source[gather]``) and stamps, and
calls ``rcl_publish_serialized_message`` for each: one call per tick.  Where numba or rcl through ctypes
is missing, the same is done step by step in Python (``CdrTemplate.fill_buffer`` +
``fast_relay.SerializedPublisher``): the same bytes.

The source of a tick of ``n`` joints (what a template's ``gather`` indexes), raveled:
desired (position, velocity, acceleration: 3 x n), actual (3 x n), effort (n), error = desired -
actual (3 x n).

The publishers must outlive every publish through their rcl handles (compiled code and ctypes hold raw
pointers, which rclpy's own reference guard does not see): a node calls :meth:`TemplatePublishers.close`
before destroying them.  close() waits for a publish under way and every publish after it raises
:class:`PublishersClosed` instead of calling rcl, whichever thread still ticks.

Test hook: ``ROBOT_BRIDGE_TEST_HOLD_PUBLISH=<seconds>`` holds the publish under way when the node's
destroy_node begins (:meth:`TemplatePublishers.hold_for_test`) for that long, right before the rcl calls:
the window of a tick publishing through the raw handles while the node is destroyed, made deterministic
(test/stress/harness_lives.py ``--hold-publish``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from typing import Sequence

import numpy as np

from .. import jit
from . import fast_relay
from .cdr_template import CdrTemplate
from .stamps import stamp_fields

HOLD_ENV = "ROBOT_BRIDGE_TEST_HOLD_PUBLISH"
CLOSE_TIMEOUT = 30.0        # s: longest wait of close() for a publish under way
SOURCE_ROWS = 10            # desired 3, actual 3, effort 1, error 3 (rows of n)
TOO_SHORT = -2              # _publish_state: an input row is not n long

_compiled: list = []          # [the compiled _publish_state, or None]
_log = logging.getLogger(__name__)


def state_source(desired: Sequence[np.ndarray], actual: Sequence[np.ndarray], effort: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
    """The source vector (see the module notes) with numpy."""
    n = len(effort)
    source = np.empty(SOURCE_ROWS * n) if out is None else out
    np.concatenate((*desired, *actual, effort), out=source[:7 * n])
    np.subtract(source[:3 * n], source[3 * n:6 * n], out=source[7 * n:])
    return source


def state_views(source: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(desired (3, n), actual (3, n), effort (n,), error (3, n)): views of a source of ``n`` joints."""
    return (source[:3 * n].reshape(3, n), source[3 * n:6 * n].reshape(3, n), source[6 * n:7 * n],
            source[7 * n:].reshape(3, n))


def _publish_state(addresses, p, v, a, position, velocity, acceleration, effort, stamp_ns, source, doubles,
                   words, gather, target, stamp_words, publishers, messages, status):  # pragma: no cover
    """Compiled: the source from the rows, every template's doubles and stamps, then each publish.  The
    index of the first publisher that failed (its rcl code in ``status[0]``), ``TOO_SHORT``, or -1."""
    n = effort.size
    if (p.size != n or v.size != n or a.size != n or position.size != n or velocity.size != n
            or acceleration.size != n or source.size != SOURCE_ROWS * n):
        return TOO_SHORT
    for k in range(n):
        source[k], source[n + k], source[2 * n + k] = p[k], v[k], a[k]
        source[3 * n + k], source[4 * n + k], source[5 * n + k] = position[k], velocity[k], acceleration[k]
        source[6 * n + k] = effort[k]
        source[7 * n + k] = p[k] - position[k]
        source[8 * n + k] = v[k] - velocity[k]
        source[9 * n + k] = a[k] - acceleration[k]
    for k in range(gather.size):
        doubles[target[k]] = source[gather[k]]
    sec = stamp_ns // 1_000_000_000                       # floor: a negative time keeps nanosec >= 0
    nanosec = stamp_ns - sec * 1_000_000_000
    for k in range(0, stamp_words.size, 2):
        words[stamp_words[k]] = sec & 0xFFFFFFFF           # int32 sec, uint32 nanosec
        words[stamp_words[k + 1]] = nanosec
    for t in range(publishers.size):
        ret = _call_int64s(addresses[0], publishers[t], messages[t], 0)
        if ret != fast_relay.RCL_RET_OK:
            status[0] = ret
            return t
    return -1


def _compiler():
    """The compiled ``_publish_state`` (numba cache), None without numba."""
    global _call_int64s
    if not _compiled:
        if jit.load() is None:
            _compiled.append(None)
            return None
        try:
            from numba import types

            _call_int64s = _int64_call_intrinsic()
            row = types.Array(types.float64, 1, "A", readonly=True)         # writable arrays convert to it
            f64, i64 = types.Array(types.float64, 1, "C"), types.Array(types.int64, 1, "C")
            signature = types.int64(i64, row, row, row, row, row, row, row, types.int64, f64, f64,
                                    types.Array(types.uint32, 1, "C"), i64, i64, i64, i64, i64, i64)
            _compiled.append(jit.njit(signature, nogil=True)(_publish_state))
        except Exception as exc:  # numba present but unable to compile here: publish from Python
            _log.warning("compiled state publishing unavailable (%s); publishing from Python", exc)
            _compiled.append(None)
    return _compiled[0]


def _int64_call_intrinsic():
    """``call(address, a, b, c)``: the C function ``int32 f(int64, int64, int64)`` at ``address``
    (rcl_publish_serialized_message) -- a plain int argument, where a ctypes function object costs the
    dispatcher a Python-level type lookup per call."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def call(typingctx, address, first, second, third):
        signature = types.int32(types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, sig, args):
            i64 = ir.IntType(64)
            function = builder.inttoptr(args[0], ir.FunctionType(ir.IntType(32), [i64] * 3).as_pointer())
            return builder.call(function, list(args[1:]))
        return signature, codegen
    return call


_call_int64s = None


class PublishersClosed(RuntimeError):
    """A publish after :meth:`TemplatePublishers.close`: the publishers may be destroyed already."""


class PublishersInUse(RuntimeError):
    """A publish did not end within the close timeout: the publishers must be left alive."""


class PublishHold:
    """The ``HOLD_ENV`` test hook: once armed, the next publish parks for ``seconds`` before its rcl calls."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.armed, self.parked = threading.Event(), threading.Event()

    @classmethod
    def from_env(cls) -> "PublishHold | None":
        value = os.environ.get(HOLD_ENV)
        return cls(float(value)) if value else None

    def arm(self, timeout: float) -> bool:
        """Wait until a publish is parked in the window (False: none came within ``timeout`` s)."""
        self.armed.set()
        return self.parked.wait(timeout)

    def park(self) -> None:
        if self.armed.is_set() and not self.parked.is_set():
            self.parked.set()
            time.sleep(self.seconds)          # the injected window: the publish goes on after it


class TemplatePublishers:
    """``entries``: (rclpy publisher, :class:`CdrTemplate`, gather) -- each message's doubles are
    ``source[gather]`` of the tick's source (module notes); :meth:`publish_state` fills and publishes all."""

    def __init__(self, entries: Sequence[tuple[object, CdrTemplate, np.ndarray]]):
        self._entries = [(fast_relay.SerializedPublisher(p), t, np.asarray(g, np.int64))
                         for p, t, g in entries]
        self._publishers = [p for p, _, _ in entries]            # alive while compiled code holds them
        self._source: np.ndarray | None = None
        self.compiled = False
        self.hold = PublishHold.from_env()
        # held by every publish through the publishers' handles and by close(): never one under the other
        self._in_use = threading.Lock()
        self.closed = False
        try:
            publish = ctypes.cast(fast_relay._libs().publish, ctypes.c_void_p).value
            pointers = [p.handle.pointer for p in self._publishers]
        except (fast_relay.FastPathUnavailable, AttributeError):
            return
        if _compiler() is None:
            return
        # every template's bytes at an 8-aligned offset of one arena: its doubles (at 4 + 8k in the CDR
        # stream) and stamp words index the arena's views directly
        offsets, size = [], 0
        for _, template, _ in self._entries:
            offsets.append(size)
            size += -(-template.size_bytes // 8) * 8
        self._arena = arena = np.zeros(size + 8, np.uint8)
        self._doubles = np.frombuffer(arena.data, "<f8", size // 8, 4)
        self._words = np.frombuffer(arena.data, "<u4", size // 4)
        self._messages = [fast_relay._SerializedMessage() for _ in self._entries]
        targets, stamps = [], []
        for (_, template, _), offset, message in zip(self._entries, offsets, self._messages):
            arena[offset:offset + template.size_bytes] = np.frombuffer(template.bytes, np.uint8)
            targets.append(offset // 8 + template.value_index)
            stamps.append(offset // 4 + template.stamp_index)
            message.point_at(arena.ctypes.data + offset, template.size_bytes)
        self._gather = np.concatenate([g for _, _, g in self._entries])
        self._target = np.concatenate(targets)
        self._stamp_words = np.concatenate(stamps).astype(np.int64)
        self._addresses = np.array([publish], np.int64)
        self._pointers = np.array(pointers, np.int64)
        self._message_addresses = np.array([ctypes.addressof(m) for m in self._messages], np.int64)
        self._status = np.zeros(1, np.int64)
        self.compiled = True

    def publish_state(self, desired: Sequence[np.ndarray], actual: Sequence[np.ndarray], effort: np.ndarray,
                      stamp_ns: int) -> np.ndarray:
        """Every message from ``desired`` / ``actual`` (position, velocity, acceleration rows of n) and
        ``effort``, stamped ``stamp_ns``; returns the source (reused: valid until the next call).
        :class:`PublishersClosed` after :meth:`close`."""
        with self._in_use:
            if self.closed:
                raise PublishersClosed("state publishing after close(): its publishers are being destroyed")
            return self._publish_open(desired, actual, effort, stamp_ns)

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """No publish through the publishers' rcl handles after this returns (one under way is waited for);
        call it before destroying them.  :class:`PublishersInUse` when a publish does not end within
        ``timeout`` s: the publishers must then be left alive."""
        if not self._in_use.acquire(timeout=timeout):
            raise PublishersInUse(f"a state publish still runs after {timeout} s; its publishers are left "
                                  "alive")
        self.closed = True
        self._in_use.release()

    def _publish_open(self, desired, actual, effort, stamp_ns: int) -> np.ndarray:
        n = len(effort)
        if self._source is None or len(self._source) != SOURCE_ROWS * n:
            self._source = np.empty(SOURCE_ROWS * n)
        if self.hold is not None:
            self.hold.park()
        if not self.compiled:
            source = state_source(desired, actual, effort, self._source)
            sec, nanosec = stamp_fields(stamp_ns)
            for publisher, template, gather in self._entries:
                publisher.publish(template.fill_buffer(source[gather], sec, nanosec), template.address)
            return source
        try:
            failed = self._call(desired, actual, effort, stamp_ns)
        except TypeError:                       # rows that are not float64 arrays (a hardware's lists)
            rows = [[np.asarray(row, float) for row in part] for part in (desired, actual)]
            failed = self._call(*rows, np.asarray(effort, float), stamp_ns)
        if failed == TOO_SHORT:
            raise ValueError(f"state rows of other lengths than {n} effort values")
        if failed >= 0:
            raise RuntimeError(f"publish on {self._publishers[failed].topic_name} failed "
                               f"({int(self._status[0])}): {fast_relay._libs().last_error()}")
        return self._source

    def hold_for_test(self, timeout: float = 5.0) -> bool:
        """The ``HOLD_ENV`` hook (a node's destroy_node calls it first): a publish parked in the window,
        or False (hook off, or no publish came within ``timeout`` s)."""
        return self.hold is not None and self.hold.arm(timeout)

    def _call(self, desired, actual, effort, stamp_ns: int) -> int:
        return _compiled[0](self._addresses, *desired, *actual, effort, int(stamp_ns), self._source,
                            self._doubles, self._words, self._gather, self._target, self._stamp_words,
                            self._pointers, self._message_addresses, self._status)

    def messages(self) -> list[bytes]:
        """The serialized messages as the last compiled :meth:`publish_state` wrote them (tests)."""
        return [ctypes.string_at(m.buffer, m.buffer_length) for m in self._messages]
