"""A stop request (SIGINT/SIGTERM) that is recorded, never raised and never lost.

``robot-bridge run`` installs it before anything slow is imported or started: a Ctrl-C at any moment of
start-up sets :data:`REQUESTED` (no KeyboardInterrupt traceback) and the start-up and spin loops check it,
so the bridge never prints ready and runs on after one.
"""

from __future__ import annotations

import signal
import threading

REQUESTED = threading.Event()
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def record_stop_requests() -> dict:
    """From now on SIGINT/SIGTERM set REQUESTED; the previous handlers (to restore them)."""
    return {sig: signal.signal(sig, lambda *_: REQUESTED.set()) for sig in SIGNALS}


def ignore_further_stop_requests() -> None:
    """For a process on its way out after a stop: a second SIGINT (``ros2 launch`` forwards Ctrl-C to a
    node that got the terminal's own, or a process group's SIGINT) must not kill it while the interpreter
    finalizes -- Python restores the default handlers then, and the clean exit 0 became a death by
    SIGINT (exit code -2)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
