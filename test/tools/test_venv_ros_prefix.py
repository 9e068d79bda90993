"""`make setup` makes .venv a ROS 2 prefix for robot_bridge (tools/venv_ros_prefix.py), like colcon would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from glob import glob
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENVS = (REPO / ".venv", REPO / ".venv-jazzy")        # make setup: Kilted, ROS_DISTRO=jazzy
SCRIPTS = sorted(ep.name for ep in metadata.distribution("robot_bridge").entry_points
                 if ep.group == "console_scripts")


def load_tool():
    spec = importlib.util.spec_from_file_location("venv_ros_prefix", REPO / "tools" / "venv_ros_prefix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data_files() -> dict[str, list[str]]:
    """What setup.py installs for colcon: share/... and lib/robot_bridge/..., relative to a prefix."""
    expected = {"share/ament_index/resource_index/packages/robot_bridge": "resource/robot_bridge",
                "share/robot_bridge/package.xml": "package.xml"}
    for folder, pattern in (("launch", "*.py"), ("config", "*")):
        for path in map(Path, sorted(glob(str(REPO / folder / pattern)))):    # as setup.py: no dotfiles
            expected[f"share/robot_bridge/{folder}/{path.name}"] = f"{folder}/{path.name}"
    return expected


@pytest.fixture(scope="module")
def venv() -> Path:
    here = Path(sys.prefix).resolve()
    if here not in {v.resolve() for v in VENVS}:
        pytest.skip(f"not running from a repo venv ({sys.prefix}), so no prefix made by make setup")
    return here


def test_the_venv_holds_the_package_like_a_colcon_install(venv):
    for relative, source in data_files().items():
        link = venv / relative
        assert link.is_symlink(), f"{link} is not a link to {source}"
        assert link.resolve() == (REPO / source).resolve()      # an edited file is what runs
    assert not (venv / "share/robot_bridge/launch").is_symlink()     # os.walk does not follow folder links
    executables = sorted(p.name for p in (venv / "lib/robot_bridge").iterdir() if os.access(p, os.X_OK))
    assert executables == SCRIPTS
    assert {"description_node", "sensor_bridge_node", "controller_node", "robot-bridge"} <= set(SCRIPTS)


def test_activate_puts_the_venv_on_the_ament_prefix_path_and_deactivate_restores_it(venv):
    script = ('source "$1/bin/activate"; source "$1/bin/activate"; echo "$AMENT_PREFIX_PATH"; '
              'deactivate; echo "${AMENT_PREFIX_PATH-unset}"')
    for before, after in ((None, "unset"), ("/opt/ros/x", "/opt/ros/x")):
        env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "VIRTUAL_ENV")}
        if before:
            env["AMENT_PREFIX_PATH"] = before
        out = subprocess.run(["bash", "-c", script, "bash", str(venv)], env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out == [":".join(filter(None, [str(venv), before])), after]


def test_links_follow_the_sources_and_stale_ones_go(tmp_path):
    tool = load_tool()
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in SCRIPTS:
        (venv / "bin" / name).write_text("#!/bin/sh\n")
        (venv / "bin" / name).chmod(0o755)
    (venv / "bin" / "activate").write_text('VIRTUAL_ENV="x"\ndeactivate () { :; }\n')
    stale = venv / "share/robot_bridge/launch/removed.launch.py"
    stale.parent.mkdir(parents=True)
    stale.symlink_to(REPO / "package.xml")
    old_exe = venv / "lib/robot_bridge/old_node"
    old_exe.parent.mkdir(parents=True)
    old_exe.symlink_to(venv / "bin" / SCRIPTS[0])
    assert tool.main(["venv_ros_prefix", str(venv)]) == 0
    assert tool.main(["venv_ros_prefix", str(venv)]) == 0        # idempotent
    assert not stale.is_symlink() and not old_exe.is_symlink()
    made = {str(p.relative_to(venv)) for p in venv.rglob("*") if p.is_symlink()}
    assert made == set(data_files()) | {f"lib/robot_bridge/{n}" for n in SCRIPTS}
    for relative in made:                               # relative: the venv may move with the tree
        assert not os.path.isabs(os.readlink(venv / relative))
    assert (venv / "bin/activate").read_text().count(tool.ACTIVATE_BEGIN) == 1
