"""Simulated depth/RGB camera against planes at known distances."""

import numpy as np
import pytest

from robot_bridge.model import Mesh
from robot_bridge.sim import PinholeModel, Scene

from fixtures.sim.models import box_body


def test_intrinsics_come_from_the_description(robot):
    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    assert cam.K == pytest.approx(np.array([[50.0, 0, 31.5], [0, 52.0, 23.5], [0, 0, 1]]))
    assert (cam.width, cam.height) == (64, 48)


def test_depth_of_a_fronto_parallel_plane(robot):
    # Camera at head x = 0.06 looking along world +x; plane face at x = 1.56 -> depth 1.5 everywhere.
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    scene = Scene(robot)
    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    pose = scene.sensor_pose(robot.sensors["cam"])
    assert pose[:3, 2] == pytest.approx([1, 0, 0])     # optical z = world x
    depth, rgb = cam.render(scene, pose, exclude=[(robot.name, "head")])
    assert depth.shape == (48, 64) and depth.dtype == np.float32
    assert np.max(np.abs(depth - 1.5)) < 1e-6
    # head-light shading: the central pixels look straight at the plane -> its full diffuse colour
    assert rgb[23, 31] == pytest.approx(np.round(np.array([0.2, 0.4, 0.8]) * 255), abs=2)


def test_depth_of_a_tilted_plane_per_pixel(robot):
    # Rotate the pan joint by 30 deg: the plane x = 1.56 is then tilted in the image.  For pixel (u, v) the
    # optical ray is r = ((u-cx)/fx, (v-cy)/fy, 1); depth = (1.56 - c_x) / (R r)_x with camera centre c.
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    scene = Scene(robot)
    scene.set_joint_positions({"pan": np.radians(30)})
    sensor = robot.sensors["cam"]
    cam = PinholeModel.from_sensor(sensor)
    pose = scene.sensor_pose(sensor)
    depth, _ = cam.render(scene, pose, exclude=[(robot.name, "head")], color=False)
    u, v = np.meshgrid(np.arange(64.0), np.arange(48.0))
    r = np.stack([(u - 31.5) / 50.0, (v - 23.5) / 52.0, np.ones_like(u)], axis=-1)
    expected = (1.56 - pose[0, 3]) / (r @ pose[:3, :3].T)[..., 0]
    assert np.max(np.abs(depth - expected)) < 1e-6
    assert np.ptp(depth) > 0.3      # really tilted


def test_nothing_in_view_is_nan_and_background(robot):
    scene = Scene(robot, environment=False)
    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    depth, rgb = cam.render(scene, scene.sensor_pose(robot.sensors["cam"]), exclude=[(robot.name, "head")])
    assert np.all(np.isnan(depth)) and not rgb.any()


def test_mesh_geometry_is_rendered(robot):
    import trimesh

    box = trimesh.creation.box(extents=[0.2, 4.0, 4.0])
    body = box_body("wall", [0.1, 2, 2], [1.66, 0, 0])
    geom = body.links["wall"].collisions[0]
    geom.shape = Mesh(uri="inline", vertices=box.vertices, triangles=box.faces)
    robot.environment["wall"] = body
    scene = Scene(robot)
    assert scene.triangle_count() == 12
    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    depth, _ = cam.render(scene, scene.sensor_pose(robot.sensors["cam"]), exclude=[(robot.name, "head")])
    assert np.nanmax(np.abs(depth - 1.5)) < 1e-6 and not np.isnan(depth).any()


def test_missing_intrinsics_are_reported(robot):
    del robot.sensors["cam"].params["fx"]
    with pytest.raises(ValueError, match="fx"):
        PinholeModel.from_sensor(robot.sensors["cam"])


def test_resized_camera_keeps_the_field_of_view_about_pixel_centres(robot):
    cam = PinholeModel.from_sensor(robot.sensors["cam"])          # 64x48, fx 50, fy 52, cx 31.5, cy 23.5
    half = cam.resized(32, 24)
    assert (half.width, half.height) == (32, 24)
    # pixel (u', v') of the half-size image covers original pixels 2u'..2u'+1: its centre is the original
    # continuous coordinate (2u' + 0.5, 2v' + 0.5)
    u, v = np.meshgrid(np.arange(32.0), np.arange(24.0))
    d = np.stack([(2 * u + 0.5 - 31.5) / 50.0, (2 * v + 0.5 - 23.5) / 52.0, np.ones_like(u)], axis=-1)
    expected = (d / np.linalg.norm(d, axis=-1, keepdims=True)).reshape(-1, 3)
    assert np.max(np.abs(half.rays() - expected)) < 1e-12
    assert (half.fx, half.fy, half.cx, half.cy) == pytest.approx((25.0, 26.0, 15.5, 11.5))
    assert cam.rays().shape == (64 * 48, 3)                         # the original is untouched
    with pytest.raises(ValueError, match="positive"):
        cam.resized(0, 24)


def test_an_unchanged_view_is_not_cast_again_but_noise_is_drawn_anew(robot, monkeypatch):
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    scene = Scene(robot)
    sensor = robot.sensors["cam"]
    cam = PinholeModel.from_sensor(sensor)
    casts = []
    original = scene.cast
    monkeypatch.setattr(scene, "cast", lambda *a, **k: casts.append(1) or original(*a, **k))
    exclude = [(robot.name, "head")]
    depth, rgb = cam.render(scene, scene.sensor_pose(sensor), exclude)
    depth[:] = 0.0                                    # the caller's copy: the cached view is untouched
    again, rgb_again = cam.render(scene, scene.snapshot().sensor_pose(sensor), exclude)
    assert len(casts) == 1
    assert np.max(np.abs(again - 1.5)) < 1e-6 and np.array_equal(rgb, rgb_again)
    scene.set_joint_positions({"pan": np.radians(30)})          # the camera turned: cast again
    turned, _ = cam.render(scene, scene.sensor_pose(sensor), exclude)
    assert len(casts) == 2 and np.nanmax(turned) > 1.6
    noisy = PinholeModel.from_sensor(sensor, {"noise_std": 0.01})
    rng = np.random.default_rng(0)
    a, _ = noisy.render(scene, scene.sensor_pose(sensor), exclude, rng=rng)
    b, _ = noisy.render(scene, scene.sensor_pose(sensor), exclude, rng=rng)
    assert len(casts) == 3 and not np.array_equal(a, b)
    assert np.nanstd(a - turned) == pytest.approx(0.01, rel=0.1)
