"""Motion planning on fixed queries whose straight line is blocked: robot_bridge.planning vs roboplan's
RRT-Connect called directly vs OMPL's RRTConnect with a Python validity checker, same queries, same run
(prints JSON).

Scenes (test/planning/scenes.py): ``embedded`` -- the embedded LWA3 arm in the demo world (default.env.xml:
table, crate, can, block, ball); ``panda`` -- example-robot-data's Panda with a table and a box on it.  The
queries (bench/plan_queries.json, made once by ``--generate`` with a fixed seed): collision-free start and
goal of the arm group, the end effector left of the obstacle at the start and right of it at the goal,
the straight joint segment between them in collision (checked every 0.01 rad).

- ``robot_bridge``: ``Planner.plan(JointGoal)``: start/goal checks, RRT-Connect (roboplan), shortcutting, the
  path re-checked every 0.01 rad; ``total`` adds TOPP-RA under the velocity and acceleration limits.
- ``roboplan``: ``roboplan.rrt.RRT`` (rrt_connect, default options) on the planner's own collision scene;
  its raw paths (edges checked every 0.05) are rechecked every 0.01 rad by the independent checker, and the
  ones that collide counted.
- ``ompl``: ``ompl.geometric.RRTConnect`` on a RealVectorStateSpace, the validity checker in Python
  (pinocchio + coal on the same URDF and world, test/planning/pin_checker.py), then ``simplifySolution``.

Collision checks per second: OMPL counts its checker's calls over its planning time; for roboplan (and so the
bridge, which plans through it) the calls happen inside C++, so the rate is that of ``hasCollisions`` on 2000
random states called from Python (an underestimate of the C++ loop).

Usage: .venv/bin/python bench/plan_bench.py [--timeout 2] [--scenes embedded,panda] [--generate]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test" / "planning"))

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


def run_scene(name: str, queries: list, timeout: float) -> dict:
    import ompl.base as ob
    import ompl.geometric as og
    import ompl.util as ou
    import roboplan.core as rc
    import roboplan.rrt as rrt
    import scenes
    from pin_checker import PinChecker

    from robot_bridge.planning import JointGoal, Planner, PlanningError

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
    pin_idx = [checker.model.joints[checker.model.getJointId(n)].idx_q for n in names]

    res = {"robot_bridge": [], "robot_bridge_total": [], "roboplan": [], "ompl": []}
    ok = {k: 0 for k in ("robot_bridge", "roboplan", "ompl")}
    ompl_checks, ompl_time = 0, 0.0
    raw_colliding = 0
    scene = planner._backend.scene          # roboplan direct: the very collision scene the planner uses
    for k, query in enumerate(queries):
        # interleaved per query, so machine load hits every method alike
        start = planner.vector(query["start"])
        try:
            t = time.perf_counter()
            plan = planner.plan(JointGoal(query["goal"]), group=GROUP, start=query["start"], timeout=timeout)
            total = time.perf_counter() - t
            ok["robot_bridge"] += 1
            res["robot_bridge"].append(plan.planning_time)
            res["robot_bridge_total"].append(total)
        except PlanningError:
            pass

        scene.setJointPositions(start)
        rp = rrt.RRT(scene, rrt.RRTOptions(group_name=GROUP, rrt_connect=True, max_planning_time=timeout,
                                           max_nodes=100000))
        rp.setRngSeed(k + 1)
        t = time.perf_counter()
        try:
            path = rp.plan(rc.JointConfiguration(names, np.array([query["start"][j] for j in names])),
                           rc.JointConfiguration(names, np.array([query["goal"][j] for j in names])))
            found = path is not None and len(path.positions) > 0
        except RuntimeError:
            found = False
        dt = time.perf_counter() - t
        if found:
            ok["roboplan"] += 1
            res["roboplan"].append(dt)
            values = dict(base)
            values.update(query["start"])
            if checker.path_collisions(names, np.array(path.positions), values, 0.01):
                raw_colliding += 1

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
        si.setStateValidityCheckingResolution(0.05 / space.getMaximumExtent())
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
    roboplan_rate = len(states) / (time.perf_counter() - t)

    def stats(key, okey):
        v = res[key]
        return {"success": ok[okey], "queries": len(queries), "success_rate": ok[okey] / len(queries),
                "median_ms": round(1e3 * statistics.median(v), 3) if v else None,
                "p90_ms": round(1e3 * percentile(v, 90), 3) if v else None,
                "max_ms": round(1e3 * max(v), 3) if v else None}

    out = {"setup_s": round(setup_s, 3), "joints": names, "notes": planner.notes,
           "robot_bridge": stats("robot_bridge", "robot_bridge"),
           "robot_bridge_with_toppra": stats("robot_bridge_total", "robot_bridge"),
           "roboplan_rrt_connect": stats("roboplan", "roboplan"),
           "roboplan_raw_paths_colliding_at_0.01_rad": raw_colliding,
           "ompl_rrt_connect_python_checker": stats("ompl", "ompl"),
           "collision_checks_per_s": {
               "roboplan_from_python": round(roboplan_rate),
               "ompl_python_checker": round(ompl_checks / ompl_time) if ompl_time else None}}
    rb, rp, om = (out[k]["median_ms"] for k in ("robot_bridge", "roboplan_rrt_connect",
                                                 "ompl_rrt_connect_python_checker"))
    out["ratios"] = {"robot_bridge_over_roboplan_median": round(rb / rp, 3) if rb and rp else None,
                     "ompl_over_roboplan_median": round(om / rp, 3) if om and rp else None,
                     "ompl_over_robot_bridge_median": round(om / rb, 3) if om and rb else None}
    out["goals"] = {"all_succeed": ok["robot_bridge"] == len(queries),
                    "median_within_1.5x_roboplan": bool(rb and rp and rb <= 1.5 * rp),
                    "p90_under_30ms": bool(out["robot_bridge"]["p90_ms"] is not None
                                           and out["robot_bridge"]["p90_ms"] < 30.0)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds per query and method")
    ap.add_argument("--scenes", default="embedded,panda")
    ap.add_argument("--generate", action="store_true", help="make bench/plan_queries.json anew")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    names = [s for s in args.scenes.split(",") if s]
    if args.generate:
        QUERIES.write_text(json.dumps(generate(names, args.count, args.seed), indent=1) + "\n")
    queries = json.loads(QUERIES.read_text())
    report = {"timeout_s": args.timeout, "scenes": {}}
    for name in names:
        report["scenes"][name] = run_scene(name, queries[name], args.timeout)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
