"""Fixtures shared by the node tests."""

from __future__ import annotations

import pytest


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
