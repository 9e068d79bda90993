"""Simulated IMU: gravity at rest in the sensor frame, rates from motion."""

import numpy as np
import pytest

from robot_bridge.model.transform import make, rotation_axis_angle
from robot_bridge.sim import ImuSimulator, Scene
from robot_bridge.sim.imu import STANDARD_GRAVITY, covariance


def test_at_rest_reads_plus_g_along_world_up_in_its_own_frame(robot):
    scene = Scene(robot, environment=False)
    scene.set_joint_positions({"pan": 0.7})
    pose = scene.sensor_pose(robot.sensors["imu"])
    imu = ImuSimulator()
    for k in range(3):
        reading = imu.update(0.01 * k, pose)
    # IMU tilted 30 deg about its x: world up (0, 0, 1) seen in the sensor frame is (0, sin 30, cos 30).
    assert reading.linear_acceleration == pytest.approx(
        STANDARD_GRAVITY * np.array([0.0, np.sin(np.radians(30)), np.cos(np.radians(30))]), abs=1e-9)
    assert np.linalg.norm(reading.linear_acceleration) == pytest.approx(9.81, abs=0.01)
    assert reading.angular_velocity == pytest.approx(np.zeros(3), abs=1e-12)


def test_upright_imu_reads_g_on_z():
    reading = ImuSimulator().update(0.0, np.eye(4))
    assert reading.linear_acceleration == pytest.approx([0, 0, STANDARD_GRAVITY])
    assert reading.orientation_xyzw == pytest.approx([0, 0, 0, 1])


def test_constant_yaw_rate_and_centripetal_acceleration():
    # Frame on a circle of radius 0.5 about world z, turning at 2 rad/s, x pointing outward.
    imu = ImuSimulator(gravity=np.zeros(3))
    dt, w, radius = 1e-3, 2.0, 0.5
    for k in range(5):
        a = w * k * dt
        rot = rotation_axis_angle([0, 0, 1], a)
        reading = imu.update(k * dt, make(rot, radius * rot[:, 0]))
    assert reading.angular_velocity == pytest.approx([0, 0, w], abs=1e-9)
    # centripetal acceleration w^2 r towards the centre = -x in the sensor frame; the second difference
    # lags one sample, i.e. is rotated by w dt: error w^3 r dt
    tolerance = 1.5 * w ** 3 * radius * dt
    assert reading.linear_acceleration == pytest.approx([-w * w * radius, 0, 0], abs=tolerance)


def test_bias_is_added():
    reading = ImuSimulator(accel_bias=[0.1, 0, 0], gyro_bias=[0, 0, 0.01]).update(0.0, np.eye(4))
    assert reading.linear_acceleration == pytest.approx([0.1, 0, STANDARD_GRAVITY])
    assert reading.angular_velocity == pytest.approx([0, 0, 0.01])


def test_covariance_from_description_or_noise():
    assert covariance([1, 2, 3, 4, 5, 6, 7, 8, 9]) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert covariance([1, 2, 3]) == [1, 0, 0, 0, 2, 0, 0, 0, 3]
    assert covariance(None, 0.1) == pytest.approx([0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01])
