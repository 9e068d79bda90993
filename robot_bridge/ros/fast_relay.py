"""Serialized relays on a thread of their own: the one fast path of every hot subscription.

Used for camera images (a header rewritten in place) and for /joint_states -> /tf (a different
message written into a reused buffer of the handler's).

An rclpy executor turns every incoming message into a Python round trip (wait set rebuilt over all
entities, ready entities scanned, a task per callback) and hands a raw subscription's message over as
``bytes``, which the republish copies twice more.  For a 640x480 rgb8 image that was 0.5-0.8 ms of
the relay's added latency (bench/sensor_bench.py).  Here the subscription is left out of the
executor (``DetachedCallbackGroup``) and a dedicated thread waits on it alone, takes the serialized
message with ``rcl_take_serialized_message`` into one reused buffer, lets a handler validate it and
rewrite its header in place (or write another message into a buffer of its own), and publishes the
result with ``rcl_publish_serialized_message``.  The
buffer keeps headroom in front of the message, so a longer ``frame_id`` is written in front of the
data instead of moving the data.

No middleware thread ever runs Python here: a thread that holds DDS locks while waiting for the GIL
deadlocks against a Python thread that holds the GIL while creating an entity (seen with a ctypes
callback).  The relay thread is woken either by an eventfd that the rmw's new-message callback
increments in C (``EventfdWake``: libc's ``eventfd_write`` is registered as the callback, see there)
or, where that is unavailable, by waiting in an rclpy wait set of its own (``WaitSetWake``, ~0.15 ms
slower per image).  rcl is called through ctypes with the GIL released; the library is the one rclpy
already loaded.  Where rclpy lacks what this needs, ``FastPathUnavailable`` says so and the caller
keeps its executor-driven subscription.

A handler may also offer a compiled ``drain`` (numba, GIL released): it takes, handles and publishes
message after message and sleeps on the eventfd itself, so a stream it can handle costs no Python at
all per message (at 1 kHz the Python round of wait, take, handler call and publish was ~60 % of the
/tf path's CPU).  It returns to Python for anything else: a message it cannot handle (left in the
buffer for the Python handler), a changed handler state (``RelayIO.invalidate``), an error, close().
Every drain loop starts with the same arguments (``RelayIO.prefix``: the C functions, the relay's
addresses and control words, the buffer) and takes and publishes through the same compiled parts
(``compiled_io``); ``warm`` compiles one before its relay needs it.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import platform
import struct
import sys
import threading
import weakref
from typing import Callable, Optional

import numpy as np

from rclpy.callback_groups import CallbackGroup
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from .. import jit
from . import rcl_layout

RCL_RET_OK = 0
RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401
INITIAL_CAPACITY = 64 * 1024
WAIT_TIMEOUT_NS = 200_000_000          # how soon a shut-down context is noticed without a close()


class FastPathUnavailable(RuntimeError):
    """The middleware (or this platform) cannot drive a relay from its own threads."""


class DetachedCallbackGroup(CallbackGroup):
    """Entities no executor waits on or takes from: their messages are taken elsewhere."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


# -- rcl / rcutils through ctypes ---------------------------------------------------------------
_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_DEALLOCATE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_REALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_ZERO_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)
_EVENT_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)   # rmw_event_callback_t
# the same C functions as compiled code calls them: pointers passed as int64 (one register either way)
_I64 = ctypes.c_int64
_TAKE_FN = ctypes.CFUNCTYPE(ctypes.c_int32, _I64, _I64, _I64, _I64)      # rcl_take_serialized_message
_PUBLISH_FN = ctypes.CFUNCTYPE(ctypes.c_int32, _I64, _I64, _I64)        # rcl_publish_serialized_message
_READ_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int32, _I64, _I64)   # libc read


class _Allocator(ctypes.Structure):            # rcutils_allocator_t
    _fields_ = [("allocate", _ALLOCATE), ("deallocate", _DEALLOCATE), ("reallocate", _REALLOCATE),
                ("zero_allocate", _ZERO_ALLOCATE), ("state", ctypes.c_void_p)]


