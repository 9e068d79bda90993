"""CPU time of a process and of each of its threads, from /proc (the benches' one implementation)."""

from __future__ import annotations

import os
from pathlib import Path


def _ticks(stat: str) -> float:
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process so far."""
    return _ticks(Path(f"/proc/{pid}/stat").read_text())


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of ``pid``, keyed "name/tid" (the main thread is "main")."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:                       # thread ended
            continue
        name = "main" if task.name == str(pid) else f"{stat.split('(', 1)[1].rsplit(')', 1)[0]}/{task.name}"
        out[name] = _ticks(stat)
    return out


def thread_percent(before: dict[str, float], after: dict[str, float], wall: float) -> dict[str, float]:
    """Per-thread % of one core between two :func:`thread_cpu` samples, busiest first, idle ones left out."""
    percent = {name: round(100.0 * (t - before.get(name, 0.0)) / wall, 1) for name, t in after.items()}
    return {k: v for k, v in sorted(percent.items(), key=lambda kv: -kv[1]) if v > 0}
