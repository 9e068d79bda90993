"""Kilted against Jazzy in one run: the /tf hot path and the camera relay benches in each venv (prints JSON).

Runs ``bench/tf_bench.py`` (description_node's CPU and added latency at 1 kHz /joint_states -> /tf) and
``bench/sensor_bench.py --relay-only`` (the camera relay's added latency, fast path, shipped Fast DDS profile)
with each venv's own Python, in alternating order over ``--rounds`` rounds (K J, J K, ...) so that a drift
of the machine's load falls on both, and reports per distribution the median over the rounds and the ratio
Jazzy / Kilted of each number.  Goal (issue 34): node CPU at 1 kHz and relay added latency within 1.2x of
Kilted's.

Usage: .venv/bin/python bench/distro_bench.py [--venv .venv --venv .venv-jazzy] [--rounds 2]
       [--duration 10] [--relay-seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_RATIO = 1.2
# what the running venv's ROS wheels set up at start (ros_wheels_bootstrapper): each venv sets its own
BOOTSTRAP_VARIABLES = ("LD_LIBRARY_PATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE")
DISTRO_PROBE = ("import sys; sys.path.insert(0, {repo!r}); from robot_bridge.ros import rcl_layout; "
                "print(rcl_layout.distro(), rcl_layout.rclpy_version(), rcl_layout.rcl_version())")


def last_json(text: str) -> dict:
    """The JSON document a bench prints last (log lines may come before it)."""
    start = text.rfind("\n{")
    return json.loads(text[start + 1 if start >= 0 else text.index("{"):])


def run(python: Path, args: list[str], domain: int, timeout: float) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in BOOTSTRAP_VARIABLES}
    env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    out = subprocess.run([str(python), *args], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{python} {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
    return last_json(out.stdout)


def measure(python: Path, duration: float, relay_seconds: float, domain: int) -> dict:
    tf = run(python, ["bench/tf_bench.py", "--duration", str(duration)], domain, 300 + 10 * duration)
    row = tf["table"][0]
    relay = run(python, ["bench/sensor_bench.py", "--relay-only", "--relay-seconds", str(relay_seconds)],
                domain, 300 + 20 * relay_seconds)
    fast = [r for r in relay["relay"] if r["relay_fast_path"] and "added_p50_ms" in r]
    return {"tf_node_cpu_percent": row["node_cpu_percent"], "tf_added_p50_us": row["added_p50_us"],
            "tf_lost": row["lost"],
            **{f"relay_added_p50_ms_{'separate' if 'per path' in r['probes'] else 'shared'}_probe":
               r["added_p50_ms"] for r in fast},
            **{f"relay_bridge_cpu_percent_{'separate' if 'per path' in r['probes'] else 'shared'}_probe":
               r["bridge_cpu_percent"] for r in fast},
            "load_average_1min": relay["load_average_1min"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", action="append", default=[], help="venvs (.venv, .venv-jazzy)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0, help="tf_bench seconds")
    parser.add_argument("--relay-seconds", type=float, default=10.0)
    args = parser.parse_args()
    venvs = [REPO / v for v in (args.venv or [".venv", ".venv-jazzy"])]
    missing = [str(v) for v in venvs if not (v / "bin" / "python").exists()]
    if missing:
        print(json.dumps({"bench": "distro", "error": f"no venv at {', '.join(missing)} "
                                                       "(make setup / make setup-jazzy)"}))
        return 2
    names = {}
    for v in venvs:
        probe = subprocess.run([str(v / "bin" / "python"), "-c", DISTRO_PROBE.format(repo=str(REPO))],
                               capture_output=True, text=True, check=True,
                               env={k: x for k, x in os.environ.items() if k not in BOOTSTRAP_VARIABLES})
        distro, rclpy_version, rcl_version = probe.stdout.split()
        names[v] = f"{distro} (rclpy {rclpy_version}, rcl {rcl_version})"
    samples: dict[Path, list[dict]] = {v: [] for v in venvs}
    domain = 150 + os.getpid() % 50
    for i in range(args.rounds):
        for v in (venvs if i % 2 == 0 else venvs[::-1]):
            samples[v].append(measure(v / "bin" / "python", args.duration, args.relay_seconds, domain))
    medians = {v: {k: statistics.median(s[k] for s in samples[v]) for k in samples[v][0]} for v in venvs}
    base, other = venvs[0], venvs[-1]
    compared = ("tf_node_cpu_percent", "tf_added_p50_us", "relay_added_p50_ms_shared_probe",
                "relay_added_p50_ms_separate_probe")
    ratios = {k: round(medians[other][k] / medians[base][k], 3) for k in compared
              if k in medians[base] and k in medians[other] and medians[base][k] > 0}
    print(json.dumps({
        "bench": "distro", "rounds": args.rounds, "goal_ratio": GOAL_RATIO,
        "distros": {names[v]: {"venv": os.path.relpath(v, REPO), "median": medians[v], "runs": samples[v]}
                    for v in venvs},
        "ratio": {"of": f"{names[other]} / {names[base]}", **ratios},
        "within_goal": {k: r <= GOAL_RATIO for k, r in ratios.items()},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
