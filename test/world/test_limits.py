"""Issue 29, world input is bounded: one message of 10,000 detections makes a bounded number of bodies in
bounded time with one summary of what was left out; quaternions with huge or tiny components keep their
rotation (rclpy-free core; the node's side is test/nodes/test_world_limits.py)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.model.transform import from_quat_wxyz, from_quat_xyzw, from_rpy, make
from robot_bridge.world import Detection, WorldObjects, load_mapping
from robot_bridge.world.mapping import with_options

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data"
GENEROUS = 10.0          # s for one batch: today's code takes ~0.3 s for 10,000; the quadratic one ~30 s


@pytest.fixture(scope="module")
def mapping():
    return load_mapping(DATA / "objects.yaml")


def grid(n: int, spacing: float = 0.5, z: float = 0.0) -> list[np.ndarray]:
    """n poses on a square grid, each farther than match_distance (0.15 m) from the others."""
    side = int(np.ceil(np.sqrt(n)))
    return [make(translation=(spacing * (i % side), spacing * (i // side), z)) for i in range(n)]


def test_ten_thousand_detections_in_one_message_make_bounded_bodies_fast(mapping):
    world = WorldObjects(mapping)              # documented defaults: 200 detections, 200 bodies
    start = time.perf_counter()
    changes = world.update([Detection("can", p) for p in grid(10_000)], 0.0)
    assert time.perf_counter() - start < GENEROUS
    assert len(world) == 200 and len(changes.added) == 200
    assert changes.over_detections == 9_800 and changes.over_bodies == 0 and changes.limited == []
    # the first 200 of the message were taken, in order: can_0 .. can_199 at the first 200 grid points
    np.testing.assert_array_equal(world.get("can_199").pose, grid(10_000)[199])

    # another 10,000 elsewhere: none starts (max_bodies), one summary line with the count
    start = time.perf_counter()
    changes = world.update([Detection("ball", p) for p in grid(10_000, z=5.0)], 1.0)
    assert time.perf_counter() - start < GENEROUS
    assert len(world) == 200 and changes.added == [] and not changes
    assert changes.over_detections == 9_800 and changes.over_bodies == 200
    assert changes.limited == ["200 new bodies refused: already 200 bodies (max_bodies 200)"]
    assert changes.rejected == [] and changes.unknown == []


def test_per_message_and_total_limits_combine(mapping):
    world = WorldObjects(mapping, max_detections=50, max_bodies=120)
    counts = []
    for k in range(3):
        changes = world.update([Detection("can", p) for p in grid(1_000, z=float(k))], float(k))
        counts.append((len(changes.added), changes.over_detections, changes.over_bodies))
    assert counts == [(50, 950, 0), (50, 950, 0), (20, 950, 30)]
    assert len(world) == 120
    # bodies seen again are continued (not refused) at the limit; lowering it removes none
    changes = world.update([Detection("can", p) for p in grid(1_000, z=0.0)], 3.0)
    assert changes.over_bodies == 0 and changes.added == [] and world.get("can_49").last_seen == 3.0
    world.set_limits(10, 100)
    assert len(world) == 120
    with pytest.raises(ValueError):
        world.set_limits(0, 100)                       # 0 is no "unlimited"
    # max_instances still bounds one class, counted like the total
    world = WorldObjects(with_options(mapping, "ball", max_instances=3))
    changes = world.update([Detection("ball", p) for p in grid(10)], 0.0)
    assert len(changes.added) == 3 and changes.over_bodies == 7
    assert changes.limited == ["7 new bodies refused: ball: already 3 bodies (max_instances)"]


def test_large_configured_limits_stay_near_linear(mapping):
    """10,000 bodies continued by 10,000 detections: no scan of all bodies per detection."""
    world = WorldObjects(mapping, max_detections=10_000, max_bodies=10_000)
    poses = grid(10_000)
    start = time.perf_counter()
    assert len(world.update([Detection("can", p, id=f"t{i}") for i, p in enumerate(poses)], 0.0).added) \
        == 10_000
    moved = [make(translation=(0.01, 0, 0)) @ p for p in poses]          # 1 cm: beyond the 5 mm jitter
    half = [Detection("can", p, id=f"t{i}") for i, p in enumerate(moved[:5_000])] + \
           [Detection("can", p) for p in moved[5_000:]]                  # by id, then by nearest body
    changes = world.update(half, 1.0)
    assert time.perf_counter() - start < 2 * GENEROUS
    assert len(changes.moved) == 10_000 and changes.added == [] and len(world) == 10_000
    np.testing.assert_array_equal(world.get("can_7777").pose, moved[7777])


# -- quaternions ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e-310, 1.0, 3e153])
def test_quaternion_of_any_length_keeps_its_rotation(scale):
    expected = from_rpy((np.pi / 2, 0.0, 0.0))           # (x, w) = (1, 1)/sqrt(2): 90 degrees about x
    np.testing.assert_allclose(from_quat_xyzw([scale, 0.0, 0.0, scale]), expected, atol=1e-12)
    np.testing.assert_allclose(from_quat_wxyz([scale, scale, 0.0, 0.0]), expected, atol=1e-12)
    from robot_bridge.model.transform import unit_quat

    np.testing.assert_allclose(unit_quat([scale, 0.0, 0.0, scale]), [2 ** -0.5, 0, 0, 2 ** -0.5], atol=1e-15)


@pytest.mark.parametrize("q, reason", [([0.0, 0.0, 0.0, 0.0], "zero"), ([np.nan, 0, 0, 1], "non-finite"),
                                       ([np.inf, 0, 0, 1], "non-finite"), ([1.0, 0.0, 0.0], "4")])
def test_quaternion_that_is_no_rotation_is_refused(q, reason):
    with pytest.raises(ValueError, match=reason):
        from_quat_xyzw(q)


def test_quaternion_with_huge_components_in_a_body_file(tmp_path):
    (tmp_path / "box.kinbody.xml").write_text(
        '<KinBody name="box"><Body name="box"><Translation>1 2 3</Translation><quat>1e200 1e200 0 0</quat>'
        '<Geom type="box"><extents>0.1 0.2 0.3</extents></Geom></Body></KinBody>')
    placement = load(tmp_path / "box.kinbody.xml").placement          # the body's only link's pose
    np.testing.assert_allclose(placement, make(from_rpy((np.pi / 2, 0.0, 0.0)), (1, 2, 3)), atol=1e-12)
