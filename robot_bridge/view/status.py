"""When each topic was last heard from, and which are stale (no message for ``stale_after`` seconds).

A latched topic (robot_description, markers, /tf_static) is never stale once heard: it is published once.
Times are ``time.monotonic()`` seconds, given by the caller (tests pass their own)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

DEFAULT_STALE_AFTER = 2.0           # s


@dataclass
class TopicState:
    name: str
    latched: bool = False
    stale_after: float = DEFAULT_STALE_AFTER
    count: int = 0
    last: float | None = None        # monotonic s of the last message


class TopicStatus:
    def __init__(self):
        self._lock = threading.Lock()
        self._topics: dict[str, TopicState] = {}

    def watch(self, name: str, latched: bool = False, stale_after: float = DEFAULT_STALE_AFTER) -> None:
        with self._lock:
            self._topics.setdefault(name, TopicState(name, latched, float(stale_after)))

    def heard(self, name: str, now: float, count: int = 1) -> None:
        with self._lock:
            state = self._topics.setdefault(name, TopicState(name))
            state.count += count
            state.last = now

    def state(self, name: str, now: float) -> str:
        """``waiting`` (never heard), ``live``, or ``stale``."""
        with self._lock:
            s = self._topics[name]
            if s.last is None:
                return "waiting"
            return "live" if s.latched or now - s.last <= s.stale_after else "stale"

    def stale(self, now: float) -> list[str]:
        return [n for n in self.names() if self.state(n, now) == "stale"]

    def names(self) -> list[str]:
        with self._lock:
            return list(self._topics)

    def report(self, now: float) -> str:
        """Markdown lines: topic, state, age of the last message, messages so far."""
        rows = []
        for name in self.names():
            with self._lock:
                s = self._topics[name]
                last, count = s.last, s.count
            state = self.state(name, now)
            age = "-" if last is None else f"{now - last:.1f} s ago"
            mark = {"stale": "**STALE**", "waiting": "waiting", "live": "live"}[state]
            rows.append(f"- `{name}` {mark}, {age}, {count} msgs")
        return "\n".join(rows)
