"""`ros2 launch robot_bridge bridge.launch.py objects:=...` as a user runs it: world_node comes up with the
bridge, a detection from this process becomes a body on /tf, and the bridge's simulated laser sees it.
Waits on message contents, never on wall-clock sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")
from fixtures.ros2_cli import ros2_launch_executable  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MAPPING = REPO / "robot_bridge" / "data" / "objects.yaml"
BALL_AT = (0.5, 0.3, 0.0)            # in the base_laser frame; radius 0.05 m (data/objects/ball.kinbody.xml)


def test_ros2_launch_with_objects_turns_detections_into_bodies_the_sim_sees(tmp_path):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState, LaserScan
    from tf2_msgs.msg import TFMessage
    from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

    from robot_bridge.ros import qos
    from robot_bridge.ros.tf import matrix

    ros2 = ros2_launch_executable()
    venv = sys.prefix                                  # this venv (Kilted .venv or .venv-jazzy)
    env = {**os.environ, "AMENT_PREFIX_PATH": venv, "PATH": f"{venv}/bin:{os.environ.get('PATH', '')}"}
    log = open(tmp_path / "launch.log", "w+", encoding="utf-8")
    process = subprocess.Popen([ros2, "launch", "robot_bridge", "bridge.launch.py", f"objects:={MAPPING}"],
                               stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                               start_new_session=True)
    context = rclpy.Context()
    context.init()
    node = rclpy.create_node("detector", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    lock = threading.Lock()
    seen = {"ball": None, "scan": None, "joint_states": None}

    def on_tf(msg):
        for t in msg.transforms:
            if t.child_frame_id == "ball_0" and t.header.frame_id == "world":
                with lock:
                    seen["ball"] = matrix(t)

    def on_scan(msg):
        with lock:
            seen["scan"] = msg

    node.create_subscription(TFMessage, "/tf", on_tf, qos.tf_qos())
    node.create_subscription(JointState, "/joint_states", lambda m: seen.update(joint_states=m),
                             qos.sensor_data_qos())
    node.create_subscription(LaserScan, "/base_laser/scan", on_scan, QoSProfile(depth=5))
    detections = node.create_publisher(Detection3DArray, "/detections", 10)

    def detect():
        msg = Detection3DArray()
        msg.header.frame_id = "base_laser"
        msg.header.stamp = node.get_clock().now().to_msg()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = "ball", 0.9
        p = hyp.pose.pose
        p.position.x, p.position.y, p.position.z = BALL_AT
        p.orientation.w = 1.0
        msg.detections.append(Detection3D(results=[hyp]))
        detections.publish(msg)

    expected = float(np.hypot(*BALL_AT[:2])) - 0.05
    beam = float(np.arctan2(BALL_AT[1], BALL_AT[0]))

    def ball_in_scan() -> bool:
        with lock:
            scan = seen["scan"]
        if scan is None:
            return False
        i = int(round((beam - scan.angle_min) / scan.angle_increment))
        return abs(scan.ranges[i] - expected) < 0.03           # config/sensor_bridge.yaml: 5 mm noise

    def wait(predicate, timeout=90.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            detect()
            executor.spin_once(timeout_sec=0.1)
            if predicate():
                return True
            if process.poll() is not None:
                return False
        return False

    try:
        assert wait(lambda: seen["ball"] is not None), "ball_0 never appeared on /tf"
        # world: the laser at (0.28, 0, 0.2) in the embedded robot's base, looking along +x
        np.testing.assert_allclose(seen["ball"][:3, 3], (0.78, 0.3, 0.2), atol=1e-9)
        assert wait(ball_in_scan), "the simulated laser never saw the detected ball"
        # every node fully up (the controller publishes joint_states once its modules are open) before
        # the launch is stopped: a stop during a node's start-up is not what this test is about
        assert wait(lambda: seen["joint_states"] is not None), "the controller never came up"
    finally:
        executor.shutdown(timeout_sec=5)
        node.destroy_node()
        context.try_shutdown()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.seek(0)
        text = log.read()
        log.close()
    assert "world_node" in text and "object ball_0 (ball)" in text, text
    assert "process has died" not in text, text
    assert "Traceback" not in text, text
