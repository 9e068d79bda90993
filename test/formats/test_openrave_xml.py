"""OpenRAVE XML reader: hand-derived poses for the seed's 3DOFRobot and one case per transform rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.errors import (IncludeCycleError, MissingFileError, SchemaError, UnknownReferenceError,
                                 UnsafeInputError)
from robot_bridge.formats import load
from robot_bridge.kinematics import forward_kinematics
from robot_bridge.model import Cylinder, Mesh, Sphere

D = math.pi / 180.0


def rz(deg):
    c, s = math.cos(deg * D), math.sin(deg * D)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def rx(deg):
    c, s = math.cos(deg * D), math.sin(deg * D)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def write(tmp_path, xml, name="t.robot.xml"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(xml)
    return path


def load_xml(tmp_path, xml, name="t.robot.xml", **kw):
    return load(write(tmp_path, xml, name), **kw)


def world(robot, positions=None):
    """Link poses in the file's world frame (placement @ root-relative pose)."""
    return {k: robot.placement @ v for k, v in forward_kinematics(robot, positions).items()}


# -- the seed's 3DOFRobot ---------------------------------------------------------------

@pytest.fixture
def tridof(fixtures):
    return load(fixtures / "openrave" / "3dofrobot.robot.xml")


def test_3dof_structure(tridof):
    assert list(tridof.links) == ["Base", "Arm0", "Arm1", "Arm2", "RClaw", "LClaw"]
    assert {n: (j.parent, j.child, j.type) for n, j in tridof.joints.items()} == {
        "Arm0": ("Base", "Arm0", "revolute"), "Arm1": ("Arm0", "Arm1", "revolute"),
        "Arm2": ("Arm1", "Arm2", "revolute"), "j1": ("Arm2", "RClaw", "revolute"),
        "j2": ("Arm2", "LClaw", "revolute")}
    arm0 = tridof.joints["Arm0"]
    assert arm0.circular == [True]                       # circular="true" with explicit limits
    assert arm0.lower[0] == pytest.approx(-math.pi) and arm0.upper[0] == pytest.approx(math.pi)
    assert arm0.weight[0] == 4 and arm0.velocity[0] == 3
    assert arm0.resolution[0] == pytest.approx(1 * D)    # <resolution> is in degrees for hinges
    j1 = tridof.joints["j1"]
    assert (j1.lower[0], j1.upper[0]) == pytest.approx((-56 * D, 16 * D))
    assert j1.circular == [False] and j1.resolution[0] == pytest.approx(3 * D)
    m = tridof.manipulators["arm"]
    assert (m.base, m.effector, m.gripper_joints) == ("Base", "Arm2", ["j1", "j2"])
    assert m.closing_directions == [1, 1]
    np.testing.assert_allclose(m.direction, [1, 0, 0])
    np.testing.assert_allclose(m.tool[:3, 3], [0.125, 0, 0])
    # geometry: the base cylinder carries rotationaxis 1 0 0 90 and the XML-y -> model-z turn
    base = tridof.links["Base"].collisions[0]
    assert isinstance(base.shape, Cylinder) and base.shape.radius == 0.03 and base.shape.length == 0.02
    np.testing.assert_allclose(base.origin[:3, :3], rx(90) @ rx(90), atol=1e-12)
    box = tridof.links["Arm0"].collisions[0]
    np.testing.assert_allclose(box.shape.half_extents, [0.08, 0.01, 0.005])
    np.testing.assert_allclose(box.origin[:3, 3], [0.08, 0, 0])
    claw = tridof.links["RClaw"].visuals[0].shape
    assert isinstance(claw, Mesh) and claw.uri == "models/puma/RClaw.iv" and claw.path is None
    assert any("RClaw.iv" in w for w in tridof.warnings)


