"""The world model of detected objects: tracks of detections, each an environment body.

``WorldObjects(mapping)`` turns detections (class id, 4x4 pose in the world frame, optional detector id)
into named bodies ``<class>_<n>``:

- a batch (one message) is looked at up to ``max_detections`` detections; the rest are counted in
  :attr:`Changes.over_detections` and never examined;
- a detection continues the body of its class with the same detector id, else the nearest body of its
  class within ``match_distance`` not yet continued by this batch, else it starts a new body unless there
  are ``max_bodies`` bodies already (all classes) or its class has ``max_instances``; refused new bodies are
  counted in :attr:`Changes.over_bodies` (and one :attr:`Changes.limited` line per limit and batch);
  ``<n>`` is the smallest index not in use;
- a continued body moves only when the new pose differs by more than ``jitter`` (m) or ``jitter_angle``
  (rad): detector noise does not count as motion;
- ``expire(now)`` removes every non-``static`` body not detected for its class's ``timeout``;
- a body that is held (``hold``: carried by a robot) neither moves with detections nor expires until
  ``release``d at the pose where it was put down;
- unknown class ids, non-finite or non-rigid poses and poses whose origin lies outside the world box (the
  cube of half extent ``world_box`` about the world origin: a body at 1e308 m breaks a collision checker's
  bounding volumes) are refused and reported in the returned :class:`Changes`, never stored.

A batch costs O(n log n) in its detections and bodies (ids by dictionary, nearest bodies by a k-d tree,
free names by one cursor per class), so the limits bound the time of every message.

All methods are thread-safe (one lock); :meth:`snapshot` returns copies.  Times are seconds of any one
clock the caller uses consistently (the node: its clock at reception).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

from ..model.transform import is_rigid, rigid_mask
from .mapping import ObjectMapping

MAX_DETECTIONS = 200          # default: detections of one batch looked at (the rest counted, not examined)
MAX_BODIES = 200              # default: bodies of all classes together (new ones beyond are refused)
WORLD_BOX = 100.0             # default: m, half extent of the cube about the world origin bodies may be in


@dataclass(frozen=True)
class Detection:
    class_id: str
    pose: np.ndarray                   # 4x4, world frame
    id: str = ""                       # detector's track id ("" when not given)
    score: float = 1.0


@dataclass
class WorldObject:
    name: str
    class_id: str
    pose: np.ndarray                   # 4x4, world frame
    file: str
    static: bool
    track_id: str = ""
    first_seen: float = 0.0
    last_seen: float = 0.0
    updates: int = 0                   # detections that moved it (above the jitter threshold)
    detections: int = 0                # detections matched to it
    srdf: str = ""                     # the class's hpp SRDF (its handles), "" when it has none

    def copy(self) -> "WorldObject":
        return WorldObject(self.name, self.class_id, self.pose.copy(), self.file, self.static, self.track_id,
                           self.first_seen, self.last_seen, self.updates, self.detections, self.srdf)


@dataclass
class Changes:
    added: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)           # class ids not in the mapping
    rejected: list[str] = field(default_factory=list)          # why a detection was refused
    over_detections: int = 0       # detections of the batch beyond max_detections: not examined
    over_bodies: int = 0           # new bodies refused by max_bodies or max_instances
    limited: list[str] = field(default_factory=list)           # per limit hit: count and limit

    def __bool__(self) -> bool:
        """True when the set of bodies or a pose changed."""
        return bool(self.added or self.moved or self.removed)

    def extend(self, other: "Changes") -> "Changes":
        for name in ("added", "moved", "removed", "unknown", "rejected", "limited"):
            getattr(self, name).extend(getattr(other, name))
        self.over_detections += other.over_detections
        self.over_bodies += other.over_bodies
        return self


def rotation_angle(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) of the rotation between the orientations of two 4x4 poses."""
    cos = (np.trace(a[:3, :3].T @ b[:3, :3]) - 1.0) / 2.0
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


