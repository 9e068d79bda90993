"""The one ``main()`` body of every robot_bridge node executable."""

from __future__ import annotations

import signal
import threading
from typing import Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from .memory import tune_allocator_for_large_messages

SPIN_PERIOD = 0.1          # seconds between checks for a stop signal


def spin_node(make_node: Callable[[], Node], args=None) -> int:
    """Init rclpy, spin the node until SIGINT/SIGTERM or shutdown, then clean up; exit status 0.

    Our own signal handlers only ask the loop to stop; the node is destroyed and the context shut down
    afterwards, in this thread.  rclpy's handlers shut the context down under a running executor, which
    raised RCLError from the next wait set (seen under load)."""
    tune_allocator_for_large_messages()
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = make_node()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            while not stop.is_set() and rclpy.ok():
                executor.spin_once(timeout_sec=SPIN_PERIOD)
        finally:
            executor.shutdown()
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
