"""Serialized relays driven by the middleware's new-message callback (large messages, e.g. images).

An rclpy executor turns every incoming message into a Python round trip (wait set rebuilt, ready
entities scanned, a task per callback) and hands a raw subscription's message over as ``bytes``,
which the republish copies twice more.  For a 640x480 rgb8 image that was 0.5-0.8 ms of the relay's
added latency (bench/sensor_bench.py: 1.3-1.7 ms through the executor, 0.65-0.99 ms here).
Here the subscription is left out of the executor (``DetachedCallbackGroup``); the rmw's
new-message callback (``rcl_subscription_set_on_new_message_callback``, Humble and later) wakes a
dedicated thread that takes the serialized message with ``rcl_take_serialized_message`` into one
reused buffer, lets a handler validate it and rewrite its header in place, and publishes that
buffer with ``rcl_publish_serialized_message``.  The buffer keeps headroom in front of the message,
so a longer ``frame_id`` is written in front of the data instead of moving the data.

rcl is reached through ctypes (no compiled code in this package); the library is the one rclpy
has already loaded.  Where the rmw has no new-message callbacks, ``FastPathUnavailable`` says so and
the caller keeps its executor-driven subscription.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import weakref
from typing import Callable, Optional

from rclpy.callback_groups import CallbackGroup

RCL_RET_OK = 0
RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401
INITIAL_CAPACITY = 64 * 1024


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


class _Allocator(ctypes.Structure):            # rcutils_allocator_t
    _fields_ = [("allocate", _ALLOCATE), ("deallocate", _DEALLOCATE), ("reallocate", _REALLOCATE),
                ("zero_allocate", _ZERO_ALLOCATE), ("state", ctypes.c_void_p)]


class _SerializedMessage(ctypes.Structure):    # rcl_serialized_message_t = rcutils_uint8_array_t
    _fields_ = [("buffer", ctypes.c_void_p), ("buffer_length", ctypes.c_size_t),
                ("buffer_capacity", ctypes.c_size_t), ("allocator", _Allocator)]


class _ErrorString(ctypes.Structure):          # rcutils_error_string_t
    _fields_ = [("str", ctypes.c_char * 1024)]


class _Libraries:
    def __init__(self):
        try:
            # the copies rclpy loaded (RTLD_NOLOAD: never a second, different one)
            self.rcl = ctypes.CDLL("librcl.so", mode=os.RTLD_NOLOAD)
            self.rcutils = ctypes.CDLL("librcutils.so", mode=os.RTLD_NOLOAD)
            self.libc = ctypes.CDLL(None)
            self.set_callback = self.rcl.rcl_subscription_set_on_new_message_callback
        except (OSError, AttributeError) as exc:
            raise FastPathUnavailable(f"rcl not reachable through ctypes: {exc}") from None
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

    def last_error(self) -> str:
        text = self.error_string().str.decode(errors="replace")
        self.reset_error()
        return text


_libraries: Optional[_Libraries] = None


def _libs() -> _Libraries:
    global _libraries
    if _libraries is None:
        _libraries = _Libraries()
    return _libraries


class _HeadroomBuffer:
    """A serialized-message buffer whose allocator keeps ``headroom`` bytes in front of the message."""

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

    def view(self) -> memoryview:
        """Headroom + the taken message, writable (the headroom is offset 0)."""
        size = self.headroom + self.message.buffer_length
        return memoryview((ctypes.c_ubyte * size).from_address(self.message.buffer - self.headroom)).cast("B")

    def free(self) -> None:
        if self.message.buffer:
            self.message.allocator.deallocate(self.message.buffer, None)
            self.message.buffer = None


_open_relays: "weakref.WeakSet[SerializedRelay]" = weakref.WeakSet()


@atexit.register
def _close_open_relays() -> None:
    """A process leaving without destroy_node: detach from the middleware before Python finalizes, so no
    middleware thread calls into a finalizing interpreter."""
    for relay in list(_open_relays):
        relay.close()


class SerializedRelay:
    """Relay ``subscription`` -> ``publisher`` (both raw-capable rclpy entities of one message type).

    ``handler(view, offset)`` gets the taken message at ``view[offset:]`` with ``offset`` bytes of
    writable headroom before it; it returns the start of the bytes to publish (a header rewritten
    in place may start before ``offset``) or None to drop the message.  It runs on the relay's own
    thread; ``on_published()`` follows each successful publish; ``on_error(text)`` reports take/publish/
    handler failures (the relay keeps going).
    """

    def __init__(self, subscription, publisher, handler: Callable[[memoryview, int], Optional[int]], *,
                 headroom: int, on_error: Callable[[str], None],
                 on_published: Callable[[], None] = lambda: None, name: str = "relay"):
        libs = _libs()
        self._libs, self._handler, self._on_error, self._on_published = libs, handler, on_error, on_published
        self._subscription, self._publisher = subscription, publisher   # keep the handles alive
        try:
            self._sub_pointer = ctypes.c_void_p(subscription.handle.pointer)
            self._pub_pointer = ctypes.c_void_p(publisher.handle.pointer)
        except AttributeError as exc:       # an rclpy without the rcl handle addresses
            raise FastPathUnavailable(f"rclpy does not expose rcl handles: {exc}") from None
        self._buffer = _HeadroomBuffer(-(-headroom // 64) * 64)
        self._out = _SerializedMessage()
        self._info = ctypes.create_string_buffer(1024)    # rmw_message_info_t, not read
        self._wake, self._closed = threading.Event(), False
        self._callback = _EVENT_CALLBACK(lambda _user, _count: self._wake.set())
        self._thread = threading.Thread(target=self._run, name=f"robot_bridge.{name}", daemon=True)
        self._thread.start()
        if libs.set_callback(self._sub_pointer, self._callback, None) != RCL_RET_OK:
            reason = libs.last_error()
            self._stop()
            raise FastPathUnavailable(f"no new-message callback from this rmw: {reason}")
        _open_relays.add(self)
        self._wake.set()                                  # messages that arrived before the callback

    def close(self) -> None:
        """Detach from the middleware and stop the thread; call before the subscription is destroyed."""
        if self._closed:
            return
        self._libs.set_callback(self._sub_pointer, _EVENT_CALLBACK(), None)
        self._stop()

    def _stop(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self._buffer.free()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            while not self._closed and self._relay_one():
                pass

    def _relay_one(self) -> bool:
        """Take and relay one message; False when none is waiting."""
        libs, message = self._libs, self._buffer.message
        ret = libs.take(self._sub_pointer, ctypes.byref(message), self._info, None)
        if ret == RCL_RET_SUBSCRIPTION_TAKE_FAILED:
            return False
        if ret != RCL_RET_OK:
            self._on_error(f"take failed ({ret}): {libs.last_error()}")
            return False
        headroom = self._buffer.headroom
        try:
            start = self._handler(self._buffer.view(), headroom)
        except Exception as exc:  # a handler bug must not kill the relay thread
            self._on_error(f"relay handler failed: {exc!r}")
            return True
        if start is None:
            return True
        out = self._out
        out.buffer = message.buffer - headroom + start
        out.buffer_length = out.buffer_capacity = headroom + message.buffer_length - start
        ret = libs.publish(self._pub_pointer, ctypes.byref(out), None)
        if ret == RCL_RET_OK:
            self._on_published()
        else:
            self._on_error(f"publish failed ({ret}): {libs.last_error()}")
        return True
