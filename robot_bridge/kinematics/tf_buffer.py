"""A small TF buffer (tf2_ros is not needed): /tf and /tf_static edges, chain lookups at a time.

Each child frame has one parent (as in tf2).  Static edges keep their one transform; dynamic edges keep
the samples of the last ``cache_time`` seconds (tf2's default: 10 s).  :meth:`TFBuffer.lookup` composes
the chains of both frames up to their common ancestor, each edge at the asked time: interpolated between
the samples around it (translation linearly, rotation by slerp), the nearest sample outside the cached
span (tf2 would raise an extrapolation error there; a detector's stamp is usually a little newer than
the last /tf), the latest sample when no time is given (tf2's ``Time()``).  Thread-safe.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from ..model.transform import inverse

MAX_DEPTH = 1000
MAX_SAMPLES = 2000          # per edge, whatever the rate


class FrameLookupError(LookupError):
    """A frame is unknown or the two frames are not connected."""


@dataclass
class _Edge:
    parent: str
    static: bool
    stamps: list[float] = field(default_factory=list)          # ascending
    matrices: list[np.ndarray] = field(default_factory=list)

    def at(self, time: Optional[float]) -> np.ndarray:
        if time is None or self.static or len(self.stamps) == 1:
            return self.matrices[-1]
        i = bisect.bisect_left(self.stamps, time)
        if i == 0:
            return self.matrices[0]
        if i == len(self.stamps):
            return self.matrices[-1]
        t0, t1 = self.stamps[i - 1], self.stamps[i]
        a, b = self.matrices[i - 1], self.matrices[i]
        if time == t1 or np.array_equal(a, b):
            return b
        f = (time - t0) / (t1 - t0)
        out = np.eye(4)
        out[:3, 3] = a[:3, 3] + f * (b[:3, 3] - a[:3, 3])
        out[:3, :3] = Slerp([0.0, 1.0], Rotation.from_matrix([a[:3, :3], b[:3, :3]]))(f).as_matrix()
        return out


def _strip(frame: str) -> str:
    return frame[1:] if frame.startswith("/") else frame        # tf2 ignores one leading slash


class TFBuffer:
    def __init__(self, cache_time: float = 10.0):
        self.cache_time = float(cache_time)
        self._lock = threading.Lock()
        self._edges: dict[str, _Edge] = {}

    def set_transform(self, parent: str, child: str, matrix: np.ndarray, stamp: float = 0.0,
                      static: bool = False) -> bool:
        """Store one sample; False (ignored) for non-finite values, an empty or self-parented frame, or a
        dynamic sample for a child that has a static edge.  A new parent, or a stamp further back than the
        cache (a restarted simulation, a looping bag), starts the edge afresh."""
        parent, child = _strip(parent), _strip(child)
        m = np.array(matrix, dtype=float)
        if not parent or not child or parent == child or m.shape != (4, 4) or not np.isfinite(m).all():
            return False
        with self._lock:
            edge = self._edges.get(child)
            if edge is not None and edge.static and not static:
                return False
            if static or edge is None or edge.parent != parent or stamp < edge.stamps[-1] - self.cache_time:
                self._edges[child] = _Edge(parent, static, [stamp], [m])
                return True
            i = bisect.bisect_left(edge.stamps, stamp)
            if i < len(edge.stamps) and edge.stamps[i] == stamp:
                edge.matrices[i] = m
            else:
                edge.stamps.insert(i, stamp)
                edge.matrices.insert(i, m)
            keep = bisect.bisect_left(edge.stamps, edge.stamps[-1] - self.cache_time)
            keep = max(keep, len(edge.stamps) - MAX_SAMPLES)
            if keep > 0:
                del edge.stamps[:keep], edge.matrices[:keep]
        return True

    def frames(self) -> set[str]:
        with self._lock:
            return set(self._edges) | {e.parent for e in self._edges.values()}

    def can_transform(self, target: str, source: str, time: Optional[float] = None) -> bool:
        try:
            self.lookup(target, source, time)
            return True
        except LookupError:
            return False

    def latest_time(self, target: str, source: str) -> float:
        """The newest time at which every dynamic edge between ``target`` and ``source`` (up to their
        common ancestor) has a sample at or after it (tf2's latest common time): a lookup at or before
        it interpolates, none extrapolates; ``inf`` when only static edges join them.  LookupError as
        :meth:`lookup`."""
        target, source = _strip(target), _strip(source)
        with self._lock:
            known = set(self._edges) | {e.parent for e in self._edges.values()}
            for frame in (target, source):
                if frame not in known:
                    raise FrameLookupError(f"frame {frame!r} does not exist in TF")
            paths = [[f for f, _ in self._chain(frame, None)] for frame in (target, source)]
            if paths[0][-1] != paths[1][-1]:
                raise FrameLookupError(f"frames {target!r} and {source!r} are not connected (trees rooted "
                                       f"at {paths[0][-1]!r} and {paths[1][-1]!r})")
            common = next(f for f in paths[0] if f in paths[1])
            edges = [self._edges[f] for path in paths for f in path[:path.index(common)]]
            return min((e.stamps[-1] for e in edges if not e.static), default=float("inf"))

    def _chain(self, frame: str, time: Optional[float]) -> list[tuple[str, np.ndarray]]:
        """[(frame, pose of frame in the chain's root)] from ``frame`` up to its root (last item)."""
        path = [frame]
        while path[-1] in self._edges and len(path) <= MAX_DEPTH:
            parent = self._edges[path[-1]].parent
            if parent in path:
                raise FrameLookupError(f"TF loop through frame {parent!r}")
            path.append(parent)
        poses = [np.eye(4)]
        for child in reversed(path[:-1]):
            poses.append(poses[-1] @ self._edges[child].at(time))
        poses.reverse()
        return list(zip(path, poses))

    def lookup(self, target: str, source: str, time: Optional[float] = None) -> np.ndarray:
        """4x4 pose of ``source`` in ``target`` at ``time`` (seconds; None: the latest); LookupError if
        a frame is unknown or the two are not connected."""
        target, source = _strip(target), _strip(source)
        if target == source:
            return np.eye(4)
        with self._lock:
            known = set(self._edges) | {e.parent for e in self._edges.values()}
            for frame in (target, source):
                if frame not in known:
                    raise FrameLookupError(f"frame {frame!r} does not exist in TF")
            chain_s = self._chain(source, time)
            chain_t = self._chain(target, time)
        root_s, root_t = chain_s[-1][0], chain_t[-1][0]
        if root_s != root_t:
            raise FrameLookupError(f"frames {target!r} and {source!r} are not connected (trees rooted at "
                                   f"{root_t!r} and {root_s!r})")
        return inverse(dict(chain_t)[target]) @ dict(chain_s)[source]
