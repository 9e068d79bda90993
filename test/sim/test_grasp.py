"""sim.grasp: where closing fingers meet a body, and which body (the controller attaches that one at
world_node).  The embedded arm's parallel gripper (finger_joint 0 closed .. 0.04 open; the left pad's inner
face at 0.012 + q from the gripper's middle) closes on a 6 cm wide box between the pads."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.bringup import DEFAULT_ROBOT
from robot_bridge.formats import load
from robot_bridge.kinematics.fk import KinematicModel
from robot_bridge.model import Box, Geometry, Link, Robot
from robot_bridge.sim.grasp import contact, contact_position
from robot_bridge.sim.scene import Scene


def robot_with_box() -> Robot:
    robot = load(DEFAULT_ROBOT)
    at = np.eye(4)
    at[:3, 3] = [0.0, 0.0, 0.07]
    box = Robot("grasp_box")
    box.links["grasp_box"] = Link("grasp_box", collisions=[Geometry(Box(np.array([0.01, 0.03, 0.01])))])
    box.placement = robot.placement @ KinematicModel(robot).link_poses({})["gripper_base"] @ at
    robot.environment["grasp_box"] = box
    return robot


def test_closing_fingers_meet_the_box_and_name_it():
    robot = robot_with_box()
    scene = Scene(robot, backend="numpy")
    positions = {j: 0.0 for j in robot.joints} | {"finger_joint": 0.04}
    found = contact(scene, positions, "finger_joint", 0.0)
    assert found is not None
    position, body = found
    assert body == "grasp_box"
    assert position == pytest.approx(0.03 - 0.012, abs=2e-4)
    assert contact_position(scene, positions, "finger_joint", 0.0) == position
    # opening: the way is free
    assert contact(scene, dict(positions, finger_joint=0.02), "finger_joint", 0.04) is None
