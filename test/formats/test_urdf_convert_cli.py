"""``robot-bridge convert``: OpenRAVE robot -> URDF + STL meshes + SRDF, consistent with each other."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.cli.verbs import convert
from robot_bridge.formats import load, srdf, urdf
from robot_bridge.model.groups import chain_joints


def _run(argv) -> int:
    parser = argparse.ArgumentParser()
    convert.add_arguments(parser)
    return convert.main(parser.parse_args([str(a) for a in argv]))


def test_convert_barrett_wam(openrave_data, tmp_path, capsys):
    out = tmp_path / "out" / "wam.urdf"
    rc = _run([openrave_data / "robots/barrettwam.robot.xml", "-o", out, "--srdf", tmp_path / "wam.srdf",
               "--search-path", openrave_data])
    assert rc == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: " in printed and "meshes converted" in printed
    check = Path(sys.executable).parent / "check_urdf"
    if check.exists():
        assert subprocess.run([str(check), str(out)], capture_output=True).returncode == 0
    robot = urdf.read(out)                        # every converted mesh is referenced and exists
    meshes = [g.shape for link in robot.links.values() for g in link.visuals + link.collisions]
    assert meshes and all(m.path and Path(m.path).is_file() for m in meshes if hasattr(m, "uri"))
    assert sorted(p.name for p in (out.parent / "wam_meshes").iterdir())
    semantics = srdf.read_srdf(tmp_path / "wam.srdf", robot)   # names agree with the URDF
    assert semantics.warnings == []
    # the chain ends at the manipulator's tool link, a fixed joint from the effector as /tf_static has it
    assert semantics.groups["arm"].chains == [("wam0", "arm_tool")]
    tool = robot.joints["arm_tool_joint"]
    assert tool.type == "fixed" and tool.parent == "wam7" and tool.child == "arm_tool"
    model = load(openrave_data / "robots/barrettwam.robot.xml", search_path=[openrave_data])
    np.testing.assert_allclose(tool.origin, model.manipulators["arm"].tool, atol=1e-9)
    assert set(semantics.groups["arm_gripper"].joints) == {"JF1", "JF2", "JF3", "JF4"}
    assert semantics.end_effectors["arm_end_effector"].parent_link == "wam7"
    # group states name only driven joints: no mimic (JF1mimic ...) and only the group's own joints
    initial = semantics.state("initial").values
    assert "JF1" in initial and not any("mimic" in j for j in initial)
    homes = {s.group: s.values for s in semantics.group_states if s.name == "home"}
    arm = chain_joints(model, "wam0", "wam7")
    assert len(arm) == 7 and set(homes["arm"]) == set(arm)            # the description's initial values
    assert homes["arm"] == {j: pytest.approx([model.joints[j].initial[0]]) for j in arm}
    assert len(semantics.collision_pairs) == 13


def test_convert_reports_input_errors_through_main(tmp_path, capsys):
    from robot_bridge.cli.main import main

    bad = tmp_path / "bad.urdf"
    bad.write_text('<robot name="x"><link name="a"/><joint name="j" type="ball"/></robot>')
    assert main(["convert", str(bad), "-o", str(tmp_path / "o.urdf")]) == 2
    assert "joint type 'ball'" in capsys.readouterr().err
