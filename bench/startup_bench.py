"""Time to ready of description_node and of the command line, beside floors measured in the same run (JSON).

- ``ready``: a fresh ``python -m robot_bridge.nodes.description`` process, timed from just before it is
  started to the first ``/robot_description``, the first ``/tf_static`` and the first ``/tf`` that answers
  a ``/joint_states`` message (this process publishes a JointState of the robot's moving joints every
  20 ms, stamped with the wall clock; a /tf counts when its stamp is one of them).  Ready = the latest
  of the three.  Each robot runs with an empty numba kernel cache (a fresh ``NUMBA_CACHE_DIR``) and a
  warm one (filled by an untimed first run); the mesh cache (``$ROS_HOME``) is warm in both.
  ``cpu_s``: the process's CPU seconds when it was seen ready (steadier than wall time under load).
- ``floor``: a minimal rclpy node in a fresh process that publishes one latched String on
  ``robot_description``, timed the same way to its arrival.  Ratios are node / floor (medians).
- ``cli``: ``robot-bridge --help`` and ``robot-bridge check`` of a 3-link URDF beside
  ``python -c "import numpy, lxml.etree"`` (wall and CPU seconds of each child, medians).

Goals (issue 33): embedded robot within 2x the floor with a warm cache and 3x with an empty one, PR2 within
3x warm; ``--help`` and ``check`` within 2x of the numpy + lxml import.  The machine may be shared: the
load average is reported; read the ratios.

Usage: .venv/bin/python bench/startup_bench.py [--repeat 3] [--robot NAME ...] [--cli-repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from proc_cpu import cpu_seconds  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
ROBOTS = {    # name: (file, search path)
    "embedded": (REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml", None),
    "pr2_urdf": (CORPUS / "collada_urdf" / "collada_urdf" / "test" / "pr2.urdf", None),
    "pr2_zae": (CORPUS / "openrave" / "src" / "robots" / "pr2-beta-static.zae", CORPUS / "openrave" / "src"),
}
GOALS = {"embedded_warm_over_floor": 2.0, "embedded_empty_over_floor": 3.0, "pr2_warm_over_floor": 3.0,
         "cli_over_numpy_lxml": 2.0}
TIMEOUT = 600.0           # s for one process to become ready (a compile on a loaded machine: minutes)
JOINT_STATE_PERIOD = 0.02
FLOOR = """
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
import sys
rclpy.init(args=sys.argv)
node = rclpy.create_node("startup_floor")
qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
node.create_publisher(String, "robot_description", qos).publish(String(data="<robot name='floor'/>"))
try:
    rclpy.spin(node)
except (KeyboardInterrupt, Exception):
    pass
"""
SMALL_URDF = """<?xml version="1.0"?>
<robot name="three_links">
  <link name="base"/><link name="upper"/><link name="lower"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1" rpy="0 0 0.5"/><axis xyz="0 0 1"/>
    <limit lower="-1.5" upper="1.5" effort="10" velocity="1"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.3 0 0" rpy="0.1 0.2 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/></joint>
