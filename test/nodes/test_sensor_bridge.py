"""sensor_bridge_node in sim mode over real rclpy: laser, depth camera and IMU from the model."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState, LaserScan

from fixtures.sim.models import box_body, pan_robot
from robot_bridge.model import AttachedSensor, Joint
from robot_bridge.sim.imu import STANDARD_GRAVITY


def test_sim_laser_ranges_and_frame_follow_joint_states(sensor_harness):
    robot = pan_robot()
    # 1 m wide box face at y = 3: visible only when the pan joint turns the laser towards +y.
    robot.environment["wall"] = box_body("wall", [0.5, 0.1, 20], [0, 3.1, 0])
    h = sensor_harness(robot, default_mode="off", **{"sensors.laser.mode": "sim", "seed": 1})
    scans = h.listen(LaserScan, "laser/scan")
    assert h.spin_until(lambda: scans)
    first = scans[-1]
    assert first.header.frame_id == "laser"
    assert len(first.ranges) == 241 and np.all(np.isinf(first.ranges))
    assert first.angle_min == pytest.approx(np.radians(-60))
    assert first.angle_max == pytest.approx(np.radians(60))

    joints = h.publisher(JointState, "joint_states")

    def turned():
        joints.publish(JointState(name=["pan"], position=[np.pi / 2]))
        return scans and np.isfinite(scans[-1].ranges).any()

    assert h.spin_until(turned)
    ranges = np.asarray(scans[-1].ranges)
    angles = first.angle_min + first.angle_increment * np.arange(len(ranges))
    x_at_wall = -2.9 * np.tan(angles)
    on_face = np.abs(x_at_wall) < 0.5 - 1e-3
    assert on_face.sum() == 39
    assert np.max(np.abs(ranges[on_face] - 2.9 / np.cos(angles[on_face]))) < 1e-6
    assert np.all(np.isinf(ranges[np.abs(x_at_wall) > 0.5 + 1e-3]))
    assert h.bridge.published["laser"] >= 2


def test_sim_laser_sees_the_world_from_where_robot_pose_places_the_robot(sensor_harness):
    """issue 43; fails on the old code (the scene stood the robot at the origin whatever robot_pose said).
    Placed at (1, 2, 0) turned 90 degrees about z, the laser (0.1 m ahead of the head, 0.5 m up) stands at
    (1, 2.1, 0.5) looking along world +y: the wall whose face is at y = 4.1, 1 m wide about x = 1, is 2 m
    ahead.  The decoy (face at x = 3.1, 1 m wide about y = 0) is what the unplaced laser sees, 3 m ahead;
    from the placed one it lies behind."""
    def scan(**parameters) -> tuple[np.ndarray, np.ndarray]:
        robot = pan_robot()
        robot.environment["wall"] = box_body("wall", [0.5, 0.1, 20], [1.0, 4.2, 0])
        robot.environment["decoy"] = box_body("decoy", [0.1, 0.5, 20], [3.2, 0, 0])
        h = sensor_harness(robot, default_mode="off", **{"sensors.laser.mode": "sim"}, **parameters)
        scans = h.listen(LaserScan, "laser/scan")
        assert h.spin_until(lambda: scans)
        ranges = np.asarray(scans[-1].ranges)
        return ranges, scans[-1].angle_min + scans[-1].angle_increment * np.arange(len(ranges))

    ranges, angles = scan(robot_pose=[1.0, 2.0, 0.0, 0.0, 0.0, np.pi / 2])
    on_face = np.abs(2.0 * np.tan(angles)) < 0.5 - 1e-3
    assert on_face.sum() == 57                                      # -14 .. 14 degrees by 0.5
    assert np.max(np.abs(ranges[on_face] - 2.0 / np.cos(angles[on_face]))) < 1e-6
    assert np.all(np.isinf(ranges[np.abs(2.0 * np.tan(angles)) > 0.5 + 1e-3]))
    # the same scene unplaced: the decoy 3 m ahead, the wall out of the field of view
    ranges, angles = scan()
    on_decoy = np.abs(3.0 * np.tan(angles)) < 0.5 - 1e-3
    assert np.max(np.abs(ranges[on_decoy] - 3.0 / np.cos(angles[on_decoy]))) < 1e-6
    assert np.all(np.isinf(ranges[np.abs(3.0 * np.tan(angles)) > 0.5 + 1e-3]))


def test_sim_depth_camera_per_pixel_depth_and_camera_info(sensor_harness):
    robot = pan_robot()
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    h = sensor_harness(robot, default_mode="off",
                        **{"sensors.cam.mode": "sim", "sensors.cam.encoding": "32FC1",
                           "sensors.cam.rate": 20.0, "sensors.cam.depth_topic": "cam/depth/image_raw"})
    images = h.listen(Image, "cam/image_raw")
    infos = h.listen(CameraInfo, "cam/camera_info")
    depths = h.listen(Image, "cam/depth/image_raw")
    assert h.spin_until(lambda: images and infos and depths)
    img = images[-1]
    assert img.header.frame_id == "cam_optical_frame"
    assert (img.width, img.height, img.encoding, img.step) == (64, 48, "32FC1", 64 * 4)
    depth = np.frombuffer(bytes(img.data), dtype=np.float32).reshape(48, 64)
    assert np.max(np.abs(depth - 1.5)) < 1e-6                      # fronto-parallel plane 1.5 m ahead
    assert bytes(depths[-1].data) == bytes(img.data)
    info = infos[-1]
    assert info.header.frame_id == "cam_optical_frame"
    assert (info.width, info.height) == (64, 48)
    assert list(info.k) == pytest.approx([50.0, 0, 31.5, 0, 52.0, 23.5, 0, 0, 1])
    assert list(info.p) == pytest.approx([50.0, 0, 31.5, 0, 0, 52.0, 23.5, 0, 0, 0, 1, 0])


def test_sim_rgb_camera_sees_the_box_colour(sensor_harness):
    robot = pan_robot()
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0], rgb=(1.0, 0.5, 0.0))
    h = sensor_harness(robot, default_mode="off", **{"sensors.cam.mode": "sim"})
    images = h.listen(Image, "cam/image_raw")
    assert h.spin_until(lambda: images)
    img = images[-1]
    assert (img.encoding, img.step) == ("rgb8", 64 * 3)
    rgb = np.frombuffer(bytes(img.data), dtype=np.uint8).reshape(48, 64, 3)
    assert rgb[24, 32] == pytest.approx([255, 128, 0], abs=2)


def test_sim_imu_at_rest_reads_gravity_up_in_its_frame(sensor_harness):
    robot = pan_robot()
    h = sensor_harness(robot, default_mode="off", **{"sensors.imu.mode": "sim"})
    imus = h.listen(Imu, "imu/imu")
    assert h.spin_until(lambda: len(imus) >= 3)
    msg = imus[-1]
    assert msg.header.frame_id == "imu"
    acc = np.array([msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z])
    # the IMU is tilted 30 deg about its x axis: world up is (0, sin 30, cos 30) in its frame
    assert acc == pytest.approx(STANDARD_GRAVITY * np.array([0, 0.5, np.cos(np.radians(30))]), abs=1e-9)
    assert np.linalg.norm(acc) == pytest.approx(9.81, abs=0.01)
    gyro = [msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z]
    assert gyro == pytest.approx([0, 0, 0])
    assert list(msg.linear_acceleration_covariance) == pytest.approx([0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01])
    q = msg.orientation
    assert [q.x, q.y, q.z, q.w] == pytest.approx([np.sin(np.radians(15)), 0, 0, np.cos(np.radians(15))])


def test_no_description_keeps_the_node_alive(sensor_harness):
    h = sensor_harness(None)
    assert h.bridge.robot is None and not h.bridge.relays
    h.spin_for(0.1)


def test_bad_mode_and_unsimulatable_type_are_reported_not_fatal(sensor_harness):
    robot = pan_robot()
    robot.sensors["odo"] = AttachedSensor("odo", "head", type="odometry")
    robot.sensors["bad name!"] = AttachedSensor("bad name!", "head", type="imu")   # no valid ROS name
    h = sensor_harness(robot, default_mode="sim",
                        **{"sensors.laser.mode": "bogus", "sensors.cam.mode": "off"})
    imus = h.listen(Imu, "imu/imu")
    assert h.spin_until(lambda: imus)
    h.spin_for(0.1)
    # laser: bad mode, odo: cannot be simulated, cam: off, "bad name!": skipped
    assert set(h.bridge.published) == {"imu"}


def test_yaml_off_read_as_false_means_off(sensor_harness):
    # YAML / --ros-args turn an unquoted `off` into the boolean false; it must still mean "off".
    h = sensor_harness(pan_robot(), default_mode=False, **{"sensors.imu.mode": "sim"})
    imus = h.listen(Imu, "imu/imu")
    assert h.spin_until(lambda: imus)
    h.spin_for(0.1)
    assert set(h.bridge.published) == {"imu"}


def test_multi_dof_joint_follows_its_urdf_axis_names(sensor_harness):
    # The pan joint as a 2-DOF universal joint (z, then x): /joint_states name its DOFs pan_axis0, pan_axis1
    # (the description node's URDF joints).  Turning axis 0 by 90 deg points the laser at the wall on +y.
    robot = pan_robot()
    pan = robot.joints["pan"]
    robot.joints["pan"] = Joint("pan", "universal", pan.parent, pan.child, origin=pan.origin,
                                axes=[np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])])
    robot.environment["wall"] = box_body("wall", [0.5, 0.1, 20], [0, 3.1, 0])
    h = sensor_harness(robot, default_mode="off", **{"sensors.laser.mode": "sim"})
    scans = h.listen(LaserScan, "laser/scan")
    joints = h.publisher(JointState, "joint_states")

    def turned():
        joints.publish(JointState(name=["pan_axis0", "pan_axis1"], position=[np.pi / 2, 0.0]))
        return scans and np.isfinite(scans[-1].ranges).any()

    assert h.spin_until(turned)
    ranges = np.asarray(scans[-1].ranges)
    angles = scans[-1].angle_min + scans[-1].angle_increment * np.arange(len(ranges))
    on_face = np.abs(2.9 * np.tan(angles)) < 0.5 - 1e-3
    assert np.max(np.abs(ranges[on_face] - 2.9 / np.cos(angles[on_face]))) < 1e-6


def test_sim_imu_covariance_parameters_override_the_description(sensor_harness):
    h = sensor_harness(pan_robot(), default_mode="off", **{
        "sensors.imu.mode": "sim", "sensors.imu.gyro_noise_std": 0.1,
        "sensors.imu.orientation_covariance": [0.5, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.5]})
    imus = h.listen(Imu, "imu/imu")
    assert h.spin_until(lambda: imus)
    msg = imus[-1]
    assert list(msg.orientation_covariance) == pytest.approx([0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5])
    # no angular velocity covariance in the description: the noise variance on the diagonal
    assert list(msg.angular_velocity_covariance) == pytest.approx([0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01])
    # the description's value stays where no parameter overrides it
    assert list(msg.linear_acceleration_covariance) == pytest.approx([0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01])


def test_sim_camera_resolution_and_rate_and_laser_resolution_from_parameters(sensor_harness):
    robot = pan_robot()
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    h = sensor_harness(robot, default_mode="off", **{
        "sensors.cam.mode": "sim", "sensors.cam.encoding": "32FC1", "sensors.cam.width": 32,
        "sensors.cam.rate": 5.0, "sensors.laser.mode": "sim",
        "sensors.laser.angle_increment": np.radians(2.0)})
    images, infos = h.listen(Image, "cam/image_raw"), h.listen(CameraInfo, "cam/camera_info")
    scans = h.listen(LaserScan, "laser/scan")
    assert h.spin_until(lambda: len(images) >= 6 and infos and scans)
    img, info = images[-1], infos[-1]
    assert (img.width, img.height) == (32, 24)                     # height scaled with the width
    assert np.max(np.abs(np.frombuffer(bytes(img.data), dtype=np.float32) - 1.5)) < 1e-6
    assert (info.width, info.height) == (32, 24)
    assert list(info.k) == pytest.approx([25.0, 0, 15.5, 0, 26.0, 11.5, 0, 0, 1])
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in images])
    assert np.median(np.diff(stamps)) == pytest.approx(0.2, rel=0.05)
    assert h.bridge.sim_sensors["cam"].rate == 5.0
    scan = scans[-1]
    assert len(scan.ranges) == 61 and scan.angle_increment == pytest.approx(np.radians(2.0))
    assert scan.angle_max == pytest.approx(np.radians(60))


def test_the_camera_zbuffer_compiles_off_the_start_up_path(sensor_harness, monkeypatch):
    """On a fresh install the camera's z-buffer compiles for seconds: the node is built, and its laser
    publishes, while that compilation runs (held here); the camera starts once it is done.  (Main compiled
    it in the constructor: a stop during start-up waited for the compiler, over 5 s on a loaded host, and
    ros2 launch escalated to SIGTERM.)"""
    import threading

    from robot_bridge.sim import raster

    entered, release = threading.Event(), threading.Event()
    real, unreleased = raster.warm_up, []

    def held():
        entered.set()
        if not release.wait(20):            # the constructor itself waiting (main): never released
            unreleased.append(True)
        return real()

    monkeypatch.setattr(raster, "warm_up", held)
    robot = pan_robot()
    robot.environment["wall"] = box_body("wall", [0.1, 50, 50], [1.66, 0, 0])
    try:
        h = sensor_harness(robot, default_mode="off",
                           **{"sensors.cam.mode": "sim", "sensors.laser.mode": "sim"})
        assert not unreleased, "the constructor waited for the z-buffer's compilation"
        if not h.bridge.scene.raster:
            pytest.skip("no z-buffer here (numba unavailable): cameras cast rays")
        scans, images = h.listen(LaserScan, "laser/scan"), h.listen(Image, "cam/image_raw")
        assert entered.wait(30), "the z-buffer was never warmed up"
        assert h.spin_until(lambda: len(scans) >= 3)          # the rest of the node runs meanwhile
        assert not images and not h.bridge.sim_sensors["cam"].worker.running
    finally:
        release.set()
    assert h.spin_until(lambda: images)                        # then the camera starts
