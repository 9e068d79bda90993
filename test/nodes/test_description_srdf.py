"""description_node refuses an SRDF for another robot and keeps serving the previous semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")
import rclpy  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from robot_bridge.nodes.description import DescriptionNode  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"


def test_mismatched_srdf_is_refused_and_the_previous_semantics_kept(tmp_path):
    other = tmp_path / "other.srdf"
    other.write_text('<robot name="pr2"><group name="arm"><joint name="shoulder_pan"/><joint name="elbow"/>'
                     '</group><group_state name="home" group="arm"><joint name="elbow" value="0"/>'
                     '</group_state></robot>')
    context = rclpy.Context()
    context.init()
    node = DescriptionNode(context=context, parameter_overrides=[
        Parameter("description_file", value=str(DATA / "lwa3_gripper.robot.xml")),
        Parameter("srdf_file", value=str(DATA / "lwa3_gripper.srdf")),
        Parameter("search_path", value=[str(tmp_path)])])      # trusted at launch: other.srdf may be set
    try:
        before = node.model
        assert before is not None and "lwa3_gripper" in before.srdf
        result = node.set_parameters([Parameter("srdf_file", value=str(other))])[0]
        assert not result.successful
        assert "SRDF for robot 'pr2' does not match the model 'lwa3_gripper'" in result.reason
        assert "3 of 3 link/joint references are not in the model" in result.reason
        assert node.model is before and node.params.get("srdf_file") == str(DATA / "lwa3_gripper.srdf")
    finally:
        node.destroy_node()
        context.try_shutdown()