</robot>
"""


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def _ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


# -- time to ready ----------------------------------------------------------------------------------------
class Observer:
    """This process's node: publishes JointStates, records the first description, static and answered /tf."""

    def __init__(self):
        import rclpy
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState

        from robot_bridge.ros import qos

        self.rclpy, self.qos, self._serialize, self._JointState = rclpy, qos, serialize_message, JointState
        self.node = rclpy.create_node("startup_bench_observer")

    def run(self, cmd: list[str], env: dict, names: list[str], namespace: str) -> dict:
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage

        qos, node, seen = self.qos, self.node, {}
        sent: set[int] = set()

        def first(key):
            def record(_msg):
                seen.setdefault(key, time.monotonic())
            return record

        def on_tf(data: bytes):
            if len(data) >= 16 and "tf" not in seen:
                sec, nanosec = struct.unpack_from("<iI", data, 8)      # the first transform's stamp
                if sec * 1_000_000_000 + nanosec in sent:
                    seen["tf"] = time.monotonic()

        joint_pub = node.create_publisher(self._JointState, f"{namespace}/joint_states",
                                          qos.sensor_data_qos(100))
        subs = [node.create_subscription(String, f"{namespace}/robot_description", first("description"),
                                         qos.description_qos()),
                node.create_subscription(TFMessage, "/tf_static", first("tf_static"),
                                         qos.tf_static_listener_qos(), raw=True),
                node.create_subscription(TFMessage, "/tf", on_tf, qos.tf_qos(), raw=True)]
        wanted = ("description", "tf_static", "tf") if names else ("description",)
        msg = self._JointState(name=names, position=[0.1] * len(names))
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cpu = None
        next_joint_state = start
        try:
            while time.monotonic() - start < TIMEOUT and proc.poll() is None:
                now = time.monotonic()
                if names and now >= next_joint_state:
                    stamp = time.time_ns()
                    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                    sent.add(stamp)
                    joint_pub.publish(msg)
                    next_joint_state = now + JOINT_STATE_PERIOD
                self.rclpy.spin_once(node, timeout_sec=0.005)
                if all(k in seen for k in wanted):
                    cpu = cpu_seconds(proc.pid)
                    break
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                _out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _out, err = proc.communicate()
            for sub in subs:
                node.destroy_subscription(sub)
            node.destroy_publisher(joint_pub)
        out = {k: round(seen[k] - start, 3) if k in seen else None for k in wanted}
        out["ready_s"] = max(out.values()) if all(out[k] is not None for k in wanted) else None
        out["cpu_s"] = round(cpu, 2) if cpu is not None else None
        if out["ready_s"] is None:
            out["error"] = err.decode(errors="replace")[-2000:]
        return out

    def close(self):
        self.node.destroy_node()


def _moving_joint_names(robot_file: Path, search_path) -> list[str]:
    """The names of the robot's moving URDF joints, as a JointState of the robot lists them."""
    from robot_bridge.formats import load
    from robot_bridge.kinematics.state_publisher import StatePublisher

    robot = load(robot_file, search_path=[search_path] if search_path else None)
    return StatePublisher(robot, compiled=False).default_joint_state()[0]


def _node_cmd(robot_file: Path, search_path) -> list[str]:
    cmd = [sys.executable, "-m", "robot_bridge.nodes.description", "--ros-args", "--log-level", "warn"]
    if search_path:
        cmd += ["-p", f"search_path:=[{search_path}]"]
    return cmd + ["-p", f"description_file:={robot_file}"]


