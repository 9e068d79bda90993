"""The simulation on models read from files (OpenRAVE XML reader), not only hand-built ones."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.sim import LaserModel, PinholeModel, Scene

if importlib.util.find_spec("robot_bridge.formats.openrave_xml") is None:
    pytest.skip("the OpenRAVE XML reader (robot_bridge.formats.openrave_xml) is not available yet",
                allow_module_level=True)

from robot_bridge.formats import load  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data"


def test_fixture_env_laser_and_camera(fixtures):
    robot = load(fixtures / "sim" / "pan_laser.env.xml")
    scene = Scene(robot)
    laser = robot.sensors["laser"]
    model = LaserModel.from_sensor(laser)
    assert model.count == 241 and model.range_min == pytest.approx(0.05)
    exclude = [(robot.name, "head")]
    ranges = model.scan(scene, scene.sensor_pose(laser), exclude)
    assert np.max(np.abs(ranges - 1.9 / np.cos(model.angles))) < 1e-6      # wall face x = 2.0, laser x = 0.1
    scene.set_joint_positions({"pan": np.radians(20)})
    pose = scene.sensor_pose(laser)
    assert pose[:3, 3] == pytest.approx([0.1 * np.cos(np.radians(20)), 0.1 * np.sin(np.radians(20)), 0.5])
    ranges = model.scan(scene, pose, exclude)
    hit = np.isfinite(ranges)
    expected = (2.0 - pose[0, 3]) / np.cos(model.angles + np.radians(20))
    assert hit.sum() > 200 and np.max(np.abs(ranges[hit] - expected[hit])) < 1e-6

    cam = PinholeModel.from_sensor(robot.sensors["cam"])
    assert cam.K == pytest.approx(np.array([[50, 0, 31.5], [0, 52, 23.5], [0, 0, 1]]))
    scene.set_joint_positions({})
    depth, _ = cam.render(scene, scene.sensor_pose(robot.sensors["cam"]), exclude, color=False)
    assert np.max(np.abs(depth - (2.0 - 0.06))) < 1e-6


def test_default_world_sensors_simulate():
    robot = load(DATA / "default.env.xml")
    scene = Scene(robot)
    assert set(robot.environment) <= {b for b in scene.bodies}
    laser = robot.sensors["base_laser"]
    ranges = LaserModel.from_sensor(laser).scan(scene, scene.sensor_pose(laser), [(robot.name, laser.link)])
    # The crate (box, half extent 0.15, centre (0.55, -0.45, 0.15)) cuts the laser plane z = 0.2; its corner
    # (0.4, -0.3) is the closest point to the laser at (0.28, 0): 0.3231 m, sampled every 0.5 deg.
    nearest = float(np.min(ranges))
    assert np.hypot(0.12, 0.3) <= nearest < np.hypot(0.12, 0.3) + 0.005
    cam = robot.sensors["wrist_camera"]
    depth, rgb = PinholeModel.from_sensor(cam).render(scene, scene.sensor_pose(cam), [(robot.name, cam.link)])
    assert depth.shape == (240, 320) and rgb.shape == (240, 320, 3)
