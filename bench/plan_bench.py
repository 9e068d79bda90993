"""Motion planning on fixed queries whose straight line is blocked, like for like: robot_bridge.planning vs
roboplan's RRT-Connect called directly vs OMPL's RRTConnect with a Python validity checker -- the same
queries, the same seeds, interleaved in the same run, several repeats (prints JSON).

Scenes (test/fixtures/planning/scenes.py): ``embedded`` -- the embedded LWA3 arm in the demo world
(default.env.xml: table, crate, can, block, ball); ``panda`` -- example-robot-data's Panda with a table and a
box on it.  The queries (bench/plan_queries.json, made once by ``--generate`` with a fixed seed):
collision-free start and goal of the arm group, the end effector left of the obstacle at the start and right
of it at the goal.  Every run asserts that each query's straight joint segment collides, by the planner (every
0.01 rad) and by the independent checker (test/fixtures/planning/pin_checker.py, pinocchio + coal on the same
URDF, every 0.01 rad).

Repeat ``r`` of query ``k`` uses seed ``1000 r + k + 1`` for every method:

- ``robot_bridge``: ``Planner.plan(JointGoal)`` (``Planner.reseed``): start/goal checks, RRT-Connect
  (roboplan, edges every 0.05), greedy shortcut that re-checks every kept segment every 0.01 rad;
  ``with_toppra`` adds TOPP-RA under the velocity and acceleration limits.
- ``roboplan_raw``: ``roboplan.rrt.RRT`` with the planner's own options (rrt_connect, edges every 0.05 with
  bisection) and the same seed on the planner's own collision scene: the same search, no re-check.
- ``roboplan_rechecked``: ``roboplan_raw`` plus the guarantee robot_bridge gives: every edge of its raw path
  checked every 0.01 rad (a path failing it counts as a failure): the like-for-like number.
- ``roboplan_at_0.01``: roboplan's own way to the same guarantee: its RRT-Connect with every edge checked
  every 0.01 rad (``collision_check_step_size`` 0.01, in the norm, so no coarser per joint), nothing
  re-checked (its paths are re-checked untimed: ``roboplan_at_0.01_paths_colliding_at_0.01_rad``).
- ``ompl``: ``ompl.geometric.RRTConnect`` on a RealVectorStateSpace (resolution 0.05 rad), the validity
  checker in Python (pin_checker), then ``simplifySolution``; OMPL's RNG is seeded once per process.

Collision checks per second: OMPL counts its checker's calls over its planning time; roboplan (and so the
bridge) checks inside C++: ``roboplan_cpp`` is ``hasCollisionsAlongPath`` over free segments of the start
states (every 0.01), ``roboplan_from_python`` ``hasCollisions`` on 2000 random states called one by one.
``load_avg_1min`` is read before and after each scene (2 cores shared by other work: compare within a run).

Usage: .venv/bin/python bench/plan_bench.py [--timeout 2] [--repeats 3] [--scenes embedded,panda] [--generate]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test" / "fixtures" / "planning"))

QUERIES = Path(__file__).resolve().parent / "plan_queries.json"
GROUP = "arm"
# Per scene: the end-effector link, and the side test: y of the effector below -side at the start, above +side
# at the goal, and higher than ``z_min`` (above the table); the obstacle stands between.
SIDES = {"embedded": ("gripper_base", 0.1, 0.8), "panda": ("panda_hand", 0.12, 0.3)}


def scene_robot(name: str):
    import scenes

    return scenes.embedded_robot() if name == "embedded" else scenes.panda_robot()


def percentile(values, q):
    return float(np.percentile(values, q)) if values else None


def generate(names, count: int, seed: int) -> dict:
    from robot_bridge.planning import Planner

    out = {}
    for name in names:
        planner = Planner(scene_robot(name), seed=seed)
        link, side, z_min = SIDES[name]
        idx = [planner.joint_names.index(j) for j in planner.group_joints(GROUP)]
        rng = np.random.default_rng(seed)
        lo, hi = planner.lower[idx], planner.upper[idx]

        def sample(sign):
            while True:
                q = planner.state.copy()
                q[idx] = rng.uniform(lo, hi)
                p = planner.link_pose(link, q)[:3, 3]
                if sign * p[1] > side and p[2] > z_min and p[0] > 0.2 and not planner.in_collision(q):
                    return q

        queries = []
        while len(queries) < count:
            a, b = sample(-1), sample(+1)
            if not planner.segment_free(a, b, 0.01):
                queries.append({"start": {planner.joint_names[i]: float(a[i]) for i in idx},
                                "goal": {planner.joint_names[i]: float(b[i]) for i in idx}})
        out[name] = queries
    return out


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def stats(values: list, success: int, runs: int) -> dict:
    return {"success": success, "runs": runs, "success_rate": round(success / runs, 4) if runs else None,
            "median_ms": round(1e3 * statistics.median(values), 3) if values else None,
            "p90_ms": round(1e3 * percentile(values, 90), 3) if values else None,
            "max_ms": round(1e3 * max(values), 3) if values else None}


def ratio(a, b):
    return round(a / b, 3) if a and b else None


def run_scene(name: str, queries: list, timeout: float, repeats: int) -> dict:
    import ompl.base as ob
    import ompl.geometric as og
    import ompl.util as ou
    import roboplan.core as rc
    import roboplan.rrt as rrt
    import scenes
    from pin_checker import PinChecker

    from robot_bridge.planning import JointGoal, Planner, PlanningError

    load_before = load_avg()
    ou.setLogLevel(ou.LogLevel.LOG_NONE)
    robot = scene_robot(name)
    t0 = time.perf_counter()
    planner = Planner(robot, seed=1)
    setup_s = time.perf_counter() - t0
    names = planner.group_joints(GROUP)
    idx = [planner.joint_names.index(j) for j in names]
    share = scenes.erd_share()
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(robot), [str(share)] if share else [])
    for gname, shape, pose in scenes.world_shapes(robot):
        checker.add_shape(gname, shape, pose)
    base = planner.positions(planner.state)

    # the queries are what they claim: the straight segment collides, by both checkers
    for k, query in enumerate(queries):
        a, b = planner.vector(query["start"]), planner.vector(query["goal"])
        assert not planner.in_collision(a) and not planner.in_collision(b), f"{name} query {k}: end collides"
        assert not planner.segment_free(a, b, 0.01), f"{name} query {k}: straight segment free (planner)"
        values = dict(base)
        values.update(query["start"])
        line = np.array([[query["start"][j] for j in names], [query["goal"][j] for j in names]])
        assert checker.path_collisions(names, line, values, 0.01), \
            f"{name} query {k}: straight segment free (independent checker)"

    pin_idx = [checker.model.joints[checker.model.getJointId(n)].idx_q for n in names]
    keys = ("robot_bridge", "robot_bridge_with_toppra", "roboplan_raw", "roboplan_rechecked",
            "roboplan_at_0.01", "ompl")
    res = {k: [] for k in keys}
    ok = {k: 0 for k in keys}
    ompl_checks, ompl_time = 0, 0.0
    raw_colliding = fine_colliding = 0
    backend = planner._backend            # roboplan direct: the very collision scene the planner uses
    scene = backend.scene
    ou.RNG.setSeed(1)
    runs = repeats * len(queries)
    for rep in range(repeats):
        for k, query in enumerate(queries):
            seed = 1000 * rep + k + 1
            # interleaved per query, so machine load hits every method alike
            start = planner.vector(query["start"])
            planner.reseed(seed)
            try:
                t = time.perf_counter()
                plan = planner.plan(JointGoal(query["goal"]), group=GROUP, start=query["start"],
                                    timeout=timeout)
                total = time.perf_counter() - t
                ok["robot_bridge"] += 1
                ok["robot_bridge_with_toppra"] += 1
                res["robot_bridge"].append(plan.planning_time)
                res["robot_bridge_with_toppra"].append(total)
            except PlanningError:
                pass

            scene.setJointPositions(start)
            rp = rrt.RRT(scene, rrt.RRTOptions(group_name=GROUP, rrt_connect=True, max_planning_time=timeout,
                                               max_nodes=100000, collision_check_step_size=planner.plan_step,
                                               collision_check_use_bisection=True))
            rp.setRngSeed(seed)
            t = time.perf_counter()
            try:
                path = rp.plan(rc.JointConfiguration(names, start[idx]),
                               rc.JointConfiguration(names, planner.vector(query["goal"])[idx]))
                found = path is not None and len(path.positions) > 0
            except RuntimeError:
                found = False
            raw = time.perf_counter() - t
            if found:
                ok["roboplan_raw"] += 1
                res["roboplan_raw"].append(raw)
                t = time.perf_counter()
                qs = []
                for p in path.positions:
                    q = start.copy()
                    q[idx] = p
                    qs.append(q)
                free = all(backend.segment_free(qa, qb, planner.check_step) for qa, qb in zip(qs, qs[1:]))
                recheck = time.perf_counter() - t
                if free:
                    ok["roboplan_rechecked"] += 1
                    res["roboplan_rechecked"].append(raw + recheck)
                else:
                    raw_colliding += 1

            scene.setJointPositions(start)
            fine = rrt.RRT(scene, rrt.RRTOptions(
                group_name=GROUP, rrt_connect=True, max_planning_time=timeout, max_nodes=100000,
                collision_check_step_size=planner.check_step, collision_check_use_bisection=True))
            fine.setRngSeed(seed)
            t = time.perf_counter()
            try:
                path = fine.plan(rc.JointConfiguration(names, start[idx]),
                                 rc.JointConfiguration(names, planner.vector(query["goal"])[idx]))
                found = path is not None and len(path.positions) > 0
            except RuntimeError:
                found = False
            took = time.perf_counter() - t
            if found:
                qs = []
                for p in path.positions:
                    q = start.copy()
                    q[idx] = p
                    qs.append(q)
                if all(backend.segment_free(qa, qb, planner.check_step) for qa, qb in zip(qs, qs[1:])):
                    ok["roboplan_at_0.01"] += 1
                    res["roboplan_at_0.01"].append(took)
                else:
                    fine_colliding += 1

            space = ob.RealVectorStateSpace(len(names))
            bounds = ob.RealVectorBounds(len(names))
            for i, j in enumerate(idx):
                bounds.setLow(i, float(planner.lower[j]))
                bounds.setHigh(i, float(planner.upper[j]))
            space.setBounds(bounds)
            ss = og.SimpleSetup(space)
            calls = [0]
            q_pin = checker.q(base)

            def valid(state, calls=calls, q_pin=q_pin):
                calls[0] += 1
                for i, j in enumerate(pin_idx):
                    q_pin[j] = state[i]
                return not checker.collides(q_pin)

            ss.setStateValidityChecker(valid)
            si = ss.getSpaceInformation()
            si.setStateValidityCheckingResolution(planner.plan_step / space.getMaximumExtent())
            s, g = space.allocState(), space.allocState()
            for i, n in enumerate(names):
                s[i], g[i] = query["start"][n], query["goal"][n]
            ss.setStartAndGoalStates(s, g)
            ss.setPlanner(og.RRTConnect(si))
            t = time.perf_counter()
            solved = ss.solve(timeout)
            exact = bool(solved) and str(solved) == "Exact solution"
            if exact:
                ss.simplifySolution()
            dt = time.perf_counter() - t
            ompl_checks += calls[0]
            ompl_time += dt
            if exact:
                ok["ompl"] += 1
                res["ompl"].append(dt)

    rng = np.random.default_rng(0)
    states = [planner.state.copy() for _ in range(2000)]
    for q in states:
        q[idx] = rng.uniform(planner.lower[idx], planner.upper[idx])
    t = time.perf_counter()
    for q in states:
        scene.hasCollisions(q)
    from_python = len(states) / (time.perf_counter() - t)
    # C++ rate: free segments from each start, one joint (the last, a wrist) swept +-0.3 rad, every 0.01
    segments, cpp_checks = [], 0
    for query in queries:
        a = planner.vector(query["start"])
        for sign in (1.0, -1.0):
            b = a.copy()
            b[idx[-1]] = np.clip(a[idx[-1]] + sign * 0.3, planner.lower[idx[-1]], planner.upper[idx[-1]])
            if planner.segment_free(a, b, 0.01):
                segments.append((a, b))
                cpp_checks += int(np.ceil(np.max(np.abs(b - a)) / 0.01)) + 1
    t = time.perf_counter()
    for a, b in segments:
        step = float(np.linalg.norm(b - a)) * 0.01 / float(np.max(np.abs(b - a)))     # roboplan: in the norm
        rc.hasCollisionsAlongPath(scene, a, b, step, False, True)
    cpp = cpp_checks / (time.perf_counter() - t) if segments else None

    out = {"setup_s": round(setup_s, 3), "joints": names, "queries": len(queries), "repeats": repeats,
           "notes": planner.notes, "load_avg_1min": {"before": load_before, "after": load_avg()}}
    out.update({k: stats(res[k], ok[k], runs) for k in keys})
    out["roboplan_raw_paths_colliding_at_0.01_rad"] = raw_colliding
    out["roboplan_at_0.01_paths_colliding_at_0.01_rad"] = fine_colliding
    out["collision_checks_per_s"] = {
        "roboplan_cpp": round(cpp) if cpp else None, "roboplan_from_python": round(from_python),
        "ompl_python_checker": round(ompl_checks / ompl_time) if ompl_time else None}
    med = {k: out[k]["median_ms"] for k in keys}
    p90 = {k: out[k]["p90_ms"] for k in keys}
    out["ratios"] = {
        "robot_bridge_over_roboplan_raw_median": ratio(med["robot_bridge"], med["roboplan_raw"]),
        "robot_bridge_over_roboplan_raw_p90": ratio(p90["robot_bridge"], p90["roboplan_raw"]),
        "robot_bridge_over_roboplan_rechecked_median": ratio(med["robot_bridge"], med["roboplan_rechecked"]),
        "robot_bridge_over_roboplan_rechecked_p90": ratio(p90["robot_bridge"], p90["roboplan_rechecked"]),
        "robot_bridge_over_roboplan_at_0.01_median": ratio(med["robot_bridge"], med["roboplan_at_0.01"]),
        "robot_bridge_over_roboplan_at_0.01_p90": ratio(p90["robot_bridge"], p90["roboplan_at_0.01"]),
        "ompl_over_roboplan_raw_median": ratio(med["ompl"], med["roboplan_raw"]),
        "ompl_over_robot_bridge_median": ratio(med["ompl"], med["robot_bridge"])}
    rb, rp = med["robot_bridge"], med["roboplan_raw"]
    out["goals"] = {"all_succeed": ok["robot_bridge"] == runs,
                    "median_within_1.5x_roboplan_raw": bool(rb and rp and rb <= 1.5 * rp),
                    "median_within_1.5x_roboplan_rechecked": bool(rb and med["roboplan_rechecked"]
                                                                  and rb <= 1.5 * med["roboplan_rechecked"]),
                    # the same output (a path free at every 0.01 rad), roboplan's faster way to it
                    "median_within_1.5x_roboplan_same_output": bool(rb and all(
                        med[k] for k in ("roboplan_rechecked", "roboplan_at_0.01")) and rb <= 1.5 * min(
                        med["roboplan_rechecked"], med["roboplan_at_0.01"])),
                    "p90_under_30ms": bool(p90["robot_bridge"] is not None and p90["robot_bridge"] < 30.0)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds per query and method")
    ap.add_argument("--repeats", type=int, default=3, help="runs of every query (seeds differ per run)")
    ap.add_argument("--scenes", default="embedded,panda")
    ap.add_argument("--generate", action="store_true", help="make bench/plan_queries.json anew")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    names = [s for s in args.scenes.split(",") if s]
    if args.generate:
        QUERIES.write_text(json.dumps(generate(names, args.count, args.seed), indent=1) + "\n")
    queries = json.loads(QUERIES.read_text())
    report = {"timeout_s": args.timeout, "repeats": args.repeats, "cpu_count": os.cpu_count(), "scenes": {}}
    for name in names:
        assert len(queries[name]) >= 20, f"{name}: {len(queries[name])} queries, at least 20 wanted"
        report["scenes"][name] = run_scene(name, queries[name], args.timeout, args.repeats)
    print(json.dumps(report, indent=2))
    for name, r in report["scenes"].items():
        print(f"{name}: robot_bridge {r['robot_bridge']['median_ms']} ms median, roboplan raw "
              f"{r['roboplan_raw']['median_ms']}, rechecked {r['roboplan_rechecked']['median_ms']}, at 0.01 "
              f"{r['roboplan_at_0.01']['median_ms']}, ompl {r['ompl']['median_ms']}; ratio raw "
              f"{r['ratios']['robot_bridge_over_roboplan_raw_median']}x, like for like "
              f"{r['ratios']['robot_bridge_over_roboplan_rechecked_median']}x / "
              f"{r['ratios']['robot_bridge_over_roboplan_at_0.01_median']}x "
              f"(load {r['load_avg_1min']['before']}-{r['load_avg_1min']['after']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