class _SerializedMessage(ctypes.Structure):    # rcl_serialized_message_t = rcutils_uint8_array_t
    _fields_ = [("buffer", ctypes.c_void_p), ("buffer_length", ctypes.c_size_t),
                ("buffer_capacity", ctypes.c_size_t), ("allocator", _Allocator)]

    def point_at(self, address: int, length: int) -> None:
        """Publish ``length`` bytes at ``address`` (memory the caller keeps; never grown by rcl)."""
        self.buffer, self.buffer_length, self.buffer_capacity = address, length, length


class _ErrorString(ctypes.Structure):          # rcutils_error_string_t
    _fields_ = [("str", ctypes.c_char * 1024)]


class _Libraries:
    def __init__(self):
        try:
            # the copies rclpy loaded (RTLD_NOLOAD: never a second, different one)
            self.rcl = ctypes.CDLL("librcl.so", mode=os.RTLD_NOLOAD)
            self.rcutils = ctypes.CDLL("librcutils.so", mode=os.RTLD_NOLOAD)
            self.libc = ctypes.CDLL(None)
        except OSError as exc:
            raise FastPathUnavailable(f"rcl not reachable through ctypes: {exc}") from None
        problem = rcl_layout.check(self.rcutils, _SerializedMessage, _Allocator)
        if problem:
            raise FastPathUnavailable(problem)
        self.set_callback = getattr(self.rcl, "rcl_subscription_set_on_new_message_callback", None)
        if self.set_callback is not None:
            self.set_callback.argtypes = [ctypes.c_void_p, _EVENT_CALLBACK, ctypes.c_void_p]
        self.take = self.rcl.rcl_take_serialized_message
        self.take.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SerializedMessage), ctypes.c_void_p,
                              ctypes.c_void_p]
        self.publish = self.rcl.rcl_publish_serialized_message
        self.publish.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SerializedMessage), ctypes.c_void_p]
        self.error_string = self.rcutils.rcutils_get_error_string
        self.error_string.restype = _ErrorString
        self.reset_error = self.rcutils.rcutils_reset_error
        for name, restype, argtypes in (("malloc", ctypes.c_void_p, [ctypes.c_size_t]),
                                        ("calloc", ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]),
                                        ("realloc", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t]),
                                        ("free", None, [ctypes.c_void_p])):
            getattr(self.libc, name).restype = restype
            getattr(self.libc, name).argtypes = argtypes

    def compiled_functions(self) -> tuple:
        """(take, publish, read) as ctypes function pointers compiled code can call (numba)."""
        def address(function):
            return ctypes.cast(function, ctypes.c_void_p).value
        return (_TAKE_FN(address(self.take)), _PUBLISH_FN(address(self.publish)),
                _READ_FN(address(self.libc.read)))

    def last_error(self) -> str:
        text = self.error_string().str.decode(errors="replace")
        self.reset_error()
        return text


_libraries: Optional[_Libraries] = None
_unavailable: Optional[FastPathUnavailable] = None
_libraries_lock = threading.Lock()       # a node's constructor and its warm-up thread may ask at once


def _libs() -> _Libraries:
    """rcl through ctypes, checked once per process (``rcl_layout``); FastPathUnavailable, logged once."""
    global _libraries, _unavailable
    if _libraries is not None:
        return _libraries
    with _libraries_lock:
        if _libraries is None:
            if _unavailable is not None:
                raise FastPathUnavailable(str(_unavailable))
            try:
                _libraries = _Libraries()
            except FastPathUnavailable as exc:
                _unavailable = exc
                logging.getLogger(__name__).warning("rcl fast path off, using the executor path: %s", exc)
                raise
    return _libraries


