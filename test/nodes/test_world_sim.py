"""The simulated sensors see detected objects: description_node, world_node and sensor_bridge (mode sim) run
as their own processes; this test process is the detector and reads the simulated base laser's scans.

A box detected 0.6 m in front of the base laser turns the scan's beams that meet it into the analytic range
to its near face (+-1e-6 m); once detections stop and the body times out, the scan is the empty world's again.
Waits on scan contents, never on wall-clock sleeps."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import LaserScan  # noqa: E402
from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose  # noqa: E402

from robot_bridge.model.transform import make  # noqa: E402

from fixtures.world_bridge import (AHEAD, HALF, WORLD, expected_box_ranges, start, stop, to_pose,  # noqa: E402
                                   wait_until)


@pytest.fixture
def sim_bridge(tmp_path, detector_node):
    box = tmp_path / "box.kinbody.xml"
    box.write_text(f"""<KinBody name="box"><Body name="box" type="dynamic">
  <Geom type="box"><extents>{HALF[0]} {HALF[1]} {HALF[2]}</extents></Geom></Body></KinBody>""")
    mapping = tmp_path / "objects.yaml"
    mapping.write_text(f"classes:\n  box: {{file: {box}, timeout: 1.0}}\n")
    procs = [start("description", f"description_file:={WORLD}"),
             start("world", f"objects_file:={mapping}", "publish_rate:=20.0"),
             start("sensor_bridge", f"description_file:={WORLD}", "default_mode:=off",
                   "sensors.base_laser.mode:=sim", "sensors.base_laser.rate:=20.0",
                   f"objects_roots:=[{tmp_path}]")]
    yield detector_node
    for out in [stop(p) for p in procs]:
        assert "Traceback" not in out, out


def test_detected_box_changes_the_simulated_scan_and_its_removal_restores_it(sim_bridge):
    node = sim_bridge
    lock = threading.Lock()
    scans: list[np.ndarray] = []

    def on_scan(msg: LaserScan) -> None:
        with lock:
            scans.append(np.asarray(msg.ranges, dtype=np.float64))
            on_scan.meta = msg

    node.create_subscription(LaserScan, "/base_laser/scan", on_scan,
                             QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE))
    detections = node.create_publisher(Detection3DArray, "/detections", 10)

    def count() -> int:
        with lock:
            return len(scans)

    assert wait_until(lambda: count() >= 3), "no simulated scans"
    with lock:
        empty = scans[-1].copy()
        meta = on_scan.meta
    angles = meta.angle_min + meta.angle_increment * np.arange(len(empty))
    inside, ranges = expected_box_ranges(angles)
    assert inside.sum() >= 20 and np.all(empty[inside] > ranges + 0.01)

    def detect():
        msg = Detection3DArray()
        msg.header.frame_id = "base_laser"
        msg.header.stamp = node.get_clock().now().to_msg()
        det = Detection3D()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = "box", 1.0
        hyp.pose.pose = to_pose(make(translation=(AHEAD, 0.0, 0.0)))
        det.results.append(hyp)
        msg.detections.append(det)
        detections.publish(msg)

    def box_seen() -> bool:
        with lock:
            last = scans[-1]
        return bool(np.max(np.abs(last[inside] - ranges)) < 1e-6)

    assert wait_until(box_seen, detect), "the box never appeared in the simulated scan"
    with lock:
        seen = scans[-1].copy()
    assert np.max(np.abs(seen[inside] - ranges)) < 1e-6
    clear = np.abs(AHEAD * np.tan(angles)) > HALF[1] + 0.1        # beams well clear of the box
    assert np.array_equal(seen[clear], empty[clear])

    # detections stop: after the timeout world_node removes the body, and the scan is the empty world's
    def restored() -> bool:
        with lock:
            return np.array_equal(scans[-1], empty)

    assert wait_until(restored), "the scan never returned to the empty world's"
