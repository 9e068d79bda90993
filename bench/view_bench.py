"""The live view's CPU while the bridge publishes /tf at 1 kHz for PR2 (prints JSON).

Processes: description_node (PR2, ``publish_frequency`` 0: one /tf of its moving frames per JointState);
``robot-bridge view`` (measured); tf_bench's sink (counts the /tf that arrived, so the rate is shown, not
assumed); optionally a headless chromium with the page open (``--browser``, default when one is found: the
page then streams poses over its WebSocket, as with a person watching).  This process publishes
/joint_states at the rate (tf_bench's serialized source).  Reported: the view's CPU % of one core (user +
system, /proc) and per thread, /tf messages received by the sink and their rate.  Goal: under 15 %.

Usage: .venv/bin/python bench/view_bench.py [--rate 1000] [--duration 10] [--robot FILE] [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from proc_cpu import cpu_seconds, thread_cpu, thread_percent  # noqa: E402
from tf_bench import NODE_CMD, PR2, JointStateSource, _moving_frames, _search_path  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.view.screenshot import free_port, start_view  # noqa: E402

GOAL_CPU_PERCENT = 15.0
WARMUP = 3.0                # s of traffic before measuring


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(robot: str, rate: float, duration: float, use_browser: bool, screenshot: str = "",
        page_rate: float = 30.0) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    names, _parents, children = _moving_frames(robot)
    node_cmd = NODE_CMD + ["--ros-args", "-p", f"description_file:={robot}", "-p", "publish_frequency:=0.0",
                           "--log-level", "warn"]
    for path in _search_path(robot):
        node_cmd[-4:-4] = ["-p", f"search_path:=[{path}]"]
    port = free_port()
    procs = [subprocess.Popen(node_cmd, env=env, cwd=REPO)]
    view, loaded, lines = start_view(port, ["--rate", str(page_rate)] + [
        a for p in _search_path(robot) for a in ("--search-path", p)], env=env, cwd=REPO)
    procs.append(view)
    browser = None
    total = WARMUP + duration
    sink = subprocess.Popen([sys.executable, str(REPO / "bench" / "tf_bench.py"), "--role", "sink",
                             "--duration", str(total + 120.0)], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            text=True)
    procs.append(sink)
    rclpy.init()
    node = rclpy.create_node("view_bench_source")
    pub = node.create_publisher(JointState, "/joint_states", qos.sensor_data_qos(100))
    source = JointStateSource(names)
    try:
        deadline = time.monotonic() + 300.0
        k = 0
        while not loaded.is_set():              # the robot loaded in the view (the node published it)
            if time.monotonic() > deadline or view.poll() is not None:
                raise RuntimeError("the view did not load the robot:\n" + "".join(lines[-20:]))
            pub.publish(source.message(k, time.time_ns()))
            k += 1
            time.sleep(0.01)
        if use_browser:
            from robot_bridge.view.screenshot import Browser, find_browser

            path, why = find_browser()
            if path is None:
                print(f"view_bench: no browser ({why}); measuring without a page open", file=sys.stderr)
            else:
                browser = Browser(path)
                browser.open(f"http://127.0.0.1:{port}/")
        period = 1.0 / rate
        count = int(total * rate)
        warm = int(WARMUP * rate)
        start = time.perf_counter()
        for i in range(count):
            delay = start + i * period - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if i == warm:
                cpu0, wall0, threads0 = cpu_seconds(view.pid), time.monotonic(), thread_cpu(view.pid)
                first_ns = time.time_ns()
            pub.publish(source.message(k + i, time.time_ns()))
        cpu = cpu_seconds(view.pid) - cpu0
        wall = time.monotonic() - wall0
        threads = thread_percent(threads0, thread_cpu(view.pid), wall)
        last_ns = time.time_ns()
        achieved = (count - warm) / (time.perf_counter() - start - WARMUP)
        if browser is not None and screenshot:
            from robot_bridge.view.screenshot import save_png

            save_png(browser.screenshot(), screenshot)
        time.sleep(1.0)
        sink.terminate()
        out, _ = sink.communicate(timeout=60.0)
    finally:
        if browser is not None:
            browser.close()
        for proc in procs:
            _stop(proc)
        node.destroy_node()
        rclpy.try_shutdown()
    stamps = [int(s) for s in json.loads(out)["via"]] if out.strip() else []
    received = sum(1 for s in stamps if first_ns <= s <= last_ns)
    percent = round(100.0 * cpu / wall, 1)
    marker = "[view_node]: robot '"
    robot_line = next((line.split("[view_node]: ", 1)[1].strip() for line in lines if marker in line), "")
    return {"robot": Path(robot).name, "moving_frames": len(children), "rate_hz": rate,
            "view_loaded": robot_line, "page_rate_hz": page_rate,
            "achieved_joint_states_hz": round(achieved, 1), "tf_received_by_sink": received,
            "tf_received_hz": round(received / ((last_ns - first_ns) * 1e-9), 1), "duration_s": duration,
            "browser_connected": browser is not None, "view_cpu_percent": percent,
            "view_thread_cpu_percent": threads, "goal_cpu_percent": GOAL_CPU_PERCENT,
            "meets_goal": percent < GOAL_CPU_PERCENT, "load_average": os.getloadavg()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default=str(PR2))
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--no-browser", action="store_true", help="measure without a page open")
    parser.add_argument("--screenshot", default="", metavar="PNG", help="save the page at the end")
    parser.add_argument("--page-rate", type=float, default=30.0, help="the view's page updates per second")
    args = parser.parse_args()
    if not Path(args.robot).is_file():
        print(json.dumps({"skipped": f"{args.robot} not found (the corpus: ../shared/corpus)"}))
        return 0
    result = run(args.robot, args.rate, args.duration, not args.no_browser, args.screenshot, args.page_rate)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
