"""Simulated laser: analytic ranges against a box wall; the beam fan follows the joints."""

import numpy as np
import pytest

from robot_bridge.sim import LaserModel, Scene

from fixtures.sim.models import box_body


def wall_ranges(angles, distance):
    """Range to the infinite plane x = distance seen from the origin at beam angle a: d / cos(a)."""
    return distance / np.cos(angles)


def test_beam_count_and_angles_follow_openrave(robot):
    model = LaserModel.from_sensor(robot.sensors["laser"])
    assert model.count == 241                   # (120 deg / 0.5 deg) + 1
    assert model.angle_max == pytest.approx(np.radians(60))
    assert model.directions()[model.count // 2] == pytest.approx([1, 0, 0])   # angle 0 along +x


def test_ranges_to_a_wall_are_analytic(robot):
    # Wall face at x = 2.0 in the world; the laser is at x = 0.1, z = 0.5 (pan = 0).
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [2.1, 0, 0])
    scene = Scene(robot)
    sensor = robot.sensors["laser"]
    model = LaserModel.from_sensor(sensor)
    pose = scene.sensor_pose(sensor)
    assert pose[:3, 3] == pytest.approx([0.1, 0, 0.5])
    ranges = model.scan(scene, pose, exclude=[(robot.name, sensor.link)])
    assert ranges.dtype == np.float32
    assert np.max(np.abs(ranges - wall_ranges(model.angles, 1.9))) < 1e-6


def test_out_of_range_is_inf(robot):
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [20.0, 0, 0])
    scene = Scene(robot)
    sensor = robot.sensors["laser"]
    ranges = LaserModel.from_sensor(sensor).scan(scene, scene.sensor_pose(sensor))
    assert np.all(np.isposinf(ranges))           # REP-117: nothing within range_max -> +inf


def test_laser_frame_moves_with_the_pan_joint(robot):
    # A 1 m wide box face at y = 3 on the +y side: invisible at pan = 0 (fan is +-60 deg about +x; the
    # 60 deg beam reaches y = 3 at x = 1.83), in view at pan = 90 deg.
    robot.environment["wall"] = box_body("wall", [0.5, 0.1, 20], [0, 3.1, 0])
    scene = Scene(robot)
    sensor = robot.sensors["laser"]
    model = LaserModel.from_sensor(sensor)
    exclude = [(robot.name, "head")]
    assert np.all(np.isinf(model.scan(scene, scene.sensor_pose(sensor), exclude)))
    scene.set_joint_positions({"pan": np.pi / 2})
    pose = scene.sensor_pose(sensor)
    assert pose[:3, 3] == pytest.approx([0.0, 0.1, 0.5], abs=1e-12)   # laser moved onto +y
    ranges = model.scan(scene, pose, exclude)
    # beam a now points along (-sin a, cos a): it meets y = 3 at x = -2.9 tan a, on the face if |x| <= 0.5
    x_at_wall = -2.9 * np.tan(model.angles)
    on_face = np.abs(x_at_wall) < 0.5 - 1e-3
    assert on_face.sum() == 39
    assert np.max(np.abs(ranges[on_face] - wall_ranges(model.angles[on_face], 2.9))) < 1e-6
    assert np.all(np.isinf(ranges[np.abs(x_at_wall) > 0.5 + 1e-3]))


def test_robot_own_geometry_is_seen_unless_excluded(robot):
    # Pan the head so the laser looks at nothing; the base plate is not in the scan plane, the head box
    # (0.05 half extent around the head origin, laser 0.1 ahead) lies behind the fan: no self hits.
    scene = Scene(robot)
    sensor = robot.sensors["laser"]
    model = LaserModel.from_sensor(sensor, {"angle_min": np.pi, "angle_max": np.pi, "range_min": 0.0})
    ranges = model.scan(scene, scene.sensor_pose(sensor))
    assert ranges[0] == pytest.approx(0.05, abs=1e-6)         # looking back at the head box face x = 0.05
    assert np.isinf(model.scan(scene, scene.sensor_pose(sensor), [(robot.name, "head")])[0])


def test_noise_is_applied_with_the_requested_spread(robot):
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [2.1, 0, 0])
    scene = Scene(robot)
    sensor = robot.sensors["laser"]
    model = LaserModel.from_sensor(sensor, {"noise_std": 0.01})
    ranges = model.scan(scene, scene.sensor_pose(sensor), rng=np.random.default_rng(0))
    err = ranges - wall_ranges(model.angles, 1.9)
    assert 0.007 < np.std(err) < 0.013


def test_bad_laser_parameters_are_reported(robot):
    with pytest.raises(ValueError, match="angle_increment"):
        LaserModel.from_sensor(robot.sensors["laser"], {"angle_increment": 0.0})
