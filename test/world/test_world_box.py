"""Issue 42: a detection that places a body outside the world box (one at x = 1e308, finite) is refused with
its reason, never stored; bodies inside are taken as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_bridge.world import Detection, WorldObjects, load_mapping

MAPPING = Path(__file__).resolve().parents[2] / "robot_bridge" / "data" / "objects.yaml"


def at(x, y=0.0, z=0.0) -> np.ndarray:
    pose = np.eye(4)
    pose[:3, 3] = (x, y, z)
    return pose


def test_detections_outside_the_world_box_are_refused_with_their_reason():
    world = WorldObjects(load_mapping(MAPPING), world_box=10.0)
    changes = world.update([Detection("block", at(1e308)), Detection("can", at(0.0, -10.5, 0.0)),
                            Detection("ball", at(9.99, -9.99, 10.0))], now=0.0)
    assert changes.added == ["ball_0"] and len(world) == 1
    assert len(changes.rejected) == 2
    assert changes.rejected[0].startswith("block: position (1e+308, 0, 0) outside world_box 10 m")
    assert "can: position (0, -10.5, 0) outside world_box 10 m" in changes.rejected[1]
    # a tracked body is not moved there either, nor put down there
    assert not world.update([Detection("ball", at(1e308, -9.99, 10.0))], now=1.0)
    assert np.allclose(world.get("ball_0").pose, at(9.99, -9.99, 10.0))
    assert world.hold("ball_0")
    assert world.release("ball_0", at(0.0, 0.0, -50.0), now=2.0).rejected == \
        ["ball_0: position (0, 0, -50) outside world_box 10 m"]
    assert np.allclose(world.get("ball_0").pose, at(9.99, -9.99, 10.0))


def test_the_world_box_is_set_and_checked():
    world = WorldObjects(load_mapping(MAPPING))
    assert world.world_box == 100.0                              # the default
    world.set_world_box(1000.0)
    assert world.update([Detection("block", at(500.0))], now=0.0).added == ["block_0"]
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="world_box"):
            world.set_world_box(bad)
    assert world.world_box == 1000.0
