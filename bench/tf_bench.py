"""JointState -> /tf through description_node at 1 kHz, against a direct hop (prints JSON).

Three processes: this one publishes, every millisecond, the same JointState
(stamp = wall clock) on ``/joint_states`` and on ``/bench_direct``; a
``description_node`` (publish_frequency 0: one /tf per JointState) turns the
first into /tf; a sink process subscribes to ``/bench_direct`` (the direct
publisher->subscriber hop) and to ``/tf`` and records each message's latency
(receive time - stamp).  Reported: lost messages, p50/p99 latency of both
paths and of the added latency (via node - direct, paired by stamp), and the
node's CPU use over the run.

Usage: .venv/bin/python bench/tf_bench.py [--rate 1000] [--duration 10] [--robot FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402

NODE_CMD = [sys.executable, "-m", "robot_bridge.nodes.description"]
DEFAULT_ROBOT = REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"
WARMUP = 1.0          # s of traffic before measuring


def _stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def run_sink(duration: float) -> int:
    """Record latencies of /bench_direct and /tf until ``duration`` s of silence-free run; print JSON."""
    rclpy.init()
    node = rclpy.create_node("tf_bench_sink")
    direct: dict[int, int] = {}
    via: dict[int, int] = {}

    # raw subscriptions: the stamps are read straight from the CDR bytes (JointState: header first;
    # TFMessage: sequence length, then the first transform's header), so the sink's own cost stays tiny
    def stamp_at(data: bytes, offset: int) -> int:
        sec, nanosec = struct.unpack_from("<iI" if data[1] == 1 else ">iI", data, offset)
        return sec * 1_000_000_000 + nanosec

    def on_direct(data: bytes):
        now = time.time_ns()
        stamp = stamp_at(data, 4)
        direct[stamp] = now - stamp

    def on_tf(data: bytes):
        now = time.time_ns()
        stamp = stamp_at(data, 8)
        via[stamp] = now - stamp

    node.create_subscription(JointState, "/bench_direct", on_direct, qos.joint_states_qos(), raw=True)
    node.create_subscription(TFMessage, "/tf", on_tf, qos.tf_qos(), raw=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    end = time.monotonic() + duration
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    print(json.dumps({"direct": direct, "via": via}))
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentiles(values_ns) -> dict:
    if not len(values_ns):
        return {"p50_us": None, "p99_us": None}
    arr = np.asarray(values_ns, dtype=float) / 1e3
    return {"p50_us": round(float(np.percentile(arr, 50)), 1),
            "p99_us": round(float(np.percentile(arr, 99)), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--robot", default=str(DEFAULT_ROBOT))
    parser.add_argument("--role", choices=["main", "sink"], default="main", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "sink":
        return run_sink(args.duration)

    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    node_proc = subprocess.Popen(
        NODE_CMD + ["--ros-args", "-p",
         f"description_file:={args.robot}", "-p", "publish_frequency:=0.0", "--log-level", "warn"],
        env=env, cwd=REPO)
    total = WARMUP + args.duration
    sink = subprocess.Popen([sys.executable, __file__, "--role", "sink", "--duration", str(total + 6.0)],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    rclpy.init()
    pub_node = rclpy.create_node("tf_bench_source")
    pub_joint = pub_node.create_publisher(JointState, "/joint_states", 100)
    pub_direct = pub_node.create_publisher(JointState, "/bench_direct", 100)
    try:
        from robot_bridge.formats import load
        from robot_bridge.kinematics.urdf_tree import urdf_tree

        robot = load(args.robot)
        names = [j.name for j in urdf_tree(robot)[1]
                 if j.type != "fixed" and robot.joints[j.source].is_active]
        # wait for both subscribers (node and sink) and give discovery a moment
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and not (pub_joint.get_subscription_count() >= 1
                                                   and pub_direct.get_subscription_count() >= 1):
            time.sleep(0.05)
        time.sleep(1.0)

        period = 1.0 / args.rate
        count = int(total * args.rate)
        warm = int(WARMUP * args.rate)
        sent: list[int] = []
        cpu0 = wall0 = None
        msg = JointState(name=names, position=[0.0] * len(names))
        start = time.perf_counter()
        for k in range(count):
            target = start + k * period
            delay = target - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if k == warm:
                cpu0, wall0 = _cpu_seconds(node_proc.pid), time.monotonic()
            msg.position = [0.3 * np.sin(0.001 * k + i) for i in range(len(names))]
            now = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
            pub_joint.publish(msg)
            pub_direct.publish(msg)
            if k >= warm:
                sent.append(now)
        cpu = _cpu_seconds(node_proc.pid) - cpu0
        wall = time.monotonic() - wall0
        achieved_rate = len(sent) / (time.perf_counter() - start - WARMUP)
        out, _ = sink.communicate(timeout=total + 60.0)
    finally:
        node_proc.terminate()
        try:
            node_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            node_proc.kill()
        if sink.poll() is None:
            sink.kill()
        pub_node.destroy_node()
        rclpy.shutdown()

    data = json.loads(out)
    direct = {int(k): v for k, v in data["direct"].items()}
    via = {int(k): v for k, v in data["via"].items()}
    lost_via = sum(1 for s in sent if s not in via)
    lost_direct = sum(1 for s in sent if s not in direct)
    paired = [s for s in sent if s in via and s in direct]
    added = [via[s] - direct[s] for s in paired]
    d, v, a = _percentiles([direct[s] for s in sent if s in direct]), \
        _percentiles([via[s] for s in sent if s in via]), _percentiles(added)
    result = {
        "bench": "tf", "robot": args.robot, "joints": len(names), "rate_hz": args.rate,
        "achieved_rate_hz": round(achieved_rate, 1), "duration_s": args.duration, "sent": len(sent),
        "lost_via_node": lost_via, "lost_direct": lost_direct,
        "direct_hop": d, "via_node": v, "added": a,
        "added_p50_over_direct_p50": round(a["p50_us"] / d["p50_us"], 3) if paired else None,
        "node_cpu_percent": round(100.0 * cpu / wall, 1),
        "goal": {"lost": 0, "added_p50_over_direct_p50_max": 1.5},
    }
    result["ok"] = lost_via == 0 and result["added_p50_over_direct_p50"] is not None \
        and result["added_p50_over_direct_p50"] <= 1.5
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
