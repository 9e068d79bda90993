"""TransformStamped / TFMessage conversions from 4x4 numpy transforms."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from geometry_msgs.msg import TransformStamped
from scipy.spatial.transform import Rotation
from tf2_msgs.msg import TFMessage

from ..model.transform import make, to_quat_xyzw


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
    return make(Rotation.from_quat([r.x, r.y, r.z, r.w]).as_matrix(), [t.x, t.y, t.z])


class TFBatchBuilder:
    """Reuses one TFMessage per set of child frames, so a /tf message costs only field writes.

    rclpy serialises on ``publish``, so the returned message may be refilled
    afterwards.
    """

    def __init__(self):
        self._cache: dict[tuple[str, ...], tuple[TFMessage, list]] = {}

    def build(self, parents: Sequence[str], children: Sequence[str], values: np.ndarray, stamp) -> TFMessage:
        """``values``: (n, 7) rows of translation x y z and quaternion x y z w."""
        key = tuple(children)
        cached = self._cache.get(key)
        if cached is None:
            parts = []
            msgs = []
            for parent, child in zip(parents, children, strict=True):
                msg = TransformStamped()
                msg.header.frame_id = parent
                msg.child_frame_id = child
                msgs.append(msg)
                parts.append((msg.header, msg.transform.translation, msg.transform.rotation))
            cached = self._cache[key] = (TFMessage(transforms=msgs), parts)
        message, parts = cached
        for (header, t, r), (x, y, z, qx, qy, qz, qw) in zip(parts, values.tolist(), strict=True):
            header.stamp = stamp
            t.x, t.y, t.z = x, y, z
            r.x, r.y, r.z, r.w = qx, qy, qz, qw
        return message
