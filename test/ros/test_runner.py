"""robot_bridge.ros.runner: a stop signal ends the spinning without the executor polling for it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from robot_bridge.ros import runner


def test_a_signal_wakes_the_waiting_executor(monkeypatch):
    """The executor waits for an hour; SIGINT still ends spin_until_stopped at once (its Python handler
    runs when the wait returns, and the signal's wake-up byte makes it return)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are the main thread's")
    monkeypatch.setattr(runner, "SPIN_PERIOD", 3600.0)
    stop = threading.Event()
    with runner.stoppable_rclpy(stop=stop):
        node = rclpy.create_node("runner_probe")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        errors = []
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        # without the wake-up the test would wait an hour: a watchdog ends it (and fails it) after 60 s
        watchdog = threading.Timer(60.0, lambda: (stop.set(), executor.create_task(lambda: None)))
        timer.start()
        watchdog.start()
        started = time.monotonic()
        try:
            runner.spin_until_stopped(executor, stop, errors.append)
        finally:
            timer.cancel()
            watchdog.cancel()
            executor.shutdown()
            node.destroy_node()
    assert stop.is_set() and errors == []
    assert time.monotonic() - started < 60.0             # woken by the signal, not by the watchdog
    assert signal.set_wakeup_fd(-1) == -1                # the wake-up fd was handed back
