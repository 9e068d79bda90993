"""Each node executable (what `ros2 run robot_bridge <node>` starts) comes up on the embedded robot and
stops cleanly on SIGINT: exit status 0, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

REPO = Path(__file__).resolve().parents[2]
WORLD = REPO / "robot_bridge" / "data" / "default.env.xml"


@pytest.mark.parametrize("module", ["description", "sensor_bridge", "controller"])
def test_node_executable_starts_and_stops_cleanly(module):
    cmd = [sys.executable, "-m", f"robot_bridge.nodes.{module}", "--ros-args",
           "-p", f"description_file:={WORLD}"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(4.0)
        assert proc.poll() is None, f"{module} exited early:\n{proc.stdout.read()}"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert "Traceback" not in output, output
    assert "ERROR" not in output, output
