"""The rclpy lifetime of a robot_bridge process, and the one ``main()`` body of every node executable."""

from __future__ import annotations

import signal
import socket
import threading
import unicodedata
from contextlib import contextmanager
from typing import Callable, Iterator

import rclpy
from rclpy.exceptions import InvalidParameterValueException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from .memory import tune_allocator_for_large_messages

SPIN_PERIOD = 2.0          # s: longest executor wait (a signal wakes it at once, see _woken_by_signals)


@contextmanager
def stoppable_rclpy(args=None, stop: threading.Event | None = None) -> Iterator[threading.Event]:
    """rclpy initialised for this process; the yielded event is set by SIGINT/SIGTERM.

    Our own signal handlers only ask the caller's loop to stop; the caller destroys its nodes, then the
    context is shut down here, in this thread.  rclpy's handlers shut the context down under a running
    executor, which raised RCLError from the next wait set (seen under load).  Also applies the
    allocator tuning for large messages."""
    tune_allocator_for_large_messages()
    stop = threading.Event() if stop is None else stop     # a given one may already be set: never lost
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        yield stop
    finally:
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def spin_until_stopped(executor, stop: threading.Event, report: Callable[[str], None]) -> None:
    """Spin until ``stop``; an exception a callback let through (one not created by a ContainedNode,
    e.g. an action server's) is reported and the spinning goes on: it never ends the process."""
    with _woken_by_signals(executor):
        while not stop.is_set() and rclpy.ok():
            try:
                executor.spin_once(timeout_sec=SPIN_PERIOD)
            except Exception as exc:  # containment of last resort; nodes contain their own callbacks
                report(f"a callback raised {type(exc).__name__}: {exc} (contained; still running)")


@contextmanager
def _woken_by_signals(executor) -> Iterator[None]:
    """A signal ends the executor's current wait at once, so its Python handler (which runs in the main
    thread only when the wait returns) is seen without the executor polling: every wake-up of an idle
    executor rebuilds its wait set, ~1 ms of CPU for a node's few dozen entities.  Python's C-level handler
    writes the signal to a socket (``signal.set_wakeup_fd``); a thread waiting on it queues an empty task.
    Outside the main thread (or where the wake-up fd is taken) the executor waits at most SPIN_PERIOD."""
    read, write = socket.socketpair()
    write.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
    except ValueError:          # not the main thread
        read.close()
        write.close()
        yield
        return

    def watch() -> None:
        while True:
            try:
                if not read.recv(64):
                    return                              # closed: spinning is over
                executor.create_task(lambda: None)      # wakes the wait set
            except Exception:  # closed, executor shut down: nothing to wake
                return
    watcher = threading.Thread(target=watch, name="robot_bridge.signal_wake", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        write.close()
        watcher.join(timeout=1.0)
        read.close()


def start_up_refusal(exc: InvalidParameterValueException) -> str:
    """One printable line for a parameter refused at start-up (the node does not start)."""
    text = str(exc.args[0]) if exc.args else str(exc)     # "Invalid parameter value (..) ... Reason: R: NAME"
    reason, _, name = text.split("Reason: ", 1)[-1].rpartition(": ")
    reason = "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" else c for c in reason or name)
    return f"parameter {name} refused at start-up, the node does not start: {reason}"


EXIT_START_FAILED = 2      # as robot-bridge run: the node did not start


def start_up_error(exc: Exception) -> str:
    """One line for any failure to build a node (no traceback): the reason, control characters escaped."""
    if isinstance(exc, InvalidParameterValueException):
        return start_up_refusal(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" else c for c in text)
    text = text if len(text) <= 400 else text[:400] + "..."
    return f"the node does not start: {type(exc).__name__}: {text}"


def _forget_half_built_node(exc: Exception) -> None:
    """Drop the frames of a failed constructor, so rclpy's shutdown does not destroy a half-built node
    (its destroy_node would raise on the attributes never set)."""
    import gc
    import traceback

    traceback.clear_frames(exc.__traceback__)
    gc.collect()


def spin_node(make_node: Callable[[], Node], args=None) -> int:
    """Spin the node until SIGINT/SIGTERM or shutdown, then clean up; exit status 0 (2: the node did not
    start, e.g. a start-up parameter refused: one error line, no traceback)."""
    from ..cli.stop import REQUESTED, ignore_further_stop_requests   # REQUESTED: set by a Ctrl-C since
                                                                     # the executable started
    try:
        with stoppable_rclpy(args, stop=REQUESTED) as stop:
            if stop.is_set():
                return 0
            try:
                node = make_node()
            except Exception as exc:      # a start-up value refused, of the wrong type, a node's own check
                rclpy.logging.get_logger("robot_bridge").error(start_up_error(exc))
                _forget_half_built_node(exc)
                return EXIT_START_FAILED
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                spin_until_stopped(executor, stop, lambda text: node.get_logger().error(text))
            finally:
                executor.shutdown()
                node.destroy_node()
    finally:
        ignore_further_stop_requests()        # an executable's last step: exit 0, whatever comes now
    _exit_now_if_threads_remain(0)
    return 0


def _exit_now_if_threads_remain(code: int) -> None:
    """End the process at once (``os._exit``) when a thread of ours is still running after the node is
    destroyed and rclpy is shut down -- typically one compiling numba kernels on a fresh install.  The
    interpreter's finalization freezes such a daemon thread where it stands, holding numba's compiler lock,
    and a finalizer waiting for that lock hung description_node until ros2 launch killed it (SIGINT, then
    SIGTERM ignored: exit -9 after 15 s).  Everything that needs an orderly end has had it; the output is
    flushed first."""
    import os
    import sys

    if not any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()):
        return
    import ctypes

    sys.stdout.flush()
    sys.stderr.flush()
    ctypes.CDLL(None).fflush(None)                      # rcutils' console output (C stdio)
    os._exit(code)
