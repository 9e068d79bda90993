"""The rclpy-free planning scene rules: shapes of body files in shape_msgs' terms, bounded meshes, and the
operations that bring a subscriber to the current world."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from robot_bridge.formats import load
from robot_bridge.model.transform import make
from robot_bridge.world.planning_scene import ADD, MOVE, REMOVE, SceneSync, body_color, body_shapes

from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data" / "objects"


def test_primitives_in_shape_msgs_order_posed_in_the_body_frame():
    can = body_shapes(load(DATA / "can.kinbody.xml"))
    [cyl] = can.primitives
    assert cyl.kind == "cylinder" and cyl.dimensions == pytest.approx((0.12, 0.035))    # height, radius
    np.testing.assert_allclose(cyl.pose[:3, 3], [0.0, 0.0, 0.06], atol=1e-12)
    assert abs(cyl.pose[:3, 2] @ [0.0, 0.0, 1.0]) == pytest.approx(1.0)                  # axis: body z
    assert not can.meshes and not can.notes
    assert body_color(load(DATA / "can.kinbody.xml")) == pytest.approx((0.8, 0.1, 0.1, 1.0))


def _body_with_mesh(tmp_path, mesh_file: Path) -> Path:
    body = tmp_path / "thing.kinbody.xml"
    body.write_text(f'<KinBody name="thing"><Body name="b"><Geom type="trimesh">'
                    f'<data>{mesh_file.name}</data></Geom></Body></KinBody>')
    return body


def test_meshes_bounded_by_file_size_and_triangles(tmp_path):
    box = trimesh.creation.box(extents=(0.2, 0.1, 0.4))
    box.export(tmp_path / "box.stl")
    body = load(_body_with_mesh(tmp_path, tmp_path / "box.stl"))
    shapes = body_shapes(body)
    [mesh] = shapes.meshes
    assert len(mesh.triangles) == 12
    np.testing.assert_allclose(mesh.vertices.max(axis=0) - mesh.vertices.min(axis=0), [0.2, 0.1, 0.4])

    beyond = body_shapes(body, max_triangles=11)             # its bounding box instead, said
    assert not beyond.meshes
    [bbox] = beyond.primitives
    assert bbox.kind == "box" and bbox.dimensions == pytest.approx((0.2, 0.1, 0.4))
    assert "12 triangles beyond the 11" in beyond.notes[0]

    too_big = body_shapes(body, max_bytes=100)               # never read
    assert not too_big and "more than 100" in too_big.notes[0]


def test_sync_add_move_remove_and_the_current_set():
    sync = SceneSync()
    key_a, key_b = object(), object()
    here, there = np.eye(4), make(translation=(0.1, 0.0, 0.0))
    assert sync.changes([("a", key_a, here), ("b", key_a, here)]) == [(ADD, "a"), (ADD, "b")]
    assert sync.changes([("a", key_a, here), ("b", key_a, here)]) == []                  # nothing new
    assert sync.changes([("a", key_a, there), ("b", key_b, here)]) == [(MOVE, "a"), (ADD, "b")]
    np.testing.assert_array_equal(sync.pose("a"), there)
    assert sync.changes([("b", key_b, here)]) == [(REMOVE, "a")]
    assert sync.current() == ["b"] and sync.pose("a") is None
