"""Paths the OS refuses reach callers of formats.load as typed errors naming the element, and
nearly-orthonormal rotations (few digits) are orthonormalized on read, with a warning when off by
more than 1e-6, so FK, TF and the exported URDF agree."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.errors import DescriptionError, MissingFileError
from robot_bridge.formats import load, meshes
from robot_bridge.formats.urdf import to_urdf
from robot_bridge.kinematics import KinematicModel
from robot_bridge.model import transform as tf
from robot_bridge.sim import Scene

from fixtures.urdf_export import assert_export_matches  # noqa: E402

TOO_LONG = "a" * 300 + ".kinbody.xml"
INCLUDE = '<Robot name="r"><KinBody name="r" file="{ref}"/></Robot>'
XML_MESH = ('<Robot name="r"><KinBody name="r"><Body name="b"><Geom type="trimesh"><data>{ref}</data></Geom>'
            '</Body></KinBody></Robot>')
URDF_MESH = ('<robot name="r"><link name="b"><visual><geometry><mesh filename="{ref}"/></geometry></visual>'
             '</link></robot>')
DAE = Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "collada" / "openrave_dummies.dae"


def _write(tmp_path, template, ref, suffix=".robot.xml"):
    (tmp_path / "adir").mkdir(exist_ok=True)
    if not (tmp_path / "broken.xml").is_symlink():
        (tmp_path / "broken.xml").symlink_to(tmp_path / "nowhere.xml")
    path = tmp_path / f"r{suffix}"
    path.write_text(template.format(ref=ref))
    return path


@pytest.mark.parametrize("template, suffix, element", [
    (INCLUDE, ".robot.xml", "/Robot[@name='r']/KinBody[@name='r']"),
    (XML_MESH, ".robot.xml", "/Robot[@name='r']/KinBody[@name='r']/Body[@name='b']/Geom"),
    (URDF_MESH, ".urdf", "/robot[@name='r']/link[@name='b']/visual/geometry/mesh")],
    ids=["include", "mesh", "urdf"])
def test_a_path_too_long_is_a_typed_error_naming_the_element(tmp_path, template, suffix, element):
    with pytest.raises(MissingFileError) as info:
        load(_write(tmp_path, template, TOO_LONG, suffix))
    text = str(info.value)
    assert element in text and "File name too long" in text and "\n" not in text and len(text) < 600


@pytest.mark.parametrize("ref", ["adir", "broken.xml", "r.robot.xml/deeper.xml"])
def test_an_include_that_is_a_directory_a_broken_link_or_under_a_file(tmp_path, ref):
    with pytest.raises(MissingFileError, match=r"KinBody\[@name='r'\]: included file .* not found"):
        load(_write(tmp_path, INCLUDE, ref))


def test_an_unreadable_include(tmp_path, monkeypatch):
    (tmp_path / "locked.kinbody.xml").write_text('<KinBody name="k"><Body name="b"/></KinBody>')
    real = os.open

    def open_(path, flags, *args, **kwargs):         # the readers open through formats.limits (os.open)
        if os.fspath(path).endswith("locked.kinbody.xml"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(MissingFileError, match="locked.kinbody.xml.*Permission denied"):
        load(_write(tmp_path, INCLUDE, "locked.kinbody.xml"))


@pytest.mark.parametrize("ref", ["adir", "broken.xml"])
def test_a_mesh_that_is_a_directory_or_a_broken_link_is_a_warning(tmp_path, ref):
    robot = load(_write(tmp_path, XML_MESH, ref))
    assert any(f"mesh file {ref!r} not found" in w for w in robot.warnings)


def test_an_unreadable_mesh_is_typed_for_every_consumer(tmp_path, monkeypatch):
    (tmp_path / "m.stl").write_bytes(b"solid m\nendsolid m\n")
    robot = load(_write(tmp_path, XML_MESH, "m.stl"))
    real = os.open

    def refusing_open(path, *args, **kwargs):      # as a file without read permission (tests run as root)
        if Path(path).name == "m.stl":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(MissingFileError, match="cannot be read: Permission denied"):
        meshes.load_triangles(tmp_path / "m.stl")
    with pytest.raises(MissingFileError, match="directory"):
        meshes.load_triangles(tmp_path / "adir")
    scene = Scene(robot, backend="numpy")
    assert len(scene.warnings) == 1 and "Permission denied" in scene.warnings[0]


def test_the_top_level_path_too_long(tmp_path):
    with pytest.raises(DescriptionError, match="File name too long"):
        load(tmp_path / TOO_LONG)


# -- rotations written with few digits ------------------------------------------------------------------

C, S = "0.7071", "0.7071"          # cos/sin 45 deg with four digits: off orthonormal by ~7e-6


def test_collada_matrix_with_four_digits_is_orthonormalized_with_a_warning(tmp_path):
    text = DAE.read_text().replace(
        '<attachment_full joint="kmodel1/jointsid1">\n                <translate>0.2 0 0</translate>',
        f'<attachment_full joint="kmodel1/jointsid1">\n                <matrix>{C} -{S} 0 0.2 {S} {C} 0 0 '
        '0 0 1 0 0 0 0 1</matrix>', 1)
    assert "<matrix>" in text
    path = tmp_path / "catia_matrix.dae"
    path.write_text(text)
    robot = load(path)
    warning = [w for w in robot.warnings if "orthonormalized" in w]
    assert len(warning) == 1 and "joint 'dummy' origin" in warning[0]
    r = robot.joints["dummy"].origin[:3, :3]
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(r, tf.rotation_axis_angle([0, 0, 1], np.pi / 4), atol=1e-4)
    # TF (quaternion) and FK use the same rotation; the URDF's pinocchio FK equals ours (< 1e-9)
    pose = KinematicModel(robot).link_poses({})["link"]
    np.testing.assert_allclose(tf.from_quat_xyzw(tf.to_quat_xyzw(pose[:3, :3])), pose[:3, :3], atol=1e-15)
    assert_export_matches(robot, tmp_path)
    assert "orthonormalized" not in to_urdf(robot)[0]


def test_openrave_rotationmat_with_four_digits_warns(tmp_path):
    path = tmp_path / "o.robot.xml"
    path.write_text(f'<Robot name="o"><KinBody name="o"><Body name="a"/><Body name="b">'
                    f'<offsetfrom>a</offsetfrom><translation>0.1 0 0</translation>'
                    f'<rotationmat>{C} -{S} 0 {S} {C} 0 0 0 1</rotationmat></Body>'
                    '<Joint name="j" type="hinge"><Body>a</Body><Body>b</Body><offsetfrom>b</offsetfrom>'
                    '<axis>0 0 1</axis></Joint></KinBody></Robot>')
    robot = load(path)
    assert [w for w in robot.warnings if "orthonormalized" in w] == [
        "o.robot.xml:1 /Robot[@name='o']/KinBody[@name='o']/Body[@name='b']/rotationmat: rotationmat is not "
        "orthonormal (off by 6.8e-06); orthonormalized"]
    r = robot.joints["j"].origin[:3, :3]
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-15)
    assert_export_matches(robot, tmp_path)


def test_exact_rotations_are_left_alone_and_silent():
    robot = load(DAE)
    assert not [w for w in robot.warnings if "orthonormal" in w]
