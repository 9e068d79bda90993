"""The one ``main()`` body of every robot_bridge node executable."""

from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from .memory import tune_allocator_for_large_messages


def spin_node(make_node: Callable[[], Node], args=None) -> int:
    """Init rclpy, spin the node until Ctrl-C / shutdown, then clean up; exit status 0."""
    tune_allocator_for_large_messages()
    rclpy.init(args=args)
    node = make_node()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