class _HeadroomBuffer:
    """A serialized-message buffer whose allocator keeps ``headroom`` bytes in front of the message.

    The allocator runs Python, but only on the relay thread inside ``rcl_take_serialized_message``,
    where the rmw grows the buffer after the DDS take has returned (no middleware lock held).
    """

    def __init__(self, headroom: int, capacity: int = INITIAL_CAPACITY):
        libc, self.headroom = _libs().libc, headroom

        def allocate(size, _state):
            base = libc.malloc(size + headroom)
            return base + headroom if base else None

        def deallocate(pointer, _state):
            if pointer:
                libc.free(pointer - headroom)

        def reallocate(pointer, size, _state):
            if not pointer:
                return allocate(size, _state)
            base = libc.realloc(pointer - headroom, size + headroom)
            return base + headroom if base else None

        def zero_allocate(count, size, _state):
            base = libc.calloc(1, count * size + headroom)
            return base + headroom if base else None

        self._callbacks = (_ALLOCATE(allocate), _DEALLOCATE(deallocate), _REALLOCATE(reallocate),
                           _ZERO_ALLOCATE(zero_allocate))          # alive as long as the buffer
        self.message = _SerializedMessage()
        self.message.allocator = _Allocator(*self._callbacks, None)
        self.message.buffer = allocate(capacity, None)
        if not self.message.buffer:
            raise MemoryError("serialized message buffer")
        self.message.buffer_capacity = capacity
        self._viewed, self._full, self._array = None, None, None

    def _rewrap(self) -> None:
        message = self.message
        if (message.buffer, message.buffer_capacity) != self._viewed:     # (re)allocated since
            self._viewed = (message.buffer, message.buffer_capacity)
            size = self.headroom + message.buffer_capacity
            memory = (ctypes.c_ubyte * size).from_address(message.buffer - self.headroom)
            self._full = memoryview(memory).cast("B")
            self._array = None

    def view(self) -> memoryview:
        """Headroom + the taken message, writable (the headroom is offset 0)."""
        self._rewrap()
        return self._full[:self.headroom + self.message.buffer_length]

    def array(self):
        """:meth:`view` as a numpy uint8 array (wrapped once per allocation)."""
        return self.whole()[:self.headroom + self.message.buffer_length]

    def whole(self):
        """Headroom + the whole allocation as a numpy uint8 array (wrapped once per allocation)."""
        self._rewrap()
        if self._array is None:
            self._array = np.frombuffer(self._full, np.uint8)
        return self._array

    def free(self) -> None:
        if self.message.buffer:
            self._viewed = self._full = self._array = None
            self.message.allocator.deallocate(self.message.buffer, None)
            self.message.buffer = None


class SerializedPublisher:
    """Publish serialized messages kept in numpy buffers through ``rcl_publish_serialized_message``:
    no ``bytes`` copy and no rclpy publish wrapper per message (a periodic publisher's tick with cold
    caches); ``publisher.publish(bytes)`` where rcl is not reachable through ctypes."""

    def __init__(self, publisher):
        self._publisher, self._message = publisher, _SerializedMessage()
        try:
            self._libs = _libs()
            self._pointer = ctypes.c_void_p(publisher.handle.pointer)
        except (FastPathUnavailable, AttributeError):
            self._libs = None

    def publish(self, buffer: np.ndarray, address: int) -> None:
        """The ``buffer``'s bytes (C-contiguous uint8 at ``address``: callers keep it, not re-read)."""
        if self._libs is None:
            self._publisher.publish(buffer.tobytes())
            return
        message = self._message
        message.point_at(address, buffer.nbytes)
        with self._publisher.handle:              # not destroyed while rcl publishes
            ret = self._libs.publish(self._pointer, ctypes.byref(message), None)
        if ret != RCL_RET_OK:
            raise RuntimeError(f"publish failed ({ret}): {self._libs.last_error()}")


_open_relays: "weakref.WeakSet[SerializedRelay]" = weakref.WeakSet()


@atexit.register
def _close_open_relays() -> None:
    """A process leaving without destroy_node: stop the relay threads before Python finalizes."""
    for relay in list(_open_relays):
        relay.close()


