"""A robot with mimic joints (issue 43): roboplan 0.7's velocity / acceleration limit getters write one value
per joint name of a group into vectors sized by its non-mimic DOFs, so any group naming mimic joints (the
default group of a URDF with <mimic>, the SRDF group "all") overran two heap blocks while the planner was
built, and TOPP-RA / RRT read group vectors of the wrong length.  Runs in a child process under glibc's
checking allocator (where this host has it): the old code dies there with SIGABRT, which fails the test with
its signal instead of taking pytest down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")

MALLOC_DEBUG = Path("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0")


def _joint(name, parent, child, z, mimic=None):
    m = f'<mimic joint="{mimic}" multiplier="0.5" offset="0.1"/>' if mimic else ""
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="0 0 {z}"/><axis xyz="0 1 0"/>'
            f'<limit lower="-1.5" upper="1.5" effort="1" velocity="1"/>{m}</joint>')


def _link(name, z):
    return (f'<link name="{name}"><collision><origin xyz="0 0 {z / 2}"/><geometry><box size="0.04 0.04 {z}"/>'
            f'</geometry></collision></link>')


# An arm of two joints, then a hand: one driven finger joint and four joints mimicking it (the Barrett
# hand's count: four overrun doubles do not fit in malloc's slack).
LINKS = [("base", 0.1), ("upper", 0.3), ("fore", 0.3), ("finger", 0.05)] + [(f"f{i}", 0.05) for i in range(4)]
JOINTS = [("shoulder", "base", "upper", 0.1, None), ("elbow", "upper", "fore", 0.3, None),
          ("finger_joint", "fore", "finger", 0.3, None)] + \
    [(f"m{i}", "finger" if i == 0 else f"f{i - 1}", f"f{i}", 0.05, "finger_joint") for i in range(4)]
URDF = ('<robot name="mimic_arm">' + "".join(_link(n, z) for n, z in LINKS)
        + "".join(_joint(*j) for j in JOINTS) + "</robot>")

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from robot_bridge.formats import urdf
    from robot_bridge.planning import JointGoal, Planner

    robot = urdf.read(sys.argv[1])
    planner = Planner(robot, seed=0)
    driven = ["shoulder", "elbow", "finger_joint"]
    assert planner.joint_names == driven, planner.joint_names
    for group in ("all",):
        joints = planner.group_joints(group)
        assert not {"m0", "m1", "m2", "m3"} & set(joints), joints
        assert len(joints) == len(planner._backend.group_indices(group)), group
    assert np.allclose(planner.velocity_limits, 1.0), planner.velocity_limits
    goal = {"shoulder": 0.4, "elbow": -0.3, "finger_joint": 0.5}
    plan = planner.plan(JointGoal(goal), group="all", start={n: 0.0 for n in driven}, timeout=5.0)
    assert plan.trajectory.joint_names == driven, plan.trajectory.joint_names
    assert np.allclose(plan.trajectory.positions[-1], [0.4, -0.3, 0.5], atol=1e-9)
    assert np.all(np.abs(plan.trajectory.velocities) <= 1.0 + 1e-9)
    print("planned", len(plan.waypoints), "waypoints")
""")


def test_planner_builds_and_plans_a_group_with_mimic_joints(tmp_path):
    path = tmp_path / "mimic_arm.urdf"
    path.write_text(URDF)
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    if MALLOC_DEBUG.is_file():
        env.update(LD_PRELOAD=" ".join(p for p in (str(MALLOC_DEBUG), env.get("LD_PRELOAD")) if p),
                   MALLOC_CHECK_="3")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)     # not the checkout: PYTHONPATH decides
    if proc.returncode < 0:
        pytest.fail(f"the planner process was killed by {signal.Signals(-proc.returncode).name}:\n"
                    f"{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "planned" in proc.stdout
