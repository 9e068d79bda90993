"""Issue 44: the view draws the occupancy map of a /planning_scene (world.octomap) as its occupied cells:
the message made by the map, decoded by OctoMap, drawn as boxes; truth: the cells of the points put in."""

from __future__ import annotations

import array

import numpy as np
import pytest

pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")

from robot_bridge.view import planning_scene  # noqa: E402
from robot_bridge.view.planning_scene import (OCTOMAP_ID, OCTOMAP_RGBA, REMOVE, ObjectUpdate,  # noqa: E402
                                              PlanningScene)
from robot_bridge.world.occupancy import OccupancyMap  # noqa: E402

RES = 0.02


def points() -> np.ndarray:
    """A 10 x 6 cell wall at x = 1 m and a bar of 5 cells apart from it, one point per cell."""
    ys, zs = np.meshgrid(np.arange(10) * RES + 0.005, np.arange(6) * RES + 0.005)
    wall = np.stack([np.full(ys.size, 1.005), ys.ravel(), zs.ravel()], axis=1)
    bar = np.stack([np.arange(5) * RES + 0.505, np.full(5, -0.295), np.full(5, 0.305)], axis=1)
    return np.concatenate([wall, bar])


def message_data(pts: np.ndarray) -> array.array:
    occupancy = OccupancyMap()
    occupancy.insert_points(pts, np.eye(4))
    return array.array("b", occupancy.to_message_fields()["data"].tobytes())     # octomap_msgs' int8[]


def boxes(body) -> tuple[np.ndarray, np.ndarray]:
    v = np.concatenate([p.vertices for p in body.parts]).reshape(-1, 8, 3)      # 8 corners a box
    return v.min(axis=1), v.max(axis=1)


def covered_by(centres: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many boxes hold each centre."""
    return ((centres[:, None] > lo[None]) & (centres[:, None] < hi[None])).all(axis=2).sum(axis=1)


def test_the_occupied_cells_are_drawn_as_boxes_covering_exactly_them():
    pts = points()
    centres = (np.floor(pts / RES) + 0.5) * RES
    ps = PlanningScene("world")
    origin = np.eye(4)
    origin[:3, 3] = (0.1, 0.0, 0.0)
    assert ps.apply_octomap("OcTree", RES, message_data(pts), "map", origin) == {OCTOMAP_ID}
    body = ps.get(OCTOMAP_ID)
    assert body.frame == "map" and np.allclose(body.pose, origin) and body.cell == pytest.approx(RES)
    assert ps.color(OCTOMAP_ID) == OCTOMAP_RGBA
    lo, hi = boxes(body)
    # every cell in exactly one box, and the boxes hold nothing else (their volume is the cells')
    assert (covered_by(centres, lo, hi) == 1).all()
    assert np.prod(hi - lo, axis=1).sum() == pytest.approx(len(centres) * RES ** 3, rel=1e-4)
    assert len(lo) < len(centres) / 4                      # merged: the wall is one box, the bar one
    serial = body.shape_serial

    # removing every collision object leaves the map; a diff without a map changes nothing
    assert ps.apply_object(ObjectUpdate("", REMOVE, "world", np.eye(4))) == set()
    assert ps.apply_octomap("", 0.0, array.array("b"), "", np.eye(4)) == set()
    assert ps.get(OCTOMAP_ID).shape_serial == serial
    # the next map replaces it; an empty one removes it
    assert ps.apply_octomap("OcTree", RES, message_data(pts[:60]), "map", origin) == {OCTOMAP_ID}
    lo, hi = boxes(ps.get(OCTOMAP_ID))
    assert (covered_by(centres[:60], lo, hi) == 1).all() and not covered_by(centres[60:], lo, hi).any()
    assert ps.apply_octomap("OcTree", RES, array.array("b"), "map", origin) == {OCTOMAP_ID}
    assert ps.get(OCTOMAP_ID) is None


def test_the_drawn_boxes_are_bounded_by_coarser_cells_never_less_covered(monkeypatch):
    rng = np.random.default_rng(3)
    pts = (rng.integers(0, 40, size=(300, 3)) + 0.5) * RES                 # scattered cells: many boxes
    centres = (np.floor(pts / RES) + 0.5) * RES
    monkeypatch.setattr(planning_scene, "MAX_OCTOMAP_BOXES", 20)
    ps = PlanningScene("world")
    ps.apply_octomap("OcTree", RES, message_data(pts), "world", np.eye(4))
    body = ps.get(OCTOMAP_ID)
    lo, hi = boxes(body)
    assert len(lo) <= 20 and body.cell > RES and sum(len(p.faces) for p in body.parts) == 12 * len(lo)
    assert (covered_by(centres, lo, hi) >= 1).all()


def test_a_map_that_does_not_decode_is_a_note_and_changes_nothing():
    ps = PlanningScene("world")
    assert ps.apply_octomap("OcTree", RES, array.array("b", [1, 2, 3]), "world", np.eye(4)) == set()
    assert ps.apply_octomap("ColorOcTree", RES, message_data(points()), "world", np.eye(4)) == set()
    assert ps.apply_octomap("OcTree", RES, message_data(points()), "world", np.full((4, 4), np.nan)) == set()
    assert ps.apply_octomap("OcTree", RES, message_data(points()), "world", np.eye(4), binary=False) == set()
    assert ps.get(OCTOMAP_ID) is None and len(ps.notes) == 4
    assert ps.apply_object(ObjectUpdate(OCTOMAP_ID, REMOVE, "world", np.eye(4))) == set()