class WaitSetWake:
    """The relay thread waits on the subscription alone in an rclpy wait set (any rmw)."""

    name = "wait set"

    def __init__(self, subscription, context):
        self._subscription, self._context = subscription, context
        try:
            self._wait_set = _rclpy.WaitSet(1, 1, 0, 0, 0, 0, context.handle)
        except (AttributeError, TypeError) as exc:      # an rclpy without this internal
            raise FastPathUnavailable(f"no rclpy wait set: {exc}") from None
        self._guard = GuardCondition(None, None, context=context)

    def wait(self) -> bool:
        """Block (GIL released) until a message, stop() or a timeout; False once the context is gone."""
        wait_set = self._wait_set
        try:
            with self._subscription.handle, self._guard.handle:
                wait_set.clear_entities()
                wait_set.add_subscription(self._subscription.handle)
                wait_set.add_guard_condition(self._guard.handle)
                wait_set.wait(WAIT_TIMEOUT_NS)
        except Exception:  # rclpy raises once the context is shut down or an entity destroyed
            return False
        return self._context.ok()

    def stop(self) -> None:
        try:
            self._guard.trigger()
        except Exception:  # context already shut down: the wait times out instead
            pass

    def release(self) -> None:
        self._wait_set.destroy_when_not_in_use()
        self._guard.destroy()


