"""An ideal pinhole's pixel grid, shared by the camera, the flash lidar and the scene's z-buffer.

Optical frame x right, y down, z forward; pixel centres sit at integer coordinates and pixel (u, v) looks
along ((u - cx) / fx, (v - cy) / fy, 1).  Lens distortion is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PinholeGrid:
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @property
    def K(self) -> np.ndarray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def unit_rays(self) -> np.ndarray:
        """Unit ray per pixel in the optical frame, (height * width, 3), row-major."""
        u, v = np.meshgrid(np.arange(self.width, dtype=float), np.arange(self.height, dtype=float))
        d = np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, np.ones_like(u)], axis=-1)
        return (d / np.linalg.norm(d, axis=-1, keepdims=True)).reshape(-1, 3)


@dataclass(frozen=True)
class PinholeView:
    """A pinhole's pixel grid at its world pose."""

    grid: PinholeGrid
    rotation: np.ndarray       # (3, 3) optical frame -> world
    position: np.ndarray       # (3,) optical centre in the world
    range_min: float = 0.0
