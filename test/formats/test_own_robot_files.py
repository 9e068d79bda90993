"""A user's own robot files (issue 31): `package://` meshes under an activated venv's AMENT_PREFIX_PATH, and
.xacro files (expanded by the xacro package, with arguments, bounded, errors with file and line)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures.xacro_arm import PARTS, XACRO, write_xacro_arm

from robot_bridge.errors import DescriptionError, SchemaError, UnsafeInputError
from robot_bridge.formats import load
from robot_bridge.formats.urdf import to_urdf

ARM = """<robot name="arm">
  <link name="base"><visual><geometry><mesh filename="package://present_pkg/meshes/base.stl"/></geometry></visual>
  </link>
  <link name="l1"><visual><geometry><mesh filename="package://absent_pkg/meshes/l1.dae"/></geometry></visual></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>
"""


def prefix_with(root: Path, package: str) -> Path:
    share = root / "share"
    (share / package / "meshes").mkdir(parents=True)
    (share / package / "package.xml").write_text(f"<package><name>{package}</name></package>")
    (share / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (share / "ament_index" / "resource_index" / "packages" / package).write_text("")
    (share / package / "meshes" / "base.stl").write_bytes(b"solid x\nendsolid x\n")
    return root


@pytest.fixture
def arm(tmp_path) -> Path:
    robot = tmp_path / "robot" / "urdf" / "arm.urdf"
    robot.parent.mkdir(parents=True)
    robot.write_text(ARM)
    return robot


@pytest.mark.parametrize("venv_only", [True, False])
def test_package_meshes_under_an_activated_venv(arm, tmp_path, monkeypatch, venv_only):
    """The venv's prefix (no such packages) first, as `source .venv/bin/activate` sets it: the missing
    package is a kept mesh with a warning, never an unsafe path; the installed one resolves."""
    prefix = prefix_with(tmp_path / "install", "present_pkg")
    monkeypatch.setenv("AMENT_PREFIX_PATH", sys.prefix if venv_only else f"{sys.prefix}:{prefix}")
    robot = load(arm)
    meshes = {g.shape.uri: g.shape.path for link in robot.links.values() for g in link.visuals}
    assert meshes["package://absent_pkg/meshes/l1.dae"] is None
    present = prefix / "share" / "present_pkg" / "meshes" / "base.stl"
    assert meshes["package://present_pkg/meshes/base.stl"] == (None if venv_only else str(present.resolve()))
    assert set(robot.missing_meshes) == {"package://absent_pkg/meshes/l1.dae"} | \
        ({"package://present_pkg/meshes/base.stl"} if venv_only else set())
    # the description node's lines: one per missing mesh
    text, report = to_urdf(robot)
    lines = robot.mesh_warnings_left_out("\n".join(report.warnings)) + report.warnings
    for uri in robot.missing_meshes:
        assert len([w for w in lines if uri in w]) == 1, lines
    assert 'filename="package://absent_pkg/meshes/l1.dae"' in text


def test_a_package_share_escape_is_still_refused(arm, tmp_path, monkeypatch):
    prefix = prefix_with(tmp_path / "install", "present_pkg")
    (tmp_path / "secret.stl").write_bytes(b"solid s\nendsolid s\n")
    arm.write_text(ARM.replace("package://present_pkg/meshes/base.stl", "package://present_pkg/../../../secret.stl"))
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    with pytest.raises(UnsafeInputError, match="outside the allowed roots"):
        load(arm)


def test_launch_roots_trust_an_installed_packages_share(tmp_path, monkeypatch):
    from robot_bridge.ros.params import confined_refusal, launch_roots

    prefix = prefix_with(tmp_path / "install", "present_pkg")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    roots = launch_roots([str(tmp_path / "launched" / "x.urdf")])
    inside = prefix / "share" / "present_pkg" / "urdf" / "arm.urdf"
    assert confined_refusal("description_file", str(inside), roots) is None
    assert confined_refusal("description_file", str(prefix / "share" / "arm.urdf"), roots)
    assert confined_refusal("description_file", str(tmp_path / "elsewhere.urdf"), roots)


@pytest.fixture
def xarm(tmp_path) -> Path:
    pytest.importorskip("xacro")
    return write_xacro_arm(tmp_path)


@pytest.mark.parametrize("args, z", [("", 0.5), ("reach:=0.75", 0.75), ({"reach": "1.25"}, 1.25)])
def test_xacro_expanded_with_its_arguments(xarm, args, z):
    robot = load(xarm, xacro_args=args)
    assert robot.name == "xarm" and sorted(robot.links) == ["base", "l1"]
    assert np.allclose(robot.joints["l1_joint"].origin[:3, 3], [0, 0, z])


def test_xacro_errors_name_the_file_and_line(xarm, tmp_path):
    xarm.write_text(XACRO.replace("$(arg reach)", "${no_such_property}"))
    with pytest.raises(SchemaError) as info:
        load(xarm)
    assert info.value.file == str(xarm) and info.value.line == 6, str(info.value)
    assert "no_such_property" in str(info.value)
    unclosed = PARTS.replace("</visual></link>", "</visual>")
    (tmp_path / "parts.xacro").write_text(unclosed)
    xarm.write_text(XACRO)
    with pytest.raises(SchemaError) as info:
        load(xarm)
    assert info.value.file.endswith("parts.xacro") and info.value.line == 7, str(info.value)
    with pytest.raises(SchemaError, match=r"'reach' is not name:=value"):
        load(xarm, xacro_args="reach")


def test_xacro_includes_are_bounded_by_the_allowed_roots_and_sizes(xarm, tmp_path, monkeypatch):
    outside = tmp_path.parent / f"{tmp_path.name}_outside.xacro"
    outside.write_text(PARTS)
    xarm.write_text(XACRO.replace("parts.xacro", str(outside)))
    with pytest.raises(UnsafeInputError, match="outside the allowed roots"):
        load(xarm)
    from robot_bridge.formats import limits

    xarm.write_text(XACRO)
    monkeypatch.setattr(limits, "MAX_XML_BYTES", len(XACRO) + 10)       # parts.xacro is larger
    with pytest.raises(DescriptionError, match="MAX_XML_BYTES"):
        load(xarm)
    assert re.search("xacro", str(xarm))


def test_the_viewer_camera_of_an_environment_is_read_not_warned():
    """Issue 31: the default world logged `<camtrans> in <environment> is not supported` on every start."""
    from robot_bridge import bringup
    from robot_bridge.render import camtrans_view

    world = load(bringup.DEFAULT_ROBOT)
    assert not [w for w in world.warnings if "camtrans" in w], world.warnings
    assert world.extras["viewer_camera"] == {"translation": [2.6, -1.6, 1.9]}
    assert camtrans_view(world, np.zeros(3)) is not None                  # render still looks from it