def _eventfd_callback_supported() -> bool:
    """``eventfd_write(int fd, eventfd_t n)`` called as ``rmw_event_callback_t(const void *user_data,
    size_t n)`` with ``user_data = fd``: on 64-bit x86 and ARM both arguments travel in the first two
    integer registers, the callee reads the fd from the low 32 bits of the first and the count from
    the second, and the int result is ignored.  Only there is the C library's function used as the
    callback; other platforms wait in a wait set."""
    return (sys.platform == "linux" and hasattr(os, "eventfd") and struct.calcsize("P") == 8
            and platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"))


class EventfdWake:
    """The rmw's new-message callback is libc's ``eventfd_write`` on an eventfd the relay thread reads:
    the middleware thread never leaves C, the relay thread sleeps in ``read`` with the GIL released."""

    name = "eventfd"

    def __init__(self, subscription_pointer: ctypes.c_void_p):
        libs = _libs()
        if libs.set_callback is None or not _eventfd_callback_supported():
            raise FastPathUnavailable("no eventfd new-message callback here")
        self._libs, self._subscription_pointer = libs, subscription_pointer
        self.fd = os.eventfd(0, os.EFD_CLOEXEC)
        self._callback = ctypes.cast(libs.libc.eventfd_write, _EVENT_CALLBACK)
        if libs.set_callback(subscription_pointer, self._callback, ctypes.c_void_p(self.fd)) != RCL_RET_OK:
            reason = libs.last_error()
            os.close(self.fd)
            raise FastPathUnavailable(f"no new-message callback from this rmw: {reason}")
        self._stopped = False

    def wait(self) -> bool:
        os.eventfd_read(self.fd)
        return True

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._libs.set_callback(self._subscription_pointer, _EVENT_CALLBACK(), None)
        os.eventfd_write(self.fd, 1)

    def release(self) -> None:
        os.close(self.fd)


# -- compiled drains ---------------------------------------------------------------------------------
# what a drain returns
DRAIN_STOPPED, DRAIN_PENDING, DRAIN_YIELD, DRAIN_UNAVAILABLE, DRAIN_TAKE_ERROR, DRAIN_PUBLISH_ERROR = range(6)
MESSAGE_TAKEN = -1                        # _next_message: a message is in the buffer
# RelayIO.ints slots: addresses and the eventfd
SUB, PUB, MESSAGE, OUTPUT, INFO, EVENTFD, SCRATCH = range(7)
# RelayIO.control slots
STOP, GENERATION, STATUS, BUFFER, CAPACITY, HANDLED, PUBLISHED = range(7)


class RelayIO:
    """What a compiled drain needs to take, sleep and publish on the relay's thread without Python.

    ``functions``: (take, publish, read) C function pointers; ``ints``: addresses (``SUB``...``SCRATCH``);
    ``words``: the take buffer's (buffer, length, capacity) as rcl sees them, ``output_words`` those of
    what the drain publishes (or :meth:`set_output` from Python); ``control``: ``STOP`` (set
    by close()), ``GENERATION`` (see :meth:`invalidate`), ``STATUS`` (the last rcl error code),
    ``BUFFER``/``CAPACITY`` (the allocation the drain's array wraps), ``HANDLED``/``PUBLISHED`` (messages
    the drain took and finished / published without Python)."""

    def __init__(self, libs: _Libraries, sub_pointer, pub_pointer, message: _SerializedMessage, info,
                 fd: int):
        self.functions = libs.compiled_functions()
        self._out = out = _SerializedMessage()            # what the drain publishes
        self.scratch = np.zeros(1, np.uint64)
        self.ints = np.array([sub_pointer.value, pub_pointer.value if pub_pointer is not None else 0,
                              ctypes.addressof(message), ctypes.addressof(out), ctypes.addressof(info), fd,
                              self.scratch.ctypes.data], np.int64)
        self.words = np.ctypeslib.as_array((ctypes.c_uint64 * 3).from_address(ctypes.addressof(message)))
        self.output_words = np.ctypeslib.as_array((ctypes.c_uint64 * 3).from_address(ctypes.addressof(out)))
        self.control = np.zeros(7, np.int64)

    @property
    def generation(self) -> int:
        """Read before the state a drain is started with; a drain started with it yields once it changes."""
        return int(self.control[GENERATION])

    def invalidate(self) -> None:
        """The handler's state changed (another model, another gate): a running drain returns
        ``DRAIN_YIELD`` before its next take and is started again with the new state."""
        self.control[GENERATION] += 1

    def set_output(self, address: int, length: int) -> None:
        """What the drain publishes: ``length`` bytes at ``address`` (kept alive by the handler)."""
        self._out.point_at(address, length)

    @property
    def handled(self) -> int:
        return int(self.control[HANDLED])

    @property
    def published(self) -> int:
        return int(self.control[PUBLISHED])

    def prefix(self, generation: int, buffer: np.ndarray, headroom: int) -> tuple:
        """The arguments every drain loop starts with (see ``warm``)."""
        return (*self.functions, self.ints, self.words, self.output_words, self.control, generation, buffer,
                headroom)


def _next_message(take, read, ints, words, control, generation):  # pragma: no cover  (compiled)
    """Take the next message into the buffer the drain's array wraps, sleeping on the eventfd while none
    is waiting (the GIL released by the caller).  ``MESSAGE_TAKEN``, or a ``DRAIN_*`` code to return with
    (``DRAIN_PENDING``: taken, but the take grew the buffer, so the array no longer wraps it)."""
    while True:
        if control[STOP] != 0:
            return DRAIN_STOPPED
        if control[GENERATION] != generation:
            return DRAIN_YIELD
        ret = take(ints[SUB], ints[MESSAGE], ints[INFO], 0)
        if ret == RCL_RET_OK:
            moved = np.int64(words[0]) != control[BUFFER] or np.int64(words[2]) != control[CAPACITY]
            return DRAIN_PENDING if moved else MESSAGE_TAKEN
        if ret != RCL_RET_SUBSCRIPTION_TAKE_FAILED:
            control[STATUS] = ret
            return DRAIN_TAKE_ERROR
        read(ints[EVENTFD], ints[SCRATCH], 8)       # -1 on a signal: the loop looks again


def _publish_output(publish, ints, control):  # pragma: no cover  (compiled)
    """Publish what the output words point at; False (the rcl code in STATUS) on failure."""
    ret = publish(ints[PUB], ints[OUTPUT], 0)
    if ret != RCL_RET_OK:
        control[STATUS] = ret
        return False
    control[PUBLISHED] += 1
    return True


_compiled_io = None


def compiled_io():
    """``(next_message, publish_output)`` compiled for drains (numba, cached); None without numba.  A
    drain's own module compiles its loop calling these after this returned."""
    global _compiled_io, _next_message, _publish_output
    if _compiled_io is None:
        if jit.load() is None:
            return None
        compile_ = jit.njit(nogil=True, inline="always")
        _next_message, _publish_output = compile_(_next_message), compile_(_publish_output)
        _compiled_io = (_next_message, _publish_output)
    return _compiled_io


def warm(drain, *args) -> bool:
    """Compile (or load) ``drain`` for ``args`` (what follows the prefix) now, not on a relay thread with a
    message waiting: called with arguments typed as a relay's and told to stop.  False where rcl is not
    reachable (nothing to warm for)."""
    try:
        functions = _libs().compiled_functions()
    except FastPathUnavailable:
        return False
    control = np.zeros(7, np.int64)
    control[STOP] = 1
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 3)())
    output = np.ctypeslib.as_array((ctypes.c_uint64 * 3)())
    whole = np.frombuffer(memoryview((ctypes.c_ubyte * 64)()).cast("B"), np.uint8)
    drain(*functions, np.zeros(7, np.int64), words, output, control, 0, whole, 0, *args)
    return True


