"""Spike (prints JSON): would certified segment checks by conservative advancement beat the planner's
0.01 rad boolean re-check?  Measured on the very segments ``Planner.plan`` checks on bench/plan_queries.json
(both scenes of bench/plan_bench.py, seed ``k + 1`` for query ``k``).

Conservative advancement on a straight joint segment ``qa -> qb``: at the current point, the distance ``d_p``
of every checked pair ``p`` (robot self pairs not disabled, robot / world pairs; pinocchio + coal on the
planner's URDF, meshes as their convex hulls -- a hull is never farther than its mesh, so this is
conservative); the displacement of any point of a geometry ``g`` over the whole segment is at most
``sum_j R[g, j] |dq_j|`` with ``R[g, j]`` a configuration-independent bound on the distance of ``g``'s points
from joint ``j``'s origin (chain of joint offsets up to ``g`` plus ``g``'s bounding sphere; prismatic joints
1 per metre and their travel added to the chain); for a pair only the joints that are not ancestors of both
count (common joints move both rigidly).  The point may advance by ``min_p d_p / bound_p`` of the segment:
the whole swept sub-segment is free.  ``d <= 0`` or an advance under 1e-4 rad: refused.

Methods, interleaved per segment (2 cores shared with other work: compare within a run):

- ``boolean_0.01``: what the planner does -- roboplan's ``hasCollisionsAlongPath`` in C++, bisection order,
  no joint moving more than 0.01 rad between checks.
- ``ca_all_pairs``: the advancement above, every pair's distance at every step (``pin.computeDistances``).
- ``ca_per_pair``: each pair keeps its own free horizon and is queried again only when the point reaches it
  (``pin.computeDistance`` per pair after ``updateGeometryPlacements``).

Also: every segment ``ca_all_pairs`` certifies is re-checked with roboplan's boolean check every 0.001 rad;
the cost of one boolean check, of one all-pairs distance query (read into Python, and not read), and of
roboplan's own ``SceneContext.computeDistances`` (C++, pairs whose AABBs are farther apart than the margin
get the AABB gap, a lower bound, which would do for the advancement; its results are not bound in Python,
so this is only the cost a C++ implementation would pay per step).

Usage: .venv/bin/python bench/ca_spike.py [--scenes embedded,panda] [--repeats 3]
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
sys.path.insert(0, str(REPO / "test" / "fixtures" / "planning"))

FLOOR = 1e-4          # rad: a smaller advance is refused


class Advancement:
    """Conservative advancement over a pinocchio geometry model mirroring the planner's collision scene."""

    def __init__(self, backend, world, disabled):
        import coal
        import pinocchio as pin

        self.pin = pin
        m = self.model = pin.buildModelFromXML(backend.urdf)
        g = self.geom = pin.buildGeomFromUrdfString(m, backend.urdf, pin.GeometryType.COLLISION,
                                                    package_dirs=backend.package_paths)
        nrobot = g.ngeoms
        for o in g.geometryObjects:
            if isinstance(o.geometry, coal.BVHModelBase):
                o.geometry.buildConvexHull(True, "Qt")
                o.geometry = o.geometry.convex
        frame_of = [m.frames[o.parentFrame].name for o in g.geometryObjects]
        for name, shape, pose in world:
            kind = type(shape).__name__
            if kind == "Box":
                cs = coal.Box(*map(float, 2 * np.asarray(shape.half_extents)))
            elif kind == "Sphere":
                cs = coal.Sphere(float(shape.radius))
            elif kind == "Cylinder":
                cs = coal.Cylinder(float(shape.radius), float(shape.length))
            else:
                raise NotImplementedError(kind)
            pose = np.asarray(pose, dtype=float)
            g.addGeometryObject(pin.GeometryObject(name, 0, 0, pin.SE3(pose[:3, :3].copy(),
                                                                       pose[:3, 3].copy()), cs))
        for i in range(nrobot):
            for k in range(i + 1, nrobot):
                if frame_of[i] != frame_of[k] and tuple(sorted((frame_of[i], frame_of[k]))) not in disabled:
                    g.addCollisionPair(pin.CollisionPair(i, k))
            for k in range(nrobot, g.ngeoms):
                g.addCollisionPair(pin.CollisionPair(i, k))
        self.data, self.gdata = m.createData(), pin.GeometryData(g)

        # scene vector (backend.joint_names, no mimic joints) -> pinocchio q: A q + c
        names = backend.joint_names
        A, self.c = np.zeros((m.nq, len(names))), np.zeros(m.nq)
        for j in range(1, m.njoints):
            jm = m.joints[j]
            if jm.nq == 0:
                continue
            assert jm.nq == 1, f"{m.names[j]}: only 1-dof joints handled"
            if m.names[j] in names:
                A[jm.idx_q, names.index(m.names[j])] = 1.0
            else:
                info = backend.scene.getJointInfo(m.names[j]).mimic_info
                A[jm.idx_q, names.index(info.mimicked_joint_name)] = info.scaling
                self.c[jm.idx_q] = info.offset
        self.A = A

        # R[g, dof]: distance of g's points from the joint's origin, any configuration; anc: dof moves g
        R = np.zeros((g.ngeoms, m.nq))
        anc = np.zeros((g.ngeoms, m.nq), bool)
        for gi, o in enumerate(g.geometryObjects[:nrobot]):
            o.geometry.computeLocalAABB()
            reach = np.linalg.norm(o.placement.act(np.asarray(o.geometry.aabb_center))) \
                + float(o.geometry.aabb_radius)
            j = o.parentJoint
            while j > 0:
                jm, v = m.joints[j], m.joints[j].idx_q
                if jm.nq == 1:
                    prismatic = "P" in jm.shortname()
                    R[gi, v] = 1.0 if prismatic else reach
                    anc[gi, v] = True
                    if prismatic:
                        reach += max(abs(m.lowerPositionLimit[v]), abs(m.upperPositionLimit[v]))
                reach += np.linalg.norm(m.jointPlacements[j].translation)
                j = m.parents[j]
        first = np.array([p.first for p in g.collisionPairs])
        second = np.array([p.second for p in g.collisionPairs])
        own = ~(anc[first] & anc[second])
        self.Rpair = (R[first] * own + R[second] * own) @ np.abs(A)     # per pair, per scene dof
        self.npairs = len(first)
        self.steps = 0
        self.pair_queries = 0

    def q(self, x):
        return self.A @ x + self.c

    def free_all_pairs(self, qa, qb) -> bool:
        pin, dq = self.pin, qb - qa
        bound, largest, s = self.Rpair @ np.abs(dq), float(np.max(np.abs(dq))), 0.0
        while True:
            self.steps += 1
            self.pair_queries += self.npairs
            pin.computeDistances(self.model, self.data, self.geom, self.gdata, self.q(qa + s * dq))
            d = np.fromiter((r.min_distance for r in self.gdata.distanceResults), float, self.npairs)
            if d.min() <= 0:
                return False
            with np.errstate(divide="ignore"):
                advance = float(np.min(d / bound))
            if s + advance >= 1.0:
                return True
            if advance * largest < FLOOR:
                return False
            s += advance

    def free_per_pair(self, qa, qb) -> bool:
        pin, m, g, gd, dq = self.pin, self.model, self.geom, self.gdata, qb - qa
        bound, largest, s = self.Rpair @ np.abs(dq), float(np.max(np.abs(dq))), 0.0
        horizon = np.zeros(self.npairs)          # pair k is free for s < horizon[k]
        while True:
            self.steps += 1
            pin.forwardKinematics(m, self.data, self.q(qa + s * dq))
            pin.updateGeometryPlacements(m, self.data, g, gd)
            for k in np.flatnonzero(horizon <= s):
                self.pair_queries += 1
                d = pin.computeDistance(g, gd, int(k)).min_distance
                advance = d / bound[k] if bound[k] > 0 else np.inf
                if d <= 0 or advance * largest < FLOOR:
                    return False
                horizon[k] = s + advance
            s = float(horizon.min())
            if s >= 1.0:
                return True