def pose_problem(pose) -> Optional[str]:
    """Why ``pose`` cannot be a body pose (None: it can)."""
    p = np.asarray(pose, dtype=float)
    if p.shape != (4, 4):
        return f"pose of shape {p.shape}, expected 4x4"
    if not np.isfinite(p).all():
        return "non-finite pose"
    if not is_rigid(p, 1e-6):
        return "pose is not a rigid transform"
    return None


def outside(position, world_box: float) -> Optional[str]:
    """Why a body's origin ``position`` is refused (None: it lies within ``world_box`` of the origin)."""
    t = np.asarray(position, dtype=float)
    if (np.abs(t) <= world_box).all():
        return None
    return f"position ({t[0]:.4g}, {t[1]:.4g}, {t[2]:.4g}) outside world_box {world_box:g} m"


def pose_problems(poses: np.ndarray, tol: float = 1e-6,
                  world_box: float = math.inf) -> list[Optional[str]]:
    """:func:`pose_problem` of every pose of an (n, 4, 4) array in one vectorised pass (the tests of
    :func:`robot_bridge.model.transform.is_rigid`), and :func:`outside` ``world_box``."""
    p = np.asarray(poses, dtype=float).reshape(-1, 4, 4)
    finite = np.isfinite(p).all(axis=(1, 2))
    rigid = rigid_mask(p, tol)
    inside = (np.abs(np.where(finite[:, None], p[:, :3, 3], 0.0)) <= world_box).all(axis=1)
    return [("pose is not a rigid transform" if f else "non-finite pose") if not ok
            else None if within else outside(pose[:3, 3], world_box)
            for ok, f, within, pose in zip(rigid, finite, inside, p)]


