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


_HELD_LOCK_NODE = """
import atexit, sys, threading
from rclpy.node import Node
from robot_bridge.ros.runner import spin_node

lock = threading.Lock()


class Probe(Node):
    def __init__(self):
        super().__init__("held_lock_probe")
        held = threading.Event()

        def compile_forever():          # numba compiling on a thread: its compiler lock held
            with lock:
                held.set()
                threading.Event().wait()
        threading.Thread(target=compile_forever, daemon=True).start()
        held.wait()
        print("up", flush=True)


atexit.register(lock.acquire)           # finalization waiting for that lock, as numba's finalizers can
sys.exit(spin_node(Probe))
"""


def test_an_executable_with_a_thread_still_running_exits_at_once_after_sigint(tmp_path):
    """spin_node ends the process once the node is destroyed and rclpy shut down, when a thread of ours
    still runs (a kernel compile on a fresh install): the interpreter's finalization would wait for the
    locks that frozen thread holds (main: description_node hung at a stop, SIGTERM ignored, until ros2
    launch killed it with SIGKILL)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.Popen([sys.executable, "-c", _HELD_LOCK_NODE], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)                      # a hang guard: it exits within a second here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, proc.stdout.read()
