"""planner_node's placement of the robot (issue 43): description_file's placement, else robot_pose, else
the origin -- the one rule of robot_bridge.model.placement, read where the node reads its robot file."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("moveit_msgs.msg")

from robot_bridge.nodes.planner import PlannerNode  # noqa: E402

TWO_LINK = "description/two_link.robot.xml"
PLACED = np.array([[0.0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0.1], [0, 0, 0, 1]])


def _node(**params):
    values = {"description_file": "", "robot_pose": [], "environment": True, **params}
    return SimpleNamespace(params=SimpleNamespace(get=values.get),
                           get_logger=lambda: SimpleNamespace(error=lambda text: None))


def test_placement_from_robot_pose_or_the_origin(fixtures):
    urdf_like = str(fixtures / TWO_LINK)
    for params, expected in (({}, np.eye(4)), ({"description_file": urdf_like}, np.eye(4)),
                             ({"robot_pose": [0, 0, 0.1, 0, 0, math.pi / 2]}, PLACED),
                             ({"description_file": urdf_like, "robot_pose": [0, 0, 0.1, 0, 0, math.pi / 2]},
                              PLACED)):
        placement = PlannerNode._robot_file(_node(**params), [])[2]
        np.testing.assert_allclose(placement, expected, atol=1e-12, err_msg=str(params))


def test_placement_from_the_environment_file_and_a_second_answer_refused(fixtures, tmp_path):
    env = tmp_path / "placed.env.xml"
    env.write_text(f"<Environment><Robot file='{fixtures / TWO_LINK}'><translation>0 0 0.1</translation>"
                   "<rotationaxis>0 0 1 90</rotationaxis></Robot></Environment>", encoding="utf-8")
    placement = PlannerNode._robot_file(_node(description_file=str(env)), [str(fixtures / "description")])[2]
    np.testing.assert_allclose(placement, PLACED, atol=1e-9)
    with pytest.raises(ValueError, match="places it already"):
        PlannerNode._robot_file(_node(description_file=str(env), robot_pose=[0, 0, 0, 0, 0, 1]),
                                [str(fixtures / "description")])
