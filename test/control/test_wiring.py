"""The controller wiring derived from the description (issue 43): one trajectory controller per planning
group of the SRDF (its joints only), one gripper per end effector whose fingers are below its parent link,
never a joint of the chain above it; the real Panda and UR5 of example-robot-data with SRDFs written as
MoveIt and hpp users write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_bridge.control.groups import (action_name, controller_groups, gripper_action, gripper_specs,
                                         wiring)
from robot_bridge.formats import load, srdf
from robot_bridge.model.groups import driven_joints

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "srdf"
ROBOTS = ("example-robot-data", "robots")
PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]
UR5_ARM = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
           "wrist_3_joint"]


def panda(corpus, srdf_path=FIXTURES / "panda_hpp.srdf"):
    robot = load(corpus.joinpath(*ROBOTS, "panda_description", "urdf", "panda.urdf"))
    if srdf_path is not None:
        srdf.attach_semantics(robot, srdf.read_srdf(srdf_path, robot))
    return robot


def test_panda_hpp_srdf_arm_controller_of_the_arm_joints_and_a_gripper_of_the_fingers(corpus):
    """main: the end effector's group ``arm`` became a gripper (its GripperCommand moved panda_joint1) and the
    one controller drove every joint, the finger too (the planner's 7-joint trajectories refused)."""
    robot = panda(corpus)
    driven = driven_joints(robot)
    assert driven == PANDA_ARM + ["panda_finger_joint1"]          # finger_joint2 mimics it
    # the default controllers (controller_node's `controllers` empty), as on main's interface
    assert controller_groups(robot, driven, []) == [("arm", PANDA_ARM)]
    specs, notes = gripper_specs(robot, driven)
    assert [(s.group, s.joints) for s in specs] == [("hand", ["panda_finger_joint1"])]
    wired = wiring(robot, driven)
    assert [(w.name, w.joints, w.prefix) for w in wired.controllers] == [("arm", PANDA_ARM, "")]
    assert wired.grippers == specs
    # the end effector naming the arm is refused as a gripper, with the reason
    [refusal] = [n for n in notes if "refused as a gripper" in n]
    assert "end effector 'end_effector' (group 'arm', parent link 'panda_hand_tcp')" in refusal
    assert "panda_joint1" in refusal and "chain above 'panda_hand_tcp'" in refusal
    # the planner's choice: the arm controller for an arm trajectory, none for arm + finger
    assert wired.controller_for(PANDA_ARM[:3]).name == "arm"
    assert wired.controller_for(PANDA_ARM + ["panda_finger_joint1"]) is None
    # the hpp gripper frame on panda_hand_tcp (no joint) finds the fingers of the hand's body
    gripper = robot.semantics.grippers["panda_gripper"]
    assert gripper.joints == [] and gripper.link == "panda_hand_tcp"
    assert wired.gripper_for(gripper.link, robot).joints == ["panda_finger_joint1"]


def test_end_effector_of_the_fingers_group_gives_the_gripper(corpus):
    """moveit_resources' Panda: end effector ``hand`` on panda_link8 (a link above the hand, fingers below
    it): GripperCommand on the finger; the arm chain its controller."""
    robot = load(corpus / "moveit_resources" / "panda_description" / "urdf" / "panda.urdf")
    srdf.attach_semantics(robot, srdf.read_srdf(
        corpus / "moveit_resources" / "panda_moveit_config" / "config" / "panda.srdf", robot))
    wired = wiring(robot, driven_joints(robot))
    assert [(w.name, w.joints) for w in wired.controllers] == [("panda_arm", PANDA_ARM)]
    assert [(s.group, s.joints, s.link) for s in wired.grippers] == [
        ("hand", ["panda_finger_joint1"], "panda_link8")]
    assert not [n for n in wired.notes if "refused" in n]


def test_end_effector_holding_one_chain_joint_is_refused_and_the_rest_keeps_working(corpus):
    """A hand group that also names panda_joint7 (above the tool frame): refused as a gripper with the
    reason; the arm keeps its controller."""
    robot = panda(corpus)
    sem = robot.semantics
    sem.groups["hand"].joints.append("panda_joint7")
    sem.end_effectors["end_effector"].group = "hand"
    wired = wiring(robot, driven_joints(robot))
    assert [n for n in wired.notes if "refused as a gripper" in n and "panda_joint7" in n]
    assert "hand" not in {s.group for s in wired.grippers}
    assert [(w.name, w.joints) for w in wired.controllers] == [("arm", PANDA_ARM)]


def test_ur5_with_a_gripperless_srdf_one_arm_controller_no_gripper(corpus, tmp_path):
    robot = load(corpus.joinpath(*ROBOTS, "ur_description", "urdf", "ur5_robot.urdf"))
    path = tmp_path / "ur5.srdf"
    path.write_text('<robot name="ur5"><group name="manipulator"><chain base_link="base_link" '
                    'tip_link="tool0"/></group><group_state name="up" group="manipulator">'
                    '<joint name="shoulder_lift_joint" value="-1.57"/></group_state></robot>')
    srdf.attach_semantics(robot, srdf.read_srdf(path, robot))
    wired = wiring(robot, driven_joints(robot))
    assert [(w.name, w.joints, w.prefix) for w in wired.controllers] == [("manipulator", UR5_ARM, "")]
    assert wired.grippers == []


def test_two_groups_each_their_own_controller_and_action(corpus):
    """Two planning groups: each served under its name; the planner's action for each from the default."""
    robot = panda(corpus)
    sem = robot.semantics
    sem.groups["arm"].joints = PANDA_ARM[:4]
    sem.groups["wrist"] = type(sem.groups["arm"])("wrist", joints=PANDA_ARM[4:])
    wired = wiring(robot, driven_joints(robot))
    assert [(w.name, w.joints, w.prefix) for w in wired.controllers] == [
        ("arm", PANDA_ARM[:4], "arm/"), ("wrist", PANDA_ARM[4:], "wrist/")]
    base = "controller_node/follow_joint_trajectory"
    assert [action_name(base, w) for w in wired.controllers] == [
        "controller_node/arm/follow_joint_trajectory", "controller_node/wrist/follow_joint_trajectory"]
    assert gripper_action("controller_node/gripper_cmd", wired.grippers, "panda_finger_joint1") == \
        "controller_node/gripper_cmd"


def test_without_srdf_the_model_declares_the_controllers(corpus, openrave_data):
    """No SRDF: a plain URDF is one controller of every driven joint; OpenRAVE manipulators each theirs."""
    robot = panda(corpus, None)
    wired = wiring(robot, driven_joints(robot))
    assert [(w.name, w.joints) for w in wired.controllers] == [("", driven_joints(robot))]
    dual = load(openrave_data / "robots" / "barrettwam-dual.robot.xml", search_path=[openrave_data])
    wired = wiring(dual, driven_joints(dual))
    assert [w.name for w in wired.controllers] == ["l_arm", "r_arm"]
    assert [s.joint for s in wired.grippers] == ["l_JF1", "r_JF1"]
    assert not set(wired.controllers[0].joints) & {j for s in wired.grippers for j in s.joints}


def test_hpp_handle_approaching_direction_read_and_used_by_the_pregrasp(corpus):
    """hpp writes approaching_direction as the handle's attribute (hpp-manipulation-urdf doc/handle.xml,
    default 1 0 0): main read only an element of that name and dropped the attribute without a word."""
    from robot_bridge.model import Gripper
    from robot_bridge.planning.grasp import grasp_pose, pregrasp_pose

    box = load(corpus / "hpp_tutorial" / "urdf" / "box.urdf")
    sem = srdf.read_srdf(FIXTURES / "box_hpp.srdf", box)
    assert sem.warnings == []
    top, side = sem.handles["top"], sem.handles["side"]
    np.testing.assert_allclose(top.approaching_direction, [0, 0, -1])
    np.testing.assert_allclose(side.approaching_direction, [1, 0, 0])          # hpp's default
    gripper = Gripper("g", "tool", clearance=0.02)
    at = np.eye(4)
    at[:3, 3] = [0.5, 0.0, 0.3]
    pre, grasp = pregrasp_pose(top, gripper, at), grasp_pose(top, at)
    # the gripper comes down onto the top: the pre-grasp is above by both clearances
    np.testing.assert_allclose(pre[:3, 3] - grasp[:3, 3], [0, 0, 0.03 + 0.02], atol=1e-12)
    # written back as hpp reads it
    again = srdf.read_srdf_string(srdf.to_srdf(sem), box)
    np.testing.assert_allclose(again.handles["top"].approaching_direction, [0, 0, -1])
    assert 'approaching_direction="0.0 0.0 -1.0"' in srdf.to_srdf(sem)


def test_hpp_gripper_without_joints_is_a_frame_and_unread_attributes_are_reported_once(corpus):
    robot = panda(corpus)
    gripper = robot.semantics.grippers["panda_gripper"]
    assert gripper.joints == [] and gripper.clearance == pytest.approx(0.02)
    text = """<robot name="box">
      <handle name="a" clearance="0.01" approaching_direction="0 1 0" colour="red">
        <position xyz="0 0 0"/><link name="base_link"/><mask_complement>0 0 0 0 0 1</mask_complement>
      </handle>
      <handle name="b" clearance="0.01" colour="blue"><position xyz="0 0 0"/><link name="base_link"/></handle>
    </robot>"""
    sem = srdf.read_srdf_string(text, load(corpus / "hpp_tutorial" / "urdf" / "box.urdf"))
    np.testing.assert_allclose(sem.handles["a"].approaching_direction, [0, 1, 0])
    assert len([w for w in sem.warnings if "'colour' is not used" in w]) == 1         # once, not per handle
    assert len([w for w in sem.warnings if "<mask_complement> is not used" in w]) == 1
