"""The demo end to end: bridge subprocess, master client, report, pictures, clean stop."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

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
            "wrist_camera", "wrist_camera_optical_frame", "wrist_imu", "world", "table", "can",
            "ball_0"} <= frames
    # the detected ball on the table's near edge, a body of world_node's
    detected = re.search(r"detected object: ball_0 \(ball\) at (\S+) (\S+) (\S+) in world .*markers: yes; "
                         r"world_node/objects: ball_0", report)
    assert detected, report
    assert [float(v) for v in detected.groups()] == [0.66, 0.0, 0.79]
    # picked up by its class handle (objects.yaml -> ball.srdf side_grasp) through planner_node's Pickup
    pickup = re.search(r"pickup: ball_0 by handle side_grasp in \S+ s; planned in \S+ s; stages reach "
                       r"pre-grasp, approach: (\d+) points over (\S+) s; phases (.*)", report)
    assert pickup, report
    assert int(pickup.group(1)) >= 3 and float(pickup.group(2)) > 0
    assert {"PLANNING", "MONITOR"} <= set(pickup.group(3).split(" > "))
    grasp = re.search(r"grasp: gripper frame on the handle within (\S+) mm, approach axis within (\S+) rad; "
                      r"finger_joint (\S+) m", report)
    assert grasp, report
    assert float(grasp.group(1)) < 1.0 and float(grasp.group(2)) < 0.01
    # the fingers stopped on the ball: short of both open (0.04) and closed (0)
    assert 0.005 < float(grasp.group(3)) < 0.0395
    holding = re.search(r"holding: ball_0 under gripper_base on /tf at (\S+) (\S+) (\S+) in world, lifted "
                        r"(\S+) m, (\S+) mm from the gripper frame", report)
    assert holding, report
    ball = np.array([float(v) for v in holding.groups()[:3]])
    assert np.linalg.norm(ball - [0.66, 0.0, 0.89]) < 0.01, ball           # lifted 10 cm, where it was
    assert abs(float(holding.group(4)) - 0.10) < 0.01 and float(holding.group(5)) < 5.0
    # the nearest thing in the laser's plane is the crate's corner (0.40, -0.30) seen from the laser at
    # (0.28, 0): hypot(0.12, 0.30) = 0.323 m (beams every 0.5 deg, 5 mm noise)
    scan_min = float(re.search(r"scan min range (\S+) m", report).group(1))
    assert 0.30 < scan_min < 0.36
    assert "wrist_camera/image_raw: 320x240 rgb8, frame_id wrist_camera_optical_frame" in report
    assert "exit status 0" in report
    # the report file holds the printed report; demo.json its numbers and the gripper's planned path
    assert (out / "report.txt").read_text().strip() in report
    numbers = json.loads((out / "demo.json").read_text())
    path = np.array(numbers["path"])
    assert len(path) == int(pickup.group(1))
    assert np.linalg.norm(path[-1] - [0.66, 0.0, 0.79]) < 1e-3        # ends on the handle: the ball's centre
    assert np.linalg.norm(path[0] - path[-1]) > 0.2                  # from where the arm started
    assert np.allclose(numbers["ball"], ball, atol=1e-3)
    check_picture(out / "demo.png")
    assert (out / "wrist_camera.png").read_bytes().startswith(b"\x89PNG")
    from robot_bridge.view.screenshot import find_browser
    if find_browser()[0] is not None:                     # the live view's picture of the demo scene
        assert f"view screenshot: {out / 'view.png'} (" in report, report
        assert (out / "view.png").read_bytes().startswith(b"\x89PNG")
    if (REPO.parent / "shared" / "corpus").is_dir():      # the mesh robot as rviz sees it
        mesh = re.search(r"mesh robot: \S+ -> robot_description with (\d+) visuals", report)
        # 18 model visuals, and one more per further colour of a file
        assert mesh and int(mesh.group(1)) == 28, report
        assert (out / "barrettwam_rviz.png").read_bytes().startswith(b"\x89PNG")


def check_picture(png: Path) -> None:
    """demo.png: the planned path (magenta, render's PATH_RGB) in both panels, and in the top view (the
    right panel) the yellow ball where the path ends: in the gripper."""
    from matplotlib.image import imread

    image = imread(str(png))[..., :3]
    height, width, _ = image.shape
    magenta = (image[..., 0] > 0.85) & (image[..., 1] < 0.3) & (image[..., 2] > 0.85)
    yellow = (image[..., 0] > 0.6) & (image[..., 1] > 0.5) & (image[..., 2] < 0.3)
    body = np.zeros_like(magenta)
    body[height // 4:] = True                                  # below the legends
    left, right = body.copy(), body.copy()
    left[:, width // 2:] = False
    right[:, :width // 2] = False
    assert (magenta & left).sum() > 150 and (magenta & right).sum() > 150
    rows, cols = np.nonzero(magenta & right)
    end = np.array([rows[np.argmax(cols)], cols.max()])        # the path runs from the base towards +x
    near = np.hypot(*(np.array(np.nonzero(yellow & right)) - end[:, None]))
    assert (near < 20).sum() > 50, "no yellow ball at the end of the path in the top view"


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
