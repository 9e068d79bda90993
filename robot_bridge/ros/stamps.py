"""Hardware sample times (``time.monotonic()``) as ROS times.

A sample's stamp must be when it was measured, not when a (possibly preempted) thread got round to stamping
it.  :class:`MonotonicStamper` keeps the offset between the node's clock and the monotonic clock, refreshed
only from clock-read pairs taken close together (< 1 ms apart), and maps each measured time through it.
"""

from __future__ import annotations

import time

from rclpy.clock import Clock
from rclpy.time import Time

TIGHT = 1e-3          # seconds between the two monotonic reads around a node-clock read


class MonotonicStamper:
    def __init__(self, clock: Clock):
        self.clock = clock
        self.offset: float | None = None         # node clock minus monotonic clock, seconds

    def __call__(self, monotonic: float | None) -> Time:
        """The node-clock time of ``monotonic`` (None: now)."""
        before = time.monotonic()
        now = self.clock.now()
        after = time.monotonic()
        if monotonic is None:
            return now
        if self.offset is None or after - before < TIGHT:
            self.offset = now.nanoseconds * 1e-9 - (before + after) / 2.0
        return Time(nanoseconds=int(round((monotonic + self.offset) * 1e9)), clock_type=self.clock.clock_type)
