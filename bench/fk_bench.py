"""Per-message forward kinematics: robot_bridge vs pinocchio on the same URDF, same run (prints JSON).

For each robot: the model is loaded with robot_bridge, written with ``to_urdf``
and that URDF text is loaded into pinocchio.  Both produce the same output --
a 4x4 numpy pose of every model link in the root frame -- and the bench checks
they agree before timing them, interleaved (so machine load hits both alike):

- ``single``: ``KinematicModel.link_poses(positions)`` vs
  ``forwardKinematics`` + ``updateFramePlacements`` + ``oMf[f].homogeneous``
  for every link, called from Python;
- ``batch``: ``link_poses_batch`` over N configurations vs a Python loop of
  the pinocchio calls above.

robot_bridge runs its numba kernel when numba is installed (``fk_kernel``: compile or cache-load
seconds at the first model, outside the per-call numbers); ``numpy_fallback`` times the numpy path
(no numba) in the same run.  ``tf_message_us``: the description node's per-message /tf work
(``JointStateTF.process`` of a serialized JointState of every moving joint into the serialized
TFMessage, in this process, no DDS) with the kernel and with numpy, interleaved.

Usage: .venv/bin/python bench/fk_bench.py [--corpus DIR] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.formats.urdf import to_urdf  # noqa: E402
from robot_bridge.kinematics import fk_kernel  # noqa: E402
from robot_bridge.kinematics.fk import KinematicModel  # noqa: E402
from robot_bridge.kinematics.urdf_tree import urdf_tree  # noqa: E402

ROBOTS = [  # (label, path relative to the repo or the corpus, search path relative to the corpus)
    ("7dof_arm lwa3_gripper (embedded)", "robot_bridge/data/lwa3_gripper.robot.xml", None),
    ("largest corpus robot: pr2-beta-static.zae", "corpus:openrave/src/robots/pr2-beta-static.zae",
     "openrave/src"),
]


class PinocchioFK:
    def __init__(self, urdf: str, robot, tree):
        self.model = pin.buildModelFromXML(urdf)
        self.data = self.model.createData()
        self.links = list(robot.links)
        self.frames = [self.model.getFrameId(name, pin.FrameType.BODY) for name in self.links]
        self.tree = {j.name: j for j in tree}

    def q(self, values: dict) -> np.ndarray:
        """pinocchio configuration from model joint values (continuous joints are (cos, sin))."""
        q = pin.neutral(self.model)
        for jid in range(1, self.model.njoints):
            tj = self.tree[self.model.names[jid]]
            v = float(values[tj.source][tj.dof])
            i, nq = self.model.idx_qs[jid], self.model.nqs[jid]
            q[i:i + nq] = [np.cos(v), np.sin(v)] if nq == 2 else [v]
        return q

    def poses(self, q: np.ndarray) -> dict:
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        oMf = self.data.oMf
        return {name: oMf[f].homogeneous for name, f in zip(self.links, self.frames, strict=True)}


def _best(fn, number: int) -> float:
    """Seconds per call, in CPU time of this thread: on a shared machine, time the process spends
    preempted would otherwise land on whichever side happened to be running."""
    t = time.thread_time()
    for _ in range(number):
        fn()
    return (time.thread_time() - t) / number


def _tf_message(robot, repeats: int, number: int = 2000) -> dict:
    """Per-message /tf work with the compiled rows and with numpy (needs rclpy to serialize)."""
    try:
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState

        from robot_bridge.kinematics.state_publisher import RateGate, StatePublisher
        from robot_bridge.ros.joint_state_tf import JointStateTF
    except ImportError as exc:
        return {"skipped": f"needs rclpy: {exc}"}
    runs = {}
    for compiled in (True, False):
        state = StatePublisher(robot, compiled=compiled)
        names, initial = state.default_joint_state()
        data = serialize_message(JointState(name=names, position=[v + 0.1 for v in initial]))
        tf, gate = JointStateTF(state), RateGate(0.0)
        if tf.process(data, 0, gate, print) is None:
            return {"skipped": "no /tf rows"}
        runs["numba" if state._rows_kernel is not None else "numpy"] = \
            lambda tf=tf, data=data, gate=gate: tf.process(data, 0, gate, print)
    best = {key: [] for key in runs}
    for _ in range(repeats):
        for key, fn in runs.items():
            best[key].append(_best(fn, number))
    return {key: round(min(v) * 1e6, 2) for key, v in best.items()}


def bench_robot(label: str, path: Path, search_path, repeats: int, batch: int) -> dict:
    robot = load(path, search_path=search_path)
    urdf, _report = to_urdf(robot)
    _links, tree = urdf_tree(robot)
    km = KinematicModel(robot)
    compiled = km.warm_up()         # the JIT (or its cache load) outside the timed calls
    km_numpy = KinematicModel(robot, compiled=False)
    pfk = PinocchioFK(urdf, robot, tree)
    rng = np.random.default_rng(0)

    def random_positions():
        out = {}
        for j in robot.joints.values():
            if j.is_active:
                lo, hi = np.maximum(j.lower, -np.pi), np.minimum(j.upper, np.pi)
                v = np.where(lo < hi, rng.uniform(lo, hi), lo)
                out[j.name] = float(v[0]) if j.dof == 1 else v     # as a JointState gives them
        return out

    configs = [random_positions() for _ in range(batch)]
    positions = configs[0]
    q = pfk.q(km.joint_values(positions))
    ours, theirs = km.link_poses(positions), pfk.poses(q)
    error = max(float(np.abs(ours[name] - theirs[name]).max()) for name in robot.links)
    if error > 1e-9:
        raise SystemExit(f"{label}: robot_bridge and pinocchio disagree by {error}")

    Q = km.configuration_matrix(configs)
    pin_qs = [pfk.q(km.joint_values(c)) for c in configs]
    batch_poses = km.link_poses_batch(Q)
    idx = [km.link_names.index(name) for name in robot.links]
    last = pfk.poses(pin_qs[-1])
    error = max(error, max(float(np.abs(batch_poses[-1, k] - last[name]).max())
                           for k, name in zip(idx, robot.links, strict=True)))

    number = 500
    single_ours, single_pin, batch_ours, batch_pin, single_np, batch_np = [], [], [], [], [], []
    for _ in range(repeats):     # interleaved, best of each
        single_ours.append(_best(lambda: km.link_poses(positions), number))
        single_np.append(_best(lambda: km_numpy.link_poses(positions), number))
        batch_np.append(_best(lambda: km_numpy.link_poses_batch(Q), 1) / batch)
        single_pin.append(_best(lambda: pfk.poses(q), number))
        batch_ours.append(_best(lambda: km.link_poses_batch(Q), 3) / batch)
        batch_pin.append(_best(lambda: [pfk.poses(x) for x in pin_qs], 1) / batch)
    s_ours, s_pin = min(single_ours), min(single_pin)
    b_ours, b_pin = min(batch_ours), min(batch_pin)
    s_np, b_np = min(single_np), min(batch_np)
    return {
        "robot": label, "file": str(path), "links": len(robot.links), "dof": len(km.dof_names),
        "urdf_joints": len(tree), "max_abs_error": error,
        "single_us": {"robot_bridge": round(s_ours * 1e6, 2), "pinocchio": round(s_pin * 1e6, 2),
                      "ratio": round(s_ours / s_pin, 3), "goal_ratio": 1.0, "ok": s_ours <= s_pin},
        "batch": {"configurations": batch, "robot_bridge_us_per_config": round(b_ours * 1e6, 3),
                  "pinocchio_loop_us_per_config": round(b_pin * 1e6, 3), "speedup": round(b_pin / b_ours, 2),
                  "goal_speedup": 3.0, "ok": b_pin >= 3.0 * b_ours},
        "kernel": "numba" if compiled else "numpy",
        "tf_message_us": _tf_message(robot, repeats),
        "numpy_fallback": {"single_us": round(s_np * 1e6, 2), "single_ratio": round(s_np / s_pin, 3),
                           "batch_us_per_config": round(b_np * 1e6, 3),
                           "batch_speedup": round(b_pin / b_np, 2)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    results = []
    for label, rel, search in ROBOTS:
        path = corpus / rel[len("corpus:"):] if rel.startswith("corpus:") else REPO / rel
        if not path.is_file():
            results.append({"robot": label, "skipped": f"{path} not found"})
            continue
        results.append(bench_robot(label, path, [corpus / search] if search else None, args.repeats,
                                   args.batch))
    jit = fk_kernel.jit_seconds()
    print(json.dumps({"bench": "fk", "pinocchio": pin.__version__, "load_average": os.getloadavg(),
                      "fk_kernel": {"numba": fk_kernel.numba and fk_kernel.numba.__version__,
                                    "jit_or_cache_load_seconds": None if jit is None else round(jit, 3)},
                      "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
