"""A small latest-value TF buffer (tf2_ros is not needed): /tf and /tf_static edges, chain lookups.

Each child frame has one parent (as in tf2); the buffer keeps the latest transform of every edge (dynamic
edges from /tf, static ones from /tf_static) and answers :meth:`TFBuffer.lookup` by composing the chains
of both frames up to their common ancestor -- tf2's ``lookup_transform(target, source, Time())``
("latest available") semantics, without interpolation.  Thread-safe.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..model.transform import inverse

MAX_DEPTH = 1000


class FrameLookupError(LookupError):
    """A frame is unknown or the two frames are not connected."""


@dataclass
class _Edge:
    parent: str
    matrix: np.ndarray
    stamp: float
    static: bool


def _strip(frame: str) -> str:
    return frame[1:] if frame.startswith("/") else frame        # tf2 ignores one leading slash


class TFBuffer:
    def __init__(self):
        self._lock = threading.Lock()
        self._edges: dict[str, _Edge] = {}

    def set_transform(self, parent: str, child: str, matrix: np.ndarray, stamp: float = 0.0,
                      static: bool = False) -> bool:
        """Store one edge; False (ignored) for non-finite values, an empty or self-parented frame, or a
        dynamic update older than what the buffer holds."""
        parent, child = _strip(parent), _strip(child)
        m = np.asarray(matrix, dtype=float)
        if not parent or not child or parent == child or m.shape != (4, 4) or not np.isfinite(m).all():
            return False
        with self._lock:
            old = self._edges.get(child)
            if old is not None and not static and not old.static and stamp < old.stamp:
                return False
            self._edges[child] = _Edge(parent, m.copy(), stamp, static)
        return True

    def frames(self) -> set[str]:
        with self._lock:
            return set(self._edges) | {e.parent for e in self._edges.values()}

    def can_transform(self, target: str, source: str) -> bool:
        try:
            self.lookup(target, source)
            return True
        except LookupError:
            return False

    def _chain(self, frame: str) -> list[tuple[str, np.ndarray]]:
        """[(frame, pose of frame in the chain's root)] from ``frame`` up to its root (last item)."""
        path = [frame]
        while path[-1] in self._edges and len(path) <= MAX_DEPTH:
            parent = self._edges[path[-1]].parent
            if parent in path:
                raise FrameLookupError(f"TF loop through frame {parent!r}")
            path.append(parent)
        # poses relative to the root
        poses = [np.eye(4)]
        for child in reversed(path[:-1]):
            poses.append(poses[-1] @ self._edges[child].matrix)
        poses.reverse()
        return list(zip(path, poses))

    def lookup(self, target: str, source: str) -> np.ndarray:
        """4x4 pose of ``source`` in ``target`` (maps points in source to target); LookupError if none."""
        target, source = _strip(target), _strip(source)
        if target == source:
            return np.eye(4)
        with self._lock:
            known = set(self._edges) | {e.parent for e in self._edges.values()}
            for frame in (target, source):
                if frame not in known:
                    raise FrameLookupError(f"frame {frame!r} does not exist in TF")
            chain_s = self._chain(source)
            chain_t = self._chain(target)
        root_s, root_t = chain_s[-1][0], chain_t[-1][0]
        if root_s != root_t:
            raise FrameLookupError(f"frames {target!r} and {source!r} are not connected (trees rooted at "
                               f"{root_t!r} and {root_s!r})")
        pose_s, pose_t = dict(chain_s)[source], dict(chain_t)[target]
        return inverse(pose_t) @ pose_s
