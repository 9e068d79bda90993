"""Attach and detach requests judged at their stamp: when world_node may compute a grasp's or put-down's pose.

A request (an AttachedCollisionObject ADD or REMOVE on world_node's ``~/attach``) names a link and the time
of the grasp or release (its stamp; none or 0: now).  The held body's offset (ADD) and its put-down pose
(REMOVE) come from the link's TF at that time; but /tf is a queue the node works through in order, and
under load its newest sample can be well behind the request.  So a request waits until the buffer holds
the link's transform at or after its stamp (:meth:`TFBuffer.latest_time` of the world frame and the link
has reached it) and is then looked up at the stamp.  Requests are kept in arrival order (the one at the
head blocks the others: an ADD and its REMOVE, a controller's ADD and the planner's repetition, stay in
order).  A bound keeps a request from waiting forever: when the link's TF makes no progress for
``patience`` seconds, when it has waited ``max_wait`` seconds, or when its stamp is more than ``max_wait``
ahead of the TF (another clock), it is done with the latest TF and :attr:`Due.late` says why.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Optional

from ..kinematics.tf_buffer import TFBuffer


@dataclass
class Due:
    """A request whose pose may be computed now: look the link up at ``time`` (None: the latest)."""

    payload: object
    time: Optional[float]
    late: str = ""                # why the latest TF is used for a stamped request ("" if it is not)


@dataclass
class _Pending:
    link: str
    stamp: Optional[float]
    payload: object
    since: float                  # when it was pushed (the caller's monotonic clock)
    progress: float               # when the link's latest common time last advanced
    seen: Optional[float] = None  # that latest common time (None: not known yet)


class AttachQueue:
    """FIFO of attach / detach requests, each released once TF covers its stamp (see the module)."""

    def __init__(self, patience: float = 2.0, max_wait: float = 10.0, max_items: int = 256):
        self.patience = float(patience)
        self.max_wait = float(max_wait)
        self.max_items = int(max_items)           # a peer's flood of requests is refused, not kept
        self._items: deque[_Pending] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def push(self, link: str, stamp: Optional[float], payload: object, now: float) -> bool:
        """Queue a request for ``link`` at ``stamp`` (seconds; None or 0: the latest TF); False (not
        queued) when ``max_items`` requests are already waiting."""
        with self._lock:
            if len(self._items) >= self.max_items:
                return False
            self._items.append(_Pending(link, stamp or None, payload, now, now))
            return True

    def due(self, tf: TFBuffer, world_frame: str, now: float) -> list[Due]:
        """Pop the requests (from the head, in order) that may be done now."""
        out = []
        with self._lock:
            while self._items:
                item = self._items[0]
                due = self._check(item, tf, world_frame, now)
                if due is None:
                    break
                self._items.popleft()
                out.append(due)
        return out

    def _check(self, item: _Pending, tf: TFBuffer, world_frame: str, now: float) -> Optional[Due]:
        if item.stamp is None:
            return Due(item.payload, None)
        try:
            latest: Optional[float] = tf.latest_time(world_frame, item.link)
        except LookupError:
            latest = None
        if latest is not None and latest >= item.stamp:
            return Due(item.payload, item.stamp)
        if latest is not None and (item.seen is None or latest > item.seen):
            item.seen, item.progress = latest, now
        if latest is not None and item.stamp - latest > self.max_wait:
            return Due(item.payload, None, f"its stamp is {item.stamp - latest:.3g} s ahead of the TF of "
                                           f"{item.link!r} (another clock?)")
        if now - item.progress >= self.patience:
            what = "no TF" if latest is None else f"no newer TF (latest {item.stamp - latest:.3g} s before)"
            return Due(item.payload, None, f"{what} of {item.link!r} for {now - item.progress:.3g} s")
        if now - item.since >= self.max_wait:
            return Due(item.payload, None, f"the TF of {item.link!r} has not reached its stamp in "
                                           f"{now - item.since:.3g} s")
        return None
