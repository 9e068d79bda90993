"""Log call sites that rclpy's logger accepts.

rclpy ties each call site (function, file, line) to the severity, logger name and filter parameters of its
first call and raises ValueError when a later call differs ("Logger severity cannot be changed between
calls.", "Logging filter parameters cannot be changed between calls.").  So a severity chosen at run time
gets one call site per severity, and a throttle whose period is a parameter (changeable at run time) is
kept here, per key, instead of in rclpy's filter (test/nodes/test_controller_logging.py checks the nodes).
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class Throttle:
    """Whether a repeated message may be logged again: per key, at most once per ``period`` seconds (the
    period given at each call, so a parameter may change it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, key: str, period: float) -> bool:
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < period:
                return False
            self._last[key] = now
            return True
