"""SRDF: MoveIt elements, hpp handles/grippers/contacts, checks against a model, writer, generation."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import SchemaError, UnsupportedFormatError
from robot_bridge.formats import load, srdf, urdf
from robot_bridge.model import Joint, Link, Manipulator, Robot
from robot_bridge.model import transform as tf

S2 = np.sqrt(0.5)


def test_every_corpus_srdf_parses(corpus):
    files = sorted(corpus.rglob("*.srdf")) + [corpus / "moveit_resources/pr2_description/srdf/robot.xml"]
    semantic = urdf_content = 0
    for path in files:
        try:
            srdf.read_srdf(path)
            semantic += 1
        except UnsupportedFormatError as exc:
            assert "URDF content" in str(exc)
            assert load(path).links                          # and formats.load reads it as URDF
            urdf_content += 1
    assert (semantic, urdf_content) == (61, 52)


def test_panda_values(corpus):
    s = srdf.read_srdf(corpus / "moveit_resources/panda_moveit_config/config/panda.srdf")
    assert s.robot_name == "panda"
    assert s.groups["panda_arm"].chains == [("panda_link0", "panda_link8")]
    assert s.groups["hand"].links == ["panda_hand", "panda_leftfinger", "panda_rightfinger"]
    assert s.groups["hand"].joints == ["panda_finger_joint1"]
    assert s.groups["panda_arm_hand"].subgroups == ["panda_arm", "hand"]
    assert [st.name for st in s.group_states] == ["ready", "extended", "transport", "open", "close"]
    assert s.state("ready").values["panda_joint4"] == [-2.356]
    assert s.end_effectors["hand"].parent_link == "panda_link8"
    assert s.end_effectors["hand"].parent_group == "panda_arm"
    vj = s.virtual_joints["virtual_joint"]
    assert (vj.type, vj.parent_frame, vj.child_link) == ("floating", "world", "panda_link0")
    assert s.passive_joints == []                   # its <passive_joint> sits inside a group: not top level
    assert len(s.collision_pairs) == 34
    first = s.collision_pairs[0]
    assert (first.link1, first.link2, first.reason, first.enabled) == ("panda_link0", "panda_link1",
                                                                       "Adjacent", False)
    assert any("<passive_joint>" in w for w in s.warnings)     # inside a group: srdfdom ignores it too


def test_checked_against_model_like_srdfdom(corpus):
    robot = urdf.read(corpus / "srdfdom/test/resources/pr2_desc.urdf")
    s = srdf.read_srdf(corpus / "srdfdom/test/resources/pr2_desc.3.srdf", robot)
    assert "world_joint" in s.joint_properties                  # a virtual joint is a known joint
    assert "made_up_joint" not in s.joint_properties
    assert any("made_up_joint" in w and "skipped" in w for w in s.warnings)
    assert s.state("home").values["world_joint"] == [0.4, 0.0, -1.0]
    assert s.groups["arms"].subgroups == ["left_arm", "right_arm"]


def test_handle_position_forms(corpus):
    expected_rot = tf.from_quat_wxyz([0, 0, S2, S2])
    text_form = srdf.read_srdf(corpus / "hpp-manipulation-urdf/tests/ressources/box.srdf").handles["handle2"]
    np.testing.assert_allclose(text_form.pose[:3, :3], expected_rot, atol=1e-15)    # legacy local_position
    wxyz = srdf.read_srdf(corpus / "hpp_tutorial/srdf/box.srdf").handles["handle2"]
    np.testing.assert_allclose(wxyz.pose[:3, :3], expected_rot, atol=1e-15)
    assert wxyz.clearance == 0.025
    cup = srdf.read_srdf(corpus / "hpp_tutorial/srdf/cup.srdf").handles["top"]     # ".7071", w < 0
    expected = tf.make(tf.from_quat_wxyz([-S2, 0, S2, 0]), [0, 0, -0.025])
    np.testing.assert_allclose(cup.pose, expected, atol=1e-15)
    rpy = srdf.read_srdf_string('<robot><handle name="h"><position xyz="1 2 3" rpy="0 0 1.5707963267948966"/>'
                                '<link name="l"/></handle></robot>').handles["h"]
    np.testing.assert_allclose(rpy.pose, tf.make(tf.from_rpy([0, 0, np.pi / 2]), [1, 2, 3]), atol=1e-15)
    xyzw = srdf.read_srdf_string('<robot><handle name="h"><position xyz="1 2 3" xyzw="0 0 1 0"/>'
                                 '<link name="l"/></handle></robot>').handles["h"]
    np.testing.assert_allclose(xyzw.pose[:3, :3], np.diag([-1.0, -1.0, 1.0]), atol=1e-15)
    # defaults: no clearance -> 0, mask all true, approaching direction x
    assert (xyzw.clearance, xyzw.mask) == (0.0, [True] * 6)
    np.testing.assert_array_equal(xyzw.approaching_direction, [1, 0, 0])


def test_masks_words_digits_and_after_link(corpus):
    placard = srdf.read_srdf(corpus / "hpp-environments/srdf/placard.srdf")
    assert placard.handles["low"].mask == [True] * 5 + [False]
    sphere = srdf.read_srdf(corpus / "hpp-environments/srdf/construction_set/sphere.srdf")
    assert all(len(h.mask) == 6 for h in sphere.handles.values())
    digits = srdf.read_srdf_string('<robot><handle name="h"><position>0 0 0 1 0 0 0</position>'
                                   '<link name="l"/><mask>1 1 1 0 0 0</mask></handle></robot>').handles["h"]
    assert digits.mask == [True, True, True, False, False, False]


def test_gripper(corpus):
    s = srdf.read_srdf(corpus / "example-robot-data/robots/ur_description/srdf/ur5_gripper.srdf")
    g = s.grippers["gripper"]
    assert (g.link, g.clearance) == ("tool0", 0.03)
    np.testing.assert_allclose(g.pose, tf.make(tf.from_quat_wxyz([0.5, -0.5, -0.5, -0.5]), [0, 0, 0.055]))
    cyl = srdf.read_srdf(corpus / "hpp-environments/srdf/construction_set/cylinder_08.srdf")   # an object
    np.testing.assert_allclose(cyl.grippers["magnet0"].pose[:3, :3], np.diag([-1.0, -1.0, 1.0]), atol=1e-15)


def test_contact_with_shapes(corpus, fixtures):
    c = srdf.read_srdf(corpus / "hpp_tutorial/srdf/cup.srdf").contacts["box_surface"]
    assert c.link == "base_link" and c.points.shape == (8, 3)
    np.testing.assert_array_equal(c.points[4], [0.01, -0.01, -0.05])         # "+0.01"
    assert c.shapes == [[3, 2, 6, 7]]
    table = srdf.read_srdf(corpus / "hpp_tutorial/srdf/table.srdf").contacts["pancake_table_table_top"]
    assert table.shapes == [[0, 2, 3, 1]] and table.points[1].tolist() == [0.8, -0.3, 0.0125]
    legacy = srdf.read_srdf(corpus / "hpp-environments/srdf/multicontact/ground.srdf")
    (contact,) = legacy.contacts.values()
    assert contact.shapes == [[0, 2, 1], [4, 5, 6]]
    assert any("<triangle> is deprecated" in w for w in legacy.warnings)
    fixture = srdf.read_srdf(fixtures / "srdf/custom_tag.srdf")
    assert fixture.contacts["c"].index == 1 and fixture.contacts["c"].shapes == [[0, 1, 2], [0, 2, 3]]


@pytest.mark.parametrize("body, words", [
    ('<handle name="h"><link name="l"/></handle>', "exactly one <position>"),
    ('<handle name="h"><position>0 0 0 1 0 0</position><link name="l"/></handle>', "expected 7 numbers"),
    ('<handle name="h"><position>0 0 0 0 0 0 0</position><link name="l"/></handle>', "zero quaternion"),
    ('<handle name="h"><position>0 0 0 1 0 0 0</position><link name="l"/><mask>1 1 yes 0 0 0</mask></handle>',
     "6 booleans"),
    ('<contact name="c"><link name="l"/><point>0 0 0 1 1 1</point><shape>3 0 1 2</shape></contact>',
     "point that does not exist"),
    ('<contact name="c"><link name="l"/><point>0 0 0 1 1</point></contact>', "multiple of 3"),
    ('<gripper name="g"><position>0 0 0 1 0 0 0</position></gripper>', "exactly one <link>"),
])
def test_bad_hpp_elements(body, words):
    with pytest.raises(SchemaError) as info:
        srdf.read_srdf_string(f"<robot name='r'>\n{body}\n</robot>", file="bad.srdf")
    assert words in str(info.value) and info.value.line == 2 and info.value.file == "bad.srdf"


def test_load_refuses_plain_srdf(corpus):
    with pytest.raises(UnsupportedFormatError, match="semantic only"):
        load(corpus / "moveit_resources/panda_moveit_config/config/panda.srdf")
    robot = load(corpus / "hpp-environments/srdf/multicontact/maze.srdf")
    assert any("URDF content" in w for w in robot.warnings)


# ------------------------------------------------------------------------------------------- extension
def test_custom_tag_extension(fixtures):
    seen = []

    def marker(element, ctx):
        link, _ = ctx.link(element, f"marker {element.get('name')!r}")
        seen.append(ctx.file)
        return {"name": element.get("name"), "link": link, "pose": ctx.position(element.find("position"))}

    def write_marker(value):
        from lxml import etree
        el = etree.Element("marker", name=value["name"])
        etree.SubElement(el, "link", name=value["link"])
        return el

    path = fixtures / "srdf/custom_tag.srdf"
    before = srdf.read_srdf(path)
    assert before.extras == {} and any("<marker>" in w for w in before.warnings)
    srdf.register_srdf_tag("marker", marker, write_marker)
    try:
        s = srdf.read_srdf(path)
        (m,) = s.extras["marker"]
        assert m["name"] == "m1" and m["link"] == "base_link" and seen == [str(path)]
        np.testing.assert_allclose(m["pose"], tf.make(tf.from_rpy([0, 0, np.pi / 2]), [0.1, 0.2, 0.3]))
        assert any("<specificities>" in w for w in s.warnings)
        assert not any("<marker>" in w for w in s.warnings)
        assert '<marker name="m1">' in srdf.to_srdf(s)
        with pytest.raises(ValueError, match="built in"):
            srdf.register_srdf_tag("handle", marker)
    finally:
        srdf.unregister_srdf_tag("marker")
    assert "marker" not in srdf.read_srdf(path).extras


# ------------------------------------------------------------------------------------------- writer
def test_writer_round_trip(corpus, fixtures):
    for path in [corpus / "srdfdom/test/resources/pr2_desc.3.srdf",
                 corpus / "moveit_resources/panda_moveit_config/config/panda.srdf",
                 corpus / "hpp_tutorial/srdf/cup.srdf", corpus / "hpp_tutorial/srdf/box.srdf",
                 corpus / "example-robot-data/robots/ur_description/srdf/ur5_gripper.srdf",
                 fixtures / "srdf/custom_tag.srdf"]:
        a = srdf.read_srdf(path)
        b = srdf.read_srdf_string(srdf.to_srdf(a))
        assert b.groups == a.groups and b.group_states == a.group_states, path
        assert b.end_effectors == a.end_effectors and b.virtual_joints == a.virtual_joints
        assert b.collision_pairs == a.collision_pairs and b.passive_joints == a.passive_joints
        assert b.joint_properties == a.joint_properties
        for kind in ("handles", "grippers"):
            for name, x in getattr(a, kind).items():
                y = getattr(b, kind)[name]
                assert (y.link, y.clearance) == (x.link, x.clearance)
                np.testing.assert_allclose(y.pose, x.pose, atol=1e-15)
        for name, x in a.contacts.items():
            y = b.contacts[name]
            assert (y.link, y.shapes, y.index) == (x.link, x.shapes, x.index)
            np.testing.assert_array_equal(y.points, x.points)


def test_generated_from_model():
    r = Robot("arm", links={n: Link(n) for n in ("base", "l1", "l2", "hand", "finger")})
    r.joints = {j.name: j for j in [
        Joint("j1", "revolute", "base", "l1", lower=[-1], upper=[1], initial=[0.25]),
        Joint("wrist", "universal", "l1", "l2", lower=-1, upper=1, initial=[0.1, 0.2]),
        Joint("fix", "fixed", "l2", "hand"),
        Joint("f", "prismatic", "hand", "finger", lower=[0], upper=[0.1]),
    ]}
    r.manipulators["arm"] = Manipulator("arm", "base", "hand", gripper_joints=["f"])
    r.collision_ignore = [("base", "l1"), ("base", "finger")]
    s = srdf.semantics_from_model(r)
    assert s.groups["arm"].chains == [("base", "hand")]
    assert s.groups["arm_gripper"].joints == ["f"]
    ee = s.end_effectors["arm_end_effector"]
    assert (ee.group, ee.parent_link, ee.parent_group) == ("arm_gripper", "hand", "arm")
    assert [(p.link1, p.link2, p.reason) for p in s.collision_pairs] == [("base", "l1", "Adjacent"),
                                                                          ("base", "finger", "Never")]
    assert s.state("initial").values == {"j1": [0.25], "wrist_axis0": [0.1], "wrist_axis1": [0.2], "f": [0.0]}
    # what it names exists in the exported URDF
    exported = urdf.read_string(urdf.to_urdf(r)[0])
    checked = srdf.read_srdf_string(srdf.to_srdf(s), exported)
    assert checked.warnings == [] and checked.state("initial").values == s.state("initial").values


def test_undefined_groups_are_reported_and_skipped(corpus):
    s = srdf.read_srdf(corpus / "moveit_resources/dual_arm_panda_moveit_config/config/panda.srdf")
    assert "left_hand" not in s.end_effectors
    assert any("group 'left_hand' is not defined" in w for w in s.warnings)
    s = srdf.read_srdf_string('<robot name="r"><group name="a"><group name="ghost"/></group>'
                              '<group_state name="s" group="nope"><joint name="j" value="1"/></group_state>'
                              '</robot>')
    assert s.groups["a"].subgroups == [] and s.group_states == []
    assert len(s.warnings) == 2


def test_attach_semantics(corpus):
    robot = urdf.read(corpus / "moveit_resources/panda_description/urdf/panda.urdf")
    semantics = srdf.read_srdf(corpus / "moveit_resources/panda_moveit_config/config/panda.srdf", robot)
    assert srdf.attach_semantics(robot, semantics) is robot and robot.semantics is semantics
    assert any(w.startswith("SRDF: ") and "<passive_joint>" in w for w in robot.warnings)
