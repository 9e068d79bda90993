"""Classes of real files beyond the corpus, each reproduced by a fixture of our own
(test/fixtures/realworld): they load with the documented warnings, export to a URDF check_urdf
accepts and whose pinocchio FK equals ours (test_corpus_urdf_export.assert_export_matches)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from robot_bridge.errors import KinematicsError, UnknownVariableError
from robot_bridge.formats import load
from robot_bridge.formats.srdf import semantics_from_model, to_srdf
from robot_bridge.formats.urdf import to_urdf
from robot_bridge.kinematics import KinematicModel

from fixtures.urdf_export import assert_export_matches  # noqa: E402

REALWORLD = Path(__file__).resolve().parents[1] / "fixtures" / "realworld"
DUMMIES = REALWORLD / "collada" / "openrave_dummies.dae"
CATIA = REALWORLD / "collada" / "catia_formulas.dae"
VRML_BOT = REALWORLD / "vrml" / "vrml_bot.robot.xml"


# -- duplicate names (OpenRAVE exporter's dummy joints, repeated link names) -------------------------

def test_openrave_dummy_joints_get_stable_unique_names():
    robot = load(DUMMIES)
    assert list(robot.joints) == ["shoulder", "dummy", "dummy_jointsid2", "dummy_jointsid3"]
    assert list(robot.links) == ["base", "arm", "link", "link_l3", "tip"]
    renames = [w for w in robot.warnings if w.startswith("duplicate")]
    assert renames == ["duplicate link name 'link' (line 70): renamed to 'link_l3'",
                       "duplicate joint name 'dummy' (line 51): renamed to 'dummy_jointsid2'",
                       "duplicate joint name 'dummy' (line 52): renamed to 'dummy_jointsid3'"]
    again = load(DUMMIES)                                      # deterministic across loads
    assert list(again.joints) == list(robot.joints) and again.warnings == robot.warnings
    # the tree: each renamed joint joins the links its sid's attachment_full joins
    chain = [(j.parent, j.child) for j in robot.joints.values()]
    assert chain == [("base", "arm"), ("arm", "link"), ("link", "link_l3"), ("link_l3", "tip")]
    assert [j.passive for j in robot.joints.values()] == [False, True, True, True]


def test_references_by_sid_follow_the_renamed_joints_and_links():
    robot = load(DUMMIES)
    j2, j3 = robot.joints["dummy_jointsid2"], robot.joints["dummy_jointsid3"]
    assert j2.mimic[0].position == "(0.05 * shoulder)"                 # formula targets by sid
    assert j3.mimic[0].position == "(40.0 * dummy_jointsid2)"           # ... and refers by sid
    assert robot.joints["dummy"].initial[0] == pytest.approx(math.radians(5))   # bind_joint_axis value
    manip = robot.manipulators["arm"]
    assert (manip.base, manip.effector, manip.gripper_joints) == ("base", "link_l3", ["dummy_jointsid3"])
    assert robot.collision_ignore == [("link", "tip")]
    # FK: shoulder 0.4 -> the prismatic dummy slides 0.02 m, the last one turns 0.8 rad
    values = KinematicModel(robot).joint_values({"shoulder": np.array([0.4])})
    assert values["dummy_jointsid2"][0] == pytest.approx(0.02)
    assert values["dummy_jointsid3"][0] == pytest.approx(0.8)
    poses = KinematicModel(robot).link_poses({"shoulder": np.array([0.4])})
    d1 = math.radians(5)                   # the passive dummy keeps its bound initial value (about y)
    r_z = np.array([[math.cos(0.4), -math.sin(0.4), 0], [math.sin(0.4), math.cos(0.4), 0], [0, 0, 1]])
    r_y = np.array([[math.cos(d1), 0, math.sin(d1)], [0, 1, 0], [-math.sin(d1), 0, math.cos(d1)]])
    tip = np.array([0, 0, 0.3]) + r_z @ (np.array([0.2, 0, 0]) + r_y @ np.array([0.1 + 0.02 + 0.1, 0, 0.05]))
    np.testing.assert_allclose(poses["tip"][:3, 3], tip, atol=1e-12)


def test_renamed_names_are_the_same_in_urdf_and_srdf(tmp_path):
    robot = load(DUMMIES)
    text = assert_export_matches(robot, tmp_path)
    urdf = etree.fromstring(text.encode())
    assert [j.get("name") for j in urdf.iter("joint")] == list(robot.joints)
    assert [link.get("name") for link in urdf.iter("link")] == list(robot.links)
    srdf = etree.fromstring(to_srdf(semantics_from_model(robot), robot.name).encode())
    pairs = {(d.get("link1"), d.get("link2")) for d in srdf.iter("disable_collisions")}
    assert ("link", "tip") in pairs
    tips = [c.get("tip_link") for c in srdf.iter("chain")]
    assert tips == ["link_l3"]


def test_urdf_duplicates_stay_errors(tmp_path):
    path = tmp_path / "dup.urdf"
    path.write_text('<robot name="d"><link name="a"/><link name="b"/><link name="c"/>'
                    '<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>'
                    '<joint name="j" type="fixed"><parent link="b"/><child link="c"/></joint></robot>')
    with pytest.raises(KinematicsError, match="duplicate joint .j."):
        load(path)


# -- formulas beyond fparser (CATIA) ----------------------------------------------------------------

def test_catia_formulas_inrange_sass_and_an_unknown_law():
    robot = load(CATIA)
    assert list(robot.joints) == ["Revolute.1", "Revolute.1_jB", "Prismatic.1", "Revolute.2"]
    assert "duplicate joint name 'Revolute.1' (line 41): renamed to 'Revolute.1_jB'" in robot.warnings
    law = [w for w in robot.warnings if w.startswith("joint 'Revolute.2'")]
    assert len(law) == 1
    assert "formula not compiled" in law[0] and "'LAW'" in law[0] and "catia_formulas.dae:90" in law[0]
    assert "the joint is independent" in law[0]
    d = robot.joints["Revolute.2"]
    assert not d.is_mimic and d.is_active
    kin = KinematicModel(robot)
    for a in (-1.0, -0.5, -0.2, 0.0, 0.3, 0.5, 0.7):
        v = kin.joint_values({"Revolute.1": np.array([a]), "Revolute.2": np.array([0.25])})
        inrange = 1.0 if -0.5 <= a <= 0.5 else 0.0
        assert v["Revolute.1_jB"][0] == pytest.approx(inrange * 0.5 * a, abs=1e-15)
        side = math.sqrt(300 ** 2 + 400 ** 2 - 2 * 300 * 400 * math.cos(a + 1.5))     # law of cosines
        assert v["Prismatic.1"][0] == pytest.approx((side - 500) * 0.001, abs=1e-15)
        assert v["Revolute.2"][0] == 0.25                                          # independent


def test_catia_export_matches_pinocchio(tmp_path):
    assert_export_matches(load(CATIA), tmp_path)


def test_fparser_text_with_an_unknown_function_makes_the_joint_independent(tmp_path):
    path = tmp_path / "law.robot.xml"
    path.write_text('<Robot name="law"><KinBody name="law">'
                    '<Body name="a"/><Body name="b"><offsetfrom>a</offsetfrom></Body>'
                    '<Body name="c"><offsetfrom>b</offsetfrom><translation>0.1 0 0</translation></Body>'
                    '<Joint name="j1" type="hinge"><Body>a</Body><Body>b</Body><axis>0 0 1</axis></Joint>'
                    '<Joint name="j2" type="hinge" mimic_pos="INRANGE(j1, 0, 1) + CATIALAW(j1)">'
                    '<Body>b</Body><Body>c</Body><axis>0 1 0</axis></Joint>'
                    '</KinBody></Robot>')
    robot = load(path)
    j2 = robot.joints["j2"]
    assert not j2.is_mimic and j2.is_active
    warning = next(w for w in robot.warnings if w.startswith("joint 'j2'"))
    assert "unknown function 'CATIALAW' at position 20" in warning and "independent" in warning
    assert_export_matches(robot, tmp_path)


def test_a_formula_naming_a_missing_joint_is_still_an_error(tmp_path):
    path = tmp_path / "missing.robot.xml"
    path.write_text('<Robot name="m"><KinBody name="m"><Body name="a"/><Body name="b"/>'
                    '<Joint name="j" type="hinge" mimic_pos="nosuchjoint*2"><Body>a</Body><Body>b</Body>'
                    '</Joint></KinBody></Robot>')
    with pytest.raises(UnknownVariableError, match="nosuchjoint"):
        load(path)


# -- VRML-only geometry -------------------------------------------------------------------------------

def test_vrml_robot_exports_with_converted_meshes(tmp_path):
    robot = load(VRML_BOT)
    assert robot.warnings == []
    text, report = to_urdf(robot, mesh_dir=tmp_path / "meshes")
    assert len(report.meshes_converted) == 2 and not report.not_expressible
    assert_export_matches(robot, tmp_path)


# -- sensor types of real OpenRAVE files ----------------------------------------------------------------

SENSOR_BOT = REALWORLD / "openrave" / "sensor_bot.robot.xml"


def test_forcesensor_and_flash_lidar_are_typed_and_export(tmp_path):
    robot = load(SENSOR_BOT)
    assert robot.warnings == ["sensor_bot.robot.xml: sensor 'flash' (BaseFlashLidar3D): <color> is not used "
                              "by robot_bridge (kept in sensor.raw)"]
    ft, flash = robot.sensors["ft"], robot.sensors["flash"]
    assert (ft.type, ft.interface, ft.link) == ("force6d", "forcesensor", "arm")
    assert (flash.type, flash.interface, flash.link) == ("flash_lidar", "BaseFlashLidar3D", "base")
    assert flash.params == {"range_max": 6.0, "scan_time": 0.1, "fx": 16.0, "fy": 12.0, "cx": 15.5,
                            "cy": 11.5, "width": 32, "height": 24}
    assert_export_matches(robot, tmp_path)


def test_an_unknown_function_in_a_partial_costs_only_the_partial(tmp_path):
    text = DUMMIES.read_text().replace(
        '<equation type="first_partial" target="kmodel1/shoulder"><math xmlns="http://www.w3.org/1998/Math/MathML">'
        '<cn>0.05</cn></math></equation>',
        '<equation type="first_partial" target="kmodel1/shoulder"><math xmlns="http://www.w3.org/1998/Math/MathML">'
        '<apply><csymbol encoding="text/xml" type="function">LAW</csymbol><cn>1</cn></apply>'
        '</math></equation>')
    assert "LAW" in text
    path = tmp_path / "partial.dae"
    path.write_text(text)
    robot = load(path)
    j2 = robot.joints["dummy_jointsid2"]
    assert j2.mimic[0].position == "(0.05 * shoulder)" and j2.mimic[0].velocity == {}
    warning = [w for w in robot.warnings if w.startswith("joint 'dummy_jointsid2'")]
    assert len(warning) == 1 and "first_partial equation not compiled" in warning[0] and "'LAW'" in warning[0]
