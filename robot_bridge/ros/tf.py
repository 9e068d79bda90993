"""TransformStamped / TFMessage conversions from 4x4 numpy transforms."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from ..model.transform import from_quat_xyzw, make, to_quat_xyzw


def transform_stamped(parent: str, child: str, matrix: np.ndarray, stamp) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    t = msg.transform.translation
    t.x, t.y, t.z = (float(v) for v in np.asarray(matrix)[:3, 3])
    r = msg.transform.rotation
    r.x, r.y, r.z, r.w = (float(v) for v in to_quat_xyzw(matrix))
    return msg


def tf_message(transforms: Iterable, stamp) -> TFMessage:
    """TFMessage from objects with ``parent``, ``child``, ``matrix`` (e.g. FrameTransform)."""
    return TFMessage(transforms=[transform_stamped(t.parent, t.child, t.matrix, stamp) for t in transforms])


def matrix(msg: TransformStamped) -> np.ndarray:
    """4x4 of a TransformStamped (inverse of :func:`transform_stamped`)."""
    t, r = msg.transform.translation, msg.transform.rotation
    return make(from_quat_xyzw([r.x, r.y, r.z, r.w]), [t.x, t.y, t.z])


class TFBatchBuilder:
    """Serialised /tf messages for batches of moving transforms, without Python message objects.

    For each set of (parent, child) frames the CDR bytes of one TFMessage are
    produced once by rclpy with sentinel values, and the byte positions of the
    stamps and of the 7 doubles of every transform are located in them; a
    message then costs two numpy byte scatters (``Publisher.publish`` accepts
    serialised bytes).  The sentinel search keeps the layout rclpy's own: no
    hand-written CDR.
    """

    MAX_TEMPLATES = 64

    def __init__(self):
        self._cache: dict[tuple[str, ...], tuple] = {}

    @staticmethod
    def _template(parents: Sequence[str], children: Sequence[str]):
        from rclpy.serialization import serialize_message

        n = len(children)
        values = 1e300 * (1.0 + np.arange(n * 7).reshape(n, 7) / 1024.0)     # unique, exactly representable
        msg = TFMessage()
        for i, (parent, child) in enumerate(zip(parents, children, strict=True)):
            ts = TransformStamped()
            ts.header.frame_id, ts.child_frame_id = parent, child
            ts.header.stamp.sec, ts.header.stamp.nanosec = 0x5EC00000 + i, 0x0A500000 + i
            t, r = ts.transform.translation, ts.transform.rotation
            t.x, t.y, t.z, r.x, r.y, r.z, r.w = (float(v) for v in values[i])
            msg.transforms.append(ts)
        data = serialize_message(msg)
        order = "<" if data[1] == 1 else ">"              # CDR encapsulation: 0x0001 = little endian

        def find(pattern: bytes) -> int:
            at = data.find(pattern)
            if at < 0 or data.find(pattern, at + 1) >= 0:
                raise RuntimeError("TFMessage template: sentinel not found exactly once")
            return at

        value_idx, stamp_idx = [], []
        for i in range(n):
            for v in values[i]:
                at = find(np.array([v], dtype=order + "f8").tobytes())
                value_idx.extend(range(at, at + 8))
            at = find(np.array([0x5EC00000 + i, 0x0A500000 + i], dtype=order + "u4").tobytes())
            stamp_idx.extend(range(at, at + 8))
        return (np.frombuffer(data, dtype=np.uint8).copy(), np.array(value_idx, dtype=np.intp),
                np.array(stamp_idx, dtype=np.intp).reshape(n, 8), order)

    def serialize(self, parents: Sequence[str], children: Sequence[str], values: np.ndarray, sec: int,
                  nanosec: int) -> bytes:
        """CDR bytes of the TFMessage; ``values``: (n, 7) rows of translation x y z, quaternion x y z w."""
        key = tuple(children)
        cached = self._cache.get(key)
        if cached is None:
            if len(self._cache) >= self.MAX_TEMPLATES:     # joint subsets vary: keep memory bounded
                self._cache.clear()
            cached = self._cache[key] = self._template(parents, children)
        buf, value_idx, stamp_idx, order = cached
        buf[value_idx] = np.asarray(values, dtype=order + "f8").view(np.uint8).reshape(-1)
        # builtin_interfaces/Time: int32 sec (a stamp may be negative), uint32 nanosec
        stamp = (np.array([sec], dtype=order + "i4").tobytes()
                 + np.array([nanosec], dtype=order + "u4").tobytes())
        buf[stamp_idx] = np.frombuffer(stamp, np.uint8)
        return buf.tobytes()
