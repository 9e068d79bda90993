"""ContainedNode: an exception in a subscription, service or timer callback is logged, counted and handed to
the node's safe state; the executor (and so the process) never sees it."""

from __future__ import annotations

import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import String
from std_srvs.srv import Trigger

from robot_bridge.ros.guard import INJECT_ENV, ContainedNode, InjectedFault


class Fragile(ContainedNode):
    def __init__(self, **kwargs):
        super().__init__("fragile", **kwargs)
        self.faults = []
        self.create_subscription(String, "in", self._on_message, 10)
        self.create_service(Trigger, "~/poke", self._on_poke)
        self.ticks = 0
        self.create_timer(0.01, self._tick)

    def _on_message(self, msg):
        raise ValueError(f"cannot handle {msg.data!r}")

    def _on_poke(self, request, response):
        response.message = "half done"
        raise RuntimeError("poke failed")

    def _tick(self):
        self.ticks += 1

    def on_callback_error(self, where, exc):
        self.faults.append((where, type(exc).__name__))


def _spin_until(executor, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        executor.spin_once(timeout_sec=0.05)        # raises if a callback's exception escaped


def test_callbacks_are_contained(monkeypatch):
    monkeypatch.setenv(INJECT_ENV, "fragile:tick")
    context = rclpy.Context()
    context.init()
    node = Fragile(context=context)
    probe = rclpy.create_node("probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(probe)
    try:
        pub = probe.create_publisher(String, "in", 10)
        client = probe.create_client(Trigger, "/fragile/poke")

        def message_failed():
            pub.publish(String(data="x"))
            return ("subscription in: on_message", "ValueError") in node.faults
        _spin_until(executor, message_failed)
        _spin_until(executor, lambda: ("timer tick", InjectedFault.__name__) in node.faults)   # the hook
        ticks = node.ticks
        _spin_until(executor, lambda: node.ticks > ticks + 2)            # the timer goes on
        future = client.call_async(Trigger.Request())
        _spin_until(executor, future.done)
        assert future.result().message == "half done" and not future.result().success
        assert ("service ~/poke: on_poke", "RuntimeError") in node.faults
        assert node.callback_errors == len(node.faults)
        assert node.faults.count(("timer tick", InjectedFault.__name__)) == 1               # once
    finally:
        executor.shutdown()
        node.destroy_node()
        probe.destroy_node()
        context.try_shutdown()
