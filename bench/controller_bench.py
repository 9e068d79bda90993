"""controller_node's CPU at its default rates, embedded arm in sim (prints JSON).

Runs ``controller_node`` (hardware sim, the embedded LWA3 arm, default parameters) in a process of its own
with a subscriber of /joint_states, ~/controller_state and /diagnostics in another, and reports the node's
CPU (% of one core, from /proc) over ``--duration`` s while it holds its position, the messages received
per topic and their rates.  On a loaded machine the node may not get the CPU to keep its rates; then
``cpu_percent_at_nominal_rates`` (its CPU per /joint_states message received, times the nominal
state_rate) is the comparable number.  ``--state-rate``/``--control-rate``/``--diagnostics-rate``
override the defaults.

Usage: .venv/bin/python bench/controller_bench.py [--duration 10] [--burners N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import rclpy  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from control_msgs.msg import JointTrajectoryControllerState  # noqa: E402
from proc_cpu import cpu_seconds, thread_cpu, thread_percent  # noqa: E402

ROBOT = REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"
GOAL_CPU_PERCENT = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--state-rate", type=float)
    parser.add_argument("--control-rate", type=float)
    parser.add_argument("--diagnostics-rate", type=float)
    parser.add_argument("--burners", type=int, default=0, help="busy-loop processes running meanwhile")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    overrides = {"state_rate": args.state_rate, "control_rate": args.control_rate,
                 "diagnostics_rate": args.diagnostics_rate}
    cmd = [sys.executable, "-m", "robot_bridge.nodes.controller", "--ros-args",
           "-p", f"description_file:={ROBOT}",
           "--log-level", "warn"]
    for name, value in overrides.items():
        if value is not None:
            cmd[-2:-2] = ["-p", f"{name}:={value}"]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    node_proc = subprocess.Popen(cmd, env=env, cwd=REPO)
    rclpy.init()
    listener = rclpy.create_node("controller_bench_listener")
    received: Counter = Counter()
    topics = ((JointState, "/joint_states"),
              (JointTrajectoryControllerState, "/controller_node/controller_state"),
              (DiagnosticArray, "/diagnostics"))
    for msg_type, topic in topics:
        listener.create_subscription(msg_type, topic, lambda _m, t=topic: received.update([t]), 10, raw=True)
    try:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not received["/joint_states"]:
            rclpy.spin_once(listener, timeout_sec=0.1)
        end = time.monotonic() + 1.0                 # settle
        while time.monotonic() < end:
            rclpy.spin_once(listener, timeout_sec=0.05)
        received.clear()
        cpu0, wall0, threads0 = cpu_seconds(node_proc.pid), time.monotonic(), thread_cpu(node_proc.pid)
        end = wall0 + args.duration
        while time.monotonic() < end:
            rclpy.spin_once(listener, timeout_sec=0.05)
        cpu, wall = cpu_seconds(node_proc.pid) - cpu0, time.monotonic() - wall0
        threads = thread_percent(threads0, thread_cpu(node_proc.pid), wall)
    finally:
        node_proc.terminate()
        try:
            node_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            node_proc.kill()
        listener.destroy_node()
        rclpy.shutdown()
        for b in burners:
            b.kill()
    percent = round(100.0 * cpu / wall, 2)
    state_rate = args.state_rate or 50.0
    states = received["/joint_states"]
    nominal = round(100.0 * cpu / (states / state_rate), 2) if states else None
    print(json.dumps({
        "bench": "controller", "robot": ROBOT.name, "hardware": "sim", "duration_s": round(wall, 1),
        "rates_hz": {k: v for k, v in overrides.items() if v is not None} or "defaults",
        "load_average": os.getloadavg(), "cpu_burners": args.burners,
        "received": dict(received), "received_hz": {k: round(v / wall, 1) for k, v in received.items()},
        "node_cpu_percent": percent, "cpu_percent_at_nominal_rates": nominal, "thread_cpu_percent": threads,
        "goal_cpu_percent": GOAL_CPU_PERCENT,
        "ok": percent <= GOAL_CPU_PERCENT and (nominal or 0) <= GOAL_CPU_PERCENT,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
