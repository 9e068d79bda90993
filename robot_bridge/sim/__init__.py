"""Sensor simulation from the model (no rclpy): scene, ray casting, laser, camera, IMU."""

from .camera import PinholeModel
from .imu import ImuReading, ImuSimulator
from .laser import LaserModel
from .scene import Hits, Scene

__all__ = ["Hits", "ImuReading", "ImuSimulator", "LaserModel", "PinholeModel", "Scene"]
