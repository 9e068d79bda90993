"""JointState -> /tf through description_node, against a direct hop and a floor (prints JSON).

Per case (robot x rate) three processes: this one publishes, at the rate, the same JointState (stamp = wall
clock) on ``/joint_states`` and on ``/bench_direct``; a target process turns the first into /tf; a sink
process records each message's latency (receive time - stamp) of the direct hop and of /tf.  Targets:

- ``node``: ``description_node`` (publish_frequency 0: one /tf per JointState, default fast path);
- ``floor``: the same fast-path take + publish (``robot_bridge.ros.fast_relay.SerializedRelay`` with the
  node's QoS and, like the node, a compiled drain) of a fixed serialized TFMessage of the robot's moving
  frames, no FK, only the stamp copied over (so latency pairs): what the node's transport cannot go
  below.  The node's CPU is reported as a ratio to it, measured in the same run on the same traffic.

The publisher and the sink send/take serialized messages (CDR patched in place, taken through rcl on their
own threads, the sink with queues ``SINK_DEPTH`` deep) so that they keep up at 5 kHz on a loaded machine
and a loss is the target's.  Reported per case: sent, lost (via the
target), p50/p99 latency of the direct hop, of the target and of the added latency (target - direct, paired
by stamp), target CPU % of one core.

Usage: .venv/bin/python bench/tf_bench.py [--rate 1000] [--duration 10] [--robot FILE] [--burners N]
       .venv/bin/python bench/tf_bench.py --sweep        (500/1000/2000/5000 Hz x arm, PR2; 10 s each)
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
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from proc_cpu import cpu_seconds, thread_cpu, thread_percent  # noqa: E402

from robot_bridge.ros import fast_relay, qos  # noqa: E402

NODE_CMD = [sys.executable, "-m", "robot_bridge.nodes.description"]
DEFAULT_ROBOT = REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"
CORPUS = REPO.parent / "shared" / "corpus"
PR2 = CORPUS / "openrave" / "src" / "robots" / "pr2-beta-static.zae"
SWEEP_RATES = [500.0, 1000.0, 2000.0, 5000.0]
WARMUP = 1.0          # s of traffic before measuring
GOALS = {"arm_1khz_cpu_percent": 15.0, "pr2_1khz_cpu_percent": 25.0, "added_p50_over_direct_p50": 1.2,
         "arm_5khz_p99_us": 5000.0, "cpu_over_floor": 1.5}


def _search_path(robot: str) -> list[str]:
    return [str(CORPUS / "openrave" / "src")] if str(robot).startswith(str(CORPUS)) else []


def _moving_frames(robot_file: str) -> tuple[list[str], list[str], list[str]]:
    """(JointState names of the active joints, /tf parents, /tf children) as the node publishes them."""
    from robot_bridge.formats import load
    from robot_bridge.kinematics.state_publisher import StatePublisher

    robot = load(robot_file, search_path=_search_path(robot_file) or None)
    state = StatePublisher(robot)
    names = [j.name for j in state.moving if robot.joints[j.source].is_active]
    sel = state.selection(names)
    return names, sel.parents, sel.children


# -- target: the floor ---------------------------------------------------------------------------------
def _floor_drain(take_fn, publish_fn, read_fn, ints, words, output, control, generation, msg,
                 headroom, out):  # pragma: no cover  (compiled)
    """The floor's compiled drain: the JointState's stamp into the fixed TFMessage, published."""
    while True:
        got = _next_message(take_fn, read_fn, ints, words, control, generation)
        if got != fast_relay.MESSAGE_TAKEN:
            return got
        for i in range(8):
            out[8 + i] = msg[headroom + 4 + i]
        control[fast_relay.HANDLED] += 1
        if not _publish_output(publish_fn, ints, control):
            return fast_relay.DRAIN_PUBLISH_ERROR


_next_message = _publish_output = None


def run_floor(robot_file: str) -> int:
    """Fast-path take of /joint_states, publish a fixed TFMessage (stamp copied) on /tf, until SIGTERM."""
    from robot_bridge.ros.fast_relay import DetachedCallbackGroup, SerializedRelay
    from robot_bridge.ros.runner import stoppable_rclpy
    from robot_bridge.ros.tf import TFBatchBuilder

    _names, parents, children = _moving_frames(robot_file)
    with stoppable_rclpy() as stop:
        node = rclpy.create_node("tf_bench_floor")
        tf_pub = node.create_publisher(TFMessage, "/tf", qos.tf_qos())
        sub = node.create_subscription(JointState, "/joint_states", lambda _m: None, qos.joint_states_qos(),
                                       raw=True, callback_group=DetachedCallbackGroup())
        fixed = TFBatchBuilder._template(parents, children)[0]
        out = memoryview(fixed)
        span = (fixed.ctypes.data, len(fixed))

        def handler(view, offset):
            out[8:16] = view[offset + 4:offset + 12]     # first transform's stamp = the JointState's
            return span

        global _next_message, _publish_output
        import numba

        _next_message, _publish_output = fast_relay.compiled_io()
        floor_drain = numba.njit(cache=True, nogil=True)(_floor_drain)

        def drain(io, buffer, headroom):
            io.set_output(*span)
            return floor_drain(*io.prefix(io.generation, buffer, headroom), fixed)

        relay = SerializedRelay(sub, tf_pub, handler, context=node.context, headroom=0,
                                on_error=lambda text: print(text, file=sys.stderr), name="floor", drain=drain)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
        relay.close()
        executor.shutdown()
        node.destroy_node()
    return 0


# -- sink -------------------------------------------------------------------------------------------------
SINK_DEPTH = 10_000        # messages per stream the sink may fall behind: 2 s at 5 kHz
def run_sink(duration: float) -> int:
    """Record latencies of /bench_direct and /tf for ``duration`` s or until SIGTERM; print JSON."""
    from robot_bridge.ros.runner import stoppable_rclpy

    with stoppable_rclpy() as stop:
        return _sink(duration, stop)


def _sink(duration: float, stop) -> int:
    from robot_bridge.ros.fast_relay import DetachedCallbackGroup, SerializedRelay

    node = rclpy.create_node("tf_bench_sink")
    direct: dict[int, int] = {}
    via: dict[int, int] = {}
    clock = time.time_ns

    # stamps straight from the CDR (JointState: header first; TFMessage: sequence length, then the first
    # transform's header), taken on the fast path so that the sink keeps up at 5 kHz
    def recorder(box: dict, at: int):
        unpack = struct.Struct("<iI").unpack_from

        def record(view, offset):
            now = clock()
            sec, nanosec = unpack(view, offset + at)
            stamp = sec * 1_000_000_000 + nanosec
            box[stamp] = now - stamp
        return record

    relays = []
    streams = ((JointState, "/bench_direct", qos.joint_states_qos(), direct, 4),
               (TFMessage, "/tf", qos.tf_qos(), via, 8))
    for msg_type, topic, profile, box, at in streams:
        # the instrument must not drop what it measures: on a host that stalls a process for >20 ms the
        # sink's depth-100 queues overflowed at 5 kHz and lost messages of both paths alike; the target's
        # own /joint_states queue keeps its shipped depth
        profile.depth = SINK_DEPTH
        sub = node.create_subscription(msg_type, topic, lambda _m: None, profile, raw=True,
                                       callback_group=DetachedCallbackGroup())
        relays.append(SerializedRelay(sub, None, recorder(box, at), context=node.context, headroom=0,
                                      on_error=lambda text: print(text, file=sys.stderr), name="sink"))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    end = time.monotonic() + duration
    while time.monotonic() < end and not stop.is_set():
        executor.spin_once(timeout_sec=0.1)
    for relay in relays:
        relay.close()
    print(json.dumps({"direct": direct, "via": via}))
    executor.shutdown()
    node.destroy_node()
    return 0


# -- driver -----------------------------------------------------------------------------------------------
def _percentiles(values_ns) -> dict:
    if not len(values_ns):
        return {"p50_us": None, "p99_us": None}
    arr = np.asarray(values_ns, dtype=float) / 1e3
    return {"p50_us": round(float(np.percentile(arr, 50)), 1),
            "p99_us": round(float(np.percentile(arr, 99)), 1)}


class JointStateSource:
    """Serialized JointStates: rclpy serializes one, then each message patches stamp and positions."""

    def __init__(self, names: list[str]):
        template = JointState(name=names, position=[1e300 + i * 1e285 for i in range(len(names))])
        self.data = bytearray(serialize_message(template))
        first = struct.pack("<d", template.position[0])
        at = bytes(self.data).find(first)
        self.positions = np.frombuffer(self.data, "<f8", len(names), at) if names else None
        self.phase = np.arange(len(names), dtype=float)

    def message(self, k: int, stamp_ns: int) -> bytes:
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        struct.pack_into("<iI", self.data, 4, sec, nanosec)
        if self.positions is not None:
            self.positions[:] = 0.3 * np.sin(0.001 * k + self.phase)
        return bytes(self.data)


def run_case(robot: str, rate: float, duration: float, target: str, env: dict, names: list[str]) -> dict:
    if target == "node":
        cmd = NODE_CMD + ["--ros-args", "-p", f"description_file:={robot}", "-p", "publish_frequency:=0.0",
                          "--log-level", "warn"]
        for path in _search_path(robot):
            cmd[-4:-4] = ["-p", f"search_path:=[{path}]"]
    else:
        cmd = [sys.executable, __file__, "--role", "floor", "--robot", robot]
    target_proc = subprocess.Popen(cmd, env=env, cwd=REPO)
    total = WARMUP + duration
    sink = subprocess.Popen([sys.executable, __file__, "--role", "sink", "--duration", str(total + 30.0)],
                            env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    source = JointStateSource(names)
    node = rclpy.create_node(f"tf_bench_source_{target}")
    pub_joint = node.create_publisher(JointState, "/joint_states", qos.sensor_data_qos(100))
    pub_direct = node.create_publisher(JointState, "/bench_direct", qos.sensor_data_qos(100))
    seen = []
    tf_seen = node.create_subscription(TFMessage, "/tf", seen.append, qos.tf_qos(), raw=True)
    try:
        # both subscribers (target, sink) matched and the target answering (it loaded the robot)
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not (seen and pub_direct.get_subscription_count() >= 1
                                                   and node.count_subscribers("/tf") >= 2):
            pub_joint.publish(source.message(0, time.time_ns()))
            rclpy.spin_once(node, timeout_sec=0.05)
        node.destroy_subscription(tf_seen)
        time.sleep(1.0)
        period = 1.0 / rate
        count = int(total * rate)
        warm = int(WARMUP * rate)
        sent: list[int] = []
        cpu0 = wall0 = None
        start = time.perf_counter()
        for k in range(count):
            delay = start + k * period - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            if k == warm:
                cpu0, wall0 = cpu_seconds(target_proc.pid), time.monotonic()
                threads0 = thread_cpu(target_proc.pid)
            now = time.time_ns()
            data = source.message(k, now)
            pub_joint.publish(data)
            pub_direct.publish(data)
            if k >= warm:
                sent.append(now)
        cpu = cpu_seconds(target_proc.pid) - cpu0
        wall = time.monotonic() - wall0
        threads = thread_percent(threads0, thread_cpu(target_proc.pid), wall)
        achieved = len(sent) / (time.perf_counter() - start - WARMUP)
        time.sleep(1.0)                           # in flight arrives
        sink.terminate()
        out, _ = sink.communicate(timeout=60.0)
    finally:
        target_proc.terminate()
        try:
            target_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            target_proc.kill()
        if sink.poll() is None:
            sink.kill()
        node.destroy_node()
    data = json.loads(out)
    direct = {int(k): v for k, v in data["direct"].items()}
    via = {int(k): v for k, v in data["via"].items()}
    paired = [s for s in sent if s in via and s in direct]
    added = [via[s] - direct[s] for s in paired]
    d = _percentiles([direct[s] for s in sent if s in direct])
    a = _percentiles(added)
    return {
        "target": target, "sent": len(sent), "achieved_rate_hz": round(achieved, 1),
        "lost": sum(1 for s in sent if s not in via), "lost_direct": sum(1 for s in sent if s not in direct),
        "direct_hop": d, "via": _percentiles([via[s] for s in sent if s in via]), "added": a,
        "added_p50_over_direct_p50": round(a["p50_us"] / d["p50_us"], 3) if paired else None,
        "cpu_percent": round(100.0 * cpu / wall, 1),
        "thread_cpu_percent": threads,
    }


def bench(robot: str, rate: float, duration: float, env: dict) -> dict:
    names, _parents, children = _moving_frames(robot)
    floor = run_case(robot, rate, duration, "floor", env, names)
    node = run_case(robot, rate, duration, "node", env, names)
    return {"robot": Path(robot).name, "joints": len(names), "tf_frames": len(children), "rate_hz": rate,
            "duration_s": duration, "node": node, "floor": floor,
            "node_cpu_over_floor": round(node["cpu_percent"] / max(floor["cpu_percent"], 0.1), 2)}


def _row(r: dict) -> dict:
    n = r["node"]
    return {"robot": r["robot"], "rate_hz": r["rate_hz"], "sent": n["sent"], "lost": n["lost"],
            "p50_us": n["via"]["p50_us"], "p99_us": n["via"]["p99_us"], "added_p50_us": n["added"]["p50_us"],
            "direct_p50_us": n["direct_hop"]["p50_us"], "node_cpu_percent": n["cpu_percent"],
            "floor_cpu_percent": r["floor"]["cpu_percent"], "node_cpu_over_floor": r["node_cpu_over_floor"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--robot", default=str(DEFAULT_ROBOT))
    parser.add_argument("--sweep", action="store_true", help="rates 500..5000 Hz x embedded arm and PR2")
    parser.add_argument("--burners", type=int, default=0, help="busy-loop threads in a process of their own")
    parser.add_argument("--role", choices=["main", "sink", "floor"], default="main", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "sink":
        return run_sink(args.duration)
    if args.role == "floor":
        return run_floor(args.robot)

    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    rclpy.init()
    try:
        cases = [(str(args.robot), args.rate)]
        if args.sweep:
            robots = [str(DEFAULT_ROBOT)] + ([str(PR2)] if PR2.is_file() else [])
            cases = [(robot, rate) for robot in robots for rate in SWEEP_RATES]
        results = [bench(robot, rate, args.duration, env) for robot, rate in cases]
    finally:
        rclpy.shutdown()
        for b in burners:
            b.kill()
    out = {"bench": "tf", "load_average": os.getloadavg(), "cpu_burners": args.burners, "goals": GOALS,
           "table": [_row(r) for r in results], "cases": results}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
