"""The demo end to end: bridge subprocess, master client, report, pictures, clean stop."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO_TIMEOUT = 110          # s: a guard against hangs (pytest.ini's per-test timeout is 120 s)


def test_demo_runs_end_to_end(tmp_path):
    out = tmp_path / "demo_out"
    done = subprocess.run([sys.executable, "-m", "robot_bridge.demo", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=DEMO_TIMEOUT)
    log = (out / "bridge.log").read_text() if (out / "bridge.log").exists() else ""
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- bridge.log ---\n{log}"
    report = done.stdout
    frames = set(re.search(r"TF frames seen: \d+ \([^)]*\): (.*)", report).group(1).split(", "))
    # every link, the sensor frames (camera optical frame per REP-103), the world and its bodies
    assert {"base", "link1", "link7", "gripper_base", "finger_left", "finger_right", "base_laser",
            "wrist_camera", "wrist_camera_optical_frame", "wrist_imu", "world", "table", "can"} <= frames
    error = float(re.search(r"final joint error [^:]*: max (\S+)", report).group(1))
    assert error < 1e-3, report
    # the nearest thing in the laser's plane is the crate's corner (0.40, -0.30) seen from the laser at
    # (0.28, 0): hypot(0.12, 0.30) = 0.323 m (beams every 0.5 deg, 5 mm noise)
    scan_min = float(re.search(r"scan min range (\S+) m", report).group(1))
    assert 0.30 < scan_min < 0.36
    assert "wrist_camera/image_raw: 320x240 rgb8, frame_id wrist_camera_optical_frame" in report
    # the detected ball: 0.5 m ahead, 0.3 m left of the laser at (0.28, 0, 0.2) -> world (0.78, 0.3, 0.2);
    # the beam towards its centre meets its surface at hypot(0.5, 0.3) - 0.05 = 0.533 m (5 mm noise)
    detected = re.search(r"detected object: ball_0 \(ball\) at (\S+) (\S+) (\S+) in world .*on /tf: yes; "
                         r"markers: yes; world_node/objects: ball_0; laser range towards it (\S+) m", report)
    assert detected, report
    assert [float(v) for v in detected.groups()[:3]] == [0.78, 0.3, 0.2]
    assert abs(float(detected.group(4)) - 0.533) < 0.03
    assert "ball_0" in frames
    assert "exit status 0" in report
    for picture in ("demo.png", "wrist_camera.png"):
        assert (out / picture).read_bytes().startswith(b"\x89PNG")
    if (REPO.parent / "shared" / "corpus").is_dir():      # the mesh robot as rviz sees it
        mesh = re.search(r"mesh robot: \S+ -> robot_description with (\d+) visuals", report)
        # 18 model visuals, and one more per further colour of a file
        assert mesh and int(mesh.group(1)) == 28, report
        assert (out / "barrettwam_rviz.png").read_bytes().startswith(b"\x89PNG")


def test_demo_honours_an_exported_domain_id(monkeypatch):
    """Issue 31: `make demo` ignored an exported ROS_DOMAIN_ID (always 101 + pid % 100)."""
    import pytest

    from robot_bridge import demo

    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert demo.domain_id() == 42
    monkeypatch.setenv("ROS_DOMAIN_ID", "0")
    assert demo.domain_id() == 0
    monkeypatch.delenv("ROS_DOMAIN_ID")
    assert 101 <= demo.domain_id() <= 200
    monkeypatch.setenv("ROS_DOMAIN_ID", "lots")
    with pytest.raises(SystemExit, match="expected 0..232"):
        demo.domain_id()
