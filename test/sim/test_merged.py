"""The environment's boxes and meshes as one Embree triangle set (Scene with the embree backend) against
the same scene cast one analytic shape at a time (numpy backend): same hits, distances, normals."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fixtures.sim.models import box_body, pan_robot
from robot_bridge.model import Geometry, Link, Mesh, Robot, Sphere
from robot_bridge.model.transform import make, rotation_axis_angle
from robot_bridge.sim import Scene
from robot_bridge.sim import raycast

pytest.importorskip("embreex")


def cluttered_robot():
    robot = pan_robot()
    for k, (half, xyz) in enumerate([([0.1, 2, 2], [2.5, 0, 0.5]), ([1, 0.1, 1], [0.5, 2.2, 0.4]),
                                     ([0.3, 0.3, 0.3], [1.2, -0.8, 0.6]), ([3, 3, 0.01], [0, 0, -0.02])]):
        robot.environment[f"box{k}"] = box_body(f"box{k}", half, xyz, rgb=(0.1 * k, 0.5, 0.9))
    ico = trimesh.creation.icosphere(subdivisions=2, radius=0.4)
    robot.environment["blob"] = Robot("blob", links={"blob": Link("blob", collisions=[Geometry(
        Mesh(uri="generated:blob", vertices=ico.vertices, triangles=ico.faces))])},
        placement=make(rotation_axis_angle([0, 0, 1], 0.3), [1.0, 0.9, 0.5]), is_robot=False)
    ball = Link("ball", collisions=[Geometry(Sphere(0.2))])
    robot.environment["ball"] = Robot("ball", links={"ball": ball},
                                      placement=make(translation=[1.5, -0.2, 0.9]), is_robot=False)
    return robot


def rays(n=4000, seed=5):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def test_merged_environment_equals_shape_by_shape_casting():
    robot = cluttered_robot()
    merged, reference = Scene(robot, backend="embree"), Scene(robot, backend="numpy")
    apex = np.array([0.1, 0.0, 0.5])
    d = rays()
    exclude = [("pan_bot", "head")]
    a = merged.cast(apex[None], d, exclude=exclude, apex=apex, normals=True, cosine=True)
    b = reference.cast(apex[None], d, exclude=exclude, apex=apex, normals=True, cosine=True)
    assert set(np.unique(a.shape)) >= {merged.shapes.index(s) for s in merged.shapes if s.body != "pan_bot"}
    same = a.shape == b.shape                    # rays grazing an edge may go either way in float32
    assert same.mean() > 0.995
    hit = same & (a.shape >= 0)
    assert np.allclose(a.distance[hit], b.distance[hit], atol=1e-9)
    assert np.allclose(a.normal[hit], b.normal[hit], atol=1e-9)
    assert np.allclose(a.cosine, np.abs(np.einsum("ij,ij->i", a.normal, d)), atol=1e-12)
    assert np.all(a.cosine[a.shape < 0] == 0) and np.all(np.isinf(a.distance[a.shape < 0]))
    # many origins (a laser's beams start at range_min) take the other path of the same query
    origins = apex + 0.05 * d
    c = merged.cast(origins, d, exclude=exclude, normals=False)
    e = reference.cast(origins, d, exclude=exclude, normals=False)
    same = c.shape == e.shape
    assert same.mean() > 0.995
    assert np.allclose(c.distance[same], e.distance[same], atol=1e-9)


def test_merged_set_follows_a_moved_body_and_snapshots_share_it():
    robot = cluttered_robot()
    scene = Scene(robot, backend="embree")
    d = np.array([[1.0, 0.0, 0.0]])
    origin = np.array([[0.0, 0.0, 0.5]])
    box0 = [i for i, s in enumerate(scene.shapes) if s.body == "box0"][0]
    head = [("pan_bot", "head")]
    first = scene.cast(origin, d, exclude=head)
    assert first.shape[0] == box0 and first.distance[0] == pytest.approx(2.4, abs=1e-12)
    frozen = scene.snapshot()
    robot.environment["box0"].placement = make(translation=[3.5, 0, 0.5])
    scene.set_joint_positions({}, body="box0")
    assert scene.cast(origin, d, exclude=head).distance[0] == pytest.approx(3.4, abs=1e-12)
    # the snapshot keeps the poses it was taken at
    assert frozen.cast(origin, d, exclude=head).distance[0] == pytest.approx(2.4, abs=1e-12)


def test_box_triangles_are_the_box():
    vertices, faces = raycast.box_triangles([1.0, 2.0, 3.0])
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    assert mesh.is_watertight and mesh.is_winding_consistent
    assert mesh.volume == pytest.approx(48.0)            # outward winding: positive volume


def test_robot_links_at_rest_join_the_set_for_camera_sized_batches():
    robot = cluttered_robot()
    merged, reference = Scene(robot, backend="embree"), Scene(robot, backend="numpy")
    apex = np.array([0.3, 0.0, 0.8])
    d = rays(n=20000, seed=9)
    base = merged.shapes.index(next(s for s in merged.shapes if s.link == "base"))
    expected = reference.cast(apex[None], d, apex=apex, normals=False)
    assert (expected.shape == base).sum() > 100              # the robot's base plate is in view
    first = merged.cast(apex[None], d, apex=apex, normals=False)      # robot just seen: cast link by link
    assert len(merged._merged._sets) == 1
    second = merged.cast(apex[None], d, apex=apex, normals=False)     # at rest: one set with its links
    assert len(merged._merged._sets) == 2
    for hits in (first, second):
        same = hits.shape == expected.shape
        assert same.mean() > 0.995
        assert np.allclose(hits.distance[same], expected.distance[same], atol=1e-9)
    merged.set_joint_positions({"pan": 0.5})                 # moving again: link by link, no new build
    merged.cast(apex[None], d, apex=apex, normals=False)
    assert len(merged._merged._sets) == 2


def test_mesh_bound_is_about_its_middle_and_culling_keeps_every_hit():
    # a link mesh 3 m away from its link origin (as link meshes that start at their joint)
    robot = pan_robot()
    ico = trimesh.creation.icosphere(subdivisions=2, radius=0.4)
    offset = Mesh(uri="generated:offset", vertices=ico.vertices + [3, 0, 0.5], triangles=ico.faces)
    robot.links["base"].collisions.append(Geometry(offset))
    for backend in ("embree", "numpy"):
        scene = Scene(robot, backend=backend)
        shape = next(s for s in scene.shapes if s.kind == "mesh")
        assert shape.bound_radius == pytest.approx(0.4, rel=0.01)
        assert shape.bound_centre == pytest.approx([3, 0, 0.5], abs=1e-9)
        apex = np.array([0.0, 0.0, 0.5])
        d = rays(n=20000, seed=2)
        culled = scene.cast(apex[None], d, apex=apex, exclude=[("pan_bot", "head")], normals=False)
        unculled = scene.cast(apex[None], d, exclude=[("pan_bot", "head")], normals=False)
        index = scene.shapes.index(shape)
        assert (unculled.shape == index).sum() > 20
        assert np.array_equal(culled.shape, unculled.shape)
        assert np.allclose(culled.distance, unculled.distance, atol=1e-12, equal_nan=True)
