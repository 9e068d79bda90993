"""numpy / core results <-> ROS 2 messages, and sanity checks of incoming sensor messages.

Builders never copy pixel or range data more than once (numpy -> message
buffer).  Validators return ``None`` for a good message or a short reason
string; they only read the message.  Images are relayed serialized: their
header is read and rewritten in the CDR bytes, the pixels are never decoded.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image, Imu, LaserScan, PointCloud2, PointField

# -- builders (sensor simulation) ------------------------------------------------

DISTORTION_SIZES = {"plumb_bob": (5,), "rational_polynomial": (8,), "equidistant": (4,)}
ENCODING_BYTES = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "mono16": 2, "8UC1": 1,
                  "8UC3": 3, "16UC1": 2, "32FC1": 4, "64FC1": 8, "bayer_rggb8": 1, "bayer_bggr8": 1,
                  "bayer_gbrg8": 1, "bayer_grbg8": 1, "yuv422": 2, "uyvy": 2, "yuyv": 2}


def laser_scan_msg(ranges: np.ndarray, *, angle_min: float, angle_increment: float, range_min: float,
                   range_max: float, frame_id: str, stamp: Time, scan_time: float = 0.0,
                   time_increment: float = 0.0, intensities: Optional[np.ndarray] = None) -> LaserScan:
    msg = LaserScan()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    msg.angle_min = float(angle_min)
    msg.angle_increment = float(angle_increment)
    msg.angle_max = float(angle_min + (len(ranges) - 1) * angle_increment)
    msg.range_min = float(range_min)
    msg.range_max = float(range_max)
    msg.scan_time = float(scan_time)
    msg.time_increment = float(time_increment)
    msg.ranges = np.ascontiguousarray(ranges, dtype=np.float32)
    if intensities is not None:
        msg.intensities = np.ascontiguousarray(intensities, dtype=np.float32)
    return msg


XYZ_FIELDS = tuple(PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                   for i, n in enumerate("xyz"))
_POINTFIELD_BYTES = {PointField.INT8: 1, PointField.UINT8: 1, PointField.INT16: 2, PointField.UINT16: 2,
                     PointField.INT32: 4, PointField.UINT32: 4, PointField.FLOAT32: 4, PointField.FLOAT64: 8}


def pointcloud2_msg(points: np.ndarray, frame_id: str, stamp: Time) -> PointCloud2:
    """An organized x, y, z float32 cloud from (height, width, 3) points (NaN: no return)."""
    pts = np.ascontiguousarray(points, dtype=np.float32)
    height, width = pts.shape[:2]
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    msg.height, msg.width = int(height), int(width)
    msg.fields = list(XYZ_FIELDS)
    msg.is_bigendian = False
    msg.point_step = 12
    msg.row_step = 12 * int(width)
    msg.data = pts.reshape(-1).view(np.uint8)
    msg.is_dense = bool(np.isfinite(pts).all())
    return msg


def wrench_msg(force: Sequence[float], torque: Sequence[float], frame_id: str, stamp: Time):
    from geometry_msgs.msg import WrenchStamped

    msg = WrenchStamped()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    f, t = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z = (float(v) for v in force)
    t.x, t.y, t.z = (float(v) for v in torque)
    return msg


def image_msg(pixels: np.ndarray, encoding: str, frame_id: str, stamp: Time) -> Image:
    """(H, W) or (H, W, C) array -> Image (little-endian, tightly packed rows)."""
    pixels = np.ascontiguousarray(pixels)
    msg = Image()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = int(pixels.strides[0])
    msg.data = pixels.reshape(-1).view(np.uint8).tobytes()
    return msg


def camera_info_msg(*, width: int, height: int, fx: float, fy: float, cx: float, cy: float, frame_id: str,
                    stamp: Time, distortion_model: str = "plumb_bob",
                    distortion: Sequence[float] = ()) -> CameraInfo:
    """CameraInfo of a pinhole camera (R = identity, P = [K | 0])."""
    msg = CameraInfo()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = distortion_model
    size = DISTORTION_SIZES.get(distortion_model, (len(distortion),))[0]
    d = [float(v) for v in distortion] + [0.0] * max(0, size - len(distortion))
    msg.d = d
    msg.k = [float(fx), 0.0, float(cx), 0.0, float(fy), float(cy), 0.0, 0.0, 1.0]
    msg.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    msg.p = [float(fx), 0.0, float(cx), 0.0, 0.0, float(fy), float(cy), 0.0, 0.0, 0.0, 1.0, 0.0]
    return msg


NOT_PROVIDED = [-1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]   # REP-145: covariance[0] = -1


def imu_msg(*, frame_id: str, stamp: Time, orientation_xyzw: Optional[Sequence[float]] = None,
            angular_velocity: Optional[Sequence[float]] = None,
            linear_acceleration: Optional[Sequence[float]] = None,
            orientation_covariance: Sequence[float] = (0.0,) * 9,
            angular_velocity_covariance: Sequence[float] = (0.0,) * 9,
            linear_acceleration_covariance: Sequence[float] = (0.0,) * 9) -> Imu:
    """Imu message; a field given as None is marked not provided (covariance element 0 = -1)."""
    msg = Imu()
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    if orientation_xyzw is None:
        msg.orientation_covariance = NOT_PROVIDED
    else:
        q = msg.orientation
        q.x, q.y, q.z, q.w = (float(v) for v in orientation_xyzw)
        msg.orientation_covariance = [float(v) for v in orientation_covariance]
    for field, value, cov in (("angular_velocity", angular_velocity, angular_velocity_covariance),
                              ("linear_acceleration", linear_acceleration, linear_acceleration_covariance)):
        if value is None:
            setattr(msg, f"{field}_covariance", NOT_PROVIDED)
        else:
            vec = getattr(msg, field)
            vec.x, vec.y, vec.z = (float(v) for v in value)
            setattr(msg, f"{field}_covariance", [float(v) for v in cov])
    return msg


# -- validators (sensor relay) ------------------------------------------------------

def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def laser_beam_count(angle_min: float, angle_max: float, angle_increment: float) -> int:
    return int(round((angle_max - angle_min) / angle_increment)) + 1


def validate_laser_scan(msg: LaserScan) -> Optional[str]:
    if not _finite(msg.angle_min, msg.angle_max, msg.angle_increment, msg.range_min, msg.range_max):
        return "non-finite angle or range limits"
    if msg.angle_increment == 0.0 or (msg.angle_max - msg.angle_min) * msg.angle_increment < 0.0:
        return f"angle_increment {msg.angle_increment} does not step from angle_min to angle_max"
    if not 0.0 <= msg.range_min <= msg.range_max:
        return f"range_min {msg.range_min} / range_max {msg.range_max} out of order"
    expected = laser_beam_count(msg.angle_min, msg.angle_max, msg.angle_increment)
    if len(msg.ranges) != expected:
        return f"{len(msg.ranges)} ranges, angles give {expected}"
    if len(msg.intensities) not in (0, len(msg.ranges)):
        return f"{len(msg.intensities)} intensities for {len(msg.ranges)} ranges"
    return None


def rep117_normalize(msg: LaserScan) -> int:
    """Legacy out-of-range finite readings -> REP-117 (+inf beyond range_max, -inf below range_min).

    Modifies ``msg.ranges`` in place (a view, no copy) only when something must
    change; returns the number of readings changed.
    """
    ranges = np.frombuffer(msg.ranges, dtype=np.float32) if len(msg.ranges) else np.zeros(0, np.float32)
    with np.errstate(invalid="ignore"):
        too_far = ranges > msg.range_max
        too_near = ranges < msg.range_min
    too_far &= np.isfinite(ranges)
    too_near &= np.isfinite(ranges)
    changed = int(too_far.sum() + too_near.sum())
    if changed:
        fixed = ranges.copy()
        fixed[too_far] = np.inf
        fixed[too_near] = -np.inf
        msg.ranges = fixed
    return changed


def image_reason(width: int, height: int, encoding: str, step: int, data_len: int) -> Optional[str]:
    if width == 0 or height == 0:
        return f"empty image {width}x{height}"
    if not encoding:
        return "no encoding"
    bpp = ENCODING_BYTES.get(encoding)
    if bpp is not None and step < width * bpp:
        return f"step {step} < width {width} x {bpp} bytes ({encoding})"
    if step * height != data_len:
        return f"step {step} x height {height} != {data_len} data bytes"
    return None


def validate_image(msg: Image) -> Optional[str]:
    return image_reason(msg.width, msg.height, msg.encoding, msg.step, len(msg.data))


def validate_camera_info(msg: CameraInfo, width: Optional[int] = None, height: Optional[int] = None
                         ) -> Optional[str]:
    """Self-consistency, and the size the description gives (when known)."""
    if msg.width == 0 or msg.height == 0:
        return f"empty size {msg.width}x{msg.height}"
    if width and height and (msg.width, msg.height) != (int(width), int(height)):
        return f"size {msg.width}x{msg.height} differs from the description's {width}x{height}"
    k = list(msg.k)
    if not _finite(*k) or k[0] <= 0.0 or k[4] <= 0.0 or k[8] != 1.0:
        return "K is not a pinhole matrix (fx, fy > 0, K[8] = 1)"
    sizes = DISTORTION_SIZES.get(msg.distortion_model)
    if sizes is not None and len(msg.d) not in sizes + (0,):
        return f"{len(msg.d)} coefficients for distortion model {msg.distortion_model!r}"
    if not _finite(*msg.d, *msg.p, *msg.r):
        return "non-finite D, R or P"
    return None


def _vector_ok(v) -> bool:
    return _finite(v.x, v.y, v.z)


def validate_imu(msg: Imu) -> Optional[str]:
    q = msg.orientation
    if msg.orientation_covariance[0] != -1.0:
        if not _finite(q.x, q.y, q.z, q.w) or abs(math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w)
                                                  - 1.0) > 1e-3:
            return "orientation is not a unit quaternion (and not marked absent)"
    if msg.angular_velocity_covariance[0] != -1.0 and not _vector_ok(msg.angular_velocity):
        return "non-finite angular velocity"
    if msg.linear_acceleration_covariance[0] != -1.0 and not _vector_ok(msg.linear_acceleration):
        return "non-finite linear acceleration"
    return None


def validate_pointcloud2(msg) -> Optional[str]:
    """sensor_msgs/PointCloud2 layout: every field inside point_step, row_step >= width * point_step,
    data exactly row_step * height bytes."""
    for f in msg.fields:
        size = _POINTFIELD_BYTES.get(f.datatype)
        if size is None:
            return f"field {f.name!r}: unknown datatype {f.datatype}"
        if f.offset + size * max(1, f.count) > msg.point_step:
            return f"field {f.name!r} does not fit in point_step {msg.point_step}"
    if msg.row_step < msg.width * msg.point_step:
        return f"row_step {msg.row_step} < width {msg.width} x point_step {msg.point_step}"
    if len(msg.data) != msg.row_step * msg.height:
        return f"data has {len(msg.data)} bytes, expected row_step x height = {msg.row_step * msg.height}"
    return None


def validate_wrench(msg) -> Optional[str]:
    w = msg.wrench
    return None if _vector_ok(w.force) and _vector_ok(w.torque) else "non-finite force or torque"


def validate_odometry(msg) -> Optional[str]:
    p = msg.pose.pose
    q = p.orientation
    if not _vector_ok(p.position) or not _finite(q.x, q.y, q.z, q.w):
        return "non-finite pose"
    if abs(math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w) - 1.0) > 1e-3:
        return "orientation is not a unit quaternion"
    t = msg.twist.twist
    return None if _vector_ok(t.linear) and _vector_ok(t.angular) else "non-finite twist"


# -- poses and detections (world_node) ----------------------------------------------------

def pose_matrix(pose) -> np.ndarray:
    """4x4 of a geometry_msgs/Pose, the quaternion normalised as tf2 does (any length, huge components
    too: :func:`robot_bridge.model.transform.from_quat_xyzw`); ValueError naming what is wrong when a
    value is not finite or the quaternion is zero."""
    from ..model.transform import from_quat_xyzw, make

    p, q = pose.position, pose.orientation
    position = (p.x, p.y, p.z)
    if not _finite(*position):
        raise ValueError("non-finite position")
    return make(from_quat_xyzw((q.x, q.y, q.z, q.w)), position)


def detection_array_count(buf) -> Optional[int]:
    """Number of detections in a serialized vision_msgs/Detection3DArray, read from its CDR without
    deserializing it (None: not CDR or truncated).  Layout: encapsulation (4), header.stamp (8),
    header.frame_id (uint32 length incl. NUL, chars), padding to 4, detections (uint32 count, items)."""
    at = _detection_count_offset(buf)
    if at is None:
        return None
    return struct.unpack_from(_cdr_order(buf) + "I", buf, at)[0]


def truncate_detection_array(buf, count: int) -> bytes:
    """The serialized Detection3DArray ``buf`` reduced to its first ``count`` detections: the sequence
    length is rewritten and the bytes after the last kept detection are left for the deserializer to
    ignore (detections is the message's last field), so only ``count`` detections are ever built."""
    at = _detection_count_offset(buf)
    if at is None:
        raise ValueError("not a CDR Detection3DArray (or truncated)")
    out = bytearray(buf)
    struct.pack_into(_cdr_order(buf) + "I", out, at, int(count))
    return bytes(out)


def _cdr_order(buf) -> str:
    return "<" if bytes(memoryview(buf)[:2]) in _CDR_LE else ">"


def _detection_count_offset(buf) -> Optional[int]:
    view = memoryview(buf)
    if len(view) < 20 or bytes(view[:2]) not in _CDR_LE + _CDR_BE:
        return None
    (frame_len,) = struct.unpack_from(_cdr_order(buf) + "I", view, 12)
    at = _align4(16 + frame_len)
    return at if at + 4 <= len(view) else None


# -- time and trajectories (controller) -----------------------------------------------

def seconds(stamp) -> float:
    """builtin_interfaces Time or Duration -> float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def duration_msg(t: float):
    from builtin_interfaces.msg import Duration

    ns = int(round(t * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def trajectory_command(msg):
    """trajectory_msgs/JointTrajectory -> robot_bridge.control.TrajectoryCommand (plain values)."""
    from ..control import TrajectoryCommand, TrajectoryPoint

    return TrajectoryCommand(list(msg.joint_names), [
        TrajectoryPoint(list(p.positions), list(p.velocities), list(p.accelerations),
                        seconds(p.time_from_start))
        for p in msg.points], seconds(msg.header.stamp))


def joint_tolerances(msgs) -> list:
    """control_msgs/JointTolerance[] -> robot_bridge.control.JointTolerance list."""
    from ..control import JointTolerance

    return [JointTolerance(t.name, t.position, t.velocity, t.acceleration) for t in msgs]


def trajectory_point(positions: Sequence[float], velocities: Sequence[float] = (),
                     accelerations: Sequence[float] = (), effort: Sequence[float] = (),
                     time_from_start: float = 0.0):
    from trajectory_msgs.msg import JointTrajectoryPoint

    return JointTrajectoryPoint(positions=[float(x) for x in positions],
                                velocities=[float(x) for x in velocities],
                                accelerations=[float(x) for x in accelerations],
                                effort=[float(x) for x in effort],
                                time_from_start=duration_msg(time_from_start))


# -- serialized Image relay (no deserialization of the pixel buffer) ---------------------
#
# Fast DDS hands rclpy sensor_msgs/Image as XCDR1 little endian: a 4-byte encapsulation header, then
# header.stamp (int32 sec, uint32 nanosec), header.frame_id (uint32 length incl. NUL, chars, NUL), padding to
# 4, height, width (uint32), encoding (string), is_bigendian (uint8), padding to 4, step (uint32), data
# (uint32 length + bytes).  Every field after frame_id is aligned to at most 4 bytes, so replacing frame_id
# and re-padding to 4 keeps the rest valid byte for byte.

_CDR_LE = (b"\x00\x01", b"\x00\x03")          # CDR_LE, PL_CDR_LE representation identifiers
_CDR_BE = (b"\x00\x00", b"\x00\x02")          # CDR_BE, PL_CDR_BE


@dataclass
class SerializedImage:
    """Fields of a serialized Image, read in place (``rest`` = offset of ``height``)."""

    rest: int
    height: int
    width: int
    encoding: str
    step: int
    data_len: int


def _align4(offset: int, base: int = 4) -> int:
    return base + ((offset - base + 3) & ~3)


def parse_serialized_image(buf) -> Optional[SerializedImage]:
    """Image fields from its serialized form; None if not little-endian CDR or truncated."""
    view = memoryview(buf)
    if len(view) < 16 or bytes(view[:2]) not in _CDR_LE:
        return None
    try:
        (frame_len,) = struct.unpack_from("<I", view, 12)
        pos = _align4(16 + frame_len)
        height, width, enc_len = struct.unpack_from("<III", view, pos)
        rest = pos
        pos += 12
        encoding = bytes(view[pos:pos + max(0, enc_len - 1)]).decode("ascii", errors="replace")
        pos += enc_len + 1                          # chars + is_bigendian
        pos = _align4(pos)
        step, data_len = struct.unpack_from("<II", view, pos)
        if pos + 8 + data_len > len(view):
            return None
    except struct.error:
        return None
    return SerializedImage(rest, height, width, encoding, step, data_len)


def validate_serialized_image(img: Optional[SerializedImage]) -> Optional[str]:
    if img is None:
        return "not a little-endian CDR Image (or truncated)"
    return image_reason(img.width, img.height, img.encoding, img.step, img.data_len)


def _serialized_header(head: bytes, frame_id: str, stamp: Optional[Time]) -> bytes:
    """Everything before ``height``: the encapsulation and stamp of ``head`` (its first 12 bytes; the
    stamp replaced if given), then ``frame_id`` padded to 4."""
    frame = frame_id.encode() + b"\x00"
    stamp_bytes = struct.pack("<iI", stamp.sec, stamp.nanosec) if stamp is not None else head[4:12]
    header = b"".join((head[:4], stamp_bytes, struct.pack("<I", len(frame)), frame))
    return header + b"\x00" * (_align4(len(header)) - len(header))


def rewrite_serialized_header(buf, img: SerializedImage, frame_id: str, stamp: Optional[Time] = None
                              ) -> bytes:
    """The serialized message with a new frame_id (and stamp): one copy of the buffer."""
    view = memoryview(buf)
    return b"".join((_serialized_header(bytes(view[:12]), frame_id, stamp), view[img.rest:]))


def serialized_header_size(frame_id: str) -> int:
    """Bytes from the start of a serialized Image up to ``height`` for this frame_id."""
    return _align4(16 + len(frame_id.encode()) + 1)


def rewrite_serialized_header_in_place(buf, offset: int, img: SerializedImage, frame_id: str,
                                       stamp: Optional[Time] = None) -> int:
    """Give the serialized message at ``buf[offset:]`` a new frame_id (and stamp) without moving its
    data: the new header is written to end where the old one ended, so it starts earlier (using the
    headroom before ``offset``) or later.  Returns the message's new start in ``buf``."""
    view = memoryview(buf)
    header = _serialized_header(bytes(view[offset:offset + 12]), frame_id, stamp)
    end = offset + img.rest
    start = end - len(header)
    if start < 0:
        raise ValueError(f"{-start} bytes of headroom missing for frame_id {frame_id!r}")
    view[start:end] = header
    return start
