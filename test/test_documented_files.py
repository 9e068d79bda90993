"""Every file an example of README.md or docs/*.md names is shipped (issue 31: `cell.env.xml` was not in the
repository), or is one of the user's own files the example stands for, listed here with the reason."""

from __future__ import annotations

import re
from pathlib import Path

from robot_bridge.formats import load

REPO = Path(__file__).resolve().parents[1]
FILE = re.compile(r"(?<![\w/$.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:env\.xml|robot\.xml|kinbody\.xml|yaml|srdf"
                  r"|urdf|xacro|dae|zae|rviz|xml))(?![\w/])")
USERS_OWN = {                       # stand for the reader's files, not shipped
    "my.robot.xml": "the user's robot", "my.srdf": "the user's SRDF", "world.env.xml": "the user's world",
    "site.yaml": "the user's parameters file",
    "my_robot.urdf.xacro": "the user's robot (the doc test runs a fixture)",
    "desc.yaml": "written by the example itself", "robot.urdf": "written by the example itself",
    "my_moveit_config/controller_node.yaml": "written by the example's robot-bridge moveit-config",
    "barrettwam.robot.xml": "from the OpenRAVE robot corpus ($OPENRAVE_DATA), not redistributed here",
}
WHERE = (REPO, REPO / "robot_bridge" / "data", REPO / "config")


def documented_files() -> set[str]:
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    return {m.group(1) for block in blocks for m in FILE.finditer(block)}


def test_every_file_a_readme_example_uses_is_shipped():
    names = documented_files()
    assert "robot_bridge/data/cell.env.xml" in names            # the two-robot example
    missing = [n for n in sorted(names - USERS_OWN.keys()) if not any((d / n).is_file() for d in WHERE)]
    assert not missing, f"README/docs examples name files the repository lacks: {missing}"


def test_the_two_robot_cell_loads_with_its_arms_apart():
    one = load(REPO / "robot_bridge" / "data" / "cell.env.xml")
    two = load(REPO / "robot_bridge" / "data" / "cell_arm2.env.xml")
    assert sorted(one.joints) == sorted(two.joints)
    assert abs(two.placement[0, 3] - one.placement[0, 3] - 2.0) < 1e-12


TEST_REFERENCE = re.compile(r"\b(test/[\w/]+\.py)::(\w+)")


def _test_names(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")}


def test_every_test_docs_security_md_names_exists():
    """docs/security.md's table names the test that shows each boundary (``test/file.py::test_name``):
    each must be a test function of that file (a renamed or deleted test fails here)."""
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    named = TEST_REFERENCE.findall(text)
    assert len(named) >= 40, named                        # the table: every boundary with its tests
    missing = [f"{file}::{name}" for file, name in named
               if not (REPO / file).is_file() or name not in _test_names(REPO / file)]
    assert not missing, f"docs/security.md names tests that do not exist: {missing}"
    # no shorthand a reader cannot look up (the old text had `..._at_start_up`)
    assert not re.search(r"`\.\.\.\w|::\.\.\.", text)
