"""Measured rate of every simulated sensor topic, and the CPU of the process that simulates them (JSON).

Starts the bridge on a robot file in sim mode -- ``robot-bridge run`` (description, sensor bridge and
controller in one process) or the sensor bridge node alone -- subscribes every sensor topic it
publishes (serialized: no decoding in this process), and counts header stamps over a window: rate =
(stamps - 1) / (last - first).  The asked rate of each sensor is the one the bridge reports on
/diagnostics.  CPU = the bridge process's user + system time over the window, in % of one core.

Usage: .venv/bin/python bench/sim_rates.py [ROBOT_FILE] [--run | --node [--move]] [--seconds 20]
       [--search-path DIR ...] [-p sensors.camera.width:=320 ...]
Default robot: ../shared/corpus/openrave/src/data/testwamcamera.env.xml (search path its data directory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS_DATA = REPO.parent / "shared" / "corpus" / "openrave" / "src"
DEFAULT_ROBOT = CORPUS_DATA / "data" / "testwamcamera.env.xml"
SENSOR_TYPES = {"sensor_msgs/msg/LaserScan", "sensor_msgs/msg/Image", "sensor_msgs/msg/CameraInfo",
                "sensor_msgs/msg/Imu", "sensor_msgs/msg/PointCloud2", "geometry_msgs/msg/WrenchStamped"}
READY_TIMEOUT = 120.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_bridge(robot: Path, search_path: list[str], namespace: str, whole_bringup: bool,
                 overrides: list[str]) -> subprocess.Popen:
    from robot_bridge import bringup

    env = dict(os.environ)
    env.update(bringup.dds_environment(env))          # the shipped profile, named as this Fast DDS reads it
    env["OPENBLAS_NUM_THREADS"] = "1"
    if search_path:
        given = [env["OPENRAVE_DATA"]] if env.get("OPENRAVE_DATA") else []
        env["OPENRAVE_DATA"] = os.pathsep.join(search_path + given)
    if whole_bringup:
        if overrides:
            raise SystemExit("-p overrides need --node (robot-bridge run takes launch arguments only)")
        command = [str(Path(sys.executable).parent / "robot-bridge"), "run", "--robot", str(robot),
                   "--mode", "sim", "--namespace", namespace]
    else:
        # output_depth: a probe that lags on a loaded machine must not lose what the bridge did publish
        command = [sys.executable, "-m", "robot_bridge.nodes.sensor_bridge", "--ros-args",
                   "-r", f"__ns:=/{namespace}", "-p", f"description_file:={robot}",
                   "-p", "default_mode:=sim", "-p", "output_depth:=50"]
        for item in overrides:
            command += ["-p", item]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def moving_joints(robot: Path, search_path: list[str], count: int = 3) -> list[str]:
    """The first ``count`` one-DOF joints of the robot (swung by --move)."""
    from robot_bridge.formats import load

    model = load(str(robot), search_path=search_path or None)
    return [name for name, joint in model.joints.items() if joint.dof == 1][:count]


def measure(robot: Path, search_path: list[str], seconds: float, whole_bringup: bool,
            overrides: list[str], warmup: float = 3.0, move: bool = False) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    namespace = f"rates{uuid.uuid4().hex[:6]}"
    bridge = start_bridge(robot, search_path, namespace, whole_bringup, overrides)
    context = rclpy.Context()
    context.init()
    node = rclpy.create_node("sim_rates_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stamps: dict[str, list[int]] = {}
    asked: dict[str, float] = {}
    reported: dict[str, dict] = {}
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)

    def on_diagnostics(msg):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if "asked_rate_hz" in values:
                asked[status.hardware_id] = float(values["asked_rate_hz"])
                level = status.level
                reported[status.hardware_id] = {
                    "level": int.from_bytes(level, "little") if isinstance(level, bytes) else int(level),
                    "message": status.message,
                    **{k: values[k] for k in ("mean_frame_ms", "mean_cpu_ms", "late_frames") if k in values}}

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 50)
    if move:            # the robot swings all the time: sensors on it never see the same view twice
        from sensor_msgs.msg import JointState

        names = moving_joints(robot, search_path)
        joints = node.create_publisher(JointState, f"/{namespace}/joint_states", 10)
        t0 = time.monotonic()

        def swing():
            phase = 2 * math.pi * 0.2 * (time.monotonic() - t0)
            positions = [0.3 * math.sin(phase + k) for k in range(len(names))]
            joints.publish(JointState(name=names, position=positions))
        node.create_timer(0.02, swing)

    def recorder(topic):
        box = stamps.setdefault(topic, [])

        def on_message(raw):
            sec, nanosec = struct.unpack_from("<iI", raw, 4)     # header.stamp after the CDR header
            box.append(sec * 10**9 + nanosec)
        return on_message

    try:
        deadline = time.monotonic() + READY_TIMEOUT
        subscribed: set[str] = set()
        while time.monotonic() < deadline and bridge.poll() is None:
            for name, types in node.get_topic_names_and_types():
                if (name.startswith(f"/{namespace}/") and name not in subscribed
                        and set(types) & SENSOR_TYPES):
                    from rosidl_runtime_py.utilities import get_message

                    node.create_subscription(get_message(types[0]), name, recorder(name), qos, raw=True)
                    subscribed.add(name)
            if subscribed and all(stamps.get(t) for t in subscribed) and asked and \
                    time.monotonic() > deadline - READY_TIMEOUT + 5.0:
                break
            executor.spin_once(timeout_sec=0.05)
        if bridge.poll() is not None:
            raise RuntimeError(f"bridge exited: {bridge.stderr.read()[-2000:]}")
        end = time.monotonic() + warmup
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        start_ns, cpu0, wall0 = node.get_clock().now().nanoseconds, cpu_seconds(bridge.pid), time.monotonic()
        end = wall0 + seconds
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        end_ns = node.get_clock().now().nanoseconds
        cpu = (cpu_seconds(bridge.pid) - cpu0) / (time.monotonic() - wall0) * 100.0
        end = time.monotonic() + 1.0                  # the window's last messages arrive
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
    finally:
        bridge.terminate()
        try:
            bridge.wait(timeout=20)
        except subprocess.TimeoutExpired:
            bridge.kill()
            bridge.wait()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
    topics = {}
    for topic, values in sorted(stamps.items()):
        window = sorted(s for s in values if start_ns <= s <= end_ns)
        sensor = topic.split("/")[-2]
        entry = {"sensor": sensor, "messages": len(window)}
        if len(window) >= 2:
            entry["measured_hz"] = round((len(window) - 1) / ((window[-1] - window[0]) * 1e-9), 3)
        if sensor in asked:
            entry["asked_hz"] = asked[sensor]
            if "measured_hz" in entry:
                entry["within_5_percent"] = abs(entry["measured_hz"] / asked[sensor] - 1.0) <= 0.05
        topics[topic.removeprefix(f"/{namespace}/")] = entry
    return {"robot": str(robot), "process": "robot-bridge run" if whole_bringup else "sensor_bridge_node",
            "robot_moving": move, "overrides": overrides, "seconds": seconds,
            "cpu_percent_of_one_core": round(cpu, 1),
            "load_average_1min": round(os.getloadavg()[0], 2), "topics": topics,
            "diagnostics": reported,
            "every_topic_within_5_percent": all(t.get("within_5_percent") for t in topics.values())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", nargs="?", default=str(DEFAULT_ROBOT))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--run", dest="whole", action="store_true", default=True,
                      help="robot-bridge run: description, sensor bridge and controller (default)")
    mode.add_argument("--node", dest="whole", action="store_false", help="the sensor bridge node alone")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--search-path", action="append", default=[])
    parser.add_argument("--move", action="store_true",
                        help="(with --node) swing three joints all the time via joint_states at 50 Hz")
    parser.add_argument("-p", dest="overrides", action="append", default=[], metavar="NAME:=VALUE",
                        help="sensor bridge parameter (with --node)")
    args = parser.parse_args()
    robot = Path(args.robot).resolve()
    if not robot.is_file():
        print(f"robot file not found: {robot}", file=sys.stderr)
        return 2
    search = args.search_path or ([str(CORPUS_DATA)] if robot.is_relative_to(CORPUS_DATA) else [])
    if args.move and args.whole:
        parser.error("--move needs --node (under robot-bridge run the controller owns joint_states)")
    result = measure(robot, search, args.seconds, args.whole, args.overrides, move=args.move)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
