"""The real ROS 2 install path: `colcon build --packages-select robot_bridge` of a copy of the repo in a
workspace, `source install/setup.bash`, `ros2 launch robot_bridge bridge.launch.py`: the three nodes come up
from the install space and stop on SIGINT.  Keeps setup.py's data_files, script dir and package.xml true for
colcon users.  Here the venv plays the ROS 2 install (its ros2 and its AMENT_PREFIX_PATH are the underlay)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.ros2_cli import (BASE_NODES, Ros2Process, assert_stopped_cleanly, ros2_env,  # noqa: E402
                               ros2_executable, stop_daemon)

REPO = Path(__file__).resolve().parents[2]
NOT_COPIED = shutil.ignore_patterns(".venv", ".venv-*", ".git", "build", "install", "log", "__pycache__",
                                    "*.egg-info", ".pytest_cache", ".ruff_cache", ".hypothesis", "demo_out")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A colcon workspace with a copy of the repo, built."""
    ros2_executable()                                      # skips with the reason when the tools are absent
    colcon = shutil.which("colcon", path=os.pathsep.join([str(Path(sys.prefix) / "bin"), os.environ["PATH"]]))
    if not colcon:
        pytest.skip("colcon is not installed (make setup installs colcon-common-extensions, a test extra)")
    ws = tmp_path_factory.mktemp("colcon_ws")
    shutil.copytree(REPO, ws / "src" / "robot_bridge", ignore=NOT_COPIED)
    build = subprocess.run([colcon, "build", "--packages-select", "robot_bridge"], cwd=ws, env=underlay(),
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    yield ws
    stop_daemon()


def underlay() -> dict[str, str]:
    """What `source /opt/ros/<distro>/setup.bash` gives: ros2 on PATH, the ROS prefix on AMENT_PREFIX_PATH."""
    env = ros2_env()
    env["PATH"] = os.pathsep.join([str(Path(ros2_executable()).parent), env["PATH"]])
    return env


def in_workspace(ws: Path, command: str) -> list[str]:
    return ["bash", "-c", f'source "{ws}/install/setup.bash" && {command}']


def test_colcon_install_holds_what_a_ros2_user_needs(workspace):
    prefix = workspace / "install" / "robot_bridge"
    assert (prefix / "share/ament_index/resource_index/packages/robot_bridge").is_file()
    assert (prefix / "share/robot_bridge/package.xml").is_file()
    assert (prefix / "share/robot_bridge/launch/bridge.launch.py").is_file()
    for name in ("description.yaml", "sensor_bridge.yaml", "controller.yaml", "fastdds_large_messages.xml"):
        assert (prefix / "share/robot_bridge/config" / name).is_file()
    executables = {p.name for p in (prefix / "lib/robot_bridge").iterdir() if os.access(p, os.X_OK)}
    assert {"description_node", "sensor_bridge_node", "controller_node", "robot-bridge"} <= executables
    venv = Path(sys.prefix)
    if (venv / "share/robot_bridge").is_dir():                 # make setup's venv prefix: the same files
        for folder in ("share/robot_bridge/launch", "share/robot_bridge/config", "lib/robot_bridge"):
            assert sorted(p.name for p in (venv / folder).iterdir()) == \
                sorted(p.name for p in (prefix / folder).iterdir()), folder
    found = subprocess.run(in_workspace(workspace, "ros2 pkg prefix robot_bridge"), env=underlay(),
                           capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == str(prefix), found


def test_ros2_launch_from_the_install_space_starts_and_stops_the_bridge(workspace):
    import psutil

    from fixtures.ros2_cli import LATCHED, echo_once, wait_for_nodes

    # planner:=false: the planner node builds its collision model at start and a stop during that build
    # waits for it (11 s seen under load: a known follow-up); this test is about the install space
    launch = Ros2Process(["launch", "robot_bridge", "bridge.launch.py", "planner:=false"],
                         workspace / "launch.log",
                         command=in_workspace(workspace, "exec ros2 launch robot_bridge bridge.launch.py "
                                                         "planner:=false"),
                         cwd=workspace, PATH=underlay()["PATH"])
    try:
        wait_for_nodes(BASE_NODES, launch)
        lib = workspace / "install" / "robot_bridge" / "lib" / "robot_bridge"
        for name, pid in launch.started().items():             # the install space's executables run
            assert any(arg.startswith(str(lib)) for arg in psutil.Process(pid).cmdline()), name
        # up, not only listed: a fresh install space compiles its numba kernels at the first start, and
        # a stop request during that start waits for it (the stop below is timed)
        assert "<robot" in echo_once("/robot_description", "std_msgs/msg/String", "data", *LATCHED)
        assert echo_once("/joint_states", "sensor_msgs/msg/JointState", "name")
        assert_stopped_cleanly(launch, nodes=len(BASE_NODES))
    finally:
        launch.close()
