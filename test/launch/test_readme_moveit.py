"""Every command of the README's "Drive it from MoveIt" section, run as written (from the repository root, the
output folder moved into the test's tmp dir) against the bridge it starts: the config is written, the
controller node serves what it names, and both goals succeed on the actions the config names."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.ros2_cli import Ros2Process, ros2, ros2_env, stop_daemon

REPO = Path(__file__).resolve().parents[2]


def moveit_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Drive it from MoveIt\n"):]
    section = section[:section.index("\n### ", 1)]
    return [line.strip() for line in section.splitlines() if line.startswith("    ") and line.strip()]


@pytest.fixture(scope="module", autouse=True)
def tools():
    from fixtures.ros2_cli import ros2_executable

    ros2_executable()                                      # skips the module with the reason when absent
    yield
    stop_daemon()


@pytest.mark.timeout(300)
def test_readme_moveit_commands_run_against_the_bridge(tmp_path):
    commands = moveit_commands()
    assert [c.split()[:2] for c in commands] == [["robot-bridge", "moveit-config"], ["ros2", "run"],
                                                ["ros2", "action"], ["ros2", "action"]]
    out = tmp_path / "my_moveit_config"
    argv = [shlex.split(c.replace("my_moveit_config", str(out))) for c in commands]

    # 1. the config, with the venv's console script
    config = subprocess.run([str(Path(sys.executable).parent / argv[0][0]), *argv[0][1:]], cwd=REPO,
                            env=ros2_env(), capture_output=True, text=True, timeout=120)
    assert config.returncode == 0, config.stderr
    manager = yaml.safe_load((out / "moveit_controllers.yaml").read_text())
    manager = manager["moveit_simple_controller_manager"]
    actions = {f"/{name}/{manager[name]['action_ns']}": manager[name] for name in manager["controller_names"]}
    for name, entry in manager.items():
        if name != "controller_names":
            assert f"controller {name}: {entry['type']} on /{name}/{entry['action_ns']}" in config.stdout

    # 2. the controller node with the written parameters
    node = Ros2Process(argv[1][1:], tmp_path / "controller.log", cwd=REPO)
    try:
        # 3., 4. the goals, on the actions the config names, with its joints
        for goal in argv[2:]:
            action, kind = goal[3], goal[4]
            assert action in actions, (action, list(actions))
            assert kind == f"control_msgs/action/{actions[action]['type']}"
            if actions[action]["type"] == "FollowJointTrajectory":
                names = re.search(r"joint_names: \[([^\]]*)\]", goal[5]).group(1)
                assert [n.strip() for n in names.split(",")] == actions[action]["joints"]
            result = ros2(*goal[1:], timeout=180)
            assert "Goal accepted" in result.stdout, result.stdout
            assert "Goal finished with status: SUCCEEDED" in result.stdout, result.stdout
        assert node.interrupt(timeout=30, group=True) == 0, node.log
        assert "Traceback" not in node.log, node.log
    finally:
        node.close()
