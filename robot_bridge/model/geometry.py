"""Geometry attached to links: primitives and meshes, in the link frame.

Conventions (format-independent; readers convert into these):
- ``Box.half_extents``: half sizes along x, y, z (OpenRAVE XML stores half
  extents, URDF full sizes).
- ``Cylinder`` runs along the geometry frame's **z** axis (OpenRAVE XML
  cylinders run along local y; its reader rotates ``origin`` accordingly).
- ``Mesh.path`` is the resolved absolute path (None when the file is missing;
  ``uri`` keeps what the file said), ``scale`` is per axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np


@dataclass
class Material:
    diffuse: Optional[tuple[float, float, float]] = None   # rgb in [0, 1]
    ambient: Optional[tuple[float, float, float]] = None
    transparency: float = 0.0                               # 0 opaque .. 1 invisible
    name: Optional[str] = None

    @property
    def rgba(self) -> tuple[float, float, float, float]:
        rgb = self.diffuse or (0.7, 0.7, 0.7)
        return (float(rgb[0]), float(rgb[1]), float(rgb[2]), 1.0 - float(self.transparency))


@dataclass
class Box:
    half_extents: np.ndarray

    @property
    def size(self) -> np.ndarray:
        """Full extents (URDF ``size``)."""
        return 2.0 * np.asarray(self.half_extents, dtype=float)


@dataclass
class Sphere:
    radius: float


@dataclass
class Cylinder:
    radius: float
    length: float


@dataclass
class Mesh:
    uri: str                                   # as written in the file
    path: Optional[str] = None                 # resolved absolute path, None if missing
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))
    vertices: Optional[np.ndarray] = None      # inline triangle meshes (COLLADA, generated)
    triangles: Optional[np.ndarray] = None


Shape = Box | Sphere | Cylinder | Mesh


@dataclass
class Geometry:
    """One visual or collision geometry of a link."""

    shape: Shape
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))   # link frame -> geometry frame
    material: Material = field(default_factory=Material)
    name: Optional[str] = None
    visible: bool = True
