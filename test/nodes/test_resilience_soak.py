"""The 60 s soak of bench/soak.py (the suite's one long test): 1 kHz /joint_states through the
description node, a 30 Hz camera relay and a simulated laser.  Nothing lost on reliable topics,
RSS growth < 5 %, no callback raised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

REPO = Path(__file__).resolve().parents[2]
SOAK_SECONDS = float(os.environ.get("ROBOT_BRIDGE_SOAK_SECONDS", "60"))


@pytest.mark.timeout(SOAK_SECONDS + 240)
def test_soak_60s_nothing_lost_memory_flat():
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "soak.py"), "--duration", str(SOAK_SECONDS)],
                          capture_output=True, text=True, timeout=SOAK_SECONDS + 180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    print("\nsoak:", json.dumps(result))
    assert result["callback_exception_count"] == 0, result["callback_exceptions"]
    assert result["lost_reliable_total"] == 0, result["reliable_topics"]
    assert result["rss_growth_percent"] < 5.0
    topics = result["reliable_topics"]
    assert all(t["published"] > 0 for t in topics.values()), topics      # every stream really flowed
    assert result["joint_states_sent"] >= 0.5 * 1000 * SOAK_SECONDS        # the input was a 1 kHz flood
    assert not result["relay_dropped"]                                      # the driver's frames were valid
