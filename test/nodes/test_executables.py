"""Each node executable (what `ros2 run robot_bridge <node>` starts) comes up on the embedded robot and
stops cleanly on SIGINT: exit status 0, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

REPO = Path(__file__).resolve().parents[2]
WORLD = REPO / "robot_bridge" / "data" / "default.env.xml"


def _start(module: str) -> subprocess.Popen:
    """The node executable on the embedded robot, running after 4 s."""
    cmd = [sys.executable, "-m", f"robot_bridge.nodes.{module}", "--ros-args",
           "-p", f"description_file:={WORLD}"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    time.sleep(4.0)
    if proc.poll() is not None:
        raise AssertionError(f"{module} exited early:\n{proc.stdout.read()}")
    return proc


@pytest.mark.parametrize("module", ["description", "sensor_bridge", "controller"])
def test_node_executable_starts_and_stops_cleanly(module):
    proc = _start(module)
    try:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert "Traceback" not in output, output
    assert "ERROR" not in output, output


@pytest.mark.parametrize("module", ["description", "controller"])
def test_ctrl_c_repeated_until_the_node_is_gone_still_exits_0(module):
    """ros2 launch forwards Ctrl-C to nodes that got the terminal's own: SIGINTs keep coming while a node
    shuts down, also while Python finalizes (where it restores the default handlers: exit -2 once)."""
    proc = _start(module)
    try:
        deadline = time.monotonic() + 30.0
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.002)
        output, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_sensor_bridge_stops_cleanly_while_images_are_relayed(sig):
    """The fast relay thread is mid-stream when the signal comes: detach, join, exit 0."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    ns = f"/exe{os.getpid()}_{int(sig)}"
    cmd = [sys.executable, "-m", "robot_bridge.nodes.sensor_bridge", "--ros-args", "-r", f"__ns:={ns}",
           "-p", f"description_file:={WORLD}", "-p", "default_mode:=relay"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    context.init()
    node = rclpy.create_node("driver", context=context, namespace=ns)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        relayed = []
        node.create_subscription(Image, "wrist_camera/image_raw", relayed.append,
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        pub = node.create_publisher(Image, "driver/wrist_camera/image_raw", 10)
        image = Image(width=320, height=240, encoding="rgb8", step=960, data=bytes(320 * 240 * 3))
        deadline = time.monotonic() + 20.0
        while len(relayed) < 10 and time.monotonic() < deadline:
            pub.publish(image)
            executor.spin_once(timeout_sec=0.01)
        if len(relayed) < 10:
            proc.send_signal(signal.SIGINT)
            pytest.fail(f"the bridge relayed {len(relayed)} images:\n{proc.communicate(timeout=20)[0]}")
        assert relayed[-1].header.frame_id == "wrist_camera_optical_frame"
        for _ in range(20):                  # images still arriving while the signal lands
            pub.publish(image)
            executor.spin_once(timeout_sec=0.005)
        proc.send_signal(sig)
        for _ in range(20):
            pub.publish(image)
            executor.spin_once(timeout_sec=0.005)
        output, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "ERROR" not in output, output


@pytest.mark.parametrize("delay", [0.8, 2.0])
def test_node_executable_ctrl_c_during_start_up_stops_without_traceback(delay):
    """A Ctrl-C while the executable still imports or builds its node: exit 0, no KeyboardInterrupt."""
    cmd = [sys.executable, "-m", "robot_bridge.nodes.controller", "--ros-args", "-p",
           f"description_file:={WORLD}"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
