"""Sensor simulation from the model (no rclpy): scene, ray casting, laser, flash lidar, camera, IMU,
force/torque."""

from .camera import PinholeModel
from .flash_lidar import FlashLidarModel
from .force import WrenchSimulator
from .imu import ImuReading, ImuSimulator
from .laser import LaserModel
from .scene import Hits, Scene

__all__ = ["FlashLidarModel", "Hits", "ImuReading", "ImuSimulator", "LaserModel", "PinholeModel", "Scene",
           "WrenchSimulator"]
