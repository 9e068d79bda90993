"""The static part of a scene as one triangle set in the world frame: one Embree query for all of it.

Boxes (12 exact triangles) and meshes of the environment bodies are put in the world frame and into one
acceleration structure, so a ray costs one traversal however many of them there are, instead of one
intersection per shape (the numpy slab test of a box over a whole camera image cost ~18 ms a box).  The
set is rebuilt only when what it holds changes: other shapes, or other poses (an object moved).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import raycast

MERGED_KINDS = ("box", "mesh")
CACHED_SETS = 4            # e.g. sensors excluding different links of an environment body


@dataclass(frozen=True)
class TriangleSet:
    mesh: raycast.TriangleMesh
    owner: np.ndarray          # (triangles,) index of the scene shape each triangle belongs to


def local_triangles(shape) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, faces) of a box or mesh shape in its geometry frame."""
    if shape.kind == "box":
        return raycast.box_triangles(shape.geometry.shape.half_extents)
    return shape.mesh.vertices, shape.mesh.faces


class MergedTriangles:
    """Builds and caches :class:`TriangleSet` s; shared by a scene and its snapshots (thread-safe)."""

    def __init__(self, backend: str):
        self.backend = backend
        self._sets: dict[tuple, TriangleSet] = {}
        self._lock = threading.Lock()

    def get(self, shapes: Sequence, indices: Sequence[int], poses: Sequence[np.ndarray]) -> TriangleSet:
        key = (tuple(indices), tuple(id(shapes[i]) for i in indices),
               b"".join(np.ascontiguousarray(poses[i]).tobytes() for i in indices))
        with self._lock:
            found = self._sets.get(key)
            if found is None:
                found = self._build(shapes, indices, poses)
                if len(self._sets) >= CACHED_SETS:
                    self._sets.pop(next(iter(self._sets)))
                self._sets[key] = found
            return found

    def _build(self, shapes, indices, poses) -> TriangleSet:
        vertices, faces, owner, offset = [], [], [], 0
        for index in indices:
            v, f = local_triangles(shapes[index])
            pose = poses[index]
            vertices.append(v @ pose[:3, :3].T + pose[:3, 3])
            faces.append(f + offset)
            owner.append(np.full(len(f), index, dtype=np.int64))
            offset += len(v)
        return TriangleSet(raycast.TriangleMesh(np.concatenate(vertices), np.concatenate(faces),
                                                backend=self.backend), np.concatenate(owner))
