"""Restart benchmark of the mesh cache: prints one JSON object.

For each robot, the description node executable (what ``ros2 run robot_bridge description_node`` starts)
is started twice with default mesh handling on one fresh cache directory: the first start converts
every mesh, the second finds them in the cache.  Measured per start: seconds from process start to the
first robot_description a subscriber receives (Python start-up and rclpy included) and the node's own
"robot_description after" time (load + convert + publish), plus the meshes converted / found.

    ROS_DOMAIN_ID=46 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST .venv/bin/python bench/mesh_cache_bench.py
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = (REPO / ".." / "shared" / "corpus" / "openrave" / "src").resolve()
ROBOTS = ["robots/barrettwam.robot.xml", "robots/pr2-beta-static.zae"]
TIMEOUT = 120.0


def start_to_description(robot: Path, cache: Path) -> dict:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from robot_bridge.ros import qos

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mesh_cache_bench", context=context)
    got = []
    node.create_subscription(String, "/robot_description", lambda m: got.append(time.monotonic()),
                             qos.description_qos())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "robot_bridge.nodes.description", "--ros-args",
                             "-p", f"description_file:={robot}", "-p", f"search_path:=[{DATA}]",
                             "-p", f"mesh_cache_dir:={cache}"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while not got and time.monotonic() - started < TIMEOUT and proc.poll() is None:
            executor.spin_once(timeout_sec=0.01)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        proc.send_signal(signal.SIGINT)
        log = proc.communicate(timeout=30)[0]
    m = re.search(r"meshes: (\d+) converted, (\d+) from the cache.*robot_description after ([0-9.]+) s", log)
    if not got or not m:
        raise RuntimeError(f"no robot_description from {robot}:\n{log[-2000:]}")
    return {"start_to_description_s": round(got[0] - started, 3), "node_load_s": float(m.group(3)),
            "converted": int(m.group(1)), "from_cache": int(m.group(2))}


def main() -> int:
    out = {"load": os.getloadavg()[0], "cpus": os.cpu_count()}
    for rel in ROBOTS:
        with tempfile.TemporaryDirectory() as cache:
            first = start_to_description(DATA / rel, Path(cache))
            second = start_to_description(DATA / rel, Path(cache))
        speedup = first["node_load_s"] / max(second["node_load_s"], 1e-3)
        out[Path(rel).name] = {"first_start": first, "restart": second,
                               "node_load_speedup": round(speedup, 2)}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
