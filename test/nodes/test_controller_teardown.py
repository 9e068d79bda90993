"""controller_node's teardown with a state tick parked in its publish through the template publishers' raw
rcl handles (issue 40's hypothesised segfault, made deterministic): the lwa harness's lives in child
processes (test/stress/harness_lives.py) with the ROBOT_BRIDGE_TEST_HOLD_PUBLISH hook, and a tick that
outlives ThreadTimers.stop (its join before 045ebec, emulated): no child dies of a signal, and the tick was
parked in the window in every life.  Without TemplatePublishers.close in destroy_node the publishers are
freed under the parked tick, and its compiled publish crashes the child (SIGSEGV)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")

LOOP = Path(__file__).resolve().parents[1] / "stress" / "harness_lives.py"
LIVES = 2


def test_a_tick_parked_in_its_raw_handle_publish_survives_the_teardown():
    from robot_bridge.ros import fast_relay

    try:
        fast_relay._libs()
    except fast_relay.FastPathUnavailable as exc:
        pytest.skip(f"no rcl fast path here: {exc}")
    done = subprocess.run([sys.executable, str(LOOP), "--lives", str(LIVES), "--goals", "none",
                           "--hold-publish", "2.5", "--old-stop", "0.3", "--malloc-check",
                           "--domain", os.environ["ROS_DOMAIN_ID"], "--budget", "240"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    failures = [(f.get("signal"), f.get("returncode"),
                 f.get("faulthandler") or f.get("stderr_tail", "")[-1500:]) for f in report["failures"]]
    assert report["crashes"] == 0 and report["other_failures"] == 0, failures
    assert report["lives"] == LIVES
    # every life had a tick parked in the window, still running after stop() returned
    assert report["held_lives_survived"] == LIVES, report
    assert report["timer_thread_alive_after_stop"] >= LIVES, report
