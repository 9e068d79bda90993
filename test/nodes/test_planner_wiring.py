"""planner_node's use of the controller wiring (issue 43), its methods on a stand-in for the node (no ROS
graph): the FollowJointTrajectory action of the controller covering the planned joints, as MoveIt's
controller manager picks; an hpp gripper without joints (as hpp files write it) is a frame whose fingers
are the gripper's on its link's body, else none (no gripper command) -- main refused it (-15 "drives no
joint")."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("moveit_msgs.action")
from control_msgs.action import FollowJointTrajectory  # noqa: E402

from robot_bridge.control.groups import wiring  # noqa: E402
from robot_bridge.formats import load, srdf  # noqa: E402
from robot_bridge.model.groups import driven_joints  # noqa: E402
from robot_bridge.nodes.planner import GoalFailed, PlannerNode  # noqa: E402

TEST = Path(__file__).resolve().parents[1]
PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]


def stand_in(robot):
    """What the two methods read of the node: its planner model, parameters, wiring and clients."""
    driven = driven_joints(robot)
    limits = {j: (robot.joints[j].lower[0], robot.joints[j].upper[0]) for j in driven}
    planner = SimpleNamespace(robot=robot, semantics=robot.semantics, joint_names=driven,
                              lower=np.array([limits[j][0] for j in driven]),
                              upper=np.array([limits[j][1] for j in driven]))
    made = []
    params = {"trajectory_action": "controller_node/follow_joint_trajectory",
              "gripper_action": "controller_node/gripper_cmd"}
    node = SimpleNamespace(model=SimpleNamespace(planner=planner), made=made,
                           params=SimpleNamespace(get=params.get),
                           _wiring=lambda: wiring(robot, driven),
                           _client=lambda kind, name: made.append((kind, name)) or name)
    return node


def hpp_panda(corpus):
    robot = load(corpus / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf")
    srdf.attach_semantics(robot, srdf.read_srdf(TEST / "fixtures" / "srdf" / "panda_hpp.srdf", robot))
    return robot


def test_gripper_frame_without_joints_takes_the_fingers_of_its_body(corpus):
    robot = hpp_panda(corpus)
    node = stand_in(robot)
    gripper = robot.semantics.grippers["panda_gripper"]
    assert gripper.joints == []
    joint, opened, closed = PlannerNode._gripper_positions(node, gripper)
    assert (joint, opened, closed) == ("panda_finger_joint1", pytest.approx(0.04), pytest.approx(0.0))
    assert PlannerNode._gripper_client(node, joint) == "controller_node/gripper_cmd"


def test_gripper_frame_without_fingers_grasps_without_a_gripper_command(corpus):
    robot = hpp_panda(corpus)
    del robot.semantics.groups["hand"]                   # no group gives the hand's fingers
    robot.semantics.groups["arm_and_hand"].subgroups = ["arm"]
    node = stand_in(robot)
    joint, opened, closed = PlannerNode._gripper_positions(node, robot.semantics.grippers["panda_gripper"])
    assert joint == "" and math.isnan(opened) and math.isnan(closed)


def test_trajectory_goes_to_the_controller_covering_its_joints(corpus):
    robot = hpp_panda(corpus)
    node = stand_in(robot)
    assert PlannerNode._trajectory_client(node, PANDA_ARM) == "controller_node/follow_joint_trajectory"
    sem = robot.semantics                                # two groups: each its own controller
    sem.groups["arm"].joints = PANDA_ARM[:4]
    sem.groups["wrist"] = type(sem.groups["arm"])("wrist", joints=PANDA_ARM[4:])
    node = stand_in(robot)
    assert PlannerNode._trajectory_client(node, PANDA_ARM[4:]) == \
        "controller_node/wrist/follow_joint_trajectory"
    assert PlannerNode._trajectory_client(node, PANDA_ARM[:2]) == \
        "controller_node/arm/follow_joint_trajectory"
    assert {k for k, _ in node.made} == {FollowJointTrajectory}
    with pytest.raises(GoalFailed, match="no controller drives all of"):
        PlannerNode._trajectory_client(node, PANDA_ARM)
