"""ThreadTimers (a node's hot periodic callbacks on one thread) and ContainedNode.create_thread_timer:
callbacks run without an executor, on the period's grid, a raising callback is contained and its timer
goes on, cancel/stop end the calls, a shut-down context ends the thread quietly."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy

from robot_bridge.ros.guard import INJECT_ENV, ContainedNode, InjectedFault
from robot_bridge.ros.thread_timers import ThreadTimers, first_deadline, next_deadline
from fixtures.waiting import wait_until


@pytest.fixture
def context():
    context = rclpy.Context()
    context.init()
    yield context
    context.try_shutdown()


def test_deadlines_are_on_the_grid_of_the_period_and_missed_ticks_are_skipped():
    ms = 1_000_000
    assert first_deadline(123 * ms + 5, 10 * ms) == 130 * ms
    assert first_deadline(120 * ms, 10 * ms) == 130 * ms           # strictly after now
    assert first_deadline(123 * ms, 20 * ms) == 140 * ms           # a 20 ms point is a 10 ms point too
    assert next_deadline(130 * ms, 10 * ms, 131 * ms) == 140 * ms
    assert next_deadline(130 * ms, 10 * ms, 175 * ms) == 180 * ms  # 140..170 missed: skipped


def test_callbacks_run_without_an_executor(context):
    calls = {"fast": 0, "slow": 0}
    errors = []
    timers = ThreadTimers(context, "t", lambda timer, exc: errors.append(exc))
    try:
        timers.create(0.01, lambda: calls.update(fast=calls["fast"] + 1))
        timers.create(0.02, lambda: calls.update(slow=calls["slow"] + 1))
        wait_until(lambda: calls["slow"] >= 5 and calls["fast"] >= 5, 30.0, "5 calls of each timer")
    finally:
        timers.stop()
    assert errors == []


def test_a_raising_callback_is_reported_and_its_timer_goes_on(context):
    calls, errors = [], []

    def tick():
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("second tick fails")
    timers = ThreadTimers(context, "t", lambda timer, exc: errors.append((timer.callback, exc)))
    try:
        timers.create(0.005, tick)
        wait_until(lambda: len(calls) >= 5, 30.0, "5 calls")
    finally:
        timers.stop()
    assert len(errors) == 1 and errors[0][0] is tick and isinstance(errors[0][1], ValueError)


def test_cancel_and_stop_end_the_calls(context):
    a, b = [], []
    timers = ThreadTimers(context, "t", lambda timer, exc: None)
    timer_a = timers.create(0.005, lambda: a.append(1))
    timers.create(0.005, lambda: b.append(1))
    wait_until(lambda: len(a) >= 2, 30.0, "2 ticks of a")
    timer_a.cancel()
    assert timer_a.is_canceled()
    count = len(a)
    wait_until(lambda: len(b) >= len(a) + 3, 30.0, "b ticking on")          # b goes on ...
    assert len(a) <= count + 1                   # ... a ran at most the tick already under way
    timers.stop()
    done = len(b)
    time.sleep(0.05)
    assert len(b) == done and not timers._thread.is_alive()


def test_a_shut_down_context_ends_the_thread_without_a_report(context):
    errors, calls = [], []
    started = threading.Event()

    def tick():
        calls.append(1)
        started.set()
    timers = ThreadTimers(context, "t", lambda timer, exc: errors.append(exc))
    timers.create(0.005, tick)
    assert started.wait(30)
    context.try_shutdown()
    timers._thread.join(30)
    assert not timers._thread.is_alive() and errors == []


class Ticking(ContainedNode):
    def __init__(self, **kwargs):
        super().__init__("ticking", **kwargs)
        self.ticks, self.faults = 0, []
        self.timer = self.create_thread_timer(0.005, self._tick)

    def _tick(self):
        self.ticks += 1

    def on_callback_error(self, where, exc):
        self.faults.append((where, type(exc).__name__))


def test_a_contained_nodes_thread_timer_honours_the_fault_hook_and_stops_with_the_node(monkeypatch, context):
    monkeypatch.setenv(INJECT_ENV, "ticking")
    node = Ticking(context=context)                  # never spun by an executor
    try:
        wait_until(lambda: node.faults, 30.0, "a fault reported")
        assert node.faults == [("timer tick", InjectedFault.__name__)] and node.callback_errors == 1
        ticks = node.ticks
        wait_until(lambda: node.ticks > ticks + 2, 30.0, "the timer going on")        # contained
        assert node.timer.timer_period_ns == 5_000_000
    finally:
        node.destroy_node()
    ticks = node.ticks
    time.sleep(0.05)
    assert node.ticks == ticks


def test_under_ros_time_a_thread_timer_is_an_executor_timer(context):
    sim_time = rclpy.parameter.Parameter("use_sim_time", value=True)
    node = Ticking(context=context, parameter_overrides=[sim_time])
    try:
        assert isinstance(node.timer, rclpy.timer.Timer) and node._thread_timers is None
    finally:
        node.destroy_node()


class Stuck(ContainedNode):
    """A thread timer callback that blocks until ``release`` (a tick stuck in a publish, say)."""

    def __init__(self, **kwargs):
        super().__init__("stuck", **kwargs)
        from std_msgs.msg import Empty

        self.pub = self.create_publisher(Empty, "~/out", 10)
        self.inside, self.release = threading.Event(), threading.Event()
        self.create_thread_timer(0.005, self._tick)

    def _tick(self):
        self.inside.set()
        self.release.wait(60)


def test_a_node_whose_thread_timer_callback_does_not_end_is_not_destroyed_under_it(monkeypatch, context):
    """stop() used to return after 5 s whatever the callback did, and destroy_node then freed the publishers
    the callback may be publishing on through their raw rcl handles (template_publishers): a heap corruption.
    Now it raises and the node keeps its entities until the callback has ended."""
    from robot_bridge.ros import thread_timers

    monkeypatch.setattr(thread_timers, "STOP_TIMEOUT", 0.5, raising=False)
    node = Stuck(context=context)
    try:
        assert node.inside.wait(30)
        with pytest.raises(getattr(thread_timers, "TimersStillRunning", RuntimeError)):
            node.destroy_node()
        assert node.pub in node.publishers
        assert node.pub.get_subscription_count() == 0          # its rcl handle is still valid
    finally:
        node.release.set()
        node.destroy_node()
    assert node.pub not in node.publishers
