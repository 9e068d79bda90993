"""Execution through the corridor under load (issue 42), embedded arm in sim (prints JSON).

Runs ``controller_node`` (hardware sim, the embedded LWA3 arm and its SRDF, state_rate 50 Hz) in a process of
its own; this process plans joint goals with the planner core (``robot_bridge.planning.Planner``, collision
checked every ``check_step``) from the recorded state, sends each as planner_node does (``trajectory_goal``:
path and goal tolerance = ``Planner.corridor()`` on every joint; header stamped ``LEAD`` s ahead, so its start
time is known) and records /joint_states.  Per level of 0, 2 and 4 busy loops (child processes, killed at
the end of the level and on any exit):

- ``tracking``: largest and p99 |recorded position - planned trajectory| over the arm's joints, the plan
  interpolated at each state's stamp with scipy's ``BPoly.from_derivatives`` (independent of the
  controller's closed form), over the states stamped between a goal's start and the arrival of its result
  (an aborted goal's states up to then include its stop);
- ``joint_states_gaps``: largest and p99 difference of consecutive /joint_states stamps (measurement times)
  over the whole level, against the 1 / state_rate period;
- goals sent, their result codes and the worst deviation each controller result named;
- ``detection_flood``: the largest and p99 /joint_states stamp gap in a quiet window and during a flood of
  detections (``FLOOD_RATE`` Detection3DArray messages/s of ``FLOOD_BODIES`` moving boxes, ``--flood-seconds``
  long) for two bringups of the sim bridge, each in a namespace of its own: ``own_process`` (controller_node
  and world_node as processes, as ``ros2 launch`` runs them) and ``robot_bridge_run`` (``robot-bridge run
  --objects``: every node in one process, sharing its GIL).

Usage: .venv/bin/python bench/execution_bench.py [--goals 6] [--levels 0 2 4] [--flood-seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STATE_RATE = 50.0
LEAD = 3.0                      # s from sending a goal to its stamped start (one taken later starts mid-way)
ARM = [f"j{i}" for i in range(1, 8)]
# joint goals cycled through (the arm's other joints 0): reachable and free in the embedded cell
TARGETS = [{"j1": -0.9, "j2": 0.6, "j4": 0.9}, {"j1": 0.9, "j2": 0.6, "j4": 0.9},
           {"j1": 0.0, "j2": 0.3, "j4": 1.2, "j6": 0.5}]
FLOOD_RATE = 400.0              # detection messages/s (the flood: 355/s)
FLOOD_BODIES = 10               # boxes per message, each moved beyond world_node's jitter every message
QUIET = 3.0                     # s of /joint_states recorded before the flood


def _stamp(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


class Client:
    """The bench's ROS side: /joint_states recorded (stamp, positions by name), the FollowJointTrajectory
    client, spun on a thread of its own."""

    def __init__(self):
        import rclpy
        from control_msgs.action import FollowJointTrajectory
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState

        self.rclpy = rclpy
        rclpy.init()
        self.node = rclpy.create_node("execution_bench")
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict]] = []
        self.node.create_subscription(JointState, "/joint_states", self._on_state, 100)
        self.action = ActionClient(self.node, FollowJointTrajectory,
                                   "/controller_node/follow_joint_trajectory")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self):
        while not self.stop:
            self.executor.spin_once(timeout_sec=0.05)

    def _on_state(self, msg):
        with self.lock:
            self.states.append((_stamp(msg), dict(zip(msg.name, msg.position))))

    def since(self, index: int) -> list[tuple[float, dict]]:
        with self.lock:
            return self.states[index:]

    def count(self) -> int:
        with self.lock:
            return len(self.states)

    def record_stamps(self, topic: str) -> list[float]:
        """The header stamps of ``topic`` (JointState) from now on, appended as they come."""
        from sensor_msgs.msg import JointState

        stamps: list[float] = []

        def on(msg):
            with self.lock:
                stamps.append(_stamp(msg))
        self.node.create_subscription(JointState, topic, on, 100)
        return stamps

    def close(self):
        self.stop = True
        self.thread.join(5.0)
        self.action.destroy()
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise TimeoutError(f"no {what} within {timeout} s")


def run_goal(client: Client, planner, target: dict) -> dict:
    """Plan from the last recorded state to ``target``, execute, return what was recorded."""
    from robot_bridge.nodes.planner import trajectory_goal
    from robot_bridge.planning import JointGoal
    from robot_bridge.ros.actions import get_result, send_goal

    current = client.since(-1)[0][1]
    planner.set_joint_state(current)
    plan = planner.plan(JointGoal(dict(target)), group="arm", timeout=20.0)
    trajectory = plan.trajectory
    goal = trajectory_goal(trajectory, planner.corridor())
    start = time.time() + LEAD                         # ROS time = the system clock
    goal.trajectory.header.stamp.sec = int(start)
    goal.trajectory.header.stamp.nanosec = int((start - int(start)) * 1e9)
    first = client.count()
    sent = send_goal(client.node, client.action, goal)
    handle = wait(lambda: sent.done() and sent.result(), 60.0, "goal handle")
    if not handle.accepted:
        raise RuntimeError("goal not accepted")
    result_future = get_result(client.node, handle)
    wait(lambda: result_future.done(), trajectory.duration + LEAD + 60.0, "result")
    ended = time.time()                                # ROS time the result was in (states after: not judged)
    response = result_future.result()
    states = [s for s in client.since(first) if s[0] <= ended]
    return {"trajectory": trajectory, "start": start, "states": states,
            "code": int(response.result.error_code), "message": response.result.error_string}


def deviations(run: dict) -> np.ndarray:
    """|recorded - planned| of the arm's joints at every state stamped from the goal's start on."""
    from scipy.interpolate import BPoly

    traj = run["trajectory"]
    names = list(traj.joint_names)
    stacked = np.stack([traj.positions, traj.velocities, traj.accelerations], axis=1)   # (points, 3, joints)
    spline = BPoly.from_derivatives(traj.times, stacked)
    out = []
    for stamp, positions in run["states"]:
        t = stamp - run["start"]
        if t < 0.0:
            continue
        planned = spline(min(t, float(traj.times[-1])))
        out.append(np.abs(np.array([positions[n] for n in names]) - planned))
    return np.array(out)


def level(busy: int, goals: int, planner, client: Client, env: dict, flood_seconds: float) -> dict:
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        first = client.count()
        runs, codes, failures = [], Counter(), []
        for k in range(goals):
            try:
                runs.append(run_goal(client, planner, TARGETS[k % len(TARGETS)]))
                codes[runs[-1]["code"]] += 1
            except Exception as exc:  # a planning failure / timeout is reported, the level goes on
                failures.append(f"{type(exc).__name__}: {exc}")
        stamps = np.array([s for s, _ in client.since(first)])
        flood = detection_flood(client, env, flood_seconds) if flood_seconds > 0 else None
    finally:
        for b in burners:
            b.kill()
        for b in burners:
            b.wait()
    dev = np.concatenate([deviations(r).ravel() for r in runs]) if runs else np.zeros(1)
    gaps = np.diff(stamps) if len(stamps) > 1 else np.zeros(1)
    return {
        "busy_loops": busy, "goals_sent": len(runs), "result_codes": {str(k): v for k, v in codes.items()},
        "failures": failures,
        "tracking_rad": {"max": float(dev.max()), "p99": float(np.percentile(dev, 99))},
        "joint_states_gaps_s": {"max": float(gaps.max()), "p99": float(np.percentile(gaps, 99)),
                                "period": 1.0 / STATE_RATE, "samples": int(len(stamps))},
        "controller_results": [r["message"][-80:] for r in runs],
        "detection_flood": flood,
    }


def _gaps(stamps: list[float], lock, since: float, until: float) -> dict:
    with lock:
        s = np.array([t for t in stamps if since <= t <= until])
    gaps = np.diff(s) if len(s) > 1 else np.array([np.inf])
    return {"max": float(gaps.max()), "p99": float(np.percentile(gaps, 99)), "samples": int(len(s))}


def _flood_message(node, k: int):
    from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

    msg = Detection3DArray()
    msg.header.frame_id = "world"
    msg.header.stamp = node.get_clock().now().to_msg()
    for i in range(FLOOD_BODIES):
        det = Detection3D()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = "box", 1.0
        p = hyp.pose.pose
        p.position.x, p.position.y, p.position.z = 1.5 + 0.3 * i, 1.5 + 0.05 * (k % 7), 0.5 + 0.05 * (k % 5)
        p.orientation.w = 1.0
        det.results.append(hyp)
        msg.detections.append(det)
    return msg


def detection_flood(client: Client, env: dict, seconds: float) -> dict:
    """/joint_states stamp gaps, quiet and under a detection flood, for each bringup (see the docstring)."""
    from vision_msgs.msg import Detection3DArray

    from robot_bridge.bringup import DEFAULT_ROBOT

    out = {"rate_hz": FLOOD_RATE, "bodies_per_message": FLOOD_BODIES, "seconds": seconds}
    with tempfile.TemporaryDirectory() as tmp:
        box = Path(tmp) / "box.kinbody.xml"
        box.write_text('<KinBody name="box"><Body name="box" type="dynamic"><Geom type="box">'
                       '<extents>0.05 0.05 0.05</extents></Geom></Body></KinBody>')
        mapping = Path(tmp) / "objects.yaml"
        mapping.write_text(f"classes:\n  box: {{file: {box}, timeout: 2.0}}\n")
        node = [sys.executable, "-m"]
        setups = {
            "own_process": [
                node + ["robot_bridge.nodes.controller", "--ros-args", "-r", "__ns:=/flood_a", "-r",
                        "/joint_states:=/flood_a/joint_states", "-p", f"description_file:={DEFAULT_ROBOT}",
                        "-p", f"state_rate:={STATE_RATE}", "-p", f"sim.objects_roots:=[{tmp}]",
                        "--log-level", "warn"],
                node + ["robot_bridge.nodes.world", "--ros-args", "-r", "__ns:=/flood_a",
                        "-p", f"objects_file:={mapping}", "-p", f"description_file:={DEFAULT_ROBOT}",
                        "--log-level", "warn"]],
            "robot_bridge_run": [
                node + ["robot_bridge.cli.main", "run", "--namespace", "flood_b", "--objects", str(mapping)]],
        }
        for name, commands in setups.items():
            ns = "/flood_a" if name == "own_process" else "/flood_b"
            procs = [subprocess.Popen(c, env=env, cwd=tmp, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL) for c in commands]
            try:
                stamps = client.record_stamps(f"{ns}/joint_states")
                publisher = client.node.create_publisher(Detection3DArray, f"{ns}/detections", 100)
                wait(lambda: len(stamps) >= 2 * STATE_RATE, 180.0, f"{name}'s /joint_states")
                quiet_from = time.time()
                time.sleep(QUIET)                            # the quiet window, then the flood
                flood_from, k = time.time(), 0
                while time.time() < flood_from + seconds:
                    publisher.publish(_flood_message(client.node, k))
                    k += 1
                    time.sleep(max(0.0, flood_from + k / FLOOD_RATE - time.time()))
                flood_to = time.time()
                out[name] = {"quiet": _gaps(stamps, client.lock, quiet_from, flood_from),
                             "flood": _gaps(stamps, client.lock, flood_from, flood_to),
                             "messages_sent": k}
            finally:
                for p in procs:
                    p.terminate()
                for p in procs:
                    try:
                        p.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=6, help="goals per level")
    parser.add_argument("--levels", type=int, nargs="+", default=[0, 2, 4], help="busy loops per level")
    parser.add_argument("--flood-seconds", type=float, default=5.0,
                        help="length of each detection flood per level (0: none)")
    args = parser.parse_args()
    from robot_bridge.bringup import DEFAULT_ROBOT, DEFAULT_SRDF
    from robot_bridge.formats import load
    from robot_bridge.formats.srdf import attach_semantics, read_srdf
    from robot_bridge.planning import Planner

    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    cmd = [sys.executable, "-m", "robot_bridge.nodes.controller", "--ros-args",
           "-p", f"description_file:={DEFAULT_ROBOT}", "-p", f"srdf_file:={DEFAULT_SRDF}",
           "-p", f"state_rate:={STATE_RATE}", "--log-level", "warn"]
    node_proc = subprocess.Popen(cmd, env=env, cwd=REPO)
    client = None
    try:
        robot = load(DEFAULT_ROBOT)
        attach_semantics(robot, read_srdf(DEFAULT_SRDF, robot))
        planner = Planner(robot, seed=1)
        client = Client()
        wait(lambda: client.count() > 0 and client.action.wait_for_server(timeout_sec=0.1), 120.0,
             "controller_node")
        levels = [level(busy, args.goals, planner, client, env, args.flood_seconds) for busy in args.levels]
    finally:
        if client is not None:
            client.close()
        node_proc.terminate()
        try:
            node_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            node_proc.kill()
            node_proc.wait()
    print(json.dumps({
        "bench": "execution", "robot": DEFAULT_ROBOT.name, "hardware": "sim", "state_rate_hz": STATE_RATE,
        "check_step_rad": planner.check_step, "corridor_rad": planner.corridor(), "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(), "levels": levels}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
