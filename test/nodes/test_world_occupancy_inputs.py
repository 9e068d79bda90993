"""Issue 44: world_node's occupancy inputs at the node level: a LaserScan and a PointCloud2 published on its
configured ``occupancy_scan_topics`` / ``occupancy_cloud_topics`` become the occupied cells of the OctoMap
it sends on /planning_scene, each where the sensor's TF pose puts its points; bad messages are refused with
a logged reason and the node keeps mapping.

world_node runs as a process (no robot description, no bodies: nothing filters the points); this test
process publishes the sensors' static TF, the messages (built by hand) and reads each /planning_scene
octomap with the OctoMap library.  Truth: the cells computed here from the beams' angles and ranges (and
the cloud's points) through the poses this test gave the sensor frames.  Waits on the map and on the log
lines with a deadline, never on wall-clock sleeps."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(240)

octomap = pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")
pytest.importorskip("rclpy")
pytest.importorskip("moveit_msgs.msg")

from geometry_msgs.msg import TransformStamped  # noqa: E402
from moveit_msgs.msg import PlanningScene  # noqa: E402
from sensor_msgs.msg import LaserScan, PointCloud2, PointField  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.planning_scene import moveit_qos  # noqa: E402

from fixtures.world_bridge import Process, wait_until  # noqa: E402

RES = 0.02
OFFSET = 1 << 15                     # OctoMap's key of the cell [0, res) on each axis
SCAN_TOPIC, CLOUD_TOPIC = "/occ_test/scan", "/occ_test/cloud"
LASER, CAMERA = "occ_test_laser", "occ_test_cloud"
# the sensors in the world frame: the laser 0.5 m up, turned 0.5 rad about z; the cloud's frame turned
# about x and z, on the other side of the origin (its rays never cross the laser's plane near its cells)
LASER_XYZ, LASER_YAW = np.array([0.4, -0.3, 0.505]), 0.5
CAMERA_XYZ, CAMERA_RPY = np.array([-0.6, 0.7, 1.2]), (-1.2, 0.0, -0.8)


def rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def quaternion(r: np.ndarray) -> tuple[float, float, float, float]:
    """x, y, z, w of a rotation matrix (its trace is positive for the rotations used here)."""
    w = 0.5 * math.sqrt(1.0 + np.trace(r))
    assert w > 0.3
    return ((r[2, 1] - r[1, 2]) / (4 * w), (r[0, 2] - r[2, 0]) / (4 * w), (r[1, 0] - r[0, 1]) / (4 * w), w)


LASER_R, CAMERA_R = rotation(0.0, 0.0, LASER_YAW), rotation(*CAMERA_RPY)


def keys_of(world: np.ndarray) -> set:
    """The cells of world points, each point at least 1 mm inside its cell (no rounding can move it)."""
    scaled = world / RES
    inside = np.abs(scaled - np.rint(scaled)) * RES
    assert np.all(inside >= 1e-3), "a point lies on a cell boundary: pick another"
    return set(map(tuple, (np.floor(scaled).astype(np.int64) + OFFSET).tolist()))


def clear_ranges(angles: np.ndarray, first: float) -> np.ndarray:
    """A float32 range per beam from ``first`` m up, each nudged until its world point is 1 mm or more
    inside its cell on every axis (so the expected cells are exact)."""
    out = []
    for k, a in enumerate(angles):
        r = np.float32(first + 0.07 * k)
        while True:
            local = np.array([math.cos(a) * float(r), math.sin(a) * float(r), 0.0])
            scaled = (LASER_R @ local + LASER_XYZ) / RES
            if np.all(np.abs(scaled - np.rint(scaled)) * RES >= 2e-3):
                break
            r = np.float32(r + np.float32(0.0013))
        out.append(r)
    return np.array(out, np.float32)


def scan_message(angle_min: float, increment: float, ranges, stamp, angle_max=None,
                 range_min: float = 0.1, range_max: float = 2.5) -> LaserScan:
    msg = LaserScan()
    msg.header.frame_id, msg.header.stamp = LASER, stamp
    msg.angle_min, msg.angle_increment = float(angle_min), float(increment)
    if angle_max is None:
        angle_max = angle_min + (len(ranges) - 1) * increment
    msg.angle_max = float(angle_max)
    msg.range_min, msg.range_max = float(range_min), float(range_max)
    msg.ranges = np.ascontiguousarray(ranges, np.float32)
    return msg


def scan_cells(angle_min: float, increment: float, ranges, range_min=0.1, range_max=2.5) -> set:
    """The cells of the beams with a finite range in [range_min, range_max] (and within world_node's
    occupancy_max_range, 3 m): the laser's pose applied to (r cos a, r sin a, 0)."""
    points = []
    for k, r in enumerate(np.asarray(ranges, np.float32).astype(float)):
        if math.isfinite(r) and range_min <= r <= range_max:
            a = float(np.float32(angle_min)) + float(np.float32(increment)) * k
            points.append(LASER_R @ [r * math.cos(a), r * math.sin(a), 0.0] + LASER_XYZ)
    return keys_of(np.array(points))


