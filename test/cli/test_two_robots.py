"""Several robots in one world, as docs/bringup.md's two-robot example runs them (two ``robot-bridge run`` on
one domain): one TF tree rooted at ``world``, each environment body once, distinct diagnostics names, both
arms controllable independently."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from fixtures.bridge_probe import Output, Probe, start_run, stop  # noqa: E402
from robot_bridge.cli.verbs.run import READY  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"
BODIES = {"table", "crate", "can", "block", "ball"}
STATIC = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                    reliability=ReliabilityPolicy.RELIABLE)


def _second_arm_world(tmp_path: Path) -> Path:
    """The default world with the arm placed across the table (x = 2, facing back)."""
    text = (DATA / "default.env.xml").read_text()
    placed = ('<Robot file="lwa3_gripper.robot.xml"><translation>2.0 0 0</translation>'
              '<rotationaxis>0 0 1 180</rotationaxis></Robot>')
    path = tmp_path / "arm2.env.xml"
    path.write_text(text.replace('<Robot file="lwa3_gripper.robot.xml"/>', placed))
    return path


def test_two_arms_one_world(tmp_path):
    arm1 = start_run("--namespace", "arm1", "--frame-prefix", "arm1/")
    arm2 = start_run("--robot", str(_second_arm_world(tmp_path)), "--srdf", str(DATA / "lwa3_gripper.srdf"),
                     "--search-path", str(DATA), "--namespace", "arm2", "--frame-prefix", "arm2/",
                     "--no-environment")
    out1, out2 = Output(arm1), Output(arm2)
    probe = Probe()
    try:
        out1.wait_for(READY)
        out2.wait_for(READY)
        static = probe.listen(TFMessage, "/tf_static", STATIC)
        moving = probe.listen(TFMessage, "/tf", qos.tf_qos())
        diagnostics = probe.listen(DiagnosticArray, "/diagnostics")
        states = {arm: probe.listen(JointState, f"/{arm}/joint_states", qos.sensor_data_qos())
                  for arm in ("arm1", "arm2")}

        def edges():
            return [(t.header.frame_id, t.child_frame_id) for m in list(static) for t in m.transforms]
        probe.wait(lambda: {("world", "arm1/base"), ("world", "arm2/base")} <= set(edges()),
                   what="both robots' roots in world")
        probe.wait(lambda: len(static) >= 2 and moving, what="/tf_static of both and /tf")

        # one tree: every frame reaches world (the /tf of every moving joint has come); no prefixed world
        def tree():
            parent = {}
            for p, c in edges() + [(t.header.frame_id, t.child_frame_id)
                                   for m in list(moving) for t in m.transforms]:
                assert parent.setdefault(c, p) == p, f"{c} has two parents"
            roots = set()
            for frame in parent:
                while frame in parent:
                    frame = parent[frame]
                roots.add(frame)
            return parent, roots
        probe.wait(lambda: tree()[1] == {"world"}, what="one tree rooted at world")
        parent, _ = tree()
        assert not any(f.endswith("/world") for f in set(parent) | set(parent.values()))
        assert {"arm1/link7", "arm2/link7", "table"} <= set(parent)
        static_children = [c for m in list(static) for t in m.transforms for c in [t.child_frame_id]]
        for body in BODIES:
            assert static_children.count(body) == 1, (body, static_children.count(body))
        roots_in_world = {c for p, c in edges() if p == "world" and c.startswith(("arm1/", "arm2/"))}
        assert {r.split("/")[0] for r in roots_in_world} == {"arm1", "arm2"}

        # distinct diagnostics names: the node's full name
        probe.wait(lambda: {"/arm1/controller_node", "/arm2/controller_node"} <=
                   {s.name.split(": ")[0] for m in list(diagnostics) for s in m.status}, what="diagnostics")
        names = [s.name for m in list(diagnostics) for s in m.status]
        assert not any(n.startswith("controller_node:") for n in names)

        # both controllable, independently
        for arm in ("arm2", "arm1"):
            probe.wait(lambda: states[arm] and states["arm1"] and states["arm2"], what=f"{arm} joint states")
            others = {a: np.array(states[a][-1].position) for a in states}
            target = others[arm].copy()
            target[0] += 0.3
            commands = probe.node.create_publisher(Float64MultiArray, f"/{arm}/controller_node/commands", 10)

            def reached(arm=arm, target=target, commands=commands):
                commands.publish(Float64MultiArray(data=list(map(float, target))))
                return abs(states[arm][-1].position[0] - target[0]) < 1e-3
            probe.wait(reached, what=f"{arm} at its commanded position")
            other = "arm1" if arm == "arm2" else "arm2"
            assert abs(states[other][-1].position[0] - others[other][0]) < 1e-3     # the other arm stayed
    finally:
        probe.close()
        text1, text2 = stop(arm1, out1), stop(arm2, out2)
    assert arm1.returncode == 0 and arm2.returncode == 0, text1 + text2
