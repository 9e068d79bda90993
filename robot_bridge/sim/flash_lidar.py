"""Simulated 3D flash lidar (OpenRAVE ``BaseFlashLidar3D``, COLLADA ``base_flash_laser``).

Upstream casts one ray per pixel of a ``width`` x ``height`` grid through the pinhole ``KK``
(fx, fy, cx, cy): pixel (u, v) looks along ((u - cx) / fx, (v - cy) / fy, 1) in the sensor frame,
which, as for OpenRAVE cameras, looks along +z with x right and y down.  The result is an organized
point cloud in the sensor frame: row v, column u holds the hit point (metres), NaN where nothing is
within [range_min, range_max] along the ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

import numpy as np

from ..model import AttachedSensor
from .pinhole import PinholeGrid
from .scene import Scene


@dataclass
class FlashLidarModel(PinholeGrid):
    range_min: float = 0.0
    range_max: float = 30.0
    scan_time: float = 0.1

    @classmethod
    def from_sensor(cls, sensor: AttachedSensor) -> "FlashLidarModel":
        p = sensor.params
        width, height = int(p.get("width", 0) or 0), int(p.get("height", 0) or 0)
        if width <= 0 or height <= 0:
            raise ValueError(f"flash lidar {sensor.name!r}: needs width and height > 0 "
                             f"(got {width}x{height})")
        fx, fy = float(p.get("fx", 0.0) or 0.0), float(p.get("fy", 0.0) or 0.0)
        if not (fx > 0 and fy > 0):
            raise ValueError(f"flash lidar {sensor.name!r}: needs KK focal lengths > 0 (got {fx}, {fy})")
        cx, cy = float(p.get("cx", (width - 1) / 2)), float(p.get("cy", (height - 1) / 2))
        lo, hi = float(p.get("range_min", 0.0) or 0.0), float(p.get("range_max", 30.0) or 30.0)
        if not (0 <= lo < hi):
            raise ValueError(f"flash lidar {sensor.name!r}: need 0 <= range_min < range_max (got {lo}, {hi})")
        return cls(width, height, fx, fy, cx, cy, lo, hi, float(p.get("scan_time", 0.1) or 0.1))

    def scan(self, scene: Scene, pose: np.ndarray, exclude: Iterable[tuple[str, str]] = (),
             rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """Points (height, width, 3) float32 in the sensor frame; NaN where nothing is hit."""
        local = self.unit_rays()
        dirs = local @ np.ascontiguousarray(pose[:3, :3].T)
        origins = pose[:3, 3] + self.range_min * dirs
        hits = scene.cast(origins, dirs, max_range=self.range_max - self.range_min, exclude=exclude,
                          apex=pose[:3, 3], normals=False)
        r = hits.distance + self.range_min
        points = local * r[:, None]
        points[~np.isfinite(r)] = np.nan
        return points.reshape(self.height, self.width, 3).astype(np.float32)
