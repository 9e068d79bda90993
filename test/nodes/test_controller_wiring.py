"""controller_node's default wiring from the SRDF (issue 43), on the real ControllerNode in-process with
example-robot-data's Panda and an SRDF written as hpp users write it (test/fixtures/srdf/panda_hpp.srdf:
example-robot-data's groups, its end effector naming the arm group, an hpp gripper frame without joints).

On main the end effector's group ``arm`` became a gripper (GripperCommand 0.5 turned panda_joint1 to 0.5 rad)
and the one trajectory controller drove every joint, the finger too (the planner's 7-joint trajectories
refused).  Now: the trajectory controller ``arm`` of the 7 arm joints at ~/follow_joint_trajectory, the
gripper of the finger at ~/gripper_cmd; a GripperCommand never moves panda_joint1."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("control_msgs.action")
from fixtures.hardware.controller import ABORTED, SUCCEEDED, Client  # noqa: E402
from fixtures.hardware.lwa_fixture import Harness  # noqa: E402

from robot_bridge.formats import load, srdf  # noqa: E402

PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]
FINGER = "panda_finger_joint1"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def hpp_panda(corpus):
    robot = load(corpus / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf")
    srdf.attach_semantics(robot, srdf.read_srdf(FIXTURES / "srdf" / "panda_hpp.srdf", robot))
    return robot


@pytest.mark.timeout(240)
def test_hpp_panda_arm_controller_and_finger_gripper_gripper_command_never_moves_the_arm(corpus):
    h = Harness(hpp_panda(corpus), state_rate=50.0)
    clients = []
    try:
        assert [(c.name, c.joints, c.prefix) for c in h.node.controllers] == [("arm", PANDA_ARM, "~/")]
        assert [(g.joint, g.prefix) for g in h.node.grippers] == [(FINGER, "~/")]
        arm = [h.node.joints.index(j) for j in PANDA_ARM]
        finger = h.node.joints.index(FINGER)
        before = h.latest_position()[arm]

        def command(position):
            clients.append(Client({"position": position, "max_effort": 0.0}, "/controller_node/gripper_cmd",
                                  "--gripper"))
            return clients[-1].result(timeout=60.0)
        # the user's command: 0.5 is no finger position (0 .. 0.04 m): refused, nothing moves
        refused = command(0.5)
        assert refused["status"] == ABORTED, refused
        opened = command(0.03)
        assert opened["status"] == SUCCEEDED and opened["reached_goal"], opened
        assert h.latest_position()[finger] == pytest.approx(0.03, abs=1e-3)
        for state in h.snapshot(h.joint_states):          # every sample: the arm where it was
            assert [state.position[i] for i in arm] == pytest.approx(list(before), abs=1e-9)
    finally:
        try:
            for c in clients:
                c.close()
        finally:
            h.close()


@pytest.mark.timeout(240)
def test_a_robot_given_without_its_srdf_is_wired_from_srdf_file(corpus):
    """robot-bridge run reads the robot file once and hands it to the controller without the SRDF: the
    controller attaches srdf_file itself.  On the old code the SRDF was ignored for a given robot: one
    controller of every joint, the finger too (the planner's 7-joint goals refused, "joints
    ['panda_finger_joint1'] missing"), and no GripperCommand; found by test/cli/test_robots_scenes.py."""
    robot = load(corpus / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf")
    h = Harness(robot, state_rate=50.0, srdf_file=str(FIXTURES / "srdf" / "panda_scenes.srdf"))
    try:
        assert [(c.name, c.joints, c.prefix) for c in h.node.controllers] == [("arm", PANDA_ARM, "~/")]
        assert [(g.joint, g.prefix) for g in h.node.grippers] == [(FINGER, "~/")]
        assert robot.semantics is None                 # the caller's robot is left as it was
    finally:
        h.close()
