"""When ``robot-bridge run`` calls its nodes ready: each node can serve, or the line says why not (no rclpy).

A node may define ``readiness()`` returning a :class:`Readiness` (or None for ready): planner_node is ready
once its planning model is built from a robot_description, controller_node once it published its first
joint state.  A node with a ``load_error`` is not ready, for good; any other node is ready once it exists.
:func:`wait` polls them until every one is ready or settled (waiting cannot change it), a stop request, or
the bound; :func:`ready_line` lists the ready ones and, for each other, the reason.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple, Sequence

POLL = 0.05          # s between looks at the nodes' states


class Readiness(NamedTuple):
    reason: str = ""             # empty: the node serves
    settled: bool = False        # not ready and waiting will not change it (a load error, no hardware)

    @property
    def ready(self) -> bool:
        return not self.reason


def of(node) -> Readiness:
    """The readiness of ``node`` now."""
    error = getattr(node, "load_error", None)
    if error:
        return Readiness(str(error), True)
    probe = getattr(node, "readiness", None)
    state = probe() if probe is not None else None
    return state if state is not None else Readiness()


def wait(nodes: Sequence, timeout: float, stop: threading.Event,
         clock: Callable[[], float] = time.monotonic) -> list[Readiness]:
    """Each node's readiness once all are ready or settled, at a stop request, or after ``timeout`` s."""
    deadline = clock() + max(0.0, timeout)
    while True:
        states = [of(n) for n in nodes]
        if all(s.ready or s.settled for s in states) or stop.is_set() or clock() >= deadline:
            return states
        stop.wait(POLL)


def ready_line(names: Sequence[str], states: Sequence[Readiness], detail: str, prefix: str) -> str:
    """``<prefix>: <ready names> (<detail>)``, then ``; not ready: <name>: <reason>`` for each other node."""
    ready = [n for n, s in zip(names, states) if s.ready]
    line = f"{prefix}: {', '.join(ready) or 'no node'} ({detail})"
    others = [f"{n}: not ready: {s.reason}" for n, s in zip(names, states) if not s.ready]
    return line + ("; " + "; ".join(others) if others else "")

