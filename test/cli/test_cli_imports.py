"""A verb imports only what it uses: ``robot-bridge --help`` and ``check`` of a small file start without the
heavy libraries (each costs more than the whole check of a small file) -- behaviour, not a timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("rclpy", "scipy", "matplotlib", "trimesh", "numba")
# runs the command line in this interpreter, then reports which modules it had imported (on stderr)
RUNNER = """
import json, runpy, sys
sys.argv = ["robot-bridge", *sys.argv[1:]]
try:
    runpy.run_module("robot_bridge.cli.main", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""
THREE_LINKS = """<?xml version="1.0"?>
<robot name="three_links">
  <link name="base"/><link name="upper"/><link name="lower"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1" rpy="0 0 0.5"/><axis xyz="0 0 1"/>
    <limit lower="-1.5" upper="1.5" effort="10" velocity="1"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.3 0 0" rpy="0.1 0.2 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/></joint>
</robot>
"""


def _run(*argv) -> tuple[int, str, set[str]]:
    out = subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True, text=True, timeout=120,
                         cwd=REPO)
    report = json.loads(out.stderr.strip().splitlines()[-1])
    return report["code"], out.stdout, set(report["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_help_imports_no_heavy_library():
    code, out, modules = _run("--help")
    assert code == 0 and "check" in out and "run" in out        # every verb listed
    assert not _heavy(modules)


@pytest.fixture
def three_links(tmp_path) -> Path:
    path = tmp_path / "three_links.urdf"
    path.write_text(THREE_LINKS)
    return path


def test_check_of_a_small_urdf_imports_no_heavy_library_and_only_its_reader(three_links):
    code, out, modules = _run("check", str(three_links))
    assert code == 0 and "ok (3 links, 2 joints, 2 DOF" in out
    assert not _heavy(modules)
    readers = sorted(m for m in modules if m.startswith("robot_bridge.formats.")
                     and m.split(".")[2] in ("openrave_xml", "openrave", "collada", "srdf"))
    assert readers == []                  # chosen by its suffix: the other readers are not imported


def test_inspect_and_verb_help_import_no_ros(three_links):
    code, out, modules = _run("inspect", str(three_links))
    assert code == 0 and "via elbow [revolute" in out
    assert "rclpy" not in modules and "numba" not in modules
    for verb in ("run", "convert", "render", "moveit-config"):
        code, out, modules = _run(verb, "--help")
        assert code == 0 and "usage: robot-bridge " + verb in out
        assert not _heavy(modules), verb


def test_the_reader_suffix_table_matches_the_readers():
    from robot_bridge import formats

    for name in formats.READER_MODULES:
        module = formats._reader(name)
        assert formats.READER_SUFFIXES[name] == module.SUFFIXES, name
