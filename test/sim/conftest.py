"""Fixtures for the sensor simulation tests."""

import pytest

from fixtures.sim.models import pan_robot


@pytest.fixture
def robot():
    """A fresh pan-head robot (laser, camera, IMU) per test."""
    return pan_robot()
