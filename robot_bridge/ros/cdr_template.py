"""A message of fixed shape, serialized once by rclpy, then only its numbers rewritten per publish.

Building a ROS message in Python (a setter with type checks per field, a list conversion per
sequence) and serializing it costs a periodic publisher most of its CPU: the controller's
JointTrajectoryControllerState at 50 Hz took ~0.6 ms a tick with the caches cold.  Here the message is
built once with a unique sentinel in every double (and every stamp) that changes, serialized by rclpy
(its layout, no hand-written CDR), and the sentinels' offsets are found; a publish then writes the new
doubles with one numpy scatter and publishes the bytes (``Publisher.publish(bytes)``, or the buffer itself
through ``fast_relay.SerializedPublisher``); ``template_publishers`` fills and publishes several templates
in one compiled call.

Usage::

    template = CdrTemplate(lambda slot, stamp: JointState(header=Header(stamp=stamp()),
                                                          position=slot(n), velocity=slot(n)))
    publisher.publish(template.fill(values, sec, nanosec))     # values: the slots' doubles, in order
"""

from __future__ import annotations

from typing import Callable

import numpy as np

_SENTINEL_BASE = 1e300          # sentinels 1e300 * (1 + k / 2**20): unique, exact, never a real value
_STAMP_BASE = (0x5EC00000, 0x0A500000)


class TemplateUnavailable(RuntimeError):
    """The serialized layout is not one this can patch (e.g. big-endian CDR): publish messages."""


class CdrTemplate:
    """``build(slot, stamp)`` returns the message: ``slot(n)`` gives the list of the next ``n`` double
    slots' sentinels, ``stamp()`` a builtin_interfaces/Time sentinel (every stamp gets the same time)."""

    def __init__(self, build: Callable[[Callable[[int], list], Callable[[], object]], object]):
        from builtin_interfaces.msg import Time
        from rclpy.serialization import serialize_message

        sentinels: list[float] = []
        stamps: list[tuple[int, int]] = []

        def slot(n: int) -> list:
            start = len(sentinels)
            sentinels.extend(_SENTINEL_BASE * (1.0 + k / 2 ** 20) for k in range(start, start + n))
            return sentinels[start:]

        def stamp():
            pair = (_STAMP_BASE[0] + len(stamps), _STAMP_BASE[1] + len(stamps))
            stamps.append(pair)
            return Time(sec=pair[0], nanosec=pair[1])

        data = bytes(serialize_message(build(slot, stamp)))
        if data[:2] != b"\x00\x01":
            raise TemplateUnavailable("not little-endian XCDR1")

        def find(pattern: bytes) -> int:
            at = data.find(pattern)
            if at < 0 or data.find(pattern, at + 1) >= 0:
                raise TemplateUnavailable("a sentinel is not in the serialized message exactly once")
            return at

        value_at = [find(np.array([v], "<f8").tobytes()) for v in sentinels]
        stamp_at = [find(np.array(pair, "<u4").tobytes()) for pair in stamps]
        if any((at - 4) % 8 for at in value_at) or any(at % 4 for at in stamp_at):
            raise TemplateUnavailable("doubles not 8-aligned in the CDR body")
        self.size = len(sentinels)
        self.bytes, self.size_bytes = data, len(data)        # as serialized, with the sentinels
        self._buffer = np.frombuffer(bytearray(data), np.uint8)
        self._doubles = np.frombuffer(self._buffer.data, "<f8", (len(data) - 4) // 8, 4)
        self._words = np.frombuffer(self._buffer.data, "<u4", len(data) // 4)
        # value_index: the doubles' indices into the float64 view at byte 4 (CDR body); stamp_index: the
        # words (uint32 view at byte 0) of each stamp's sec, nanosec
        self.value_index = (np.array(value_at, dtype=np.int64) - 4) // 8
        first = np.array(stamp_at, dtype=np.int64) // 4
        self.stamp_index = np.stack([first, first + 1], axis=1).reshape(-1)
        self._stamp = np.zeros(2 * len(stamps), np.uint32)
        self._one_stamp = tuple(int(i) for i in self.stamp_index) if len(stamps) == 1 else None
        self.address = self._buffer.ctypes.data

    def fill(self, values: np.ndarray, sec: int, nanosec: int) -> bytes:
        """The serialized message with the slots' ``values`` (in slot order) and every stamp = (sec,
        nanosec)."""
        return self.fill_buffer(values, sec, nanosec).tobytes()

    def fill_buffer(self, values: np.ndarray, sec: int, nanosec: int) -> np.ndarray:
        """:meth:`fill` into the template's own buffer (uint8, at :attr:`address`), returned uncopied:
        valid until the next fill."""
        self._doubles[self.value_index] = values
        if self._one_stamp is not None:                      # the usual case: one header
            words, (at_sec, at_nanosec) = self._words, self._one_stamp
            words[at_sec], words[at_nanosec] = sec & 0xFFFFFFFF, nanosec      # int32 sec, uint32 nanosec
        elif len(self._stamp):
            self._stamp[0::2], self._stamp[1::2] = sec & 0xFFFFFFFF, nanosec
            self._words[self.stamp_index] = self._stamp
        return self._buffer