def cloud_message(points: np.ndarray, stamp, frame: str = CAMERA) -> PointCloud2:
    """An unorganised float32 x y z cloud, 16 bytes a point (4 bytes of padding after z)."""
    msg = PointCloud2()
    msg.header.frame_id, msg.header.stamp = frame, stamp
    msg.height, msg.width = 1, len(points)
    msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                  for i, n in enumerate("xyz")]
    msg.is_bigendian, msg.point_step, msg.row_step = False, 16, 16 * len(points)
    raw = np.zeros((len(points), 4), np.float32)
    raw[:, :3] = points
    msg.data = raw.reshape(-1).view(np.uint8).tobytes()
    msg.is_dense = False
    return msg


def cloud_points() -> np.ndarray:
    """A 4 x 3 grid of returns 1.0-1.3 m ahead of the cloud's frame (+z), each 1 mm or more inside its
    cell in the world, and two rows without a return (NaN, inf)."""
    pts = []
    for i in range(4):
        for j in range(3):
            p = np.array([-0.15 + 0.1 * i, -0.1 + 0.1 * j, 1.0 + 0.1 * j], np.float32)
            while True:
                scaled = (CAMERA_R @ p.astype(float) + CAMERA_XYZ) / RES
                if np.all(np.abs(scaled - np.rint(scaled)) * RES >= 2e-3):
                    break
                p = (p + np.float32(0.0013)).astype(np.float32)
            pts.append(p)
    return np.array(pts + [[np.nan, 0.0, 1.0], [np.inf, 1.0, np.inf]], np.float32)


def cloud_cells(points: np.ndarray) -> set:
    """The cells of the cloud's finite points: the cloud frame's pose applied to each."""
    finite = points[np.isfinite(points).all(axis=1)].astype(float)
    return keys_of(finite @ CAMERA_R.T + CAMERA_XYZ)


def read(octo) -> set:
    """The occupied cells OctoMap reads from the message (binaryMsgToMap: readBinaryData), at full
    resolution."""
    data = np.asarray(octo.data, dtype=np.int8).astype(np.uint8).tobytes()
    tree = octomap.OcTree(octo.resolution)
    raw = np.frombuffer(data, np.uint8)
    nodes = 1 + int(sum(np.count_nonzero((raw >> s) & 3) for s in (0, 2, 4, 6)))
    header = (f"# Octomap OcTree binary file\nid {octo.id}\nsize {nodes}\nres {octo.resolution}\n"
              "data\n").encode()
    assert tree.readBinary(header + data)
    cells = set()
    for leaf in tree.begin_leafs():
        if tree.isNodeOccupied(leaf):
            assert leaf.getSize() == pytest.approx(RES), "a pruned leaf: cells are sparse here"
            c = np.asarray(leaf.getCoordinate(), float)
            cells.add(tuple((np.floor(c / RES).astype(np.int64) + OFFSET).tolist()))
    return cells


@pytest.fixture(scope="module")
def world(module_detector_node):
    node = module_detector_node
    lock = threading.Lock()
    maps: list = []

    def on_scene(msg: PlanningScene) -> None:
        octo = msg.world.octomap.octomap
        if msg.is_diff and octo.id:
            with lock:
                maps.append(octo)

    node.create_subscription(PlanningScene, "/planning_scene", on_scene, moveit_qos())
    static = node.create_publisher(TFMessage, "/tf_static", qos.tf_static_qos())
    tf = TFMessage()
    for frame, xyz, r in ((LASER, LASER_XYZ, LASER_R), (CAMERA, CAMERA_XYZ, CAMERA_R)):
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = "world", frame
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = map(float, xyz)
        q = t.transform.rotation
        q.x, q.y, q.z, q.w = quaternion(r)
        tf.transforms.append(t)
    static.publish(tf)
    scans = node.create_publisher(LaserScan, SCAN_TOPIC, qos.sensor_data_qos())
    clouds = node.create_publisher(PointCloud2, CLOUD_TOPIC, qos.sensor_data_qos())
    proc = Process("world", f"occupancy_scan_topics:=[{SCAN_TOPIC}]",
                   f"occupancy_cloud_topics:=[{CLOUD_TOPIC}]", "occupancy_rate:=100.0",
                   "occupancy_publish_rate:=10.0", "warn_throttle:=0.0")

    class World:
        process = proc

        @staticmethod
        def now():
            return node.get_clock().now().to_msg()

        @staticmethod
        def cells() -> set:
            with lock:
                octo = maps[-1] if maps else None
            return read(octo) if octo is not None and len(octo.data) else set()

        @staticmethod
        def publish(msg) -> None:
            (scans if isinstance(msg, LaserScan) else clouds).publish(msg)

    yield World
    out = proc.stop()
    assert "Traceback" not in out, out


SCAN_ANGLES = (-0.4, 0.1, 9)          # angle_min, increment, beams: the first scan
SECOND_SCAN = (2.0, 0.1, 7)           # the one after the bad messages: another sector (no beam of it
#                                       points at the first scan's cells, so none is cleared)


