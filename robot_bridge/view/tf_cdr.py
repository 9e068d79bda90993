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
    unpack_stamp = struct.Struct(order + "iI").unpack_from
    unpack_values = struct.Struct(order + "7d").unpack_from
    for i in range(count):
        pos += (-(pos - 4)) % 4
        if pos + 8 > len(data):
            raise SchemaError(f"TFMessage: transform {i} past the end at byte {pos}")
        sec, nsec = unpack_stamp(data, pos)
        stamps[i] = sec + nsec * 1e-9
        parent, s0, end = _string(data, pos + 8, order)
        child, s1, pos = _string(data, end, order)
        spans += [(s0 - 4, end), (s1 - 4, pos)]           # length words and bytes of both names
        pos += (-(pos - 4)) % 8
        if pos + 56 > len(data):
            raise SchemaError(f"TFMessage: transform {i} ({child!r}) past the end at byte {pos}")
        values.append(unpack_values(data, pos))
        pos += 56
        parents.append(parent)
        children.append(child)
    mask = np.zeros(len(data), dtype=np.uint8)
    for a, b in spans:
        mask[a:b] = 0xFF
    matrices = quat_matrices(np.array(values, dtype=float).reshape(-1, 7))
    return Decoded(parents, children, stamps, matrices, mask, len(data))


class LatestTF:
    """The latest transform of every child frame (dynamic and static), and frame poses in a fixed frame.

    Thread-safe.  Non-finite transforms and frames that would make a loop are ignored (counted in
    ``rejected``); messages that do not decode are counted in ``bad_messages`` with the last reason."""

    def __init__(self):
        self._lock = threading.Lock()
        self._edges: dict[str, tuple[str, np.ndarray, float]] = {}     # child -> (parent, matrix, stamp)
        self._static: set[str] = set()
        self.version = 0                # bumped on every change
        self.decoded = self.skipped = self.rejected = self.bad_messages = 0
        self.last_error = ""

    def add_batch(self, messages: list[bytes], static: bool = False) -> None:
        """Messages in arrival order; the newest pose of each frame wins."""
        seen: set[str] = set()
        layouts: list[tuple[np.ndarray, np.ndarray]] = []     # (name mask, the names under it)
        for raw in reversed(messages):
            if not static and self._superseded(raw, layouts):
                self.skipped += 1
                continue
            try:
                msg = decode(raw)
            except SchemaError as exc:
                self.bad_messages += 1
                self.last_error = str(exc)
                continue
            self.decoded += 1
            if msg.children:
                layouts.append((msg.name_mask, np.frombuffer(raw, dtype=np.uint8) & msg.name_mask))
            with self._lock:
                for i in range(len(msg.children) - 1, -1, -1):
                    child = msg.children[i]
                    if child in seen:
                        continue
                    seen.add(child)
                    self._set(msg.parents[i], child, msg.matrices[i], float(msg.stamps[i]), static)

    @staticmethod
    def _superseded(raw: bytes, layouts) -> bool:
        if not layouts:
            return False
        view = None
        for mask, names in layouts:
            if len(raw) != len(mask):
                continue
            if view is None:
                view = np.frombuffer(raw, dtype=np.uint8)
            if np.array_equal(view & mask, names):
                return True
        return False

    def _set(self, parent: str, child: str, matrix: np.ndarray, stamp: float, static: bool) -> None:
        parent, child = parent.lstrip("/"), child.lstrip("/")
        if not parent or not child or parent == child or not np.isfinite(matrix).all():
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

    def set(self, parent: str, child: str, matrix, stamp: float = 0.0, static: bool = False) -> None:
        with self._lock:
            self._set(parent, child, np.asarray(matrix, dtype=float), stamp, static)

    def frames(self) -> set[str]:
        with self._lock:
            return set(self._edges) | {p for p, _, _ in self._edges.values()}

    def poses(self, fixed: str, frames) -> dict[str, np.ndarray]:
        """Pose of each of ``frames`` in ``fixed`` (frames not connected to it are left out)."""
        fixed = fixed.lstrip("/")
        with self._lock:
            root_pose: dict[str, np.ndarray] = {}        # frame -> pose in its tree's root
            roots: dict[str, str] = {}

            def walk(frame: str) -> None:
                chain = []
                f = frame
                while f not in root_pose and f in self._edges and len(chain) < MAX_CHAIN:
                    chain.append(f)
                    f = self._edges[f][0]
                if f not in root_pose:
                    root_pose[f], roots[f] = np.eye(4), f
                for c in reversed(chain):
                    parent, m, _ = self._edges[c]
                    root_pose[c] = root_pose[parent] @ m
                    roots[c] = roots[parent]

            walk(fixed)
            out = {}
            fixed_inv = np.linalg.inv(root_pose[fixed])
            for frame in frames:
                frame = frame.lstrip("/")
                walk(frame)
                if roots[frame] == roots[fixed]:
                    out[frame] = fixed_inv @ root_pose[frame]
            return out

    def stamp(self, child: str) -> float | None:
        with self._lock:
            edge = self._edges.get(child.lstrip("/"))
            return None if edge is None else edge[2]
