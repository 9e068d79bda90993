"""A node's hot periodic callbacks on one thread of its own, not in the executor.

Each tick of an rclpy timer costs the executor a wait-set rebuild over every entity of the node (the
controller has ~35: services, action servers, publishers' QoS event handlers) and a task round trip:
at the controller's default 100 + 50 Hz that was two thirds of its CPU (bench/controller_bench.py).
``ThreadTimers`` runs such callbacks from one thread that sleeps until the next deadline on the steady
clock (no drift: a deadline is the previous one plus the period, on the grid of multiples of the period
so that a 100 Hz and a 50 Hz timer share every other wake-up; ticks missed by more than a period are
skipped, as rclpy's timers do).  A callback that raises is reported through ``on_error`` and the
timer keeps running; once the node's context is shut down (Ctrl-C) the thread ends quietly.

ROS time (``use_sim_time``) is not followed: nodes keep executor timers then.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable

MAX_SLEEP = 0.1        # s: longest sleep, so a new timer, a cancel or stop() is seen within it
STOP_TIMEOUT = 30.0    # s: longest wait of stop() for a callback under way


class TimersStillRunning(RuntimeError):
    """A thread timer callback did not end within the stop timeout: what it uses must be left alive."""


def first_deadline(now: int, period: int) -> int:
    """The first grid point (a multiple of ``period``, ns) after ``now``: timers whose periods divide
    each other share wake-ups."""
    return (now // period + 1) * period


def next_deadline(deadline: int, period: int, now: int) -> int:
    """After a tick due at ``deadline``: the next grid point, or the first one after ``now`` when that one
    is already past (missed ticks are skipped, not run in a burst)."""
    later = deadline + period
    return later if later > now else first_deadline(now, period)


class ThreadTimer:
    """One periodic callback of a :class:`ThreadTimers` (the parts of rclpy's Timer that are used)."""

    def __init__(self, owner: "ThreadTimers", period_sec: float, callback: Callable[[], None]):
        self._owner, self.callback = owner, callback
        self.timer_period_ns = int(round(period_sec * 1e9))
        self.canceled = False

    def is_canceled(self) -> bool:
        return self.canceled

    def cancel(self) -> None:
        self.canceled = True

    destroy = cancel


class ThreadTimers:
    """Periodic callbacks of one node on one thread; ``on_error(timer, exc)`` reports a raising callback
    (called on the thread, context still up).

    The thread sleeps (``time.sleep``) until the next deadline, at most MAX_SLEEP: a new timer, a cancel
    or stop() is seen within that.  Measured at 100 wake-ups a second on the 2-core machine: a bare
    ``time.sleep`` loop costs 0.62 % of a core, ``select`` on a socket 0.87 %, ``threading.Event.wait``
    1.25 % (the controller's ticks are 100 a second)."""

    def __init__(self, context, name: str, on_error: Callable[[ThreadTimer, BaseException], None]):
        self._context, self._on_error = context, on_error
        self._heap: list[tuple[int, int, ThreadTimer]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"robot_bridge.{name}.timers", daemon=True)
        self._thread.start()

    def create(self, period_sec: float, callback: Callable[[], None]) -> ThreadTimer:
        timer = ThreadTimer(self, period_sec, callback)
        with self._lock:
            heapq.heappush(self._heap, (first_deadline(time.monotonic_ns(), timer.timer_period_ns),
                                        next(self._order), timer))
        return timer

    def stop(self, timeout: float | None = None) -> None:
        """No callback runs after this returns.  A callback still under way after ``timeout`` s (default
        STOP_TIMEOUT) raises :class:`TimersStillRunning`: the node must then keep its publishers, which
        the callback may be publishing on through their raw rcl handles (``template_publishers``), so
        returning as if stopped would let destroy_node free them under it."""
        self._stopped = True
        if threading.current_thread() is self._thread:
            return
        self._thread.join(STOP_TIMEOUT if timeout is None else timeout)
        if self._thread.is_alive():
            raise TimersStillRunning(f"{self._thread.name}: a callback still runs after "
                                     f"{STOP_TIMEOUT if timeout is None else timeout} s; the node's "
                                     "entities are left alive")

    def _due(self) -> tuple[list[ThreadTimer], int | None]:
        """The timers due now (rescheduled) and the next deadline (None: no timer)."""
        now = time.monotonic_ns()
        due = []
        with self._lock:
            heap = self._heap
            while heap and (heap[0][2].canceled or heap[0][0] <= now):
                deadline, _, timer = heapq.heappop(heap)
                if not timer.canceled:
                    due.append(timer)
                    later = next_deadline(deadline, timer.timer_period_ns, now)
                    heapq.heappush(heap, (later, next(self._order), timer))
            return due, heap[0][0] if heap else None

    def _run(self) -> None:
        while not self._stopped:
            due, deadline = self._due()
            if due and not self._context.ok():
                return
            for timer in due:
                if self._stopped:
                    return
                if timer.canceled:
                    continue
                try:
                    timer.callback()
                except Exception as exc:  # reported by the node, the timer keeps running
                    if self._stopped or not self._context.ok():
                        return                                    # shutting down: nothing to report
                    self._on_error(timer, exc)
            # until the next deadline as rescheduled by _due (past already if the callbacks took that long)
            wait = MAX_SLEEP if deadline is None else (deadline - time.monotonic_ns()) / 1e9
            if wait > 0:
                time.sleep(min(wait, MAX_SLEEP))
