"""rclpy fixtures: each test gets its own initialised Context(s), shut down afterwards."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from robot_bridge.ros.actions import destroy_actions


class RosProcess:
    """One rclpy Context (one DDS participant set) with its own executor spinning in a thread."""

    def __init__(self, name: str):
        self.context = rclpy.Context()
        self.context.init()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes = []
        self._thread = threading.Thread(target=self._spin, name=f"spin-{name}", daemon=True)
        self._thread.start()

    def _spin(self):
        try:
            self.executor.spin()
        except ExternalShutdownException:
            pass

    def node(self, name: str):
        node = rclpy.create_node(name, context=self.context)
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def close(self):
        self.executor.shutdown(timeout_sec=10)
        self._thread.join(timeout=10)
        for node in self.nodes:
            destroy_actions(node)
            node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def ros_process():
    """Factory: ``ros_process("name")`` starts a spinning context; all are shut down after the test."""
    started = []

    def start(name: str) -> RosProcess:
        started.append(RosProcess(name))
        return started[-1]

    yield start
    for process in reversed(started):
        process.close()


@pytest.fixture
def wait_for():
    """``wait_for(predicate)``: poll until true; a deadline only guards against hangs."""

    def wait(predicate, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    return wait
