"""Simulated pinhole camera: depth (32FC1, metres along the optical axis) and RGB.

Rays go through pixel centres of an ideal pinhole (x right, y down, z forward:
pixel (u, v) looks along ((u - cx)/fx, (v - cy)/fy, 1)); lens distortion is not
rendered.  Depth is NaN where nothing lies within range.  Colour is the hit
geometry's diffuse colour shaded by a head-light: ``rgb * (ambient + (1 -
ambient) |n . ray|)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Optional

import numpy as np

from ..model import AttachedSensor
from .pinhole import PinholeGrid, PinholeView
from .scene import Scene


@dataclass
class PinholeModel(PinholeGrid):
    range_min: float = 0.0
    range_max: float = 20.0
    ambient: float = 0.3
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)
    noise_std: float = 0.0
    _rays: Optional[np.ndarray] = field(default=None, repr=False)
    _z: Optional[np.ndarray] = field(default=None, repr=False)
    _last: Optional[tuple] = field(default=None, repr=False)   # (view key, depth, rgb, shapes): last render

    @classmethod
    def from_sensor(cls, sensor: AttachedSensor, overrides: Optional[Mapping[str, float]] = None
                    ) -> "PinholeModel":
        p = {**sensor.params, **(overrides or {})}
        missing = [k for k in ("width", "height", "fx", "fy", "cx", "cy") if p.get(k) is None]
        if missing:
            raise ValueError(f"camera {sensor.name!r}: intrinsics missing: {', '.join(missing)}")
        width, height = int(p["width"]), int(p["height"])
        if width <= 0 or height <= 0 or float(p["fx"]) <= 0 or float(p["fy"]) <= 0:
            raise ValueError(f"camera {sensor.name!r}: need width, height, fx, fy > 0")
        return cls(width=width, height=height, fx=float(p["fx"]), fy=float(p["fy"]), cx=float(p["cx"]),
                   cy=float(p["cy"]), range_min=float(p.get("range_min", 0.0) or 0.0),
                   range_max=float(p.get("range_max", 20.0) or 20.0),
                   noise_std=float(p.get("noise_std", 0.0) or 0.0))

    def resized(self, width: int, height: int) -> "PinholeModel":
        """The same camera (same field of view) at another resolution.

        Pixel centres sit at integer coordinates, so pixel ``u'`` of the new image covers the old
        ``[u' / s - 0.5, (u' + 1) / s - 0.5]`` (``s = width / self.width``): ``fx' = s fx`` and
        ``cx' = s (cx + 0.5) - 0.5`` (likewise y)."""
        if width <= 0 or height <= 0:
            raise ValueError(f"camera resolution must be positive, not {width}x{height}")
        sx, sy = width / self.width, height / self.height
        return replace(self, width=int(width), height=int(height), fx=self.fx * sx, fy=self.fy * sy,
                       cx=sx * (self.cx + 0.5) - 0.5, cy=sy * (self.cy + 0.5) - 0.5, _rays=None, _z=None,
                       _last=None)

    def rays(self) -> np.ndarray:
        """Unit ray per pixel in the optical frame, (height * width, 3), row-major."""
        if self._rays is None:
            self._rays = self.unit_rays()
        return self._rays

    def render(self, scene: Scene, pose: np.ndarray, exclude: Iterable[tuple[str, str]] = (),
               color: bool = True, rng: Optional[np.random.Generator] = None
               ) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """(depth float32 (H, W), rgb uint8 (H, W, 3) or None) from the optical frame at world ``pose``.

        Depth and colour come from one ray batch; colour needs only ``|n . ray|`` per pixel, not the
        normals.  A view that has not changed since the last call (same camera pose, same shapes at the
        same poses: a robot at rest in a static world) is not cast again; noise is drawn anew."""
        key = self._view_key(scene, pose, exclude, color)
        if key is not None and self._last is not None and self._last[0] == key:
            depth, rgb = self._last[1].copy(), None if self._last[2] is None else self._last[2].copy()
        else:
            depth, rgb = self._render(scene, pose, exclude, color)
            # the shapes are kept with the key: their ids cannot be reused by other shapes meanwhile
            self._last = (key, depth.copy(), None if rgb is None else rgb.copy(), list(scene.shapes))
        if self.noise_std > 0.0:
            rng = rng or np.random.default_rng()
            depth += rng.normal(0.0, self.noise_std, depth.shape).astype(np.float32)
        return depth, rgb

    @staticmethod
    def _view_key(scene: Scene, pose: np.ndarray, exclude, color: bool) -> Optional[tuple]:
        poses = getattr(scene, "shape_poses", None)
        if poses is None:
            return None
        return (np.ascontiguousarray(pose, dtype=float).tobytes(), tuple(map(id, scene.shapes)),
                b"".join(np.ascontiguousarray(p).tobytes() for p in poses()), tuple(exclude), color)

    def _render(self, scene: Scene, pose: np.ndarray, exclude, color: bool
                ) -> tuple[np.ndarray, Optional[np.ndarray]]:
        local = self.rays()
        dirs = local @ np.ascontiguousarray(pose[:3, :3].T)
        origins = pose[:3, 3] + self.range_min * dirs if self.range_min else pose[:3, 3][None]
        hits = scene.cast(origins, dirs, max_range=self.range_max - self.range_min, exclude=exclude,
                          apex=pose[:3, 3], normals=False, cosine=color, pinhole=PinholeView(
                              self, pose[:3, :3], pose[:3, 3], self.range_min))
        distance = hits.distance + self.range_min if self.range_min else hits.distance
        depth = np.multiply(distance, self._optical_z(), dtype=np.float32)
        depth[np.isinf(depth)] = np.nan
        rgb = None
        if color:
            # rows: one per scene shape, then the background (shape index -1 -> last row)
            palette = np.array([s.rgb for s in scene.shapes] + [self.background], dtype=np.float32) * 255.0
            hit = hits.shape >= 0
            shade = np.multiply(hits.cosine, 1.0 - self.ambient, dtype=np.float32)
            shade += self.ambient
            np.minimum(shade, 1.0, out=shade)
            shade[~hit] = 1.0
            rgb = np.empty((len(local), 3), dtype=np.uint8)
            channel = np.empty(len(local), dtype=np.float32)
            for c in range(3):
                np.take(palette[:, c], hits.shape, out=channel, mode="wrap")      # -1: the last row
                channel *= shade
                channel += 0.5
                rgb[:, c] = channel                   # truncation after +0.5: rounding; values within 0..255
            rgb = rgb.reshape(self.height, self.width, 3)
        return depth.reshape(self.height, self.width), rgb

    def _optical_z(self) -> np.ndarray:
        """Per pixel, the optical-axis component of its unit ray (distance along the ray -> depth)."""
        if self._z is None:
            self._z = np.ascontiguousarray(self.rays()[:, 2])
        return self._z
