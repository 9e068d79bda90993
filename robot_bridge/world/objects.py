"""The world model of detected objects: tracks of detections, each an environment body.

``WorldObjects(mapping)`` turns detections (class id, 4x4 pose in the world frame, optional detector id)
into named bodies ``<class>_<n>``:

- a detection continues the body of its class with the same detector id, else the nearest body of its
  class within ``match_distance`` not yet continued by this batch, else it starts a new body (unless the
  class has ``max_instances`` bodies already); ``<n>`` is the smallest index not in use;
- a continued body moves only when the new pose differs by more than ``jitter`` (m) or ``jitter_angle``
  (rad): detector noise does not count as motion;
- ``expire(now)`` removes every non-``static`` body not detected for its class's ``timeout``;
- a body that is held (``hold``: carried by a robot) neither moves with detections nor expires until
  ``release``d at the pose where it was put down;
- unknown class ids and non-finite or non-rigid poses are refused and reported in the returned
  :class:`Changes`, never stored.

All methods are thread-safe (one lock); :meth:`snapshot` returns copies.  Times are seconds of any one
clock the caller uses consistently (the node: its clock at reception).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from ..model.transform import is_rigid
from .mapping import ObjectMapping


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

    def copy(self) -> "WorldObject":
        return WorldObject(self.name, self.class_id, self.pose.copy(), self.file, self.static, self.track_id,
                           self.first_seen, self.last_seen, self.updates, self.detections)


@dataclass
class Changes:
    added: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)           # class ids not in the mapping
    rejected: list[str] = field(default_factory=list)          # why a detection was refused

    def __bool__(self) -> bool:
        """True when the set of bodies or a pose changed."""
        return bool(self.added or self.moved or self.removed)

    def extend(self, other: "Changes") -> "Changes":
        for name in ("added", "moved", "removed", "unknown", "rejected"):
            getattr(self, name).extend(getattr(other, name))
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


class WorldObjects:
    def __init__(self, mapping: ObjectMapping):
        self._lock = threading.RLock()
        self._mapping = mapping
        self._objects: dict[str, WorldObject] = {}
        self._held: set[str] = set()
        self.version = 0                       # incremented on every change of bodies or poses

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
                    obj.file, obj.static = cls.file, cls.static
            if changes:
                self.version += 1
            return changes

    def update(self, detections: Iterable[Detection], now: float) -> Changes:
        """Apply one batch of detections (one Detection3DArray) received at ``now``."""
        changes = Changes()
        with self._lock:
            by_class: dict[str, list[Detection]] = {}
            for det in detections:
                if self._mapping.get(det.class_id) is None:
                    if det.class_id not in changes.unknown:
                        changes.unknown.append(det.class_id)
                    continue
                problem = pose_problem(det.pose)
                if problem is not None:
                    changes.rejected.append(f"{det.class_id}: {problem}")
                    continue
                by_class.setdefault(det.class_id, []).append(det)
            for class_id, dets in by_class.items():
                self._update_class(class_id, dets, now, changes)
            if changes:
                self.version += 1
        return changes

    def _update_class(self, class_id: str, dets: list[Detection], now: float, changes: Changes) -> None:
        cls = self._mapping.get(class_id)
        mine = {n: o for n, o in self._objects.items() if o.class_id == class_id}
        assigned: dict[int, str] = {}
        taken: set[str] = set()
        # 1. the detector's id
        for i, det in enumerate(dets):
            if det.id:
                name = next((n for n, o in mine.items() if o.track_id == det.id and n not in taken), None)
                if name is not None:
                    assigned[i] = name
                    taken.add(name)
        # 2. nearest body in reach, closest pairs first
        pairs = sorted((float(np.linalg.norm(det.pose[:3, 3] - obj.pose[:3, 3])), i, n)
                       for i, det in enumerate(dets) if i not in assigned
                       for n, obj in mine.items() if n not in taken)
        for distance, i, name in pairs:
            if distance > cls.match_distance:
                break
            if i in assigned or name in taken:
                continue
            assigned[i] = name
            taken.add(name)
        # 3. continue the matched bodies, start new ones for the rest
        for i, det in enumerate(dets):
            name = assigned.get(i)
            if name is None:
                if cls.max_instances and sum(o.class_id == class_id for o in self._objects.values()) \
                        >= cls.max_instances:
                    changes.rejected.append(f"{class_id}: already {cls.max_instances} bodies (max_instances)")
                    continue
                name = self._free_name(class_id)
                self._objects[name] = WorldObject(name, class_id, np.array(det.pose, dtype=float), cls.file,
                                                  cls.static, det.id, now, now, 0, 1)
                changes.added.append(name)
                continue
            obj = self._objects[name]
            obj.last_seen = max(obj.last_seen, now)
            obj.detections += 1
            if name in self._held:           # carried: seen, not moved by the detector
                continue
            if det.id:
                obj.track_id = det.id
            shift = float(np.linalg.norm(det.pose[:3, 3] - obj.pose[:3, 3]))
            if shift > cls.jitter or rotation_angle(obj.pose, det.pose) > cls.jitter_angle:
                obj.pose = np.array(det.pose, dtype=float)
                obj.updates += 1
                changes.moved.append(name)

    def _free_name(self, class_id: str) -> str:
        n = 0
        while f"{class_id}_{n}" in self._objects:
            n += 1
        return f"{class_id}_{n}"

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
            problem = pose_problem(pose)
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
