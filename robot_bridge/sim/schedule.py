"""Each simulated sensor on its own schedule: a worker thread per sensor and a monitor of its rate.

:class:`PeriodicWorker` runs one producer at a fixed rate on a thread of its own, so a slow producer
never delays another one (or whatever else shares the process).  A short hiccup (the machine busy
for a moment) is caught up, so the count of frames stays true to the rate; a producer further behind
than ``MAX_CATCH_UP`` (one that cannot keep its rate) starts its next frame at once, without a burst:
it publishes at the rate it can.  :class:`RateMonitor` measures that rate from the stamps of the frames
(asked vs achieved) for logs and diagnostics.  No rclpy here: the node passes its clock in.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

MAX_WAIT = 0.1          # s: longest single wait, so a clock that is not wall time (sim time) is re-read
MAX_CATCH_UP = 1.0      # s: a schedule this far behind (a hiccup) catches up; further behind, it restarts
MIN_SPAN = 0.5          # s: a rate is judged over at least this long (a start-up hiccup in 5 frames at 100 Hz
                        # read as 84 Hz and warned "cannot keep" once for good)


@dataclass(frozen=True)
class RateReport:
    asked_hz: float
    achieved_hz: Optional[float]     # None until two frames are in the window
    frames: int
    late_frames: int                 # frames that took longer than the period
    mean_frame_ms: Optional[float]
    max_frame_ms: Optional[float]
    mean_cpu_ms: Optional[float]     # thread CPU time per frame

    def keeping_up(self, tolerance: float = 0.05) -> Optional[bool]:
        """Achieved within ``tolerance`` of asked; None before there is a measurement."""
        if self.achieved_hz is None:
            return None
        return self.achieved_hz >= self.asked_hz * (1.0 - tolerance)


class RateMonitor:
    """Asked vs achieved rate of one periodic producer, from the stamps of its frames (thread-safe)."""

    def __init__(self, rate_hz: float, window_s: float = 2.0, min_frames: int = 5):
        self.rate_hz = float(rate_hz)
        self.window_ns = int(window_s * 1e9)
        self.min_span_ns = int(min(window_s, MIN_SPAN) * 1e9)
        self.min_frames = min_frames
        self._stamps: deque[int] = deque()
        self._durations: deque[tuple[int, int]] = deque(maxlen=50)      # (wall ns, cpu ns)
        self._frames = 0
        self._late = 0
        self._lock = threading.Lock()

    @property
    def period_ns(self) -> int:
        return int(1e9 / self.rate_hz)

    def record(self, stamp_ns: int, wall_ns: int, cpu_ns: int = 0) -> None:
        """One frame: its stamp, and the wall and CPU time it took."""
        with self._lock:
            self._frames += 1
            self._late += wall_ns > self.period_ns
            self._durations.append((wall_ns, cpu_ns))
            self._stamps.append(stamp_ns)
            # keep the window, but never fewer than min_frames stamps (a slow producer is still measured)
            while len(self._stamps) > self.min_frames and stamp_ns - self._stamps[0] > self.window_ns:
                self._stamps.popleft()

    def report(self) -> RateReport:
        with self._lock:
            stamps, durations = list(self._stamps), list(self._durations)
            frames, late = self._frames, self._late
        achieved = None
        if len(stamps) >= self.min_frames and stamps[-1] - stamps[0] >= max(self.min_span_ns, 1):
            achieved = (len(stamps) - 1) / ((stamps[-1] - stamps[0]) * 1e-9)
        walls = [w for w, _ in durations]
        cpus = [c for _, c in durations]
        return RateReport(
            asked_hz=self.rate_hz, achieved_hz=achieved, frames=frames, late_frames=late,
            mean_frame_ms=sum(walls) / len(walls) * 1e-6 if walls else None,
            max_frame_ms=max(walls) * 1e-6 if walls else None,
            mean_cpu_ms=sum(cpus) / len(cpus) * 1e-6 if cpus else None)


def next_deadline(deadline_ns: int, now_ns: int, period_ns: int, max_lag_ns: int) -> int:
    """The frame after the one due at ``deadline_ns``: one period later (a frame already due runs at
    once, catching up a hiccup), or ``now_ns`` when that is more than ``max_lag_ns`` behind."""
    following = deadline_ns + period_ns
    return now_ns if now_ns - following > max_lag_ns else following


class PeriodicWorker:
    """Calls ``frame()`` every ``period`` seconds of ``now_ns`` on a daemon thread of its own.

    ``frame()`` returns the stamp (ns) of what it produced, or None when it produced nothing; stamps and
    frame times go to ``monitor``.  An exception from ``frame()`` goes to ``on_error`` and the schedule
    goes on.  ``keep_going()`` (e.g. the ROS context being ok) is checked before each frame.
    """

    def __init__(self, name: str, monitor: RateMonitor, frame: Callable[[], Optional[int]],
                 now_ns: Callable[[], int], on_error: Callable[[BaseException], None],
                 keep_going: Callable[[], bool] = lambda: True):
        self.name, self.monitor = name, monitor
        self._frame, self._now_ns, self._on_error, self._keep_going = frame, now_ns, on_error, keep_going
        self._max_lag_ns = int(max(MAX_CATCH_UP, 2.0 / monitor.rate_hz) * 1e9)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"sim:{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Ask the thread to stop and wait for the frame in progress; True once it has ended."""
        self._stop.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _wait_until(self, deadline_ns: int) -> bool:
        while not self._stop.is_set():
            remaining = deadline_ns - self._now_ns()
            if remaining <= 0:
                return True
            self._stop.wait(min(remaining * 1e-9, MAX_WAIT))
        return False

    def _run(self) -> None:
        period = self.monitor.period_ns
        deadline = self._now_ns()
        while self._wait_until(deadline) and self._keep_going():
            wall0, cpu0 = time.monotonic_ns(), time.thread_time_ns()
            try:
                stamp = self._frame()
            except Exception as exc:  # one bad frame never ends the schedule
                self._on_error(exc)
                stamp = None
            wall = time.monotonic_ns() - wall0
            if stamp is not None:
                self.monitor.record(stamp, wall, time.thread_time_ns() - cpu0)
            deadline = next_deadline(deadline, self._now_ns(), period, self._max_lag_ns)
