"""sensor_bridge_node in relay mode over real rclpy: frame fixing, pass-through, drops with counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from fixtures.sim.ros_harness import Harness
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image, Imu, LaserScan

from fixtures.sim.models import pan_robot
from robot_bridge.model import AttachedSensor

RELAY_ALL = {"default_mode": "relay", "relay_namespace": "driver"}


@pytest.fixture
def harness():
    robot = pan_robot()
    robot.sensors["ft"] = AttachedSensor("ft", "head", type="force6d")
    robot.sensors["odom"] = AttachedSensor("odom", "base", type="odometry")
    h = Harness(robot, **RELAY_ALL)
    yield h
    h.close()


def scan(n=5, frame="laser_link", ranges=None) -> LaserScan:
    msg = LaserScan()
    msg.header.frame_id = frame
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1234, 5678
    msg.angle_min, msg.angle_increment = -0.2, 0.1
    msg.angle_max = msg.angle_min + (n - 1) * msg.angle_increment
    msg.range_min, msg.range_max = 0.1, 10.0
    msg.ranges = list(ranges) if ranges is not None else [1.0, 2.0, float("inf"), float("nan"), 3.0][:n]
    return msg


def image(width=8, height=4, step=None, data_len=None) -> Image:
    msg = Image()
    msg.header.frame_id = "camera_color"
    msg.width, msg.height, msg.encoding = width, height, "rgb8"
    msg.step = step if step is not None else width * 3
    msg.data = bytes((i * 7) % 256 for i in range(data_len or msg.step * height))
    return msg


def send_until(h, pub, msg, box, count=1):
    """Publish (again, until discovery completes) until ``box`` has ``count`` messages."""
    def done():
        if len(box) < count:
            pub.publish(msg)
        return len(box) >= count
    return h.spin_until(done)


def burst_is_rate_limited(h, pub, make_msg, stream) -> bool:
    """15 messages within ~0.3 s through a 2 Hz limit: at most one more passes, the rest are counted."""
    relayed = stream.relayed()
    for _ in range(15):
        pub.publish(make_msg())
        h.spin_for(0.02)
    h.spin_for(0.05)
    return stream.relayed() - relayed <= 1 and stream.counts["rate_limited"] >= 10


def send_until_counted(h, pub, msg, counted):
    """Publish (again, until discovery completes) until ``counted()`` is truthy."""
    def done():
        if not counted():
            pub.publish(msg)
        return bool(counted())
    return h.spin_until(done)


def test_valid_scan_passes_unchanged_except_frame_id(harness):
    h = harness
    out = h.listen(LaserScan, "laser/scan")
    pub = h.publisher(LaserScan, "driver/laser/scan")
    sent = scan()
    assert send_until(h, pub, sent, out)
    got = out[0]
    assert got.header.frame_id == "laser"
    assert (got.header.stamp.sec, got.header.stamp.nanosec) == (1234, 5678)   # no restamp by default
    assert [got.angle_min, got.angle_max, got.angle_increment] == list(
        np.float32([sent.angle_min, sent.angle_max, sent.angle_increment]))   # float32 fields
    assert list(got.ranges[:3]) == [1.0, 2.0, math.inf] and math.isnan(got.ranges[3]) and got.ranges[4] == 3.0


def test_malformed_scans_are_dropped_and_counted(harness):
    h = harness
    out = h.listen(LaserScan, "laser/scan")
    pub = h.publisher(LaserScan, "driver/laser/scan")
    assert send_until(h, pub, scan(), out)                       # connection established
    h.spin_for(0.2)
    before = len(out)
    bad_length = scan(ranges=[1.0, 2.0])                          # angles give 5 beams
    bad_limits = scan()
    bad_limits.range_min, bad_limits.range_max = 5.0, 1.0
    for msg in (bad_length, bad_limits, scan(frame="marker")):
        pub.publish(msg)
    assert h.spin_until(lambda: len(out) > before and sum(h.bridge.dropped["laser"].values()) >= 2)
    h.spin_for(0.2)
    assert [m.header.frame_id for m in out[before:]] == ["laser"]   # only the valid one came through
    dropped = h.bridge.dropped["laser"]
    assert sum(dropped.values()) == 2
    assert any("2 ranges, angles give 5" in reason for reason in dropped)
    assert h.bridge.relays[("laser", "scan")].counts["invalid"] == 2
    assert h.bridge.relays[("laser", "scan")].counts["warned"] == 1      # throttled: 5 s between warnings
    # throttling is per stream: a bad image right after still gets its own warning
    img_pub = h.publisher(Image, "driver/cam/image_raw")
    assert send_until_counted(h, img_pub, image(step=10), lambda: h.bridge.dropped["cam"])
    assert h.bridge.relays[("cam", "image_raw")].counts["warned"] == 1


def test_rep117_legacy_out_of_range_values_become_inf(harness):
    h = harness
    out = h.listen(LaserScan, "laser/scan")
    pub = h.publisher(LaserScan, "driver/laser/scan")
    assert send_until(h, pub, scan(ranges=[1.0, 10.5, 0.05, float("nan"), 2.0]), out)
    got = list(out[0].ranges)
    assert got[:3] == [1.0, math.inf, -math.inf] and math.isnan(got[3]) and got[4] == 2.0


@pytest.mark.parametrize("fast_path", [True, False], ids=["middleware_thread", "executor"])
def test_images_fixed_and_validated(fast_path):
    h = Harness(pan_robot(), default_mode="off", relay_fast_path=fast_path, **{"sensors.cam.mode": "relay"})
    try:
        assert (("cam", "image_raw") in h.bridge.fast_relays) == fast_path
        out = h.listen(Image, "cam/image_raw")
        pub = h.publisher(Image, "driver/cam/image_raw")
        good = image()
        assert send_until(h, pub, good, out)
        assert out[0].header.frame_id == "cam_optical_frame"
        assert out[0].header.stamp == good.header.stamp
        assert bytes(out[0].data) == bytes(good.data) and out[0].step == good.step
        h.spin_for(0.2)
        before = len(out)
        pub.publish(image(data_len=8 * 3 * 4 - 1))                   # step * height != len(data)
        pub.publish(image(step=10))                                   # step < width * 3
        assert h.spin_until(lambda: sum(h.bridge.dropped["cam"].values()) == 2)
        h.spin_for(0.1)
        assert len(out) == before
        # larger than the relay's first buffer (64 KiB): the buffer grows, the pixels arrive intact
        big = image(width=200, height=150)
        big.header.frame_id = "a_driver_frame_name_longer_than_the_bridge_frame"
        pub.publish(big)
        assert h.spin_until(lambda: len(out) > before)
        assert out[-1].header.frame_id == "cam_optical_frame" and bytes(out[-1].data) == bytes(big.data)
        stream = h.bridge.relays[("cam", "image_raw")]
        # the fast path counts right after its publish returns, the probe may have the image already
        assert h.spin_until(lambda: stream.relayed() == len(out)) and stream.counts["invalid"] == 2
    finally:
        h.close()


@pytest.mark.parametrize("fast_path", [True, False], ids=["middleware_thread", "executor"])
def test_image_restamp_and_rate_limit(fast_path):
    h = Harness(pan_robot(), default_mode="off", relay_fast_path=fast_path,
                **{"sensors.cam.mode": "relay", "sensors.cam.restamp": True, "sensors.cam.max_rate": 2.0})
    try:
        out = h.listen(Image, "cam/image_raw")
        pub = h.publisher(Image, "driver/cam/image_raw")
        assert send_until(h, pub, image(), out)
        assert out[0].header.stamp.sec != 0                          # restamped (the driver sent 0)
        stream = h.bridge.relays[("cam", "image_raw")]
        assert h.spin_until(lambda: stream.relayed() >= len(out))
        assert burst_is_rate_limited(h, pub, image, stream)
        assert not h.bridge.dropped["cam"]
    finally:
        h.close()


def test_camera_info_size_is_checked_against_the_description(harness):
    h = harness
    out = h.listen(CameraInfo, "cam/camera_info")
    pub = h.publisher(CameraInfo, "driver/cam/camera_info")
    info = CameraInfo(width=64, height=48, distortion_model="plumb_bob", d=[0.0] * 5)
    info.k = [50.0, 0, 31.5, 0, 52.0, 23.5, 0, 0, 1]
    assert send_until(h, pub, info, out)
    assert out[0].header.frame_id == "cam_optical_frame"
    pub.publish(CameraInfo(width=640, height=480, k=info.k, distortion_model="plumb_bob"))
    pub.publish(CameraInfo(width=64, height=48, k=info.k, distortion_model="plumb_bob", d=[0.1, 0.2]))
    assert h.spin_until(lambda: sum(h.bridge.dropped["cam"].values()) == 2)
    reasons = " ".join(h.bridge.dropped["cam"])
    assert "differs from the description's 64x48" in reasons and "2 coefficients" in reasons


def test_imu_and_wrench_relay(harness):
    h = harness
    imus = h.listen(Imu, "imu/imu")
    wrenches = h.listen(WrenchStamped, "ft/wrench")
    imu_pub = h.publisher(Imu, "driver/imu/imu")
    ft_pub = h.publisher(WrenchStamped, "driver/ft/wrench")
    msg = Imu()
    msg.orientation_covariance[0] = -1.0          # REP-145: orientation not provided
    msg.linear_acceleration.z = 9.8
    assert send_until(h, imu_pub, msg, imus)
    assert imus[0].header.frame_id == "imu" and imus[0].linear_acceleration.z == 9.8
    w = WrenchStamped()
    w.wrench.force.x = 1.5
    assert send_until(h, ft_pub, w, wrenches)
    assert wrenches[0].header.frame_id == "ft"
    bad = Imu()
    bad.orientation.w = 2.0                        # not unit and not marked absent
    imu_pub.publish(bad)
    assert h.spin_until(lambda: sum(h.bridge.dropped["imu"].values()) == 1)


def test_odometry_relay(harness):
    h = harness
    out = h.listen(Odometry, "odom/odom")
    pub = h.publisher(Odometry, "driver/odom/odom")
    good = Odometry()
    good.pose.pose.orientation.w = 1.0
    good.twist.twist.linear.x = 0.3
    assert send_until(h, pub, good, out)
    assert out[0].header.frame_id == "odom" and out[0].twist.twist.linear.x == pytest.approx(0.3)
    bad = Odometry()
    bad.pose.pose.orientation.w = 0.0              # zero quaternion (the message default is w = 1)
    pub.publish(bad)
    assert h.spin_until(lambda: h.bridge.dropped["odom"])
    assert "unit quaternion" in next(iter(h.bridge.dropped["odom"]))


def test_restamp_and_rate_limit():
    robot = pan_robot()
    h = Harness(robot, default_mode="off", **{"sensors.laser.mode": "relay", "sensors.laser.restamp": True,
                                              "sensors.laser.max_rate": 2.0})
    try:
        out = h.listen(LaserScan, "laser/scan")
        pub = h.publisher(LaserScan, "driver/laser/scan")
        assert send_until(h, pub, scan(), out)
        assert out[0].header.stamp.sec != 1234                  # restamped with the bridge clock
        assert burst_is_rate_limited(h, pub, scan, h.bridge.relays[("laser", "scan")])
        assert not h.bridge.dropped["laser"]                    # rate limiting is not "invalid"
    finally:
        h.close()


def test_validators_reject_nonfinite_laser_limits():
    from robot_bridge.ros.conversions import validate_laser_scan

    msg = scan()
    msg.angle_increment = float("nan")
    assert "non-finite" in validate_laser_scan(msg)
    assert validate_laser_scan(scan()) is None
    assert np.isfinite(scan().angle_max)


def test_images_fall_back_to_the_executor_without_middleware_callbacks(monkeypatch):
    from robot_bridge.ros import fast_relay

    def unavailable():
        raise fast_relay.FastPathUnavailable("no new-message callback from this rmw: unsupported")

    monkeypatch.setattr(fast_relay, "_libs", unavailable)
    h = Harness(pan_robot(), default_mode="off", **{"sensors.cam.mode": "relay"})
    try:
        assert not h.bridge.fast_relays
        assert sum(s.topic_name.endswith("driver/cam/image_raw") for s in h.bridge.subscriptions) == 1
        out = h.listen(Image, "cam/image_raw")
        assert send_until(h, h.publisher(Image, "driver/cam/image_raw"), image(), out)
        assert out[0].header.frame_id == "cam_optical_frame"
    finally:
        h.close()


def test_image_stream_of_one_shape_is_relayed_by_the_compiled_drain():
    """After the Python handler relayed an image, images of the same shape are relayed by the fast path's
    compiled drain -- the same bytes the handler writes (frame_id replaced, stamp and pixels kept, any
    driver frame_id length) -- and whatever differs goes back to the handler: an invalid image is dropped
    and counted, a new shape is learned, a restamp set meanwhile is applied."""
    pytest.importorskip("numba")
    h = Harness(pan_robot(), default_mode="off", **{"sensors.cam.mode": "relay"})
    try:
        stream = h.bridge.relays[("cam", "image_raw")]
        if stream.relay_io is None:
            pytest.skip("no eventfd wake here: the fast path runs without a compiled drain")
        out = h.listen(Image, "cam/image_raw")
        pub = h.publisher(Image, "driver/cam/image_raw")
        assert send_until(h, pub, image(), out)                          # Python: relayed and learned
        h.spin_for(0.2)

        def sent(k, frame_id, **shape):
            msg = image(**shape)
            msg.header.frame_id = frame_id
            msg.header.stamp.sec, msg.header.stamp.nanosec = 100 + k, 1000 * k
            msg.data = bytes((i * k + 3) % 256 for i in range(len(msg.data)))
            return msg

        def relay_one(msg):
            before, sec = len(out), msg.header.stamp.sec
            pub.publish(msg)
            assert h.spin_until(lambda: any(m.header.stamp.sec == sec for m in out[before:]))
            got = next(m for m in out[before:] if m.header.stamp.sec == sec)
            msg.header.frame_id = "cam_optical_frame"
            assert got == msg                                            # every field, every byte
        start_handled, start_python = stream.relay_io.handled, stream.counts["relayed"]
        for k, frame_id in enumerate(["a", "", "driver_cam", "x" * 61, "camera_color"], start=1):
            relay_one(sent(k, frame_id))
        # (late copies of the first image, sent until discovery completed, may be drained meanwhile)
        assert stream.relay_io.handled - start_handled >= 5
        assert stream.counts["relayed"] == start_python                  # none went through Python
        assert h.spin_until(lambda: stream.relayed() == len(out))

        before = len(out)
        pub.publish(image(data_len=8 * 3 * 4 - 1))                       # the shape, one byte short
        assert h.spin_until(lambda: stream.counts["invalid"] == 1)
        h.spin_for(0.1)
        assert len(out) == before

        handled = stream.relay_io.handled
        relay_one(sent(6, "b", width=16, height=2))                      # a new shape: Python learns it
        relay_one(sent(7, "c", width=16, height=2))                      # ... then the drain relays it
        assert stream.relay_io.handled == handled + 1
        assert stream.counts["relayed"] == start_python + 1

        assert h.bridge.set_parameters([Parameter("sensors.cam.restamp", value=True)])[0].successful
        before = len(out)
        pub.publish(sent(8, "d", width=16, height=2))
        assert h.spin_until(lambda: len(out) > before)
        assert out[-1].header.stamp.sec != 108                           # restamped: the handler's rule
        assert stream.relay_io.handled == handled + 1
        assert h.spin_until(lambda: h.bridge.published["cam"] == stream.relayed() == len(out))
        from robot_bridge.ros import image_drain
        assert len(image_drain._drainer().signatures) == 1          # warmed at set-up: none compiled since
    finally:
        h.close()
