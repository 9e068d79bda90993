"""Simulated 2D laser range finder (OpenRAVE BaseLaser2D / COLLADA base_laser2d).

Beams lie in the sensor frame's xy plane, angle 0 along +x, increasing
counter-clockwise about +z -- upstream BaseLaser2D's convention and
sensor_msgs/LaserScan's.  As upstream, a beam starts ``range_min`` from the
origin (so the housing never blinds it); nothing hit within ``range_max`` is
``+inf`` (REP-117).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import numpy as np

from ..model import AttachedSensor
from .scene import Scene


@dataclass
class LaserModel:
    angle_min: float
    angle_increment: float
    count: int
    range_min: float
    range_max: float
    scan_time: float = 0.1
    time_increment: float = 0.0
    noise_std: float = 0.0

    @classmethod
    def from_sensor(cls, sensor: AttachedSensor, overrides: Optional[Mapping[str, float]] = None
                    ) -> "LaserModel":
        p = {**sensor.params, **(overrides or {})}
        lo = float(p.get("angle_min", -np.pi / 2))
        hi = float(p.get("angle_max", np.pi / 2))
        inc = float(p.get("angle_increment", np.radians(1.0)))
        if not inc > 0.0 or hi < lo:
            raise ValueError(f"laser {sensor.name!r}: need angle_increment > 0 and angle_max >= angle_min "
                             f"(got {lo}, {hi}, {inc})")
        count = int((hi - lo) / inc + 0.5) + 1     # upstream BaseLaser2D beam count
        return cls(angle_min=lo, angle_increment=inc, count=count,
                   range_min=float(p.get("range_min", 0.0)), range_max=float(p.get("range_max", 30.0)),
                   scan_time=float(p.get("scan_time", 0.1) or 0.1),
                   time_increment=float(p.get("time_increment", 0.0) or 0.0),
                   noise_std=float(p.get("noise_std", 0.0) or 0.0))

    @property
    def angle_max(self) -> float:
        """Angle of the last beam (LaserScan: angle_min + (count - 1) * angle_increment)."""
        return self.angle_min + (self.count - 1) * self.angle_increment

    @property
    def angles(self) -> np.ndarray:
        return self.angle_min + self.angle_increment * np.arange(self.count)

    def directions(self) -> np.ndarray:
        """Unit beam directions in the sensor frame, (count, 3)."""
        a = self.angles
        return np.stack([np.cos(a), np.sin(a), np.zeros_like(a)], axis=1)

    def scan(self, scene: Scene, pose: np.ndarray, exclude: Iterable[tuple[str, str]] = (),
             rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """Ranges (float32, metres) from the sensor at world ``pose``."""
        dirs = self.directions() @ np.ascontiguousarray(pose[:3, :3].T)
        origins = pose[:3, 3] + self.range_min * dirs
        hits = scene.cast(origins, dirs, max_range=self.range_max - self.range_min, exclude=exclude,
                          apex=pose[:3, 3], normals=False)
        ranges = hits.distance + self.range_min
        if self.noise_std > 0.0:
            rng = rng or np.random.default_rng()
            finite = np.isfinite(ranges)
            ranges[finite] += rng.normal(0.0, self.noise_std, int(finite.sum()))
            ranges[finite] = np.clip(ranges[finite], self.range_min, self.range_max)
        return ranges.astype(np.float32)
