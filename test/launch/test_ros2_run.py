"""`ros2 run robot_bridge <executable>` as docs/install.md shows it."""

from __future__ import annotations


import pytest

from fixtures.ros2_cli import (LATCHED, Ros2Process, echo_once, ros2,  # noqa: E402
                               stop_daemon, urdf_links)

from robot_bridge import bringup  # noqa: E402
from robot_bridge.formats import load  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def tools():
    from fixtures.ros2_cli import ros2_executable

    ros2_executable()                                      # skips the module with the reason when absent
    yield
    stop_daemon()


def test_ros2_run_description_node_serves_robot_description(tmp_path):
    robot = bringup.DATA_DIR / "lwa3_gripper.robot.xml"
    node = Ros2Process(["run", "robot_bridge", "description_node", "--ros-args", "-p",
                        f"description_file:={robot}"], tmp_path / "run.log")
    try:
        urdf = echo_once("/robot_description", "std_msgs/msg/String", "data", *LATCHED)
        assert urdf_links(urdf) == sorted(load(str(robot)).links)
        assert node.interrupt(timeout=30, group=True) == 0, node.log          # Ctrl-C
        assert "Traceback" not in node.log, node.log
    finally:
        node.close()


def test_ros2_run_robot_bridge_check_works_as_documented(tmp_path):
    robot = bringup.DATA_DIR / "lwa3_gripper.robot.xml"
    ok = ros2("run", "robot_bridge", "robot-bridge", "check", str(robot))
    model = load(str(robot))
    assert ok.stdout.strip().startswith(f"{robot}: ok ({len(model.links)} links, {len(model.joints)} joints")
    broken = tmp_path / "broken.robot.xml"
    broken.write_text('<Robot name="broken">\n  <KinBody>\n    <Body name="a">\n  </KinBody>\n</Robot>\n')
    bad = ros2("run", "robot_bridge", "robot-bridge", "check", str(broken), check=False)
    assert bad.returncode == 2, bad
    # README: one line `robot-bridge <verb>: error: <file>:<line> ...: <what was expected>`, status 2
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith(f"robot-bridge check: error: {broken}:4: ") and "KinBody" in line, line