def test_3dof_poses_at_zero(tridof):
    # Base at the origin; Arm0 = Base + (0,0,0.005); Arm1 = Arm0 + (0.14,0,0.01); Arm2 = Arm1 + (0.14,0,0.01);
    # RClaw = Arm2 + (0.08,0,0.005) turned -90 deg about z; LClaw = Arm2 + (0.08,0.005,0), also -90 deg.
    p = world(tridof)
    expect = {"Base": (0, 0, 0), "Arm0": (0, 0, 0.005), "Arm1": (0.14, 0, 0.015), "Arm2": (0.28, 0, 0.025),
              "RClaw": (0.36, 0, 0.03), "LClaw": (0.36, 0.005, 0.025)}
    for name, xyz in expect.items():
        np.testing.assert_allclose(p[name][:3, 3], xyz, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(p["RClaw"][:3, :3], rz(-90), atol=1e-12)
    np.testing.assert_allclose(p["LClaw"][:3, :3], rz(-90), atol=1e-12)


def test_3dof_poses_nonzero(tridof):
    # Arm0 = +90 deg about z through (0,0,0.005): Arm1's offset (0.14,0,0.01) turns to (0,0.14,0.01)
    # -> Arm1 at (0,0.14,0.015).  Arm1 = -90 deg cancels the turn:
    # Arm2 = Arm1 + (0.14,0,0.01) = (0.14,0.14,0.025),
    # orientation identity.  RClaw = Arm2 + (0.08,0,0.005) = (0.22,0.14,0.03), turned -90 deg then
    # j1 = 0.3 rad about its +z axis; LClaw = (0.22,0.145,0.025), turned -90 deg then 0.3 rad about its
    # -z axis (axis 0 0 -1).
    q = {"Arm0": math.pi / 2, "Arm1": -math.pi / 2, "Arm2": 0.0, "j1": 0.3, "j2": 0.3}
    p = world(tridof, q)
    np.testing.assert_allclose(p["Arm0"][:3, :3], rz(90), atol=1e-12)
    np.testing.assert_allclose(p["Arm1"][:3, 3], [0, 0.14, 0.015], atol=1e-12)
    np.testing.assert_allclose(p["Arm2"][:3, 3], [0.14, 0.14, 0.025], atol=1e-12)
    np.testing.assert_allclose(p["Arm2"][:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(p["RClaw"][:3, 3], [0.22, 0.14, 0.03], atol=1e-12)
    np.testing.assert_allclose(p["RClaw"][:3, :3], rz(-90 + 0.3 / D), atol=1e-12)
    np.testing.assert_allclose(p["LClaw"][:3, 3], [0.22, 0.145, 0.025], atol=1e-12)
    np.testing.assert_allclose(p["LClaw"][:3, :3], rz(-90 - 0.3 / D), atol=1e-12)


# -- transform rules ----------------------------------------------------------------------------

def body_pose(tmp_path, inner, name="b"):
    robot = load_xml(tmp_path, f'<KinBody name="k"><Body name="{name}">{inner}</Body></KinBody>',
                     "k.kinbody.xml")
    return robot.placement


def test_translations_sum_and_rotations_never_rotate_translation(tmp_path):
    # T = [R2 R1 | t1 + t2]: the rotation between the translations does not turn the second one
    t = body_pose(tmp_path, "<translation>1 0 0</translation><rotationaxis>0 0 1 90</rotationaxis>"
                            "<translation>0 2 0</translation><rotationaxis>1 0 0 90</rotationaxis>")
    np.testing.assert_allclose(t[:3, 3], [1, 2, 0])
    np.testing.assert_allclose(t[:3, :3], rx(90) @ rz(90), atol=1e-12)   # later rotation left-multiplied


def test_quat_is_wxyz(tmp_path):
    # w x y z = cos45, 0, 0, sin45 -> 90 deg about z
    t = body_pose(tmp_path, f"<quat>{math.cos(math.pi / 4)} 0 0 {math.sin(math.pi / 4)}</quat>")
    np.testing.assert_allclose(t[:3, :3], rz(90), atol=1e-12)


def test_rotationaxis_degrees_and_rotationmat_row_major(tmp_path):
    t = body_pose(tmp_path, "<RotationAxis>0 0 2 30</RotationAxis>")          # axis normalised, degrees
    np.testing.assert_allclose(t[:3, :3], rz(30), atol=1e-12)
    t = body_pose(tmp_path, "<rotationmat>0 -1 0 1 0 0 0 0 1</rotationmat>")  # rows of Rz(90)
    np.testing.assert_allclose(t[:3, :3], rz(90), atol=1e-12)


def test_offsetfrom_and_reopened_body(tmp_path):
    xml = """<KinBody name="k">
      <Body name="a"><translation>1 0 0</translation><rotationaxis>0 0 1 90</rotationaxis></Body>
      <Body name="b"><offsetfrom>a</offsetfrom><translation>1 0 0</translation></Body>
      <Body name="b"><translation>0 0 1</translation><translation>0 0 2</translation>
        <geom type="sphere"><radius>0.1</radius></geom></Body>
      <Joint name="j" type="hinge"><body>a</body><body>b</body><offsetfrom>b</offsetfrom></Joint>
    </KinBody>"""
    robot = load_xml(tmp_path, xml, "k.kinbody.xml")
    assert list(robot.links) == ["a", "b"]                  # re-declared body extends, no duplicate
    p = world(robot)
    # b = a (at (1,0,0), turned 90 deg) * (1,0,0) -> (1,1,0); re-opened: + (0,0,1) + (0,0,2) -> (1,1,3)
    np.testing.assert_allclose(p["b"][:3, 3], [1, 1, 3], atol=1e-12)
    np.testing.assert_allclose(p["b"][:3, :3], rz(90), atol=1e-12)
    assert isinstance(robot.links["b"].collisions[0].shape, Sphere)


def test_kinbody_transform_moves_all_links_created_inside(tmp_path):
    write(tmp_path, '<KinBody name="part"><Body name="p0"><translation>1 0 0</translation></Body>'
          '<Body name="p1"><translation>2 0 0</translation></Body></KinBody>', "part.kinbody.xml")
    xml = """<Robot name="r"><KinBody><Body name="base"/></KinBody>
      <KinBody file="part.kinbody.xml"><rotationaxis>0 0 1 90</rotationaxis><translation>0 0 5</translation>
      </KinBody></Robot>"""
    robot = load_xml(tmp_path, xml)
    p = world(robot)
    np.testing.assert_allclose(p["base"][:3, 3], [0, 0, 0])
    np.testing.assert_allclose(p["p0"][:3, 3], [0, 1, 5], atol=1e-12)    # Rz(90)*(1,0,0) + (0,0,5)
    np.testing.assert_allclose(p["p1"][:3, 3], [0, 2, 5], atol=1e-12)
    assert robot.joints["p0__fixed"].extras["generated"] and robot.joints["p0__fixed"].parent == "base"


def test_anchor_and_axis_in_offsetfrom_frame(tmp_path):
    xml = """<KinBody name="k">
      <Body name="a"/>
      <Body name="b"><translation>1 0 0</translation><rotationaxis>0 0 1 90</rotationaxis></Body>
      <Joint name="j" type="hinge"><body>a</body><body>b</body><offsetfrom>b</offsetfrom>
        <anchor>0 1 0</anchor><axis>1 0 0</axis></Joint></KinBody>"""
    robot = load_xml(tmp_path, xml, "k.kinbody.xml")
    j = robot.joints["j"]
    # in b's frame (turned 90 deg about z), anchor (0,1,0) is world (0,0,0)... i.e. (1,0,0)+(-1,0,0); the
    # axis x is world +y.  Joint frame: on that axis closest to b's origin (1,0,0) -> (0,0,0)+(0,y,0): (0,0,0)
    axis_world = j.origin[:3, :3] @ j.axes[0]
    np.testing.assert_allclose(axis_world, [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(j.origin[:3, 3], [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(j.child_offset[:3, 3], [0, -1, 0], atol=1e-12)   # b's origin, joint frame
    # rotating 90 deg about world y through the origin moves b from (1,0,0) to (0,0,-1)
    p = world(robot, {"j": math.pi / 2})
    np.testing.assert_allclose(p["b"][:3, 3], [0, 0, -1], atol=1e-12)


def test_joint_listed_child_first_is_flipped(tmp_path):
    xml = """<KinBody name="k"><Body name="root"/>
      <Body name="arm"><translation>1 0 0</translation></Body>
      <Joint name="j" type="hinge"><body>arm</body><body>root</body><axis>0 0 1</axis></Joint></KinBody>"""
    robot = load_xml(tmp_path, xml, "k.kinbody.xml")
    j = robot.joints["j"]
    assert (j.parent, j.child, j.extras.get("flipped")) == ("root", "arm", True)
    # upstream: root moves by +q relative to arm, i.e. arm turns by -q about z (through the default anchor,
    # the origin) relative to root: (1,0,0) -> (0,-1,0)
    p = world(robot, {"j": math.pi / 2})
    np.testing.assert_allclose(p["arm"][:3, 3], [0, -1, 0], atol=1e-12)
    np.testing.assert_allclose(p["arm"][:3, :3], rz(-90), atol=1e-12)


def test_limits_units_per_tag_and_type(tmp_path):
    xml = """<KinBody name="k"><Body name="a"/><Body name="b"/><Body name="c"/><Body name="d"/>
      <Body name="e"/>
      <Joint name="h" type="hinge"><body>a</body><body>b</body><limitsdeg>90 -45</limitsdeg>
        <maxveldeg>180</maxveldeg><resolution>2</resolution></Joint>
      <Joint name="s" type="slider"><body>a</body><body>c</body><limitsdeg>-0.5 0.25</limitsdeg>
        <resolution>0.01</resolution></Joint>
      <Joint name="r" type="hinge"><body>a</body><body>d</body><limitsrad>-4 2</limitsrad></Joint>
      <Joint name="dflt" type="slider"><body>a</body><body>e</body></Joint></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    h, s, rr, d = (r.joints[n] for n in ("h", "s", "r", "dflt"))
    assert (h.lower[0], h.upper[0]) == pytest.approx((-45 * D, 90 * D))    # degrees, sorted
    assert h.velocity[0] == pytest.approx(math.pi) and h.resolution[0] == pytest.approx(2 * D)
    assert s.type == "prismatic" and (s.lower[0], s.upper[0]) == (-0.5, 0.25)   # limitsdeg not scaled
    assert s.resolution[0] == 0.01
    assert (rr.lower[0], rr.upper[0]) == (-4, 2)
    assert rr.offset[0] == pytest.approx(-1)          # beyond +-pi: offset = midpoint
    assert (d.lower[0], d.upper[0]) == (-10, 10)                              # slider default limits
    assert h.offset[0] == 0


def test_default_limits_spherical_universal_continuous(tmp_path):
    xml = """<KinBody name="k"><Body name="a"/><Body name="b"/><Body name="c"/><Body name="d"/>
      <Joint name="ball" type="spherical"><body>a</body><body>b</body></Joint>
      <Joint name="u" type="universal"><body>a</body><body>c</body><axis1>1 0 0</axis1><axis2>0 1 0</axis2>
      </Joint>
      <Joint name="wheel" type="hinge" circular="true"><body>a</body><body>d</body></Joint></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    assert r.joints["ball"].type == "spherical" and r.joints["ball"].dof == 3
    np.testing.assert_allclose(r.joints["ball"].lower, [-100] * 3)
    assert r.joints["u"].dof == 2 and np.allclose(r.joints["u"].upper, [math.pi] * 2)
    assert r.joints["wheel"].type == "continuous" and r.joints["wheel"].circular == [True]


def test_passive_dummy_joint_is_fixed_and_passive_mimic_kept(tmp_path):
    xml = """<KinBody name="k"><Body name="a"/><Body name="b"/><Body name="c"/><Body name="d"/>
      <Joint name="dummy" type="hinge" enable="false"><body>a</body><body>b</body><limits>0 0</limits></Joint>
      <Joint name="drive" type="hinge"><body>a</body><body>d</body></Joint>
      <Joint name="m" type="hinge" enable="False" mimic_pos="drive*2" mimic_vel="|drive 2">
        <body>a</body><body>c</body></Joint></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    assert r.joints["dummy"].type == "fixed" and r.joints["dummy"].passive
    m = r.joints["m"]
    assert m.passive and m.type == "revolute" and m.mimic[0].position == "drive*2"
    assert m.mimic[0].velocity == {"drive": "2"}
    assert not m.is_active


def test_deprecated_mimic_and_lostop_histop(tmp_path):
    xml = """<KinBody name="k"><Body name="a"/><Body name="b"/><Body name="c"/>
      <Joint name="j" type="hinge"><body>a</body><body>b</body><lostop>-30</lostop><histop>60</histop>
        <axis>0 0 1</axis></Joint>
      <Joint name="m" type="hinge" mimic="j 2 0.5"><body>a</body><body>c</body></Joint></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    j = r.joints["j"]
    assert (j.lower[0], j.upper[0]) == pytest.approx((-30 * D, 60 * D))   # degrees
    np.testing.assert_allclose(j.origin[:3, :3] @ j.axes[0], [0, 0, -1])  # lostop/histop negate the axis
    m = r.joints["m"].mimic[0]
    assert m.position.replace(" ", "") == "j*2.0+0.5" and m.velocity == {"j": "2.0"}
    poses = forward_kinematics(r, {"j": 0.25})
    np.testing.assert_allclose(poses["c"][:3, :3], rz(1.0 / D), atol=1e-12)   # m = 2*0.25+0.5
    with pytest.raises(SchemaError, match="lostop"):
        load_xml(tmp_path, xml.replace("<histop>60</histop>", "<limits>0 1</limits>"), "k.kinbody.xml")


def test_geometry_conventions(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.stl").write_text("solid x\nendsolid x\n")
    xml = """<KinBody name="k"><Body name="a">
      <Geom type="box"><extents>1 2 3</extents><diffuseColor>1 0 0</diffuseColor>
        <transparency>0.25</transparency></Geom>
      <Geom type="cylinder"><radius>0.5</radius><height>2</height></Geom>
      <Geom type="trimesh"><data>models/m.stl 0.001</data><render>models/m.stl 2 3 4</render></Geom>
      <Geom type="box" render="false"><fullextents>2 2 2</fullextents></Geom>
      <mass type="custom"><total>3</total><com>0 0 1</com><inertia>1 0 0 0 2 0 0 0 3</inertia></mass>
    </Body></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    link = r.links["a"]
    box, cyl, mesh, full = (g.shape for g in link.collisions)
    np.testing.assert_allclose(box.half_extents, [1, 2, 3])
    np.testing.assert_allclose(box.size, [2, 4, 6])
    assert link.collisions[0].material.rgba == (1, 0, 0, 0.75)
    assert isinstance(cyl, Cylinder) and cyl.length == 2
    # model cylinders run along z; the XML one along local y: the geometry frame's z is +-y
    np.testing.assert_allclose(abs(link.collisions[1].origin[:3, :3] @ [0, 0, 1]), [0, 1, 0], atol=1e-12)
    assert mesh.path == str((tmp_path / "models" / "m.stl").resolve())
    np.testing.assert_allclose(mesh.scale, [0.001] * 3)
    np.testing.assert_allclose(link.visuals[2].shape.scale, [2, 3, 4])    # <render> is the visual
    np.testing.assert_allclose(full.half_extents, [1, 1, 1])
    assert not link.visuals[3].visible
    assert link.inertial.mass == 3
    np.testing.assert_allclose(link.inertial.origin[:3, 3], [0, 0, 1])
    np.testing.assert_allclose(np.diag(link.inertial.inertia), [1, 2, 3])


def test_mimicgeom_mass_from_density(tmp_path):
    xml = """<KinBody name="k"><Body name="a"><Geom type="box"><extents>0.5 0.5 0.5</extents>
      <translation>0 0 2</translation></Geom><mass type="mimicgeom"><density>10</density></mass></Body>
      </KinBody>"""
    link = load_xml(tmp_path, xml, "k.kinbody.xml").links["a"]
    assert link.inertial.mass == pytest.approx(10.0)              # 1 m^3 * 10 kg/m^3
    np.testing.assert_allclose(link.inertial.origin[:3, 3], [0, 0, 2])
    np.testing.assert_allclose(np.diag(link.inertial.inertia), [10 / 6] * 3)   # m(a^2+b^2)/12, a = b = 1


def test_prefix_robot_rewrites_mimic_kinbody_does_not(tmp_path):
    write(tmp_path, """<Robot name="hand"><KinBody><Body name="palm"/><Body name="f"/><Body name="g"/>
      <Joint name="jf" type="hinge"><body>palm</body><body>f</body></Joint>
      <Joint name="jg" type="hinge" enable="false" mimic_pos="jf" mimic_vel="|jf 1"><body>palm</body>
        <body>g</body></Joint></KinBody>
      <Manipulator name="m"><base>palm</base><effector>f</effector><joints>jf</joints></Manipulator>
      <AttachedSensor name="s"><link>f</link><sensor type="BaseCamera"><KK>1 1 0 0</KK></sensor>
      </AttachedSensor>
      </Robot>""", "hand.robot.xml")
    xml = """<Robot name="two"><KinBody><Body name="base"/></KinBody>
      <Robot prefix="l_" file="hand.robot.xml"/>
      <KinBody><Joint name="fix" type="hinge" enable="false"><body>base</body><body>l_palm</body>
        <limits>0 0</limits></Joint></KinBody></Robot>"""
    r = load_xml(tmp_path, xml)
    assert r.name == "two"
    assert {"l_palm", "l_f", "l_g"} <= set(r.links) and {"l_jf", "l_jg"} <= set(r.joints)
    mimic = r.joints["l_jg"].mimic[0]
    assert mimic.position == "l_jf" and mimic.velocity == {"l_jf": "1"}
    m = r.manipulators["l_m"]
    assert (m.base, m.effector, m.gripper_joints) == ("l_palm", "l_f", ["l_jf"])
    assert r.sensors["l_s"].link == "l_f"
    # a KinBody prefix renames links and joints but leaves the mimic equation alone (upstream behaviour)
    write(tmp_path, """<KinBody name="kb"><Body name="p"/><Body name="q"/><Body name="s"/>
      <Joint name="a" type="hinge"><body>p</body><body>q</body></Joint>
      <Joint name="b" type="hinge" mimic_pos="a"><body>p</body><body>s</body></Joint></KinBody>""",
          "kb.kinbody.xml")
    kb_robot = """<Robot name="x"><KinBody prefix="k_" file="kb.kinbody.xml"/>
      <KinBody prefix="j_" file="kb.kinbody.xml"/></Robot>"""
    path = write(tmp_path, kb_robot, "x.robot.xml")
    with pytest.raises(Exception, match="'a'"):
        load(path)         # "a" no longer exists: the unrewritten equation names an unknown joint


def test_include_lookup_order(tmp_path, monkeypatch):
    # the including file's folder wins over the search path, then search_path, then $OPENRAVE_DATA
    write(tmp_path, '<KinBody name="local"><Body name="here"/></KinBody>', "dir/part.kinbody.xml")
    write(tmp_path, '<KinBody name="data"><Body name="there"/></KinBody>', "data/part.kinbody.xml")
    write(tmp_path, '<KinBody name="env"><Body name="envlink"/></KinBody>', "envdata/sub/only.kinbody.xml")
    main = write(tmp_path, '<Robot name="r"><KinBody file="part.kinbody.xml"/></Robot>', "dir/r.robot.xml")
    assert "here" in load(main, search_path=[tmp_path / "data"]).links
    other = write(tmp_path, '<Robot name="r"><KinBody file="part.kinbody.xml"/></Robot>', "x/r.robot.xml")
    assert "there" in load(other, search_path=[tmp_path / "data"]).links
    monkeypatch.setenv("OPENRAVE_DATA", str(tmp_path / "envdata"))
    env_file = write(tmp_path, '<Robot name="r"><KinBody file="sub/only.kinbody.xml"/></Robot>',
                     "y/r.robot.xml")
    assert "envlink" in load(env_file).links
    missing = write(tmp_path, '<Robot name="r">\n<KinBody file="nope.kinbody.xml"/></Robot>', "z/r.robot.xml")
    with pytest.raises(MissingFileError, match="nope.kinbody.xml") as err:
        load(missing)
    assert err.value.line == 2


def test_jointvalues_set_initial_and_environment_bodies(tmp_path):
    write(tmp_path, """<Robot name="arm"><KinBody><Body name="b0"/><Body name="b1"/><Body name="b2"/>
      <Joint name="j1" type="hinge"><body>b0</body><body>b1</body></Joint>
      <Joint name="p" type="hinge" enable="false"><body>b1</body><body>b2</body><limits>0 0</limits></Joint>
      </KinBody></Robot>""", "arm.robot.xml")
    env = """<Environment><camtrans>1 2 3</camtrans><physicsengine type="ode"/>
      <KinBody name="floor"><translation>0 0 -1</translation><Body name="f" type="static">
        <Geom type="box"><extents>1 1 1</extents></Geom></Body></KinBody>
      <Robot file="arm.robot.xml"><translation>5 0 0</translation><jointvalues>0.7</jointvalues></Robot>
      </Environment>"""
    r = load_xml(tmp_path, env, "e.env.xml")
    assert r.name == "arm" and r.joints["j1"].initial[0] == 0.7
    np.testing.assert_allclose(r.placement[:3, 3], [5, 0, 0])
    floor = r.environment["floor"]
    assert not floor.is_robot and floor.links["f"].static
    np.testing.assert_allclose(floor.placement[:3, 3], [0, 0, -1])
    assert "camtrans" in r.extras and "physicsengine" in r.extras
    assert r.extras["viewer_camera"]["translation"] == [1, 2, 3]       # read: the viewer's camera, no warning
    assert not any("camtrans" in w for w in r.warnings)
    assert sum("physicsengine" in w for w in r.warnings) == 1


def test_sensor_params_and_sensor_file(tmp_path):
    write(tmp_path, '<sensor type="BaseCamera"><KK>600 610 320 240</KK><width>640</width><height>480</height>'
          '<framerate>5</framerate></sensor>', "cam.sensor.xml")
    xml = """<Robot name="r"><KinBody><Body name="b"/></KinBody>
      <AttachedSensor name="laser"><link>b</link><translation>0 0 1</translation>
        <sensor type="BaseLaser2D"><minangle>-90</minangle><maxangle>90</maxangle><resolution>0.5</resolution>
          <maxrange>4</maxrange><scantime>0.1</scantime></sensor></AttachedSensor>
      <AttachedSensor name="cam"><sensor file="cam.sensor.xml"/></AttachedSensor></Robot>"""
    r = load_xml(tmp_path, xml)
    laser = r.sensors["laser"]
    assert laser.type == "laser" and laser.interface == "BaseLaser2D"
    assert laser.params["angle_min"] == pytest.approx(-math.pi / 2)
    assert laser.params["angle_increment"] == pytest.approx(0.5 * D)
    assert laser.params["range_max"] == 4 and laser.params["scan_time"] == 0.1
    np.testing.assert_allclose(laser.origin[:3, 3], [0, 0, 1])
    cam = r.sensors["cam"]
    assert cam.type == "camera" and cam.link == "b"          # no <link>: the first link
    assert (cam.params["fx"], cam.params["fy"], cam.params["cx"], cam.params["width"]) == (600, 610, 320, 640)
    assert cam.params["frame_rate"] == 5
    alone = load(tmp_path / "cam.sensor.xml")
    assert alone.extras["sensor_definition"] and list(alone.sensors) == ["cam"]


def test_closed_loop_joint_kept_out_of_tree(tmp_path):
    xml = """<KinBody name="k"><Body name="a"/><Body name="b"/><Body name="c"/>
      <Joint name="ab" type="hinge"><body>a</body><body>b</body></Joint>
      <Joint name="bc" type="hinge"><body>b</body><body>c</body></Joint>
      <Joint name="ca" type="hinge" enable="false"><body>c</body><body>a</body></Joint></KinBody>"""
    r = load_xml(tmp_path, xml, "k.kinbody.xml")
    # breadth-first from the root "a": ab and ca (flipped) attach b and c, so bc closes the loop
    assert set(r.joints) == {"ab", "ca"} and set(r.extras["closed_loop_joints"]) == {"bc"}
    assert r.joints["ca"].extras["flipped"] and r.joints["ca"].parent == "a"
    assert any("bc" in w and "loop" in w for w in r.warnings)


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("inner, error, words", [
    ('<Body name="a"><translation>1 x 0</translation></Body>', SchemaError, "'x'"),
    ('<Body name="a"/><Body name="b"/><Joint name="j" type="screw"><body>a</body><body>b</body></Joint>',
     SchemaError, "screw"),
    ('<Body name="a"/><Joint name="j"><body>a</body><body>ghost</body></Joint>', UnknownReferenceError,
     "ghost"),
    ('<Body name="a"><offsetfrom>nowhere</offsetfrom></Body>', UnknownReferenceError, "nowhere"),
    ('<Body name="a"><Geom type="box"/></Body>', SchemaError, "extents"),
])
def test_bad_input_errors_name_file_line_and_element(tmp_path, inner, error, words):
    path = write(tmp_path, f'<KinBody name="k">\n{inner}\n</KinBody>', "bad.kinbody.xml")
    with pytest.raises(error, match=words) as err:
        load(path)
    assert err.value.file.endswith("bad.kinbody.xml") and err.value.line == 2 and err.value.element


def test_include_cycle_and_dtd_refused(tmp_path):
    write(tmp_path, '<Robot name="a"><Robot file="b.robot.xml"/></Robot>', "a.robot.xml")
    write(tmp_path, '<Robot name="b"><Robot file="a.robot.xml"/></Robot>', "b.robot.xml")
    with pytest.raises(IncludeCycleError):
        load(tmp_path / "a.robot.xml")
    evil = write(tmp_path, '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "y">]>'
                 '<KinBody name="k">&x;</KinBody>', "evil.kinbody.xml")
    with pytest.raises(UnsafeInputError):
        load(evil)


def test_urdf_named_robot_xml_is_not_claimed(tmp_path):
    from robot_bridge.formats import openrave_xml

    urdf = write(tmp_path, '<robot name="u"><link name="a"/></robot>', "robot.xml")
    assert not openrave_xml.claims(urdf)
    assert openrave_xml.claims(write(tmp_path, '<robot><kinbody file="x"/></robot>', "o.xml"))


# -- COLLADA includes -------------------------------------------------------------------------------

def test_collada_include_merged_with_xml_extension(tmp_path, monkeypatch):
    """A hand-built Robot stands in for collada.read: links placed by FK at zero, XML extends them."""
    from robot_bridge.formats.openrave import reader
    from robot_bridge.model import Joint, Link, Manipulator, Robot
    from robot_bridge.model import transform as tf

    def fake_read(path, search_path=None):
        r = Robot(name="zaearm")
        r.links = {"base": Link("base"), "tip": Link("tip", collisions=[])}
        r.joints = {"j": Joint("j", "revolute", "base", "tip", origin=tf.translation([0, 0, 1]),
                               axes=[np.array([1.0, 0, 0])], lower=[-1], upper=[1])}
        r.manipulators = {"m": Manipulator("m", base="base", effector="tip")}
        r.collision_ignore = [("base", "tip")]
        return r

    class FakeCollada:
        read = staticmethod(fake_read)

    monkeypatch.setattr(reader, "collada_reader", lambda ctx, el, path: FakeCollada)
    (tmp_path / "arm.zae").write_bytes(b"PK")
    xml = """<Robot name="combo"><Robot prefix="a_" file="arm.zae"/>
      <KinBody><Body name="tool"><offsetfrom>a_tip</offsetfrom><translation>0 0 0.5</translation></Body>
        <Joint name="fix" type="hinge" enable="false"><body>a_tip</body><body>tool</body><limits>0 0</limits>
        </Joint></KinBody></Robot>"""
    r = load_xml(tmp_path, xml)
    assert list(r.links) == ["a_base", "a_tip", "tool"]
    j = r.joints["a_j"]
    assert (j.parent, j.child, j.type) == ("a_base", "a_tip", "revolute")
    assert (j.lower[0], j.upper[0]) == (-1, 1)
    assert r.manipulators["a_m"].effector == "a_tip" and r.collision_ignore == [("a_base", "a_tip")]
    p = world(r, {"a_j": math.pi / 2})
    np.testing.assert_allclose(p["a_tip"][:3, 3], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(p["tool"][:3, 3], [0, -0.5, 1], atol=1e-12)  # (0,0,0.5) turned 90 deg about x


def test_imu_sensor_reads_covariances_and_rate(tmp_path):
    path = tmp_path / "imu.robot.xml"
    path.write_text("""<Robot name="r"><KinBody><Body name="b"/></KinBody>
      <AttachedSensor name="imu"><link>b</link><translation>0 0.05 0</translation>
        <sensor type="base_imu"><measurement_time>0.01</measurement_time>
          <rotation_covariance>1 0 0 0 2 0 0 0 3</rotation_covariance>
          <linear_acceleration_covariance>0.5 0 0 0 0.5 0 0 0 0.5</linear_acceleration_covariance>
        </sensor></AttachedSensor></Robot>""")
    sensor = load(path).sensors["imu"]
    assert sensor.type == "imu"
    assert sensor.params["orientation_covariance"] == [1, 0, 0, 0, 2, 0, 0, 0, 3]
    assert sensor.params["linear_acceleration_covariance"][0] == 0.5
    assert "angular_velocity_covariance" not in sensor.params
    assert sensor.params["rate"] == pytest.approx(100.0)


def test_unused_sensor_element_is_reported(tmp_path):
    path = tmp_path / "laser.robot.xml"
    path.write_text("""<Robot name="r"><KinBody><Body name="b"/></KinBody>
      <AttachedSensor name="scan"><link>b</link>
        <sensor type="BaseLaser2D"><maxrange>4</maxrange><mindistance>0.1</mindistance></sensor>
      </AttachedSensor></Robot>""")
    robot = load(path)
    assert robot.sensors["scan"].raw["mindistance"] == "0.1"
    assert "range_min" not in robot.sensors["scan"].params
    assert [w for w in robot.warnings if "<mindistance>" in w and "'scan'" in w]


def test_repeated_joint_names_are_an_error_naming_each_once(tmp_path):
    """Formulas and manipulators name joints: a repeated joint name would be ambiguous (one pass over the
    names finds the repeats, sorted)."""
    bodies = "".join(f'<Body name="b{i}"/>' for i in range(5))
    joints = "".join(f'<Joint name="{name}" type="hinge"><Body>b{i}</Body><Body>b{i + 1}</Body></Joint>'
                     for i, name in enumerate(("k", "j", "k", "j")))
    path = write(tmp_path, f'<Robot name="r"><KinBody name="r">{bodies}{joints}</KinBody></Robot>')
    with pytest.raises(SchemaError, match=r"duplicate joint names: j, k$"):
        load(path)
