"""Fixtures shared by the node tests."""

from __future__ import annotations

import pytest

from fixtures.description_node import TF_PATHS


@pytest.fixture(params=TF_PATHS)
def harness_factory(request):
    """make(**parameters) -> a description_node Harness (fixtures/description_node.py) on each /tf transport;
    every one made is closed after the test.  The test module initialises rclpy."""
    from fixtures.description_node import Harness

    made = []

    def make(**params):
        h = Harness(request.param, **params)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


@pytest.fixture
def sensor_harness():
    """make(robot, **parameters) -> a sensor_bridge_node Harness; every one made is closed after the test."""
    from fixtures.sim.ros_harness import Harness

    made = []

    def make(robot, **parameters):
        made.append(Harness(robot, **parameters))
        return made[-1]

    yield make
    for h in made:
        h.close()


@pytest.fixture
def detector_node():
    """The test's node in its own context, spun by a thread (fixtures/world_bridge.py)."""
    from fixtures.world_bridge import detector

    yield from detector()


@pytest.fixture(scope="module")
def module_detector_node():
    """The node of a module's tests that share one bridge (a module-scoped fixture's node)."""
    from fixtures.world_bridge import detector

    yield from detector()