def first_scan() -> tuple[np.ndarray, set]:
    angle_min, inc, n = SCAN_ANGLES
    ranges = clear_ranges(angle_min + inc * np.arange(n), 0.8)
    ranges[2], ranges[5] = np.nan, np.inf            # no return; nothing within range_max (REP-117)
    return ranges, scan_cells(angle_min, inc, ranges)


def test_a_scan_and_a_cloud_become_the_cells_their_tf_poses_give(world):
    angle_min, inc, _ = SCAN_ANGLES
    ranges, expected_scan = first_scan()
    assert len(expected_scan) == 7
    points = cloud_points()
    expected_cloud = cloud_cells(points)
    assert len(expected_cloud) == 12
    expected = expected_scan | expected_cloud

    def send() -> None:
        world.publish(scan_message(angle_min, inc, ranges, world.now()))
        world.publish(cloud_message(points, world.now()))

    state = {}

    def mapped() -> bool:
        state["cells"] = world.cells()
        return expected <= state["cells"]

    assert wait_until(mapped, send, timeout=90.0), (
        f"missing {sorted(expected - state.get('cells', set()))[:5]}; output:\n{world.process.output()}")
    assert state["cells"] == expected, sorted(state["cells"] - expected)[:10]


def test_bad_scans_and_clouds_are_refused_with_a_reason_and_the_node_keeps_mapping(world):
    angle_min, inc, n = SCAN_ANGLES
    ranges, expected_scan = first_scan()
    points = cloud_points()
    before_cells = expected_scan | cloud_cells(points)
    assert wait_until(lambda: before_cells <= world.cells(), lambda: (
        world.publish(scan_message(angle_min, inc, ranges, world.now())),
        world.publish(cloud_message(points, world.now()))), timeout=90.0)

    far = clear_ranges(angle_min + inc * np.arange(40), 1.2)       # in range: mapped if not refused
    stray = np.full(4, 1.5, np.float32)
    bad_cloud_x = cloud_message(points[:-2], world.now())
    bad_cloud_x.fields[0] = PointField(name="x", offset=0, datatype=PointField.FLOAT64, count=1)
    short_cloud = cloud_message(points[:-2], world.now())
    short_cloud.data = short_cloud.data[:-16]
    huge_cloud = cloud_message(points[:-2], world.now())
    sent = len(huge_cloud.data)
    huge_cloud.width = 250_000_000                                   # 4 GB of points claimed, 192 B sent
    huge_cloud.row_step = 16 * huge_cloud.width
    many = 100_001                                                   # over the map's bound on beams
    dropped = f"occupancy: {CLOUD_TOPIC} dropped: point cloud:"
    cases = [  # (message, the reason world_node must log)
        (lambda: scan_message(angle_min, float("nan"), ranges, world.now()),
         f"occupancy: {SCAN_TOPIC} dropped: laser scan: non-finite angle or range limits"),
        (lambda: scan_message(angle_min, inc, ranges, world.now(), range_max=float("inf")),
         f"occupancy: {SCAN_TOPIC} dropped: laser scan: non-finite angle or range limits"),
        (lambda: scan_message(angle_min, inc, far, world.now(), angle_max=angle_min + inc * (n - 1)),
         f"occupancy: {SCAN_TOPIC} dropped: laser scan: 40 ranges, angles give {n}"),
        (lambda: scan_message(-math.pi, 2 * math.pi / many, np.full(many, 1.0, np.float32), world.now()),
         f"occupancy: {SCAN_TOPIC} dropped: laser scan: {many} beams, over 100000"),
        (lambda: scan_message(0.0, 0.0, stray, world.now(), angle_max=0.0),
         f"occupancy: {SCAN_TOPIC} dropped: laser scan: angle_increment 0.0 does not step"),
        (lambda: bad_cloud_x, f"{dropped} needs FLOAT32 fields x, y, z"),
        (lambda: short_cloud, f"{dropped} data has {sent - 16} bytes"),
        (lambda: huge_cloud, f"{dropped} data has {sent} bytes, expected row_step x height = 4000000000"),
    ]
    for make, reason in cases:
        since = len(world.process.lines)
        assert wait_until(lambda: reason in world.process.output(since), lambda: world.publish(make()),
                          timeout=60.0), f"no {reason!r} in:\n{world.process.output()}"
    # still mapping: a scan into another sector adds its cells; the refused messages added none
    angle2, inc2, n2 = SECOND_SCAN
    ranges2 = clear_ranges(angle2 + inc2 * np.arange(n2), 1.0)
    expected = before_cells | scan_cells(angle2, inc2, ranges2)
    state = {}

    def mapped() -> bool:
        state["cells"] = world.cells()
        return expected <= state["cells"]

    assert wait_until(mapped, lambda: world.publish(scan_message(angle2, inc2, ranges2, world.now())),
                      timeout=60.0), f"output:\n{world.process.output()}"
    assert state["cells"] == expected, sorted(state["cells"] - expected)[:10]
    assert world.process.proc.poll() is None