class SerializedRelay:
    """Relay ``subscription`` -> ``publisher`` (rclpy entities of one message type, in ``context``).

    ``handler(view, offset)`` gets the taken message at ``view[offset:]`` with ``offset`` bytes of
    writable headroom before it; it returns the start of the bytes to publish (a header rewritten
    in place may start before ``offset``), an ``(address, length)`` pair of serialized bytes it wrote
    into memory of its own (kept alive by the handler, e.g. a reused numpy buffer), or None to drop
    the message.  With ``as_array`` the handler gets a numpy uint8 array instead of a memoryview (for
    handlers that hand the bytes to compiled code).  Without a ``publisher`` the relay only takes (a
    serialized listener).  It runs on the relay's own thread; ``on_published()`` follows each
    successful publish; ``on_error(text)`` reports take/publish/handler failures (the relay keeps
    going).  Once ``context`` is shut down (Ctrl-C: rclpy's signal handler shuts the context before the
    node is destroyed) the relay ends quietly.  ``wake``: "auto" (eventfd where supported, else a wait
    set) or "wait_set".

    ``drain(io, buffer, headroom)``: the handler's compiled loop (see the module notes), called with the
    :class:`RelayIO` (``self.io``), the take buffer as a numpy uint8 array (headroom + the allocation)
    and the headroom; it returns a ``DRAIN_*`` code.  Used only with the eventfd wake; messages it
    finishes are counted in ``io.handled`` / ``io.published``, not through ``on_published``.
    """

    def __init__(self, subscription, publisher, handler: Callable[[memoryview, int], Optional[int]], *,
                 context, headroom: int, on_error: Callable[[str], None],
                 on_published: Callable[[], None] = lambda: None, name: str = "relay", wake: str = "auto",
                 as_array: bool = False, drain: Optional[Callable] = None):
        libs = _libs()
        self._libs, self._handler, self._on_error, self._on_published = libs, handler, on_error, on_published
        self._context, self._subscription, self._publisher = context, subscription, publisher
        try:
            self._sub_pointer = ctypes.c_void_p(subscription.handle.pointer)
            self._pub_pointer = None if publisher is None else ctypes.c_void_p(publisher.handle.pointer)
        except AttributeError as exc:       # an rclpy without the rcl handle addresses
            raise FastPathUnavailable(f"rclpy does not expose rcl handles: {exc}") from None
        self._buffer = _HeadroomBuffer(-(-headroom // 64) * 64)
        self._bytes = self._buffer.array if as_array else self._buffer.view
        self._out = _SerializedMessage()
        self._info = ctypes.create_string_buffer(1024)    # rmw_message_info_t, not read
        self._closed = self._stopping = False
        try:
            self.wake = EventfdWake(self._sub_pointer) if wake == "auto" else None
        except FastPathUnavailable:
            self.wake = None
        self.wake = self.wake or WaitSetWake(subscription, context)
        self.io = None                  # RelayIO of the compiled drain (eventfd wake only)
        if drain is not None and isinstance(self.wake, EventfdWake) and jit.AVAILABLE:   # numba loaded later
            self.io = RelayIO(libs, self._sub_pointer, self._pub_pointer, self._buffer.message, self._info,
                              self.wake.fd)
        self._drain = drain if self.io is not None else None
        self._thread = threading.Thread(target=self._run, name=f"robot_bridge.{name}", daemon=True)
        self._thread.start()
        _open_relays.add(self)

    def close(self) -> None:
        """Stop the thread and release the buffer; call before the subscription is destroyed."""
        if self._closed:
            return
        self._closed = self._stopping = True
        if self.io is not None:
            self.io.control[STOP] = 1
        self.wake.stop()
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self._buffer.free()
            self.wake.release()

    def _run(self) -> None:
        while not self._stopping:
            if self._drain is not None:
                result = self._drain_once()
                if result == DRAIN_STOPPED:
                    return
                if result == DRAIN_PENDING:           # taken, left for the Python handler
                    self._relay_taken()
                    continue
                if result == DRAIN_PUBLISH_ERROR:
                    self._report(f"publish failed ({self.io.control[STATUS]})")
                if result in (DRAIN_YIELD, DRAIN_PUBLISH_ERROR):
                    continue
                if result == DRAIN_TAKE_ERROR:
                    self._report(f"take failed ({self.io.control[STATUS]})")
                else:             # DRAIN_UNAVAILABLE: the drain may have consumed the wake of what waits
                    while not self._stopping and self._relay_one():
                        pass
                if self._stopping:
                    return
            if not self.wake.wait():
                if self._context.ok() and not self._stopping:
                    self._on_error("waiting for messages failed; this relay stopped")
                return
            while not self._stopping and self._relay_one():
                pass

    def _drain_once(self) -> int:
        whole = self._buffer.whole()                  # wraps the current allocation
        control, message = self.io.control, self._buffer.message
        control[BUFFER], control[CAPACITY] = message.buffer, message.buffer_capacity
        try:
            return self._drain(self.io, whole, self._buffer.headroom)
        except Exception as exc:  # a drain bug: report it, relay in Python from now on
            self._on_error(f"relay drain failed, relaying without it: {exc!r}")
            self._drain = None
            return DRAIN_UNAVAILABLE

    def _relay_one(self) -> bool:
        """Take and relay one message; False when none is waiting."""
        libs, message = self._libs, self._buffer.message
        ret = libs.take(self._sub_pointer, ctypes.byref(message), self._info, None)
        if ret == RCL_RET_SUBSCRIPTION_TAKE_FAILED:
            return False
        if ret != RCL_RET_OK:
            self._report(f"take failed ({ret})")
            return False
        return self._relay_taken()

    def _relay_taken(self) -> bool:
        """Hand the message in the buffer to the handler, publish what it returns; False once stopping."""
        libs, message = self._libs, self._buffer.message
        headroom = self._buffer.headroom
        try:
            start = self._handler(self._bytes(), headroom)
        except Exception as exc:  # a handler bug must not kill the relay thread
            self._on_error(f"relay handler failed: {exc!r}")
            return True
        if start is None or self._pub_pointer is None:
            return True
        out = self._out
        if start.__class__ is tuple:                # another message, in the handler's memory
            out.point_at(*start)
        else:
            out.point_at(message.buffer - headroom + start, headroom + message.buffer_length - start)
        ret = libs.publish(self._pub_pointer, ctypes.byref(out), None)
        if ret == RCL_RET_OK:
            self._on_published()
        else:
            self._report(f"publish failed ({ret})")
        return not self._stopping

    def _report(self, what: str) -> None:
        reason = self._libs.last_error()
        if not self._context.ok():
            self._stopping = True        # shutting down: nothing to report, the thread ends
            return
        self._on_error(f"{what}: {reason}")
