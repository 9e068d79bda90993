"""sensor_bridge relay under a flood of malformed messages (typed garbage, then raw garbage CDR bytes):
no callback raises (an exception would surface from spin), bad messages are dropped and counted,
and valid messages afterwards still come through with the fixed frame.  (An unknown image encoding
with consistent sizes is not malformed: the relay passes custom encodings through.)"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("rclpy")
from sensor_msgs.msg import CameraInfo, Image, Imu, LaserScan  # noqa: E402

from fixtures.sim.models import pan_robot  # noqa: E402
from fixtures.sim.ros_harness import Harness  # noqa: E402

NAN, INF = float("nan"), float("inf")


@pytest.fixture
def harness():
    h = Harness(pan_robot(), default_mode="relay", relay_namespace="driver")
    yield h
    h.close()


def scan(**fields) -> LaserScan:
    msg = LaserScan(angle_min=-0.2, angle_max=0.2, angle_increment=0.1, range_min=0.1, range_max=10.0,
                    ranges=[1.0, 2.0, 3.0, 4.0, 5.0])
    msg.header.frame_id = "driver_laser"
    for key, value in fields.items():
        setattr(msg, key, value)
    return msg


def image(**fields) -> Image:
    msg = Image(width=8, height=4, encoding="rgb8", step=24, data=bytes(96))
    msg.header.frame_id = "driver_cam"
    for key, value in fields.items():
        setattr(msg, key, value)
    return msg


BAD_SCANS = [scan(angle_increment=0.0), scan(angle_increment=NAN), scan(angle_min=INF), scan(range_min=NAN),
             scan(range_max=-1.0), scan(ranges=[]), scan(ranges=[1.0] * 20000), scan(angle_increment=-0.1),
             scan(intensities=[1.0, 2.0])]
BAD_IMAGES = [image(width=2**31 - 1), image(height=0, data=b""), image(step=3), image(data=b"\x00"),
              image(encoding=""), image(step=2**32 - 1),
              image(width=4, height=2**31, step=12)]
BAD_IMU = [Imu(), Imu(orientation_covariance=[NAN] * 9)]
BAD_INFO = [CameraInfo(width=8, height=4), CameraInfo(width=8, height=4, k=[NAN] * 9)]
for bad_imu in BAD_IMU:
    bad_imu.orientation.w = NAN


def _garbage_cdr(rng: random.Random) -> bytes:
    return bytes([0, 1, 0, 0]) + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))


def test_malformed_flood_then_valid_messages_flow(harness):
    h = harness
    scans, images = h.listen(LaserScan, "laser/scan"), h.listen(Image, "cam/image_raw")
    scan_pub = h.publisher(LaserScan, "driver/laser/scan")
    image_pub = h.publisher(Image, "driver/cam/image_raw")
    extra = [(h.publisher(Imu, "driver/imu/imu"), BAD_IMU),
             (h.publisher(CameraInfo, "driver/cam/camera_info"), BAD_INFO)]
    assert h.spin_until(lambda: all(p.get_subscription_count() for p in (scan_pub, image_pub, extra[0][0])))
    h.spin_for(0.5)                      # both ends matched before the flood
    rng = random.Random(10)
    sent_bad = {"laser": 0, "cam": 0}
    for _ in range(20):
        for msg in BAD_SCANS:
            scan_pub.publish(msg)
            sent_bad["laser"] += 1
        for msg in BAD_IMAGES:
            image_pub.publish(msg)
            sent_bad["cam"] += 1
        for pub, msgs in extra:
            for msg in msgs:
                pub.publish(msg)
        h.spin_for(0.05)
    h.spin_for(0.5)
    assert not scans and not images, "a malformed message was relayed"
    dropped = {name: sum(c.values()) for name, c in h.bridge.dropped.items()}
    assert dropped.get("laser", 0) >= 0.5 * sent_bad["laser"], dropped       # best effort: most arrive
    assert dropped.get("cam", 0) >= 0.5 * sent_bad["cam"], dropped

    for _ in range(50):     # raw bytes that are not valid CDR: rmw cannot deserialize them, nothing raises
        image_pub.publish(_garbage_cdr(rng))
        scan_pub.publish(_garbage_cdr(rng))
        h.spin_for(0.01)
    h.spin_for(0.3)
    assert not scans and not images
    good_scan, good_image = scan(), image()

    def resend():
        if not scans:
            scan_pub.publish(good_scan)
        if not images:
            image_pub.publish(good_image)
        return bool(scans and images)
    assert h.spin_until(resend)
    assert scans[0].header.frame_id != "driver_laser" and images[0].header.frame_id != "driver_cam"
    assert list(scans[0].ranges) == [1.0, 2.0, 3.0, 4.0, 5.0]
