"""Serialized tf2_msgs/TFMessage (CDR) -> latest pose per child frame, without rclpy.

At 1 kHz a robot's /tf carries the same frames in every message: of the messages that arrived since the
last page update only the newest needs decoding.  :class:`LatestTF` decodes a batch newest first and skips
an older message whose frame names are byte-for-byte those of one already decoded (same length, same bytes
at the decoded message's string offsets): every pose in it is superseded.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import SchemaError

MAX_TRANSFORMS = 100_000            # per message (a TransformStamped is at least 72 bytes anyway)
MAX_FRAME_NAME = 1024               # bytes
MAX_FRAMES = 100_000                # frames kept by LatestTF
MAX_CHAIN = 1000
_MIN_TRANSFORM_BYTES = 8 + 4 + 4 + 56


@dataclass
class Decoded:
    parents: list[str]
    children: list[str]
    stamps: np.ndarray               # (n,) s
    matrices: np.ndarray             # (n, 4, 4)
    name_mask: np.ndarray            # 0xFF on every frame-name byte (with its length word), else 0
    size: int
    value_at: np.ndarray = None      # (n,) byte offset of each transform's 7 doubles
    stamp_at: np.ndarray = None      # (n,) byte offset of each header stamp (int32 sec, uint32 nanosec)
    order: str = "<"


@dataclass
class _Layout:
    """A decoded message's frame names and where its numbers are: a newer message with the same names (same
    length, same bytes under ``mask``) is read by two numpy gathers, not parsed."""

    mask: np.ndarray
    names: np.ndarray                # the message's bytes under mask
    parents: list[str]
    children: list[str]
    value_index: np.ndarray          # (n * 56,) byte indices of the doubles
    stamp_index: np.ndarray          # (n * 8,)
    order: str

    @classmethod
    def of(cls, msg: "Decoded", raw: bytes) -> "_Layout":
        value_index = (msg.value_at[:, None] + np.arange(56)).ravel()
        stamp_index = (msg.stamp_at[:, None] + np.arange(8)).ravel()
        return cls(msg.name_mask, np.frombuffer(raw, dtype=np.uint8) & msg.name_mask, msg.parents,
                   msg.children, value_index, stamp_index, msg.order)

    def matches(self, raw: bytes) -> bool:
        return len(raw) == len(self.mask) and np.array_equal(np.frombuffer(raw, dtype=np.uint8) & self.mask,
                                                             self.names)

    def read(self, raw: bytes) -> "Decoded":
        buf = np.frombuffer(raw, dtype=np.uint8)
        values = buf[self.value_index].view(self.order + "f8").reshape(-1, 7)
        stamp = buf[self.stamp_index].reshape(-1, 8)
        sec = stamp[:, :4].copy().view(self.order + "i4").ravel()
        nsec = stamp[:, 4:].copy().view(self.order + "u4").ravel()
        return Decoded(self.parents, self.children, sec + nsec * 1e-9, quat_matrices(values), self.mask,
                       len(raw))


def _string(data: bytes, pos: int, order: str) -> tuple[str, int, int]:
    pos += (-(pos - 4)) % 4
    if pos + 4 > len(data):
        raise SchemaError(f"TFMessage: string length past the end at byte {pos}")
    (n,) = struct.unpack_from(order + "I", data, pos)
    start = pos + 4
    if n == 0 or n > MAX_FRAME_NAME + 1 or start + n > len(data):
        raise SchemaError(f"TFMessage: frame name of {n} bytes at byte {pos} (expected 1.."
                          f"{MAX_FRAME_NAME + 1}, within the message)")
    raw = data[start:start + n - 1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SchemaError(f"TFMessage: frame name at byte {pos} is not UTF-8") from None
    return text, start, start + n


def quat_matrices(values: np.ndarray) -> np.ndarray:
    """(n, 7) translation xyz + quaternion xyzw -> (n, 4, 4); a quaternion is normalized (zero: identity)."""
    v = np.asarray(values, dtype=float).reshape(-1, 7)
    q = v[:, 3:7].copy()
    norm = np.linalg.norm(q, axis=1)
    q[norm == 0] = (0.0, 0.0, 0.0, 1.0)
    norm[norm == 0] = 1.0
    x, y, z, w = (q / norm[:, None]).T
    out = np.zeros((len(v), 4, 4))
    out[:, 0, 0] = 1 - 2 * (y * y + z * z)
    out[:, 0, 1] = 2 * (x * y - z * w)
    out[:, 0, 2] = 2 * (x * z + y * w)
    out[:, 1, 0] = 2 * (x * y + z * w)
    out[:, 1, 1] = 1 - 2 * (x * x + z * z)
    out[:, 1, 2] = 2 * (y * z - x * w)
    out[:, 2, 0] = 2 * (x * z - y * w)
    out[:, 2, 1] = 2 * (y * z + x * w)
    out[:, 2, 2] = 1 - 2 * (x * x + y * y)
    out[:, :3, 3] = v[:, :3]
    out[:, 3, 3] = 1.0
    return out


def decode(data: bytes) -> Decoded:
    """One serialized TFMessage; SchemaError (naming the byte offset) when it is not one."""
    data = bytes(data)
    if len(data) < 8 or data[0] != 0 or data[1] not in (0, 1):
        raise SchemaError("TFMessage: expected a CDR encapsulation header (00 00 or 00 01)")
    order = "<" if data[1] == 1 else ">"
    (count,) = struct.unpack_from(order + "I", data, 4)
    if count > min(MAX_TRANSFORMS, (len(data) - 8) // _MIN_TRANSFORM_BYTES):
        raise SchemaError(f"TFMessage: {count} transforms do not fit in {len(data)} bytes")
    pos = 8
    parents, children, spans = [], [], []
    stamps = np.empty(count)
    values = []
    value_at = np.empty(count, dtype=np.int64)
    stamp_at = np.empty(count, dtype=np.int64)
    unpack_stamp = struct.Struct(order + "iI").unpack_from
    unpack_values = struct.Struct(order + "7d").unpack_from
    for i in range(count):
        pos += (-(pos - 4)) % 4
        if pos + 8 > len(data):
            raise SchemaError(f"TFMessage: transform {i} past the end at byte {pos}")
        sec, nsec = unpack_stamp(data, pos)
        stamps[i] = sec + nsec * 1e-9
        stamp_at[i] = pos
        parent, s0, end = _string(data, pos + 8, order)
        child, s1, pos = _string(data, end, order)
        spans += [(s0 - 4, end), (s1 - 4, pos)]           # length words and bytes of both names
        pos += (-(pos - 4)) % 8
        if pos + 56 > len(data):
            raise SchemaError(f"TFMessage: transform {i} ({child!r}) past the end at byte {pos}")
        values.append(unpack_values(data, pos))
        value_at[i] = pos
        pos += 56
        parents.append(parent)
        children.append(child)
    mask = np.zeros(len(data), dtype=np.uint8)
    for a, b in spans:
        mask[a:b] = 0xFF
    matrices = quat_matrices(np.array(values, dtype=float).reshape(-1, 7))
    return Decoded(parents, children, stamps, matrices, mask, len(data), value_at, stamp_at, order)


class LatestTF:
    """The latest transform of every child frame (dynamic and static), and frame poses in a fixed frame.

    Thread-safe.  Non-finite transforms and frames that would make a loop are ignored (counted in
    ``rejected``); messages that do not decode are counted in ``bad_messages`` with the last reason."""

    def __init__(self):
        self._lock = threading.Lock()
        self._edges: dict[str, tuple[str, np.ndarray, float]] = {}     # child -> (parent, matrix, stamp)
        self._static: set[str] = set()
        self.version = 0                # bumped on every change
        self._topology = 0              # bumped when a frame appears or changes parent
        self._tree = None               # (topology, frames index, parent index, levels, root index)
        self._layout: _Layout | None = None      # of the last /tf message decoded
        self.decoded = self.skipped = self.rejected = self.bad_messages = 0
        self.last_error = ""

    def add_batch(self, messages: list[bytes], static: bool = False) -> None:
        """Messages in arrival order; the newest pose of each frame wins."""
        seen: set[str] = set()
        layouts: list[tuple[int, np.ndarray, bytes]] = []     # (size, name byte indices, the name bytes)
        for raw in reversed(messages):
            if not static and self._superseded(raw, layouts):
                self.skipped += 1
                continue
            try:
                layout = self._layout
                if not static and layout is not None and layout.matches(raw):
                    msg = layout.read(raw)
                else:
                    msg = decode(raw)
                    if not static and msg.children:
                        self._layout = _Layout.of(msg, raw)
            except SchemaError as exc:
                self.bad_messages += 1
                self.last_error = str(exc)
                continue
            self.decoded += 1
            if msg.children:
                where = np.flatnonzero(msg.name_mask)
                layouts.append((len(raw), where, np.frombuffer(raw, dtype=np.uint8)[where].tobytes()))
            finite = np.isfinite(msg.matrices).all(axis=(1, 2))
            with self._lock:
                for i in range(len(msg.children) - 1, -1, -1):
                    child = msg.children[i]
                    if child in seen:
                        continue
                    seen.add(child)
                    self._set(msg.parents[i], child, msg.matrices[i], float(msg.stamps[i]), static,
                              bool(finite[i]))

    @staticmethod
    def _superseded(raw: bytes, layouts) -> bool:
        """Same size and the same bytes at a decoded message's frame names: every pose in it is older."""
        view = None
        for size, where, names in layouts:
            if len(raw) != size:
                continue
            if view is None:
                view = np.frombuffer(raw, dtype=np.uint8)
            if view[where].tobytes() == names:
                return True
        return False

    def _set(self, parent: str, child: str, matrix: np.ndarray, stamp: float, static: bool,
             finite: bool | None = None) -> None:
        if parent[:1] == "/":
            parent = parent.lstrip("/")
        if child[:1] == "/":
            child = child.lstrip("/")
        if finite is None:
            finite = bool(np.isfinite(matrix).all())
        edge = self._edges.get(child)
        if edge is not None and edge[0] == parent and finite:       # a known edge moved: no loop check
            if static or child not in self._static:
                self._edges[child] = (parent, matrix, stamp)
                if static:
                    self._static.add(child)
                self.version += 1
            return
        if not parent or not child or parent == child or not finite:
            self.rejected += 1
            return
        if child in self._static and not static:
            return                                      # tf2: a static frame is not moved by /tf
        if child not in self._edges and len(self._edges) >= MAX_FRAMES:
            self.rejected += 1
            return
        frame = parent                                  # refuse a loop through child
        for _ in range(MAX_CHAIN):
            if frame == child:
                self.rejected += 1
                return
            edge = self._edges.get(frame)
            if edge is None:
                break
            frame = edge[0]
        self._edges[child] = (parent, matrix, stamp)
        if static:
            self._static.add(child)
        self.version += 1
        self._topology += 1

    def set(self, parent: str, child: str, matrix, stamp: float = 0.0, static: bool = False) -> None:
        with self._lock:
            self._set(parent, child, np.asarray(matrix, dtype=float), stamp, static)

    def frames(self) -> set[str]:
        with self._lock:
            return set(self._edges) | {p for p, _, _ in self._edges.values()}

    def _tree_of(self):
        """(frame -> index, parent index (-1: a root), index arrays by depth below the roots, root index),
        rebuilt when a frame appears or changes parent.  Call with the lock held."""
        if self._tree is not None and self._tree[0] == self._topology:
            return self._tree[1:]
        frames = list(self._edges) + [p for p, _, _ in self._edges.values() if p not in self._edges]
        index = {f: i for i, f in enumerate(dict.fromkeys(frames))}
        parent = np.full(len(index), -1, dtype=np.int64)
        for child, (p, _, _) in self._edges.items():
            parent[index[child]] = index[p]
        depth = np.zeros(len(index), dtype=np.int64)
        root = np.arange(len(index))
        for i in range(len(index)):                 # the edges make no loop (_set refuses them)
            d, f = 0, i
            while parent[f] >= 0 and d <= MAX_CHAIN:
                f, d = parent[f], d + 1
            depth[i], root[i] = d, f
        levels = [np.flatnonzero(depth == d) for d in range(1, int(depth.max(initial=0)) + 1)]
        self._tree = (self._topology, index, parent, levels, root)
        return self._tree[1:]

    def poses(self, fixed: str, frames) -> dict[str, np.ndarray]:
        """Pose of each of ``frames`` in ``fixed`` (frames not connected to it are left out): every frame's
        pose in its tree's root by one batched product per tree depth."""
        fixed = fixed.lstrip("/")
        frames = [f.lstrip("/") for f in frames]
        with self._lock:
            index, parent, levels, root = self._tree_of()
            if fixed not in index:
                return {f: np.eye(4) for f in frames if f == fixed}
            local = np.empty((len(index), 4, 4))
            local[:] = np.eye(4)
            for child, (_p, m, _s) in self._edges.items():
                local[index[child]] = m
        pose = local
        for level in levels:
            pose[level] = pose[parent[level]] @ local[level]
        f = index[fixed]
        wanted = [(name, index[name]) for name in frames if name in index and root[index[name]] == root[f]]
        if not wanted:
            return {}
        rel = np.linalg.inv(pose[f]) @ pose[[i for _, i in wanted]]
        return {name: rel[k] for k, (name, _) in enumerate(wanted)}

    def stamp(self, child: str) -> float | None:
        with self._lock:
            edge = self._edges.get(child.lstrip("/"))
            return None if edge is None else edge[2]
