"""The camera's z-buffer (numba) renders what ray casting renders; without numba the camera casts rays."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.model import Cylinder, Geometry, Link, Material, Mesh, Robot, Sphere
from robot_bridge.model.transform import make, rotation_axis_angle
from robot_bridge.sim import PinholeModel, Scene, raster

from fixtures.sim.models import box_body

needs_numba = pytest.mark.skipif(not raster.AVAILABLE, reason="numba not installed (robot_bridge[raycast])")


def _primitive_body(name, shape, xyz, rgb, rotation=np.eye(3)) -> Robot:
    link = Link(name, collisions=[Geometry(shape, material=Material(diffuse=rgb))], static=True)
    return Robot(name, links={name: link}, placement=make(rotation, xyz), is_robot=False)


def _cluttered(robot) -> Robot:
    """Boxes (a floor reaching behind the camera plane, a wall), an environment mesh, a sphere and a
    cylinder in front of them, and a mesh on the robot's base link (moved by the scene's robot poses)."""
    import trimesh

    robot.environment["floor"] = box_body("floor", [5, 5, 0.05], [0, 0, 0.1], rgb=(0.5, 0.5, 0.5))
    robot.environment["wall"] = box_body("wall", [0.1, 1.0, 0.3], [2.6, 0.3, 0.6], rgb=(0.2, 0.4, 0.8))
    ball = trimesh.creation.icosphere(subdivisions=3, radius=0.35)
    body = box_body("blob", [0.1, 0.1, 0.1], [1.6, -0.35, 0.55], rgb=(0.9, 0.1, 0.1))
    body.links["blob"].collisions[0].shape = Mesh(uri="inline", vertices=ball.vertices, triangles=ball.faces)
    robot.environment["blob"] = body
    robot.environment["ball"] = _primitive_body("ball", Sphere(0.15), [1.2, -0.2, 0.45], (0.1, 0.9, 0.1))
    robot.environment["can"] = _primitive_body("can", Cylinder(0.1, 0.5), [1.3, 0.35, 0.5], (0.9, 0.9, 0.1),
                                               rotation_axis_angle([1, 0, 0], 0.4))
    part = trimesh.creation.box(extents=[0.2, 0.3, 0.25])
    robot.links["base"].collisions.append(Geometry(Mesh(uri="inline", vertices=part.vertices,
                                                        triangles=part.faces),
                                                   origin=make(rotation_axis_angle([0, 0, 1], 0.5),
                                                               [1.0, 0.25, 0.6]),
                                                   material=Material(diffuse=(0.3, 0.8, 0.8))))
    return robot


def _both_paths(scene, cam, pose, exclude, color=True):
    scene.raster = True
    rastered = cam._render(scene, pose, exclude, color)
    scene.raster = False
    cast = cam._render(scene, pose, exclude, color)
    return rastered, cast


@needs_numba
@pytest.mark.parametrize("pan", [0.0, 0.3, -0.45])
@pytest.mark.parametrize("ranges", [(0.0, 20.0), (1.25, 20.0), (0.0, 1.4)])
def test_zbuffer_renders_what_ray_casting_renders(robot, pan, ranges):
    robot = _cluttered(robot)
    scene = Scene(robot)
    scene.set_joint_positions({"pan": pan})
    sensor = robot.sensors["cam"]
    cam = PinholeModel.from_sensor(sensor).resized(160, 120)
    cam.range_min, cam.range_max = ranges
    pose = scene.sensor_pose(sensor)
    (depth_z, rgb_z), (depth_r, rgb_r) = _both_paths(scene, cam, pose, [(robot.name, "head")])
    seen = ~np.isnan(depth_r)
    assert 0.2 < seen.mean() < 1.0                 # really a mix of hits and misses
    assert np.array_equal(np.isnan(depth_z), ~seen)
    assert np.max(np.abs(depth_z[seen] - depth_r[seen])) < 1e-6
    assert np.array_equal(rgb_z, rgb_r)
    assert len(np.unique(rgb_r.reshape(-1, 3), axis=0)) >= 6     # floor, wall, blob, ball, can, link mesh...


@needs_numba
def test_zbuffer_depth_of_a_plane_crossing_behind_the_camera(robot):
    # a floor 0.5 m below the camera reaching far behind it: depth of pixel row v is 0.5 fy / (v - cy)
    robot.environment["floor"] = box_body("floor", [50, 50, 0.05], [0, 0, -0.05])
    scene = Scene(robot, )
    sensor = robot.sensors["cam"]
    cam = PinholeModel.from_sensor(sensor)
    cam.range_max = 1000.0
    scene.raster = True
    depth, _ = cam.render(scene, scene.sensor_pose(sensor), exclude=[(robot.name, "head")], color=False)
    below = np.arange(48) > 23.5
    rows = 0.5 * 52.0 / (np.arange(48.0) - 23.5)
    near = below & (rows < 40)            # beyond, the floor's far edge (50 m) and float32 matter
    assert np.max(np.abs(depth[near] - rows[near, None])) < 1e-5
    assert np.isnan(depth[~below]).all()


def test_without_numba_the_camera_casts_rays(robot, monkeypatch):
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    scene = Scene(robot)
    scene.raster = False
    calls = []
    monkeypatch.setattr(raster, "nearest_triangles", lambda *a, **k: calls.append(a))
    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    depth, _ = cam.render(scene, scene.sensor_pose(robot.sensors["cam"]), exclude=[(robot.name, "head")])
    assert np.max(np.abs(depth - 1.5)) < 1e-6 and not calls


def test_a_missing_numba_turns_the_zbuffer_off():
    code = ("import sys; sys.modules['numba'] = None\n"
            "from robot_bridge.sim import Scene, raster\n"
            "from robot_bridge.model import Robot, Link\n"
            "print(raster.AVAILABLE, Scene(Robot('r', links={'a': Link('a')})).raster)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
