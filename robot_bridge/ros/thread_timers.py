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
import select
import socket
import threading
import time
from typing import Callable


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
        self._owner._notify()

    destroy = cancel


class ThreadTimers:
    """Periodic callbacks of one node on one thread; ``on_error(timer, exc)`` reports a raising callback
    (called on the thread, context still up).

    The thread sleeps in ``select`` on a socket pair (written to by create/cancel/stop) until the next
    deadline: a ``threading.Event`` wait costs ~50 us of Python per wake-up with cold caches, a tenth of
    a percent of a core at the controller's 100 wake-ups a second."""

    def __init__(self, context, name: str, on_error: Callable[[ThreadTimer, BaseException], None]):
        self._context, self._on_error = context, on_error
        self._heap: list[tuple[int, int, ThreadTimer]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"robot_bridge.{name}.timers", daemon=True)
        self._thread.start()

    def create(self, period_sec: float, callback: Callable[[], None]) -> ThreadTimer:
        timer = ThreadTimer(self, period_sec, callback)
        with self._lock:
            heapq.heappush(self._heap, (first_deadline(time.monotonic_ns(), timer.timer_period_ns),
                                        next(self._order), timer))
        self._notify()
        return timer

    def stop(self, timeout: float = 5.0) -> None:
        """No callback runs after this returns (unless one is stuck past ``timeout``)."""
        self._stopped = True
        self._notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._wake_read.close()
                self._wake_write.close()

    def _notify(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:      # closed (stopped), or full: the thread is awake anyway
            pass

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
        wake = self._wake_read
        while not self._stopped:
            due, deadline = self._due()
            for timer in due:
                if self._stopped or not self._context.ok():
                    return
                if timer.canceled:
                    continue
                try:
                    timer.callback()
                except Exception as exc:  # reported by the node, the timer keeps running
                    if self._stopped or not self._context.ok():
                        return                                    # shutting down: nothing to report
                    self._on_error(timer, exc)
            if due:
                continue                  # the callbacks took time: look again before sleeping
            wait = None if deadline is None else (deadline - time.monotonic_ns()) / 1e9
            if wait is None or wait > 0:
                if select.select((wake,), (), (), wait)[0]:
                    try:
                        wake.recv(4096)
                    except OSError:
                        pass
