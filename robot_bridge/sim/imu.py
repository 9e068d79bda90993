"""Simulated IMU from the motion of its frame (REP-145 conventions).

Angular velocity and linear acceleration are expressed in the IMU frame; the
accelerometer reads specific force ``R^T (a - g)`` with ``g`` the world gravity
(default (0, 0, -9.81)), so at rest it reads +9.81 m/s^2 along the world's up
axis.  Velocities come from finite differences of successive poses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
from scipy.spatial.transform import Rotation

STANDARD_GRAVITY = 9.80665


@dataclass
class ImuReading:
    orientation_xyzw: np.ndarray     # sensor frame in the world
    angular_velocity: np.ndarray     # rad/s, sensor frame
    linear_acceleration: np.ndarray  # m/s^2 specific force, sensor frame


@dataclass
class ImuSimulator:
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -STANDARD_GRAVITY]))
    gyro_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))
    accel_bias: np.ndarray = field(default_factory=lambda: np.zeros(3))
    gyro_noise_std: float = 0.0
    accel_noise_std: float = 0.0
    rng: Optional[np.random.Generator] = None
    _last: Optional[tuple[float, np.ndarray]] = field(default=None, repr=False)
    _velocity: Optional[np.ndarray] = field(default=None, repr=False)
    _omega: np.ndarray = field(default_factory=lambda: np.zeros(3), repr=False)

    def __post_init__(self):
        self.gravity = np.asarray(self.gravity, dtype=float).reshape(3)
        self.gyro_bias = np.asarray(self.gyro_bias, dtype=float).reshape(3)
        self.accel_bias = np.asarray(self.accel_bias, dtype=float).reshape(3)

    def update(self, time: float, pose: np.ndarray) -> ImuReading:
        """Reading at ``time`` (seconds) for the IMU frame's world ``pose``."""
        rot = pose[:3, :3]
        omega = np.zeros(3)
        accel_world = np.zeros(3)
        if self._last is not None and time > self._last[0]:
            t0, p0 = self._last
            dt = time - t0
            omega = Rotation.from_matrix(p0[:3, :3].T @ rot).as_rotvec() / dt
            velocity = (pose[:3, 3] - p0[:3, 3]) / dt
            if self._velocity is not None:
                accel_world = (velocity - self._velocity) / dt
            self._velocity = velocity
        elif self._last is not None:
            omega = self._omega            # same stamp again: repeat the last rate
        self._last = (time, pose.copy())
        self._omega = omega
        accel = rot.T @ (accel_world - self.gravity) + self.accel_bias
        gyro = omega + self.gyro_bias
        if self.gyro_noise_std > 0.0 or self.accel_noise_std > 0.0:
            rng = self.rng or np.random.default_rng()
            gyro = gyro + rng.normal(0.0, self.gyro_noise_std, 3)
            accel = accel + rng.normal(0.0, self.accel_noise_std, 3)
        return ImuReading(Rotation.from_matrix(rot).as_quat(), gyro, accel)


def covariance(values: Optional[Sequence[float]], noise_std: float = 0.0) -> list[float]:
    """Row-major 3x3 covariance: the given 9 values, else ``noise_std^2`` on the diagonal."""
    if values is not None and len(values) == 9:
        return [float(v) for v in values]
    if values is not None and len(values) == 3:
        return [float(values[0]), 0.0, 0.0, 0.0, float(values[1]), 0.0, 0.0, 0.0, float(values[2])]
    var = float(noise_std) ** 2
    return [var, 0.0, 0.0, 0.0, var, 0.0, 0.0, 0.0, var]