def bench_ready(robots: list[str], repeat: int, env: dict, scratch: Path) -> dict:
    import rclpy

    rclpy.init()
    observer = Observer()
    results: dict = {"floor": []}
    runs = 0

    def run(cmd, names, run_env):
        """``cmd`` (its ``--ros-args`` last) in a namespace of its own, so no run sees another's topics."""
        nonlocal runs
        runs += 1
        namespace = f"/startup_bench_{os.getpid()}_{runs}"
        result = observer.run(cmd + ["-r", f"__ns:={namespace}"], run_env, names, namespace)
        label = "floor" if cmd[1] == "-c" else f"{Path(cmd[-1]).name} {run_env.get('NUMBA_CACHE_DIR')}"
        print(f"startup_bench: {label}: {result}", file=sys.stderr, flush=True)
        return result

    try:
        env = {**env, "ROS_HOME": str(scratch / "ros_home")}        # mesh cache: warm after the first run
        floor_cmd = [sys.executable, "-c", FLOOR, "--ros-args", "--log-level", "warn"]
        for name in robots:
            robot_file, search_path = ROBOTS[name]
            if not robot_file.is_file():
                results[name] = {"skipped": f"{robot_file} not found (../shared/corpus absent)"}
                continue
            names = _moving_joint_names(robot_file, search_path)
            warm_dir = scratch / f"numba_warm_{name}"
            warm_env = {**env, "NUMBA_CACHE_DIR": str(warm_dir)}
            first = run(_node_cmd(robot_file, search_path), names, warm_env)   # fills both caches
            case = {"file": str(robot_file), "moving_joints": len(names), "first_run": first,
                    "empty": [], "warm": []}
            for k in range(repeat):
                empty_env = {**env, "NUMBA_CACHE_DIR": str(scratch / f"numba_empty_{name}_{k}")}
                case["empty"].append(run(_node_cmd(robot_file, search_path), names, empty_env))
                case["warm"].append(run(_node_cmd(robot_file, search_path), names, warm_env))
                results["floor"].append(run(floor_cmd, [], env))
            results[name] = case
    finally:
        observer.close()
        rclpy.shutdown()
    floor = _median([r["description"] for r in results["floor"]])
    floor_cpu = _median([r["cpu_s"] for r in results["floor"]])
    summary = {"floor_s": floor, "floor_cpu_s": floor_cpu}
    for name in robots:
        case = results.get(name, {})
        if "skipped" in case:
            summary[name] = case
            continue
        row = {}
        for cache in ("empty", "warm"):
            ready = _median([r["ready_s"] for r in case[cache]])
            cpu = _median([r["cpu_s"] for r in case[cache]])
            row[cache] = {"ready_s": ready, "over_floor": _ratio(ready, floor), "cpu_s": cpu,
                          "cpu_over_floor": _ratio(cpu, floor_cpu),
                          **{k: _median([r[k] for r in case[cache]])
                             for k in ("description", "tf_static", "tf")}}
        summary[name] = row
    return {"summary": summary, "runs": results}


# -- command line -----------------------------------------------------------------------------------------
def _child_times(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    code = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), code


def bench_cli(repeat: int, env: dict, scratch: Path) -> dict:
    small = scratch / "three_links.urdf"
    small.write_text(SMALL_URDF)
    script = Path(sys.executable).with_name("robot-bridge")
    cli = [str(script)] if script.is_file() else [sys.executable, "-m", "robot_bridge.cli.main"]
    cases = {"numpy_lxml": [sys.executable, "-c", "import numpy, lxml.etree"],
             "help": cli + ["--help"], "check": cli + ["check", str(small)]}
    times: dict = {k: [] for k in cases}
    for cmd in cases.values():               # untimed: compiled bytecode written, files in the page cache
        _child_times(cmd, env)
    for _ in range(repeat):                  # interleaved: the machine's load hits every case alike
        for name, cmd in cases.items():
            wall, cpu, code = _child_times(cmd, env)
            if code != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {code}")
            times[name].append((wall, cpu))
    out = {name: {"wall_s": _median([w for w, _ in t]), "cpu_s": _median([c for _, c in t])}
           for name, t in times.items()}
    base = out["numpy_lxml"]
    for name in ("help", "check"):
        out[name]["over_numpy_lxml"] = _ratio(out[name]["wall_s"], base["wall_s"])
        out[name]["cpu_over_numpy_lxml"] = _ratio(out[name]["cpu_s"], base["cpu_s"])
    out["command"] = " ".join(cases["check"][:-1]) + " three_links.urdf"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per robot and cache state (medians)")
    parser.add_argument("--cli-repeat", type=int, default=7)
    parser.add_argument("--robot", action="append", choices=sorted(ROBOTS), default=None,
                        help="robots to start (default: all; PR2 skipped when ../shared/corpus is absent)")
    parser.add_argument("--skip-ready", action="store_true", help="only the command line")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # as installed: bytecode cached (else every import compiles)
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    load_before = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="startup_bench_"))
    try:
        out = {"bench": "startup", "goals": GOALS, "cli": bench_cli(args.cli_repeat, env, scratch)}
        if not args.skip_ready:
            out["ready"] = bench_ready(args.robot or list(ROBOTS), args.repeat, env, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out["load_average"] = {"before": [round(v, 2) for v in load_before],
                           "after": [round(v, 2) for v in os.getloadavg()], "cpus": os.cpu_count()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
