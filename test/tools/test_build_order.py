"""tools/venv_interfaces/build_order.py: the interface packages `make setup` builds, in order, and the subset
VENV_INTERFACES names (with the local packages they depend on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "venv_interfaces" / "build_order.py"
SRC = REPO / "tools" / "venv_interfaces"


def order(*names: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(SRC), *names], capture_output=True, text=True,
                          timeout=60)


def packages(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()]


def test_all_packages_dependencies_first():
    every = packages(order().stdout)
    on_disk = {p.parent.name for p in SRC.glob("*/package.xml") if (p.parent / "CMakeLists.txt").is_file()}
    assert set(every) == on_disk
    assert every.index("octomap_msgs") < every.index("moveit_msgs")
    assert every.index("object_recognition_msgs") < every.index("moveit_msgs")


def test_a_subset_brings_its_local_dependencies_only():
    assert packages(order("tf2_msgs", "control_msgs").stdout) == ["control_msgs", "tf2_msgs"]
    with_moveit = packages(order("moveit_msgs").stdout)
    assert set(with_moveit) == {"moveit_msgs", "octomap_msgs", "object_recognition_msgs"}
    assert with_moveit[-1] == "moveit_msgs"


def test_an_unknown_name_is_refused_with_the_known_ones():
    result = order("tf2_msgs", "no_such_msgs")
    assert result.returncode != 0
    assert "no_such_msgs" in result.stderr and "tf2_msgs" in result.stderr
