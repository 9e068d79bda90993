"""``robot-bridge convert``: OpenRAVE robot -> URDF + STL meshes + SRDF, consistent with each other."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from robot_bridge.cli.verbs import convert
from robot_bridge.formats import srdf, urdf


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
    assert semantics.groups["arm"].chains == [("wam0", "wam7")]
    assert set(semantics.groups["arm_gripper"].joints) == {"JF1", "JF2", "JF3", "JF4"}
    assert semantics.end_effectors["arm_end_effector"].parent_link == "wam7"
    initial = semantics.state("initial").values
    assert initial["JF1mimic"] == pytest.approx([0.8727])      # mimic JF1/3+0.8727 at JF1 = 0
    assert len(semantics.collision_pairs) == 13


def test_convert_reports_input_errors_through_main(tmp_path, capsys):
    from robot_bridge.cli.main import main

    bad = tmp_path / "bad.urdf"
    bad.write_text('<robot name="x"><link name="a"/><joint name="j" type="ball"/></robot>')
    assert main(["convert", str(bad), "-o", str(tmp_path / "o.urdf")]) == 2
    assert "joint type 'ball'" in capsys.readouterr().err
