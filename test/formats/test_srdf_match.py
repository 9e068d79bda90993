"""An SRDF for another robot is refused with one line of counts; a partial match gives one summary warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from robot_bridge.errors import SemanticMismatchError
from robot_bridge.formats import load, srdf

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"
FIXTURES = REPO / "test" / "fixtures"


def test_srdf_of_another_robot_is_refused_in_one_line_with_counts():
    robot = load(FIXTURES / "description" / "two_link.robot.xml")
    with pytest.raises(SemanticMismatchError) as err:
        srdf.read_srdf(DATA / "lwa3_gripper.srdf", robot)
    text = str(err.value)
    assert "\n" not in text
    assert "SRDF for robot 'lwa3_gripper' does not match the model 'two_link'" in text
    assert "28 of 28 link/joint references are not in the model" in text and "refused" in text


def test_partial_match_is_one_summary_warning(tmp_path):
    robot = load(DATA / "lwa3_gripper.robot.xml")
    text = (DATA / "lwa3_gripper.srdf").read_text()
    extra = ('<group name="ghost"><joint name="no_such_joint"/><joint name="other_ghost"/></group>'
             '<disable_collisions link1="ghost_link" link2="j1_link" reason="Never"/></robot>')
    path = tmp_path / "partial.srdf"
    path.write_text(text.replace("</robot>", extra))
    semantics = srdf.read_srdf(path, robot)
    mismatch = [w for w in semantics.warnings if "not in the model" in w]
    assert len(mismatch) == 1, semantics.warnings
    assert mismatch[0].startswith("3 of ") and "joint no_such_joint" in mismatch[0]
    assert "link ghost_link" in mismatch[0]


def test_renamed_robot_with_matching_names_is_accepted_with_one_warning(tmp_path):
    robot = load(DATA / "lwa3_gripper.robot.xml")
    path = tmp_path / "renamed.srdf"
    path.write_text((DATA / "lwa3_gripper.srdf").read_text().replace('name="lwa3_gripper"', 'name="arm"', 1))
    semantics = srdf.read_srdf(path, robot)
    assert [w for w in semantics.warnings if "the model is" in w] == [
        "SRDF is for robot 'arm', the model is 'lwa3_gripper' (every link/joint reference matches)"]
