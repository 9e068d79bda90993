"""rclpy fixtures: each test gets its own initialised Context(s), shut down afterwards."""

from __future__ import annotations

import time

import pytest
import rclpy
from fixtures.spinning import Spinner
from rclpy.executors import SingleThreadedExecutor



class RosProcess:
    """One rclpy Context (one DDS participant set) with its own executor spinning in a thread."""

    def __init__(self, name: str):
        self.context = rclpy.Context()
        self.context.init()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes = []
        self.spinner = Spinner(self.executor, name=f"spin-{name}")

    def node(self, name: str):
        node = rclpy.create_node(name, context=self.context)
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def close(self):
        # the spinning ends (thread joined) before any node goes: rclpy does not support destroying a node
        # under a running spin, nor Executor.shutdown() under spin() (see fixtures/spinning.py)
        self.spinner.close(self.nodes, self.context)


@pytest.fixture
def ros_process():
    """Factory: ``ros_process("name")`` starts a spinning context; all are shut down after the test."""
    started = []

    def start(name: str) -> RosProcess:
        started.append(RosProcess(name))
        return started[-1]

    yield start
    errors = []
    for process in reversed(started):       # every one closed, whichever raised
        try:
            process.close()
        except Exception as exc:  # reported below, after the others are closed
            errors.append(exc)
    if errors:
        raise errors[0]


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
