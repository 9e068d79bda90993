"""The planning scene as the view keeps it (rclpy-free): MoveIt's collision object operations, attached
bodies following their link, ObjectColor.  Truth: the shapes' extents from their dimensions, poses composed
by hand."""

from __future__ import annotations

import numpy as np

from robot_bridge.view.planning_scene import (ADD, APPEND, BOX, CYLINDER, DEFAULT_RGBA, MOVE, REMOVE, SPHERE,
                                              ObjectUpdate, PlanningScene)


def at(x, y, z) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def turned(deg: float) -> np.ndarray:
    a = np.radians(deg)
    m = np.eye(4)
    m[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return m


def extent(body) -> np.ndarray:
    v = np.concatenate([p.vertices for p in body.parts])
    return np.stack([v.min(axis=0), v.max(axis=0)])


def test_add_move_remove_with_primitives_and_meshes():
    ps = PlanningScene("world")
    box = ObjectUpdate("table", ADD, "world", at(1, 0, 0), primitives=[(BOX, [0.4, 0.2, 0.1], at(0, 0, 0.5))])
    assert ps.apply_object(box) == {"table"}
    body = ps.get("table")
    assert body.frame == "world" and np.allclose(body.pose, at(1, 0, 0))
    assert np.allclose(extent(body), [[-0.2, -0.1, 0.45], [0.2, 0.1, 0.55]], atol=1e-6)   # object frame
    serial = body.shape_serial

    tri = (np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0]]), np.array([[0, 1, 2]]), at(0, 0, 1))
    assert ps.apply_object(ObjectUpdate("table", APPEND, "world", at(1, 0, 0), meshes=[tri])) == {"table"}
    assert len(body.parts) == 2 and body.shape_serial > serial
    assert np.allclose(extent(body)[1], [1.0, 2.0, 1.0])

    assert ps.apply_object(ObjectUpdate("table", MOVE, "world", at(2, 3, 0))) == {"table"}
    assert np.allclose(body.pose, at(2, 3, 0)) and len(body.parts) == 2

    # ADD again replaces the shapes: a sphere and a cylinder ([height, radius])
    shapes = [(SPHERE, [0.1], np.eye(4)), (CYLINDER, [0.6, 0.05], at(1, 0, 0))]
    ps.apply_object(ObjectUpdate("table", ADD, "world", np.eye(4), primitives=shapes))
    assert np.allclose(extent(ps.get("table")), [[-0.1, -0.1, -0.3], [1.05, 0.1, 0.3]], atol=1e-6)

    ps.apply_object(ObjectUpdate("chair", ADD, "world", np.eye(4), primitives=[(BOX, [1, 1, 1], np.eye(4))]))
    assert ps.apply_object(ObjectUpdate("table", REMOVE, "world", np.eye(4))) == {"table"}
    assert set(ps.bodies) == {"chair"}
    assert ps.apply_object(ObjectUpdate("", REMOVE, "world", np.eye(4))) == {"chair"}   # empty id: all
    assert ps.bodies == {}


def test_colours_by_id_before_or_after_the_body():
    ps = PlanningScene()
    assert ps.apply_colors({"ball_0": (0.9, 0.8, 0.1, 1.0)}) == set()          # not there yet: kept
    ps.apply_object(ObjectUpdate("ball_0", ADD, "world", np.eye(4), primitives=[(SPHERE, [0.05], np.eye(4))]))
    assert ps.color("ball_0") == (0.9, 0.8, 0.1, 1.0)
    ps.apply_object(ObjectUpdate("can_0", ADD, "world", np.eye(4), primitives=[(SPHERE, [0.05], np.eye(4))]))
    assert ps.color("can_0") == DEFAULT_RGBA
    assert ps.apply_colors({"can_0": (1, 0, 0, 1)}) == {"can_0"}
    assert ps.apply_colors({"can_0": (1, 0, 0, 1)}) == set()                     # unchanged


def test_an_attached_world_body_follows_its_link_and_stays_where_it_is_put_down():
    ps = PlanningScene("world")
    ps.apply_object(ObjectUpdate("block_0", ADD, "world", at(0.5, 0, 0.2),
                                 primitives=[(BOX, [0.08, 0.08, 0.08], np.eye(4))]))
    link = {"hand": at(0.5, 0, 0.3) @ turned(90)}
    poses = lambda fixed, frames: {f: link[f] if f in link else np.eye(4) for f in frames}   # noqa: E731
    # the planner's attach: the id only, no shapes
    assert ps.apply_attached("hand", ObjectUpdate("block_0", ADD, "hand", np.eye(4)), poses) == {"block_0"}
    body = ps.get("block_0")
    assert body.attached_to == "hand" and body.frame == "hand"
    assert np.allclose(link["hand"] @ body.pose, at(0.5, 0, 0.2))          # where it was when attached
    # the hand moves: the body's world pose is the link's times the same offset
    link["hand"] = at(0.0, 0.4, 0.6) @ turned(180)
    assert np.allclose((link["hand"] @ body.pose)[:3, 3], [0.0, 0.4, 0.5])
    # a MOVE in the world does not move a carried body: its link does
    assert ps.apply_object(ObjectUpdate("block_0", MOVE, "world", at(9, 9, 9))) == set()
    assert body.frame == "hand"
    # a world REMOVE of every body leaves the carried one
    ps.apply_object(ObjectUpdate("", REMOVE, "world", np.eye(4)))
    assert "block_0" in ps.bodies
    # detached: in the world where the hand holds it now
    assert ps.apply_attached("hand", ObjectUpdate("block_0", REMOVE, "hand", np.eye(4)), poses) == {"block_0"}
    assert body.frame == "world" and not body.attached_to
    assert np.allclose(body.pose[:3, 3], [0.0, 0.4, 0.5])


def test_an_attached_object_with_shapes_is_created_on_the_link():
    ps = PlanningScene("world")
    poses = lambda fixed, frames: {f: at(0, 0, 1) for f in frames}                           # noqa: E731
    u = ObjectUpdate("tool", ADD, "hand", at(0, 0, 0.1), primitives=[(BOX, [0.1, 0.1, 0.1], np.eye(4))])
    assert ps.apply_attached("/hand", u, poses) == {"tool"}
    body = ps.get("tool")
    assert body.attached_to == "hand" and np.allclose(body.pose, at(0, 0, 0.1))


def test_bad_input_is_a_note_and_changes_nothing():
    ps = PlanningScene()
    nan = np.full((4, 4), np.nan)
    assert ps.apply_object(ObjectUpdate("a", ADD, "world", nan)) == set()
    cone_like = [(9, [1], np.eye(4))]
    assert ps.apply_object(ObjectUpdate("b", ADD, "world", np.eye(4), primitives=cone_like)) == set()
    assert ps.apply_object(ObjectUpdate("c", MOVE, "world", np.eye(4))) == set()
    bad_mesh = (np.zeros((3, 3)), np.array([[0, 1, 7]]), np.eye(4))
    assert ps.apply_object(ObjectUpdate("d", ADD, "world", np.eye(4), meshes=[bad_mesh])) == set()
    assert ps.apply_attached("hand", ObjectUpdate("e", ADD, "hand", np.eye(4)), lambda f, fr: {}) == set()
    assert ps.apply_colors({"f": (1.0, float("nan"), 0.0, 1.0)}) == set()
    assert ps.bodies == {} and len(ps.notes) == 6
    assert "'a'" in ps.notes[0] and "type 9" in ps.notes[1] and "out of its 3 vertices" in ps.notes[3]
