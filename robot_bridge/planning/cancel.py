"""A cancel token: how a caller (the node's action server) stops a planning attempt that is under way.

The planner checks the token between slices of its search (:data:`PLAN_SLICE` s of RRT-Connect each) and
between IK restarts; a cancel seen there ends the attempt with :class:`PlanningCanceled` (MoveIt's PREEMPTED,
-7).  The token records, on the planner's clock, when the cancel was asked for, when the planner saw it and
when planning stopped: the latency is read from these stamps, not from a caller's sleeps.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from .errors import PlanningCanceled

PLAN_SLICE = 0.05               # s of search between two checks of the token (each slice a fresh RRT-Connect)


class CancelToken:
    def __init__(self, clock: Optional[Callable[[], float]] = None):
        self._clock = clock or time.perf_counter        # the backend's monotonic clock
        self._lock = threading.Lock()
        self.reason = ""
        self.requested_at: Optional[float] = None       # cancel() called
        self.seen_at: Optional[float] = None            # the planner's first check after it
        self.stopped_at: Optional[float] = None         # the planning attempt ended (by the cancel)

    def now(self) -> float:
        return self._clock()

    def cancel(self, reason: str = "canceled") -> None:
        """Ask the attempt to stop (any thread); the first reason is kept."""
        with self._lock:
            if self.requested_at is None:
                self.reason = reason
                self.requested_at = self._clock()

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    def check(self) -> None:
        """Raise :class:`PlanningCanceled` once a cancel was asked for (stamping when it was first seen)."""
        if self.requested_at is None:
            return
        with self._lock:
            if self.seen_at is None:
                self.seen_at = self._clock()
        raise PlanningCanceled(self.reason or "canceled")

    def stopped(self) -> None:
        """The attempt that saw the cancel has unwound (called by the planner on its way out)."""
        if self.seen_at is not None and self.stopped_at is None:
            self.stopped_at = self._clock()
