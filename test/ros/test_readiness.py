"""`robot-bridge run`'s ready line (issue 43): a node is listed as ready only when it can serve, otherwise the
line says why; the wait is bounded.  Nodes here are stand-ins with the attributes the bridge's nodes have
(``readiness()``, ``load_error``); time is an injected clock, never a sleep."""

from __future__ import annotations

import threading

import pytest

from robot_bridge.ros.readiness import Readiness, of, ready_line, wait

PREFIX = "robot-bridge run: ready"


class Node:
    def __init__(self, *states, load_error=None):
        self.states, self.load_error, self.asked = list(states), load_error, 0

    def readiness(self):
        self.asked += 1
        return self.states[min(self.asked, len(self.states)) - 1] if self.states else None


class Clock:
    """Advances one second per look, so the bound is reached after a known number of looks."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


class NoWait(threading.Event):
    def wait(self, timeout=None):           # the poll's pause: nothing to wait for in a test
        return self.is_set()


def test_ready_once_every_node_serves():
    planner = Node(Readiness("loading the planning libraries"), Readiness("no robot_description yet"), None)
    states = wait([Node(), planner], 100.0, NoWait(), Clock())
    assert [s.ready for s in states] == [True, True] and planner.asked == 3
    line = ready_line(["/description_node", "/planner_node"], states, "sim mode, x.urdf", PREFIX)
    assert line == "robot-bridge run: ready: /description_node, /planner_node (sim mode, x.urdf)"


def test_the_bound_names_each_node_not_ready_and_why():
    planner = Node(Readiness("no robot_description yet"))
    states = wait([Node(), planner], 5.0, NoWait(), Clock())
    assert planner.asked >= 2                        # looked again until the bound, not once
    line = ready_line(["/description_node", "/planner_node"], states, "sim mode, x.urdf", PREFIX)
    assert line == ("robot-bridge run: ready: /description_node (sim mode, x.urdf); "
                    "/planner_node: not ready: no robot_description yet")


def test_settled_states_end_the_wait_and_load_errors_are_not_ready():
    controller = Node(Readiness("controller not ready: no CAN bus", settled=True))
    broken = Node(load_error="cannot load the robot description: SchemaError: x")
    clock = Clock()
    states = wait([controller, broken], 1000.0, NoWait(), clock)
    assert clock.now < 10 and not any(s.ready for s in states)
    assert of(broken) == Readiness("cannot load the robot description: SchemaError: x", True)
    assert "no node (" in ready_line(["/a", "/b"], states, "real mode, x", "ready")


def test_a_stop_request_ends_the_wait():
    stop = NoWait()
    stop.set()
    assert wait([Node(Readiness("loading"))], 1000.0, stop, Clock()) == [Readiness("loading")]


def test_the_master_model_says_why_it_cannot_serve():
    pytest.importorskip("roboplan", reason="the planning extra is not installed")
    from robot_bridge.planning.master import MasterModel

    urdf = """<robot name="stick"><link name="base"/><link name="l1"/><link name="tip"/>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
        <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
      <joint name="t" type="fixed"><parent link="l1"/><child link="tip"/><origin xyz="0.5 0 0"/></joint>
    </robot>"""
    master = MasterModel(acceleration_limits={"j1": 2.0}, seed=1)
    assert master.readiness() == "no robot_description yet"
    assert master.set_description("<robot name='x'><link name='a'/><link name='a'/></robot>") is not None
    reason = master.readiness()
    assert reason.startswith("robot description not used: ") and "'a'" in reason, reason
    assert master.set_description(urdf) is None and master.readiness() is None
