"""Hardware sample times (``time.monotonic()``) as ROS times.

A sample's stamp must be when it was measured, not when a (possibly preempted) thread got round to stamping
it.  :class:`MonotonicStamper` keeps the offset between the node's clock and the monotonic clock, refreshed
only from clock-read pairs taken close together (< 1 ms apart), and maps each measured time through it.
Times are integer nanoseconds: the control loop stamps every sample, and an rclpy ``Time`` made and turned
into a message costs ~75 us of a tick with cold caches.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from rclpy.clock import Clock

TIGHT = 1e-3          # seconds between the two monotonic reads around a node-clock read


class MonotonicStamper:
    """``now_ns``: the node clock read directly when that is the system clock (``time.time_ns``; rclpy's
    ``Clock.now()`` costs ~55 us with cold caches); default: ``clock.now()``."""

    def __init__(self, clock: Clock, now_ns: Optional[Callable[[], int]] = None):
        self.clock = clock
        self.now_ns = now_ns or (lambda: clock.now().nanoseconds)
        self.offset: float | None = None         # node clock minus monotonic clock, seconds

    def __call__(self, monotonic: float | None) -> int:
        """The node-clock time of ``monotonic`` (None: now), ns."""
        before = time.monotonic()
        now = self.now_ns()
        after = time.monotonic()
        if monotonic is None:
            return now
        if self.offset is None or after - before < TIGHT:
            self.offset = now * 1e-9 - (before + after) / 2.0
        return int(round((monotonic + self.offset) * 1e9))


def stamp_fields(nanoseconds: int) -> tuple[int, int]:
    """(sec, nanosec) of a builtin_interfaces/Time."""
    return divmod(nanoseconds, 1_000_000_000)
