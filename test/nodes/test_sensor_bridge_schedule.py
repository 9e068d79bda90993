"""Every simulated sensor on its own schedule: a deliberately slow sensor (0.5 s a frame) starves neither
the other sensors, nor the joint_states intake, nor the node's parameter services.

The bridge spins on its own executor thread (as in its executable); the test's probe node lives in
another context with its own executor.  Rates are measured from the header stamps of the messages
received; the only wall-clock bound is the one the issue asks for: a parameter request answered
within 1 s (before, it waited behind the slow frame, 40 s and more), checked on the median and the
90th percentile of ~50 requests so that one request held up by the loaded machine's scheduler does
not fail the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rcl_interfaces.srv import GetParameters, ListParameters
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import Image, Imu, JointState, LaserScan

from fixtures.ros2_tools import missing_reason
from fixtures.sim.models import box_body, pan_robot
from fixtures.spinning import spun
from robot_bridge.nodes.sensor_bridge import SensorBridge
from fixtures.waiting import wait_until

DEEP = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
SLOW_FRAME = 0.5            # s: the camera's test hook sleeps this long in every frame
WINDOW = 3.0                # s of header stamps over which each rate is measured


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def rate_from_stamps(messages, start_ns: int, end_ns: int, at_least: int = 10) -> float:
    """Frames per second of stamp time: the least-squares slope of the frame count over the stamps.

    A frame delayed by a hiccup of the (loaded) machine and caught up just after sits off the line
    for a moment without tilting it, as it would tilt (n - 1) / (last - first) at a window's edge;
    frames never produced (a starved sensor) shift every later point and do tilt it."""
    stamps = np.sort([s for s in map(stamp_ns, list(messages)) if start_ns <= s <= end_ns])
    assert len(stamps) >= at_least, f"only {len(stamps)} messages in the window"
    seconds = (stamps - stamps[0]) * 1e-9
    return float(np.polyfit(seconds, np.arange(len(stamps)), 1)[0])


@pytest.fixture
def slow_camera_bridge():
    robot = pan_robot()
    robot.environment["wall"] = box_body("wall", [0.5, 0.1, 20], [0, 3.1, 0])   # seen once pan = 90 deg
    namespace = f"/t{uuid.uuid4().hex[:8]}"
    bridge_context, probe_context = rclpy.Context(), rclpy.Context()
    bridge_context.init()
    probe_context.init()
    bridge = SensorBridge(robot=robot, context=bridge_context, namespace=namespace, parameter_overrides=[
        Parameter("default_mode", value="sim"), Parameter("output_depth", value=200),
        Parameter("diagnostics_rate", value=4.0)])
    bridge.sim_sensors["cam"].frame_hook = lambda: time.sleep(SLOW_FRAME)
    probe = rclpy.create_node("probe", context=probe_context, namespace=namespace)
    # each spin ends before its node goes, then its context (fixtures/spinning.py)
    with spun(bridge_context, bridge), spun(probe_context, probe):
        yield bridge, probe, namespace


def _call(client, request) -> float:
    """Seconds until the service answered (the client is spun by the probe's own executor; it goes with the
    probe node once that spin has stopped: a client destroyed under the spin is outside rclpy's contract)."""
    assert client.wait_for_service(timeout_sec=30.0), f"{client.srv_name} not found"
    start = time.monotonic()
    future = client.call_async(request)
    wait_until(future.done, 30.0, lambda: f"{client.srv_name} never answered")
    elapsed = time.monotonic() - start
    assert future.result() is not None
    return elapsed, future.result()


def test_slow_sensor_starves_neither_other_sensors_nor_joint_states_nor_parameter_services(
        slow_camera_bridge):
    bridge, probe, ns = slow_camera_bridge
    inbox = {name: [] for name in ("scan", "imu", "image", "diagnostics")}
    probe.create_subscription(LaserScan, "laser/scan", inbox["scan"].append, DEEP)
    probe.create_subscription(Imu, "imu/imu", inbox["imu"].append, DEEP)
    probe.create_subscription(Image, "cam/image_raw", inbox["image"].append, DEEP)
    probe.create_subscription(DiagnosticArray, "/diagnostics", inbox["diagnostics"].append, DEEP)
    wait_until(lambda: all(inbox[k] for k in ("scan", "imu", "image")), 30.0, "scan, imu and image")
    laser_hz, imu_hz = bridge.sim_sensors["laser"].rate, bridge.sim_sensors["imu"].rate
    assert (laser_hz, imu_hz, bridge.sim_sensors["cam"].rate) == (20.0, 100.0, 15.0)

    # Parameter services answer within 1 s while the camera is in one of its 0.5 s frames.
    latencies = []
    list_client = probe.create_client(ListParameters, f"{ns}/sensor_bridge/list_parameters")
    get_client = probe.create_client(GetParameters, f"{ns}/sensor_bridge/get_parameters")
    window_start = bridge.get_clock().now().nanoseconds
    while bridge.get_clock().now().nanoseconds - window_start < WINDOW * 1e9:
        seconds, listed = _call(list_client, ListParameters.Request())
        latencies.append(seconds)
        assert "sensors.cam.rate" in listed.result.names
        seconds, got = _call(get_client, GetParameters.Request(names=["sensors.cam.rate", "default_mode"]))
        latencies.append(seconds)
        assert got.values[1].string_value == "sim"
    window_end = bridge.get_clock().now().nanoseconds
    # within 1 s, as the issue asks; the machine is shared and loaded, so one call in ten may be held up
    # by the OS (seen: one 1.1 s among 50 at load 12, the others 20-300 ms); waiting behind the camera's
    # frames would show in the median and in the 90th percentile
    assert np.median(latencies) < 0.5 and np.percentile(latencies, 90) < 1.0, latencies
    assert max(latencies) < 5.0, latencies

    # The other sensors kept their rates (from the stamps of what was received), the camera ran as it could.
    wait_until(lambda: inbox["imu"] and stamp_ns(inbox["imu"][-1]) > window_end, 30.0, "a late IMU")
    wait_until(lambda: stamp_ns(inbox["scan"][-1]) > window_end, 30.0, "a scan past the window")
    assert rate_from_stamps(inbox["scan"], window_start, window_end) == pytest.approx(laser_hz, rel=0.05)
    assert rate_from_stamps(inbox["imu"], window_start, window_end) == pytest.approx(imu_hz, rel=0.05)
    camera_hz = rate_from_stamps(inbox["image"], window_start - 10**9, window_end, at_least=4)
    assert camera_hz < 1.0 / SLOW_FRAME * 1.05

    # /diagnostics: the slow camera says it cannot keep its rate (achieved vs asked), the others are OK.
    def latest_status():
        statuses = {}
        for array in list(inbox["diagnostics"]):
            for status in array.status:
                statuses[status.hardware_id] = status
        return statuses

    wait_until(lambda: latest_status().get("cam") is not None
               and latest_status()["cam"].level == DiagnosticStatus.WARN, 30.0, "cam at WARN")
    cam = latest_status()["cam"]
    values = {kv.key: kv.value for kv in cam.values}
    assert float(values["asked_rate_hz"]) == 15.0
    assert float(values["achieved_rate_hz"]) < 1.0 / SLOW_FRAME * 1.05
    assert "cannot keep its rate" in cam.message
    statuses = latest_status()
    assert statuses["laser"].level == DiagnosticStatus.OK and statuses["imu"].level == DiagnosticStatus.OK

    # joint_states still move the sensor frames: the IMU turns with the pan joint, the laser sees the wall.
    joints = probe.create_publisher(JointState, "joint_states", DEEP)
    sent_ns = bridge.get_clock().now().nanoseconds
    expected = Rotation.from_euler("z", np.pi / 2) * Rotation.from_euler("x", np.radians(30))

    def turned():
        joints.publish(JointState(name=["pan"], position=[np.pi / 2]))
        imu = [m for m in list(inbox["imu"]) if stamp_ns(m) > sent_ns]
        if not imu:
            return False
        q = imu[-1].orientation
        return abs(abs(np.dot([q.x, q.y, q.z, q.w], expected.as_quat()))) > 1.0 - 1e-9

    wait_until(turned, 15.0, "the IMU turned with the pan joint")
    wait_until(lambda: np.isfinite(inbox["scan"][-1].ranges).any(), 15.0, "the laser seeing the wall")


@pytest.mark.skipif(shutil.which("ros2") is None and not os.path.exists(
    os.path.join(os.path.dirname(__import__("sys").executable), "ros2")),
    reason=missing_reason())
def test_ros2_param_list_and_get_answer_while_a_sensor_is_slow(slow_camera_bridge):
    bridge, _probe, ns = slow_camera_bridge
    bindir = os.path.dirname(__import__("sys").executable)
    ros2 = shutil.which("ros2") or os.path.join(bindir, "ros2")
    node = f"{ns}/sensor_bridge"
    env = dict(os.environ)
    # --spin-time: discovery of the node may take seconds on a loaded machine (not what is measured here;
    # the 1 s bound is checked with rclpy clients above)
    listed = subprocess.run([ros2, "param", "list", node, "--no-daemon", "--spin-time", "5"],
                            capture_output=True, text=True, timeout=90, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "sensors.cam.rate" in listed.stdout
    got = subprocess.run([ros2, "param", "get", node, "default_mode", "--no-daemon", "--spin-time", "5",
                          "--timeout", "20"],
                         capture_output=True, text=True, timeout=90, env=env)
    assert got.returncode == 0, got.stderr
    assert "sim" in got.stdout
