"""Child process of test_corpus_planning.py: for each corpus file named on the command line, build a Planner
for its robot and plan one goal, printing one JSON line before (``"event": "start"``) and after (``"event":
"done"``, the result) each, so the parent attributes a crash (a signal) to the robot in progress.

The goal: every joint the planner drives, from the home state (the model's initial values; a random
collision-free state when home is in collision) to a random collision-free state within the limits, each
joint at most ``REACH`` from the start (a long way checked every 0.01 rad costs seconds on large meshes).
The path returned is checked by the planner's own validity: every waypoint within the limits, every segment
collision-free at the planner's check step, the trajectory from the start to the goal.

    python corpus_plan_worker.py CORPUS_DIR REL_PATH...
"""

from __future__ import annotations

import faulthandler
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

GOAL_TRIES = 200          # random states tried for a collision-free one
REACH = 0.5               # rad or m: how far a goal joint may lie from the start
PLAN_TIMEOUT = 10.0       # s per plan (RRT-Connect; typical corpus robots need far less)
PLANS = 3                 # goals tried before the robot counts as unplannable


def load_robot(corpus: Path, path: Path):
    from robot_bridge.formats import load, urdf

    if path.suffix == ".urdf":
        return urdf.read(path, allowed_roots=["/"])   # trusted corpus: absolute mesh paths allowed
    return load(path, search_path=[corpus / "openrave" / "src"])


def drop_absent_meshes(robot) -> int:
    """Leave out mesh geometry whose file is absent from the corpus (MANIFEST: e.g. example-robot-data's
    meshes were not copied); how many were.  The planner refuses a URDF naming a mesh it cannot load."""
    from robot_bridge.model import Mesh

    def absent(g) -> bool:
        return isinstance(g.shape, Mesh) and g.shape.path is None and g.shape.vertices is None

    dropped = 0
    bodies = [robot, *robot.environment.values()]
    for body in bodies:
        for link in body.links.values():
            for kind in ("collisions", "visuals"):
                kept = [g for g in getattr(link, kind) if not absent(g)]
                dropped += len(getattr(link, kind)) - len(kept)
                setattr(link, kind, kept)
    return dropped


def random_free(planner, rng: np.random.Generator, base: np.ndarray, reach: float = np.inf):
    """A collision-free state within the limits, every driven joint random within ``reach`` of ``base``,
    or None."""
    lo = np.maximum(np.where(np.isfinite(planner.lower), planner.lower, -np.pi), base - reach)
    hi = np.minimum(np.where(np.isfinite(planner.upper), planner.upper, np.pi), base + reach)
    for _ in range(GOAL_TRIES):
        q = rng.uniform(lo, hi)
        if not planner.in_collision(q) and np.any(q != base):
            return q
    return None


def check_plan(planner, plan, q0: np.ndarray, q1: np.ndarray) -> None:
    from robot_bridge.planning.planner import LIMIT_TOLERANCE

    idx = [planner.joint_names.index(n) for n in plan.trajectory.joint_names]
    waypoints = []
    for w in plan.waypoints:
        q = np.array(q0, dtype=float)
        q[idx] = w
        waypoints.append(q)
    assert np.allclose(waypoints[0], q0, atol=1e-9), "the path does not start at the start state"
    assert np.allclose(waypoints[-1], q1, atol=1e-9), "the path does not end at the goal"
    lo, hi = planner.lower - LIMIT_TOLERANCE, planner.upper + LIMIT_TOLERANCE
    for q in waypoints:
        assert np.all(q >= lo) and np.all(q <= hi), "a waypoint outside the joint limits"
    for a, b in zip(waypoints, waypoints[1:]):
        assert planner.segment_free(a, b), "a path segment in collision"
    pos = np.asarray(plan.trajectory.positions)
    assert np.allclose(pos[0], q0[idx], atol=1e-9) and np.allclose(pos[-1], q1[idx], atol=1e-9), \
        "the trajectory does not join the start and the goal"


def plan_one(corpus: Path, rel: str) -> dict:
    from robot_bridge.planning import JointGoal, Planner
    from robot_bridge.planning.errors import NoPathFound, PlanningTimedOut

    t0 = time.monotonic()
    robot = load_robot(corpus, corpus / rel)
    if not robot.active_joints:
        return {"skip": "no joint a controller drives (no chain to plan for)"}
    absent = drop_absent_meshes(robot)
    planner = Planner(robot, seed=0)
    out = {"joints": len(planner.joint_names), "build_s": round(time.monotonic() - t0, 2)}
    if absent:
        out["meshes_absent"] = absent
    rng = np.random.default_rng(0)
    q0 = np.array(planner.state, dtype=float)
    if planner.in_collision(q0):
        q0 = random_free(planner, rng, q0)
        if q0 is None:
            raise AssertionError(f"no collision-free state in {GOAL_TRIES} random ones")
        out["home"] = "in collision: a random collision-free start"
    last = None
    for _ in range(PLANS):
        q1 = random_free(planner, rng, q0, REACH)
        if q1 is None:
            raise AssertionError(f"no collision-free goal in {GOAL_TRIES} random states")
        start = dict(zip(planner.joint_names, map(float, q0)))
        goal = JointGoal(dict(zip(planner.joint_names, map(float, q1))))
        try:
            plan = planner.plan(goal, start=start, timeout=PLAN_TIMEOUT)
        except (NoPathFound, PlanningTimedOut) as exc:    # that goal not reached in time: another one
            last = exc
            continue
        check_plan(planner, plan, q0, q1)
        out.update(waypoints=len(plan.waypoints), group=plan.group, seconds=round(time.monotonic() - t0, 2))
        return out
    raise AssertionError(f"{PLANS} random goals, none planned: {type(last).__name__}: {last}")


def main(argv: list[str]) -> int:
    faulthandler.enable()                   # a crash prints the Python stack on stderr
    warnings.simplefilter("ignore")
    corpus = Path(argv[1])
    for rel in argv[2:]:
        print(json.dumps({"event": "start", "file": rel}), flush=True)
        try:
            result = {"ok": True, **plan_one(corpus, rel)}
        except BaseException as exc:        # noqa: BLE001 - reported to the parent, next robot
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=8)}
        result.update(event="done", file=rel)
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
