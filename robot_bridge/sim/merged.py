"""The still part of a scene as one triangle set in the world frame: one Embree query for all of it.

Boxes (12 exact triangles) and meshes of the environment bodies are put in the world frame and into one
acceleration structure, so a ray costs one traversal however many of them there are, instead of one
intersection per shape (the numpy slab test of a box over a whole camera image cost ~18 ms a box).  For
large ray batches (cameras) the robot's links join the set once they are at rest.  A set is rebuilt only
when what it holds changes: other shapes, or other poses (an object moved, the robot moved and stopped).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import raycast

MERGED_KINDS = ("box", "mesh")
CACHED_SETS = 8            # e.g. sensors excluding different links
MIN_RAYS_FOR_ROBOT = 16384  # a camera: the robot's still links join the set (a laser: never worth a build)


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
        self._last_poses: dict[tuple, bytes] = {}
        self._lock = threading.Lock()

    def settled(self, shapes: Sequence, indices: Sequence[int], poses: Sequence[np.ndarray]) -> bool:
        """True when these shapes are where they were at the previous call for the same shapes: moving
        links are cast one by one (no rebuild per frame), links that came to rest join the set."""
        key = (tuple(indices), tuple(id(shapes[i]) for i in indices))
        where = b"".join(np.ascontiguousarray(poses[i]).tobytes() for i in indices)
        with self._lock:
            previous = self._last_poses.get(key)
            self._last_poses[key] = where
            if len(self._last_poses) > 4 * CACHED_SETS:
                self._last_poses.pop(next(iter(self._last_poses)))
        return previous == where

    def get(self, shapes: Sequence, indices: Sequence[int], poses: Sequence[np.ndarray]) -> TriangleSet:
        key = (tuple(indices), tuple(id(shapes[i]) for i in indices),
               b"".join(np.ascontiguousarray(poses[i]).tobytes() for i in indices))
        with self._lock:
            found = self._sets.get(key)
        if found is not None:
            return found
        # built outside the lock: a camera building its set never holds up a laser using another one
        built = self._build(shapes, indices, poses)
        with self._lock:
            found = self._sets.get(key)
            if found is None:
                if len(self._sets) >= CACHED_SETS:
                    self._sets.pop(next(iter(self._sets)))
                self._sets[key] = found = built
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
