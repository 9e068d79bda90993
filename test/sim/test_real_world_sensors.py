"""Flash lidar and force/torque simulation on an OpenRAVE XML robot of our own
(test/fixtures/realworld/openrave/sensor_bot.robot.xml)."""

from pathlib import Path

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.sim import FlashLidarModel, Scene, WrenchSimulator
from robot_bridge.sim.imu import STANDARD_GRAVITY

from fixtures.sim.models import box_body

SENSOR_BOT = (Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "openrave"
              / "sensor_bot.robot.xml")


@pytest.fixture
def robot():
    return load(SENSOR_BOT)


def test_flash_lidar_sees_a_plane_at_a_known_distance(robot):
    # wall face at world x = 2.0: in the sensor frame (at x = 0.15, z along world x) the plane z = 1.85
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [2.1, 0, 0])
    scene = Scene(robot, backend="numpy")
    sensor = robot.sensors["flash"]
    model = FlashLidarModel.from_sensor(sensor)
    points = model.scan(scene, scene.sensor_pose(sensor), exclude=[(robot.name, "base")])
    assert points.shape == (24, 32, 3) and points.dtype == np.float32
    v, u = np.mgrid[0:24, 0:32].astype(float)
    expected = np.stack([1.85 * (u - 15.5) / 16.0, 1.85 * (v - 11.5) / 12.0, np.full(u.shape, 1.85)], -1)
    assert np.max(np.abs(points - expected)) < 1e-6


def test_flash_lidar_nan_where_nothing_is_hit(robot):
    # a wall only on the world's +y side: rows above the centre (sensor y = world y < 0) see nothing
    robot.environment["wall"] = box_body("wall", [0.1, 5, 20], [2.1, 5.0, 0])
    scene = Scene(robot, backend="numpy")
    sensor = robot.sensors["flash"]
    points = FlashLidarModel.from_sensor(sensor).scan(scene, scene.sensor_pose(sensor),
                                                      exclude=[(robot.name, "base")])
    assert np.isnan(points[:12]).all() and np.isfinite(points[12:]).all()
    np.testing.assert_allclose(points[12:, :, 2], 1.85, atol=1e-6)


def test_flash_lidar_beyond_range_is_nan(robot):
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [8.1, 0, 0])      # 7.85 m > maxrange 6
    scene = Scene(robot, backend="numpy")
    sensor = robot.sensors["flash"]
    points = FlashLidarModel.from_sensor(sensor).scan(scene, scene.sensor_pose(sensor),
                                                      exclude=[(robot.name, "base")])
    assert np.isnan(points).all()


def test_force_sensor_reads_the_weight_of_the_links_below(robot):
    scene = Scene(robot, backend="numpy")
    sim = WrenchSimulator(robot, robot.sensors["ft"])
    assert sorted(name for name, _ in sim.loads) == ["finger", "hand"]
    g = STANDARD_GRAVITY
    force, torque = sim.wrench(scene)
    # sensor frame = arm frame (no rotation); load 2.5 kg, centre 0.17 m ahead along x
    np.testing.assert_allclose(force, [0, 0, -2.5 * g], atol=1e-12)
    np.testing.assert_allclose(torque, [0, 2.5 * g * 0.17, 0], atol=1e-12)       # r x F, r = (0.17, 0, 0)
    # j2 = 90 deg about +y: the hand points down (x -> -z), its weight acts along its own axis
    scene.set_joint_positions({"j2": np.pi / 2})
    force, torque = sim.wrench(scene)
    np.testing.assert_allclose(force, [0, 0, -2.5 * g], atol=1e-12)
    np.testing.assert_allclose(torque, [0, 2.5 * g * 0.05, 0], atol=1e-12)       # only the 0.05 m lever
    # turning the arm (j1) turns the sensor frame: the force stays world-down, expressed in it
    scene.set_joint_positions({"j1": 0.7})
    force, torque = sim.wrench(scene)
    np.testing.assert_allclose(force, [0, 0, -2.5 * g], atol=1e-12)
    np.testing.assert_allclose(torque, [0, 2.5 * g * 0.17, 0], atol=1e-12)


def test_force_sensor_on_a_leaf_link_reads_zero(robot):
    robot.sensors["ft"].link = "finger"
    force, torque = WrenchSimulator(robot, robot.sensors["ft"]).wrench(Scene(robot, backend="numpy"))
    assert not force.any() and not torque.any()
