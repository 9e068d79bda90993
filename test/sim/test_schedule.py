"""Per-sensor schedules (no ROS): the deadline rule, the rate monitor, the worker thread."""

from __future__ import annotations

import threading
import time

import pytest

from robot_bridge.sim.schedule import PeriodicWorker, RateMonitor, next_deadline

MS = 10**6


def test_next_deadline_keeps_the_grid_catches_up_a_hiccup_and_restarts_when_far_behind():
    period, lag = 10 * MS, 250 * MS
    assert next_deadline(100 * MS, 103 * MS, period, lag) == 110 * MS          # on time: next grid point
    assert next_deadline(100 * MS, 140 * MS, period, lag) == 110 * MS          # hiccup: due now, caught up
    assert next_deadline(100 * MS, 400 * MS, period, lag) == 400 * MS          # too far behind: from now


def test_rate_monitor_achieved_rate_from_stamps_and_late_frames():
    monitor = RateMonitor(10.0, window_s=2.0, min_frames=5)
    assert monitor.report().achieved_hz is None and monitor.report().keeping_up() is None
    for i in range(40):                     # 10 Hz for 4 s; only the last 2 s are in the window
        monitor.record(i * 100 * MS, wall_ns=20 * MS, cpu_ns=15 * MS)
    report = monitor.report()
    assert report.achieved_hz == pytest.approx(10.0)
    assert report.frames == 40 and report.late_frames == 0 and report.keeping_up()
    assert report.mean_frame_ms == pytest.approx(20.0) and report.mean_cpu_ms == pytest.approx(15.0)
    start = 40 * 100 * MS
    for i in range(40):                     # then a frame takes 300 ms: 3.33 Hz of 10
        monitor.record(start + i * 300 * MS, wall_ns=300 * MS)
    report = monitor.report()
    assert report.achieved_hz == pytest.approx(10 / 3)
    assert report.late_frames == 40 and report.keeping_up() is False
    assert report.max_frame_ms == pytest.approx(300.0)


def test_rate_monitor_judges_no_rate_from_a_start_up_hiccup():
    monitor = RateMonitor(100.0, window_s=2.0, min_frames=5)
    for i, t in enumerate([0, 10, 20, 38, 48]):       # 5 frames, one 8 ms late: 84 Hz over 48 ms
        monitor.record(t * MS, wall_ns=MS)
    assert monitor.report().achieved_hz is None and monitor.report().keeping_up() is None
    for i in range(5, 60):                            # then on time for half a second
        monitor.record((48 + (i - 4) * 10) * MS, wall_ns=MS)
    assert monitor.report().keeping_up() is True


def test_rate_monitor_measures_a_producer_slower_than_its_window():
    monitor = RateMonitor(5.0, window_s=2.0, min_frames=5)
    for i in range(5):                      # one frame per 1.5 s: the window keeps min_frames stamps
        monitor.record(i * 1500 * MS, wall_ns=1500 * MS)
    assert monitor.report().achieved_hz == pytest.approx(1 / 1.5)


def test_worker_keeps_its_rate_survives_a_failing_frame_and_stops():
    monitor = RateMonitor(50.0, min_frames=5)
    stamps, errors = [], []

    def frame():
        stamps.append(time.monotonic_ns())
        if len(stamps) == 3:
            raise RuntimeError("one bad frame")
        return stamps[-1]

    worker = PeriodicWorker("t", monitor, frame, now_ns=time.monotonic_ns, on_error=errors.append)
    worker.start()
    deadline = time.monotonic() + 30
    while len(stamps) < 60 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.stop() and not worker.running
    count = len(stamps)
    time.sleep(0.05)
    assert len(stamps) == count                                   # no frame after stop()
    assert [str(e) for e in errors] == ["one bad frame"]
    assert monitor.report().frames == count - 1                   # the failed frame is not counted
    # never ahead of the 20 ms grid, however the (loaded) machine scheduled the thread: the k-th frame
    # starts no earlier than k periods after the first (the rate itself: test_next_deadline_*, and the
    # node test on message stamps)
    ahead = [(s - stamps[0]) - k * 20 * MS for k, s in enumerate(stamps)]
    assert min(ahead) > -2 * MS


def test_worker_that_cannot_keep_its_rate_runs_back_to_back_without_bursts():
    monitor = RateMonitor(100.0, min_frames=3)
    starts = []
    done = threading.Event()

    def frame():
        starts.append(time.monotonic_ns())
        time.sleep(0.3)                     # 30 periods per frame: far behind, never caught up
        if len(starts) >= 4:
            done.set()
        return starts[-1]

    worker = PeriodicWorker("slow", monitor, frame, now_ns=time.monotonic_ns, on_error=print)
    worker.start()
    assert done.wait(30)
    worker.stop()
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 300 * MS                                   # no burst of frames to catch up
    assert monitor.report().keeping_up() is False