def segments_checked(planner, queries) -> list:
    """(qa, qb) of every segment check ``Planner.plan`` makes on these queries."""
    from robot_bridge.planning import JointGoal

    b, out = planner._backend, []
    original = b.segment_free

    def recording(qa, qb, step):
        out.append((np.array(qa, dtype=float), np.array(qb, dtype=float)))
        return original(qa, qb, step)

    b.segment_free = recording
    try:
        for k, query in enumerate(queries):
            planner.reseed(k + 1)
            planner.plan(JointGoal(query["goal"]), group="arm", start=query["start"], timeout=2.0)
    finally:
        b.segment_free = original
    return out


def run_scene(name: str, queries: list, repeats: int) -> dict:
    import roboplan.core as rc
    import scenes

    from robot_bridge.planning import Planner

    robot = scenes.embedded_robot() if name == "embedded" else scenes.panda_robot()
    planner = Planner(robot, seed=1)
    b = planner._backend
    segments = segments_checked(planner, queries)
    disabled = {tuple(sorted(p)) for p in scenes.disabled_pairs(robot)} | set(b.always_pairs)
    ca = Advancement(b, scenes.world_shapes(robot), disabled)

    def boolean(qa, qb, step):
        largest = float(np.max(np.abs(qb - qa)))
        return not rc.hasCollisionsAlongPath(b.scene, qa, qb, step * float(np.linalg.norm(qb - qa)) / largest,
                                             True, True)

    methods = {"boolean_0.01": lambda qa, qb: boolean(qa, qb, 0.01),
               "ca_all_pairs": ca.free_all_pairs, "ca_per_pair": ca.free_per_pair}
    times = {k: [] for k in methods}
    counts = {}
    answers = {k: [] for k in methods}
    for rep in range(repeats):
        total = dict.fromkeys(methods, 0.0)
        for qa, qb in segments:
            for key, fn in methods.items():           # interleaved per segment
                before = (ca.steps, ca.pair_queries)
                t = time.perf_counter()
                free = fn(qa, qb)
                total[key] += time.perf_counter() - t
                if rep == 0:
                    answers[key].append(free)
                    c = counts.setdefault(key, [0, 0, 0])
                    c[0] += ca.steps - before[0]
                    c[1] += ca.pair_queries - before[1]
                    c[2] += (ca.steps - before[0]) if free else 0
        for key in methods:
            times[key].append(total[key])
    free_ref = answers["boolean_0.01"]
    nominal = sum(int(np.ceil(np.max(np.abs(qb - qa)) / 0.01)) + 1 for qa, qb in segments)
    dense_misses = sum(not boolean(qa, qb, 0.001)
                       for (qa, qb), ok in zip(segments, answers["ca_all_pairs"]) if ok)

    x = planner.state
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        b.scene.hasCollisions(x)
    bool_us = 1e6 * (time.perf_counter() - t) / n
    t = time.perf_counter()
    for _ in range(n):
        ca.pin.computeDistances(ca.model, ca.data, ca.geom, ca.gdata, ca.q(x))
        np.fromiter((r.min_distance for r in ca.gdata.distanceResults), float, ca.npairs)
    dist_us = 1e6 * (time.perf_counter() - t) / n
    t = time.perf_counter()
    for _ in range(n):
        ca.pin.computeDistances(ca.model, ca.data, ca.geom, ca.gdata, ca.q(x))
    dist_cxx_us = 1e6 * (time.perf_counter() - t) / n
    context = rc.SceneContext(b.scene)       # roboplan's own distances (results not readable from Python)
    ctx_us = {}
    for margin in (None, 0.1, 0.02):
        t = time.perf_counter()
        for _ in range(n):
            context.computeDistances(x, margin)
        ctx_us[str(margin)] = round(1e6 * (time.perf_counter() - t) / n, 2)

    per_plan = {k: round(1e3 * statistics.median(v) / len(queries), 3) for k, v in times.items()}
    out = {"plans": len(queries), "segments": len(segments), "segments_free": int(sum(free_ref)),
           "checked_pairs": ca.npairs,
           "boolean_checks_nominal_per_plan": round(nominal / len(queries), 1),
           "ms_per_plan_median_of_repeats": per_plan,
           "ratio_over_boolean": {k: round(v / per_plan["boolean_0.01"], 2) for k, v in per_plan.items()},
           "ca_all_pairs_steps_per_plan": round(counts["ca_all_pairs"][0] / len(queries), 1),
           "ca_all_pairs_steps_on_free_segments_per_plan": round(counts["ca_all_pairs"][2] / len(queries), 1),
           "ca_per_pair_steps_per_plan": round(counts["ca_per_pair"][0] / len(queries), 1),
           "ca_per_pair_pair_queries_per_plan": round(counts["ca_per_pair"][1] / len(queries), 1),
           "answers_differing_from_boolean": {k: sum(a != r for a, r in zip(v, free_ref))
                                              for k, v in answers.items()},
           "ca_certified_segments_colliding_at_0.001_rad": dense_misses,
           "us_per_boolean_check": round(bool_us, 2), "us_per_all_pairs_distance": round(dist_us, 2),
           "us_per_all_pairs_distance_not_read": round(dist_cxx_us, 2),
           "us_per_roboplan_context_distances_by_broadphase_margin": ctx_us,
           "state_min_distance_m": round(float(min(r.min_distance for r in ca.gdata.distanceResults)), 4)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", default="embedded,panda")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import os

    queries = json.loads((REPO / "bench" / "plan_queries.json").read_text())
    report = {"repeats": args.repeats, "load_avg_1min_before": round(os.getloadavg()[0], 2), "scenes": {}}
    for name in [s for s in args.scenes.split(",") if s]:
        report["scenes"][name] = run_scene(name, queries[name], args.repeats)
    report["load_avg_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