def _limit(value: int, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, not {value!r}")
    return int(value)


def _beyond_jitter(new: np.ndarray, old: np.ndarray, jitter: float, jitter_angle: float) -> list[bool]:
    """Per pair of (n, 4, 4) poses: does ``new`` differ from ``old`` by more than ``jitter`` (m) or
    ``jitter_angle`` (rad)?  (:func:`rotation_angle`, vectorised.)"""
    if not len(new):
        return []
    shift = np.linalg.norm(new[:, :3, 3] - old[:, :3, 3], axis=1)
    cos = (np.einsum("nij,nij->n", old[:, :3, :3], new[:, :3, :3]) - 1.0) / 2.0
    angle = np.arccos(np.clip(cos, -1.0, 1.0))
    return ((shift > jitter) | (angle > jitter_angle)).tolist()


def _nearest_pairs(points: list, targets: list, reach: float) -> list[tuple[int, int]]:
    """(point index, target index) of every pair within ``reach``, closest first (ties: by point, then
    target index), from a k-d tree: no all-pairs table."""
    if not points or not targets:
        return []
    from scipy.spatial import cKDTree

    found = cKDTree(np.asarray(points)).sparse_distance_matrix(cKDTree(np.asarray(targets)), reach,
                                                               output_type="ndarray")
    order = np.lexsort((found["j"], found["i"], found["v"]))
    return [(int(i), int(j)) for i, j in zip(found["i"][order], found["j"][order])]


class WorldObjects:
    def __init__(self, mapping: ObjectMapping, max_detections: int = MAX_DETECTIONS,
                 max_bodies: int = MAX_BODIES, world_box: float = WORLD_BOX):
        self._lock = threading.RLock()
        self._mapping = mapping
        self._objects: dict[str, WorldObject] = {}
        self._held: set[str] = set()
        self.version = 0                       # incremented on every change of bodies or poses
        self.set_limits(max_detections, max_bodies)
        self.set_world_box(world_box)

    def set_world_box(self, world_box: float) -> None:
        """Half extent (m, > 0) of the cube about the world origin where bodies may be; bodies already
        outside stay until they time out or move."""
        world_box = float(world_box)
        if not (math.isfinite(world_box) and world_box > 0):
            raise ValueError(f"world_box must be a finite number > 0, not {world_box!r}")
        with self._lock:
            self.world_box = world_box

    def set_limits(self, max_detections: int, max_bodies: int) -> None:
        """Detections looked at per batch and bodies in all (>= 1 each).  Lowering ``max_bodies`` below
        the bodies there are removes none: they go as they time out, and no new one starts until fewer."""
        max_detections = _limit(max_detections, "max_detections")
        max_bodies = _limit(max_bodies, "max_bodies")
        with self._lock:
            self.max_detections, self.max_bodies = max_detections, max_bodies

    def limit_batch(self, items: Sequence) -> tuple[Sequence, int]:
        """The part of one message's items that a batch looks at, and how many are left out: callers
        converting messages call this first, so the left-out items are never converted."""
        limit = self.max_detections
        return (items[:limit], len(items) - limit) if len(items) > limit else (items, 0)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def mapping(self) -> ObjectMapping:
        return self._mapping

    def snapshot(self) -> list[WorldObject]:
        """Copies of the current bodies, sorted by name."""
        with self._lock:
            return [self._objects[n].copy() for n in sorted(self._objects)]

    def get(self, name: str) -> Optional[WorldObject]:
        with self._lock:
            obj = self._objects.get(name)
            return obj.copy() if obj is not None else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    # -- updates ---------------------------------------------------------------------------------
    def set_mapping(self, mapping: ObjectMapping) -> Changes:
        """Use a new mapping: bodies of classes it no longer has are removed; others keep their pose and
        take the class's new file and parameters."""
        with self._lock:
            self._mapping = mapping
            changes = Changes()
            for name, obj in list(self._objects.items()):
                cls = mapping.get(obj.class_id)
                if cls is None:
                    del self._objects[name]
                    changes.removed.append(name)
                else:
                    obj.file, obj.static, obj.srdf = cls.file, cls.static, cls.srdf
            if changes:
                self.version += 1
            return changes

    def update(self, detections: Iterable[Detection], now: float, left_out: int = 0) -> Changes:
        """Apply one batch of detections (one Detection3DArray) received at ``now``: its first
        ``max_detections`` (``left_out``: more the caller already left out, see :meth:`limit_batch`)."""
        changes = Changes(over_detections=int(left_out))
        with self._lock:
            dets, more = self.limit_batch(list(detections))
            changes.over_detections += more
            known = []
            unknown: set[str] = set()
            for det in dets:
                if self._mapping.get(det.class_id) is not None:
                    known.append(det)
                elif det.class_id not in unknown:
                    unknown.add(det.class_id)
                    changes.unknown.append(det.class_id)
            problems = pose_problems(np.array([d.pose for d in known], dtype=float),
                                     world_box=self.world_box) if known else []
            by_class: dict[str, list[Detection]] = {}
            for det, problem in zip(known, problems):
                if problem is not None:
                    changes.rejected.append(f"{det.class_id}: {problem}")
                else:
                    by_class.setdefault(det.class_id, []).append(det)
            refused: dict[str, int] = {}
            for class_id, class_dets in by_class.items():
                self._update_class(class_id, class_dets, now, changes, refused)
            for reason, count in refused.items():
                changes.limited.append(f"{count} new bodies refused: {reason}")
                changes.over_bodies += count
            if changes:
                self.version += 1
        return changes

    def _update_class(self, class_id: str, dets: list[Detection], now: float, changes: Changes,
                      refused: dict[str, int]) -> None:
        cls = self._mapping.get(class_id)
        mine = {n: o for n, o in self._objects.items() if o.class_id == class_id}
        assigned: dict[int, str] = {}
        taken: set[str] = set()
        # 1. the detector's id
        by_track: dict[str, list[str]] = {}
        for n, o in mine.items():
            if o.track_id:
                by_track.setdefault(o.track_id, []).append(n)
        for i, det in enumerate(dets):
            if det.id:
                name = next((n for n in by_track.get(det.id, ()) if n not in taken), None)
                if name is not None:
                    assigned[i] = name
                    taken.add(name)
        # 2. nearest body in reach, closest pairs first
        free_dets = [i for i in range(len(dets)) if i not in assigned]
        free_bodies = [n for n in mine if n not in taken]
        for i, name in _nearest_pairs([dets[i].pose[:3, 3] for i in free_dets],
                                      [mine[n].pose[:3, 3] for n in free_bodies], cls.match_distance):
            i, name = free_dets[i], free_bodies[name]
            if i in assigned or name in taken:
                continue
            assigned[i] = name
            taken.add(name)
        # 3. continue the matched bodies, start new ones for the rest
        matched = sorted(assigned)
        moves = dict(zip(matched, _beyond_jitter(np.array([dets[i].pose for i in matched]),
                                                 np.array([mine[assigned[i]].pose for i in matched]),
                                                 cls.jitter, cls.jitter_angle)))
        names = self._free_names(class_id)
        count = len(mine)
        for i, det in enumerate(dets):
            name = assigned.get(i)
            if name is None:
                if len(self._objects) >= self.max_bodies:
                    reason = f"already {len(self._objects)} bodies (max_bodies {self.max_bodies})"
                    refused[reason] = refused.get(reason, 0) + 1
                    continue
                if cls.max_instances and count >= cls.max_instances:
                    reason = f"{class_id}: already {cls.max_instances} bodies (max_instances)"
                    refused[reason] = refused.get(reason, 0) + 1
                    continue
                name = next(names)
                self._objects[name] = WorldObject(name, class_id, np.array(det.pose, dtype=float), cls.file,
                                                  cls.static, det.id, now, now, 0, 1, cls.srdf)
                changes.added.append(name)
                count += 1
                continue
            obj = self._objects[name]
            obj.last_seen = max(obj.last_seen, now)
            obj.detections += 1
            if name in self._held:           # carried: seen, not moved by the detector
                continue
            if det.id:
                obj.track_id = det.id
            if moves[i]:
                obj.pose = np.array(det.pose, dtype=float)
                obj.updates += 1
                changes.moved.append(name)

    def _free_names(self, class_id: str) -> Iterator[str]:
        """Names ``<class>_<n>`` not in use, smallest n first (one cursor: a batch scans each n once)."""
        n = 0
        while True:
            name = f"{class_id}_{n}"
            if name not in self._objects:
                yield name
            n += 1

    def expire(self, now: float) -> Changes:
        """Remove every non-static body last detected more than its class's timeout before ``now``."""
        changes = Changes()
        with self._lock:
            for name, obj in list(self._objects.items()):
                cls = self._mapping.get(obj.class_id)
                if obj.static or cls is None or name in self._held:
                    continue
                if now - obj.last_seen > cls.timeout:
                    del self._objects[name]
                    changes.removed.append(name)
            if changes:
                self.version += 1
        return changes

    def remove(self, name: str) -> bool:
        with self._lock:
            if self._objects.pop(name, None) is None:
                return False
            self._held.discard(name)
            self.version += 1
            return True

    def hold(self, name: str) -> bool:
        """A robot carries body ``name``: detections no longer move it, it does not expire."""
        with self._lock:
            if name not in self._objects:
                return False
            self._held.add(name)
            return True

    def release(self, name: str, pose: np.ndarray, now: float) -> Changes:
        """A carried body put down at ``pose`` (world frame); its timeout runs from ``now``."""
        changes = Changes()
        with self._lock:
            obj = self._objects.get(name)
            if obj is None or name not in self._held:
                return changes
            self._held.discard(name)
            problem = pose_problem(pose) or outside(np.asarray(pose, dtype=float)[:3, 3], self.world_box)
            if problem is not None:
                changes.rejected.append(f"{name}: {problem}")
                return changes
            obj.pose = np.array(pose, dtype=float)
            obj.last_seen = max(obj.last_seen, now)
            obj.updates += 1
            changes.moved.append(name)
            self.version += 1
        return changes

    def is_held(self, name: str) -> bool:
        with self._lock:
            return name in self._held

    def next_expiry(self) -> Optional[float]:
        """Earliest time at which :meth:`expire` will remove a body (None: no body can expire)."""
        with self._lock:
            times = [o.last_seen + self._mapping.get(o.class_id).timeout for o in self._objects.values()
                     if not o.static and self._mapping.get(o.class_id) is not None]
            return min(times) if times else None
