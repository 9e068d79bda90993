"""Issue 29, world input is bounded, with real processes: description_node, world_node and sensor_bridge
(base laser simulated) run as their own; this test process is the detector and the observer.

One Detection3DArray of 10,000 detections makes at most ``max_bodies`` (200) bodies, one warning line and
two log lines; world_node keeps serving (/tf, markers, a later detection moves its body) and the simulated
laser keeps its rate (measured on the scans' header stamps).  A detection whose quaternion has components
of 1e200 is placed with its rotation.  Waits on conditions, never on wall-clock sleeps."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import LaserScan  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from robot_bridge.model.transform import from_rpy, make  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.tf import matrix as tf_matrix  # noqa: E402

from fixtures.world_bridge import (AHEAD, HALF, WORLD, expected_box_ranges, start, stop, to_pose,  # noqa: E402
                                   wait_until)

BIG = 10_000
LIMIT = 200                         # world_node's documented max_detections and max_bodies defaults
HUGE = make(from_rpy((np.pi / 2, 0.0, 0.0)), (-3.0, 0.0, 3.0))        # out of the laser's plane


def seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def detection(pose=None, *, orientation=None, position=(0.0, 0.0, 0.0), id: str = "") -> Detection3D:
    det = Detection3D()
    det.id = id
    hyp = ObjectHypothesisWithPose()
    hyp.hypothesis.class_id, hyp.hypothesis.score = "box", 1.0
    if pose is not None:
        hyp.pose.pose = to_pose(pose)
    else:
        p, q = hyp.pose.pose.position, hyp.pose.pose.orientation
        p.x, p.y, p.z = position
        q.x, q.y, q.z, q.w = orientation
    det.results.append(hyp)
    return det


class Recorder:
    def __init__(self, node):
        self.node = node
        self.lock = threading.Lock()
        self.scans: list[tuple[float, np.ndarray]] = []          # (header stamp, ranges)
        self.tf: list[tuple[float, str, np.ndarray]] = []        # world -> box_*: (stamp, child, matrix)
        self.docs: list[dict] = []
        self.markers: list = []
        latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(LaserScan, "/base_laser/scan", self._on_scan,
                                 QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.tf_qos())
        node.create_subscription(String, "/world_node/objects_yaml", self._on_doc, latched)
        node.create_subscription(MarkerArray, "/world_node/markers", self._on_markers, latched)
        self.detections = node.create_publisher(Detection3DArray, "/detections", 10)

    def _on_scan(self, msg: LaserScan) -> None:
        with self.lock:
            self.scans.append((seconds(msg.header.stamp), np.asarray(msg.ranges, dtype=np.float64)))
            self.meta = msg

    def _on_tf(self, msg: TFMessage) -> None:
        with self.lock:
            self.tf += [(seconds(t.header.stamp), t.child_frame_id, tf_matrix(t)) for t in msg.transforms
                        if t.header.frame_id == "world" and t.child_frame_id.startswith("box_")]

    def _on_doc(self, msg: String) -> None:
        import yaml

        doc = yaml.safe_load(msg.data)
        with self.lock:
            self.docs.append(doc)

    def _on_markers(self, msg: MarkerArray) -> None:
        with self.lock:
            self.markers += [(seconds(m.header.stamp), m.ns, m.action) for m in msg.markers]

    def bodies(self) -> set:
        with self.lock:
            return {o["name"] for o in self.docs[-1]["objects"]} if self.docs else set()

    def last_tf(self, child: str):
        with self.lock:
            hits = [t for t in self.tf if t[1] == child]
        return hits[-1] if hits else None

    def publish(self, frame: str, *dets: Detection3D) -> float:
        msg = Detection3DArray()
        msg.header.frame_id = frame
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.detections = list(dets)
        self.detections.publish(msg)
        return seconds(msg.header.stamp)


@pytest.fixture
def limited_bridge(tmp_path, detector_node):
    box = tmp_path / "box.kinbody.xml"
    box.write_text(f"""<KinBody name="box"><Body name="box" type="dynamic">
  <Geom type="box"><extents>{HALF[0]} {HALF[1]} {HALF[2]}</extents></Geom></Body></KinBody>""")
    mapping = tmp_path / "objects.yaml"
    mapping.write_text(f"classes:\n  box: {{file: {box}, timeout: 600.0}}\n")
    procs = {"description": start("description", f"description_file:={WORLD}"),
             "world": start("world", f"objects_file:={mapping}", "publish_rate:=20.0",
                            "warn_throttle:=1000.0"),
             "sensor_bridge": start("sensor_bridge", f"description_file:={WORLD}", "default_mode:=off",
                                    "sensors.base_laser.mode:=sim", "sensors.base_laser.rate:=20.0",
                                    "output_depth:=1000", f"objects_roots:=[{tmp_path}]")}
    recorder = Recorder(detector_node)
    recorder.outputs = {}
    recorder.stop = lambda: {n: recorder.outputs.setdefault(n, stop(p)) for n, p in procs.items()}
    yield recorder
    for out in recorder.stop().values():
        assert "Traceback" not in out, out


def scan_rate(stamps: np.ndarray) -> float:
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


@pytest.mark.timeout(400)
def test_ten_thousand_detections_are_bounded_and_the_sensors_keep_their_rate(limited_bridge):
    rec = limited_bridge
    assert wait_until(lambda: len(rec.scans) >= 40, timeout=120), "no simulated scans"
    with rec.lock:
        empty = rec.scans[-1][1].copy()
        meta = rec.meta
    inside, ranges = expected_box_ranges(meta.angle_min + meta.angle_increment * np.arange(len(empty)))
    assert inside.sum() >= 20 and np.all(empty[inside] > ranges + 0.01)

    # a quaternion of huge but valid components (x = w = 1e200): the box is turned 90 degrees about x
    huge = detection(orientation=(1e200, 0.0, 0.0, 1e200), position=tuple(HUGE[:3, 3]), id="q")
    assert wait_until(lambda: rec.last_tf("box_0") is not None, lambda: rec.publish("world", huge)), \
        "box_0 never appeared on /tf"
    np.testing.assert_allclose(rec.last_tf("box_0")[2], HUGE, rtol=0, atol=1e-9)

    # one message of 10,000 detections, each a new body: the first in front of the laser, the rest above
    poses = [make(translation=(AHEAD, 0.0, 0.0))] + [
        make(translation=(0.5 * (i % 100), 0.5 * (i // 100), 5.0)) for i in range(1, BIG)]
    from rclpy.serialization import serialize_message

    big = Detection3DArray(detections=[detection(p) for p in poses])
    big.header.frame_id = "base_laser"
    big.header.stamp = rec.node.get_clock().now().to_msg()
    data = serialize_message(big)                     # built before: the test process does not stall
    with rec.lock:
        t0 = rec.scans[-1][0]
    rec.detections.publish(data)

    def box_seen() -> bool:
        with rec.lock:
            last = rec.scans[-1][1]
        return bool(np.max(np.abs(last[inside] - ranges)) < 1e-6)

    assert wait_until(box_seen, timeout=90), "the simulated laser never saw the first detected box"
    with rec.lock:
        seen = rec.scans[-1][0]
    assert wait_until(lambda: len(rec.bodies()) == LIMIT, timeout=60), f"{len(rec.bodies())} bodies"
    # the laser's rate: 2 s after it saw the box, every scan since the big message, from the stamps
    assert wait_until(lambda: rec.scans[-1][0] > seen + 2.0, timeout=60)
    with rec.lock:
        stamps = np.array([s for s, _ in rec.scans])
    before = stamps[(stamps >= t0 - 3.0) & (stamps <= t0)]
    during = stamps[(stamps >= t0) & (stamps <= seen + 2.0)]
    print(f"laser: {scan_rate(before):.1f} Hz before, {scan_rate(during):.1f} Hz in the "
          f"{during[-1] - t0:.1f} s "
          f"after the big message (largest gap {np.diff(during).max():.3f} s)")
    assert len(before) >= 10 and len(during) >= 10
    assert np.diff(during).max() < 1.0, f"the laser stalled {np.diff(during).max():.2f} s"
    assert scan_rate(during) >= 0.5 * scan_rate(before), (scan_rate(before), scan_rate(during))

    # world_node keeps serving: every body on /tf after the big message, a later detection moves box_0
    with rec.lock:
        doc_stamp = rec.docs[-1]["stamp"]
    assert wait_until(lambda: (rec.last_tf("box_199") or (0,))[0] > doc_stamp), "no /tf after the big message"
    moved = make(from_rpy((np.pi / 2, 0.0, 0.0)), (-3.0, 1.0, 3.0))
    sent = []
    assert wait_until(lambda: np.allclose(rec.last_tf("box_0")[2], moved, rtol=0, atol=1e-9),
                      lambda: sent.append(rec.publish("world", detection(moved, id="q")))), "box_0 stayed"
    assert wait_until(lambda: any(s >= sent[0] and ns == "box_0" for s, ns, _ in list(rec.markers)))
    bodies = rec.bodies()
    assert len(bodies) == LIMIT and {"box_0", "box_199"} <= bodies and "box_200" not in bodies

    outputs = rec.stop()
    world_lines = outputs["world"].splitlines()
    limits = [line for line in world_lines if "over the limits" in line]
    assert len(limits) == 1, limits
    assert f"{BIG - LIMIT} detections beyond max_detections {LIMIT}" in limits[0]
    assert "1 new bodies refused" in limits[0] and f"max_bodies {LIMIT}" in limits[0]
    assert len([line for line in world_lines if "box_" in line]) <= 3, world_lines     # box_0, the batch
    scene_lines = [line for line in outputs["sensor_bridge"].splitlines() if "simulated scene" in line]
    assert 1 <= len(scene_lines) <= 3, scene_lines
    assert any(f"{LIMIT - 1} objects added" in line for line in scene_lines), scene_lines


def test_detection_count_is_read_and_cut_in_the_serialized_message():
    from rclpy.serialization import deserialize_message, serialize_message

    from robot_bridge.ros.conversions import detection_array_count, truncate_detection_array

    for frame in ("", "c", "base_laser_frame"):                 # every padding of the frame name
        msg = Detection3DArray(detections=[detection(id=f"d{i}", orientation=(0, 0, 0, 1)) for i in range(7)])
        msg.header.frame_id = frame
        data = serialize_message(msg)
        assert detection_array_count(data) == 7
        cut = deserialize_message(truncate_detection_array(data, 3), Detection3DArray)
        assert [d.id for d in cut.detections] == ["d0", "d1", "d2"] and cut.header.frame_id == frame
    assert detection_array_count(b"\x00\x01\x00\x00" + b"\x00" * 8) is None          # truncated
    assert detection_array_count(b"\x07\x07" + b"\x00" * 30) is None                  # not CDR


def test_message_quaternions_with_huge_components_keep_their_rotation():
    from geometry_msgs.msg import Pose, TransformStamped

    t = TransformStamped()                                     # /tf and /tf_static
    t.transform.rotation.x, t.transform.rotation.w = -1e200, 1e200
    np.testing.assert_allclose(tf_matrix(t), make(from_rpy((-np.pi / 2, 0, 0))), atol=1e-12)

    from robot_bridge.ros.conversions import pose_matrix      # detections

    pose = Pose()
    pose.position.x, pose.orientation.x, pose.orientation.w = 1.0, 1e200, 1e200
    np.testing.assert_allclose(pose_matrix(pose), make(from_rpy((np.pi / 2, 0, 0)), (1, 0, 0)), atol=1e-12)
    for q in ((0.0, 0.0, 0.0, 0.0), (np.nan, 0.0, 0.0, 1.0), (np.inf, 0.0, 0.0, np.inf)):
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = q
        with pytest.raises(ValueError):
            pose_matrix(pose)
