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
    """Reuses one TransformStamped per (parent, child) so a /tf message costs only field writes.

    rclpy serialises on ``publish``, so the returned message may be refilled
    afterwards.
    """

    def __init__(self):
        self._cache: dict[tuple[str, str], TransformStamped] = {}

    def build(self, parents: Sequence[str], children: Sequence[str], translations: np.ndarray,
              quaternions: np.ndarray, stamp) -> TFMessage:
        out = []
        tl = translations.tolist()
        ql = quaternions.tolist()
        for parent, child, (x, y, z), (qx, qy, qz, qw) in zip(parents, children, tl, ql, strict=True):
            msg = self._cache.get((parent, child))
            if msg is None:
                msg = self._cache[(parent, child)] = TransformStamped()
                msg.header.frame_id = parent
                msg.child_frame_id = child
            msg.header.stamp = stamp
            t = msg.transform.translation
            t.x, t.y, t.z = x, y, z
            r = msg.transform.rotation
            r.x, r.y, r.z, r.w = qx, qy, qz, qw
            out.append(msg)
        return TFMessage(transforms=out)
