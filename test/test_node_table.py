"""Issue 40: the nodes are listed once, in robot_bridge/node_table.py.  Every other list of nodes --
setup.py's console scripts, the executables of robot_bridge.nodes, the node modules themselves, bringup's
node set and READS_ROBOT, the launch file, config/, the docs pages and their generated parameter tables -- is
checked against it here, so that editing any one of them alone fails.  Independent truth where there is one:
the node modules' source (their classes, main() and schemas, read with ast), setup.py as setuptools receives
it, the files in config/ and docs/."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_bridge import bringup, node_table
from robot_bridge.node_table import NODES

REPO = Path(__file__).resolve().parents[1]
NODES_DIR = REPO / "robot_bridge" / "nodes"
NOT_NODES = {"__init__.py", "parameter_tables.py"}


def module_path(module: str) -> Path:
    return REPO.joinpath(*module.split(".")).with_suffix(".py")


def source_facts(path: Path) -> dict:
    """What a node module's source defines at its top level: main(), the ContainedNode classes with the
    node name each passes to super().__init__ and whether __init__ takes a robot, the schema assignments."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    facts = {"main": False, "classes": {}, "schemas": set()}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "main":
            facts["main"] = True
        elif isinstance(stmt, ast.ClassDef) and "ContainedNode" in [getattr(b, "id", "") for b in stmt.bases]:
            init = next(s for s in stmt.body if isinstance(s, ast.FunctionDef) and s.name == "__init__")
            (name,) = {c.args[0].value for c in ast.walk(init) if isinstance(c, ast.Call)
                       and getattr(c.func, "attr", "") == "__init__" and c.args
                       and isinstance(c.args[0], ast.Constant)}
            facts["classes"][stmt.name] = (name, "robot" in [a.arg for a in init.args.args])
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and getattr(stmt.value.func, "attr", getattr(stmt.value.func, "id", "")) == "schema":
            facts["schemas"] |= {t.id for t in stmt.targets}
    return facts


def test_the_table_is_consistent():
    names = [n.name for n in NODES]
    executables = [n.executable for n in NODES]
    keys = [s.key for n in NODES for s in n.schemas]
    assert len(set(names)) == len(names) and len(set(executables)) == len(executables)
    assert len(set(keys)) == len(keys) and len({n.docs for n in NODES}) == len(NODES)
    assert all(n.module.startswith("robot_bridge.nodes.") and n.schemas for n in NODES)


def test_every_node_module_is_in_the_table_with_its_class_main_and_schemas():
    """The node modules' own source: each one (but the package and this table's tables) is a row, its
    ContainedNode class is the row's class and carries the row's node name, main() is there, every schema it
    assigns is a row's schema, and reads_robot is whether the class takes a Robot already read."""
    on_disk = {f"robot_bridge.nodes.{p.stem}" for p in NODES_DIR.glob("*.py") if p.name not in NOT_NODES}
    assert on_disk == {n.module for n in NODES}
    for node in NODES:
        facts = source_facts(module_path(node.module))
        assert facts["main"], f"{node.module} has no main() for {node.executable}"
        assert list(facts["classes"]) == [node.node_class], node.module
        assert facts["classes"][node.node_class] == (node.name, node.reads_robot), node.module
        assert facts["schemas"] == {s.attribute for s in node.schemas}, node.module


def test_setup_py_installs_one_executable_per_node_without_importing_the_nodes():
    """setup.py as setuptools receives it (setup() replaced by a recorder in a fresh interpreter): its
    console scripts are the table's executables, each starting its module's main(), plus the CLI; and
    reading them imported neither robot_bridge nor rclpy."""
    script = ("import json, runpy, sys, setuptools\n"
              "seen = {}\n"
              "setuptools.setup = lambda **kw: seen.update(kw)\n"
              "runpy.run_path('setup.py', run_name='__main__')\n"
              "print(json.dumps({'scripts': seen['entry_points']['console_scripts'], 'imported': "
              "sorted(m for m in sys.modules if m.split('.')[0] in ('robot_bridge', 'rclpy'))}))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["imported"] == []
    scripts = dict(re.fullmatch(r"(\S+) = (\S+)", s).groups() for s in result["scripts"])
    assert len(scripts) == len(result["scripts"])
    expected = {n.executable: f"{n.module}:main" for n in NODES}
    expected["robot-bridge"] = "robot_bridge.cli.main:main"
    assert scripts == expected


def test_every_executable_records_ctrl_c_as_a_stop_request(monkeypatch):
    """robot_bridge.nodes treats each node's executable as one (planner_node and view_node were not: a Ctrl-C
    during their imports was a KeyboardInterrupt traceback), and nothing else."""
    import robot_bridge.nodes as nodes

    assert set(nodes.EXECUTABLES) == {n.executable for n in NODES}
    monkeypatch.setattr(sys, "orig_argv", [sys.executable], raising=False)
    for node in NODES:
        monkeypatch.setattr(sys, "argv", [f"/opt/ws/lib/robot_bridge/{node.executable}", "--ros-args"])
        assert nodes._started_as_executable(), node.executable
    monkeypatch.setattr(sys, "argv", ["/usr/bin/pytest"])
    assert not nodes._started_as_executable()


def everything_on(monkeypatch) -> list[bringup.NodeSpec]:
    """bringup's node set with every optional node asked for (the planner as if installed)."""
    monkeypatch.setattr(bringup, "planner_unavailable", lambda: None)
    options = bringup.Options(objects="objects.yaml", view=True, rviz=True, planner=True)
    return [s for s in bringup.node_set(options) if s.package == bringup.PACKAGE]


def test_bringup_starts_the_tables_nodes_with_their_config(monkeypatch):
    specs = everything_on(monkeypatch)
    assert [(s.name, s.executable, s.factory) for s in specs] == \
        [(n.name, n.executable, n.factory) for n in NODES]
    configs = {n.config for n in NODES if n.config}
    assert {p.name for p in (REPO / "config").glob("*.yaml")} == configs
    for spec in specs:
        config = node_table.BY_NAME[spec.name].config
        if config:        # every value of the node's own section reaches it (or an argument overrides it)
            assert set(bringup.yaml_parameters(REPO / "config" / config, spec.name)) <= set(spec.parameters)
    assert bringup.READS_ROBOT == tuple(n.name for n in NODES if n.reads_robot)
    # xacro_args reaches exactly the nodes that read the robot file with it
    with_xacro = bringup.node_set(bringup.Options(objects="o.yaml", view=True, xacro_args="a:=1"))
    assert {s.name for s in with_xacro if "xacro_args" in s.parameters} == set(bringup.READS_ROBOT)


def test_the_launch_files_take_their_nodes_from_bringup():
    """launch/*.py name no node: they start bringup.node_set (test/launch/test_bridge_launch.py compares the
    Node actions with it under the real launch_ros)."""
    known = {n.name for n in NODES} | {n.executable for n in NODES}
    for path in sorted((REPO / "launch").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {c.value for c in ast.walk(tree) if isinstance(c, ast.Constant) and type(c.value) is str}
        assert not strings & known, f"{path.name} names nodes itself: {sorted(strings & known)}"
        calls = {ast.unparse(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
        assert "bringup.node_set" in calls, path.name


def pages_with_tables() -> dict[str, tuple[str, ...]]:
    found = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        keys = tuple(re.findall(r"<!-- parameters: (\S+) -->", page.read_text(encoding="utf-8")))
        if keys:
            found[page.relative_to(REPO).as_posix()] = keys
    return found


def test_each_nodes_page_carries_its_tables_and_nodes_md_lists_every_node():
    from robot_bridge.nodes.parameter_tables import PAGES

    expected = {n.docs: tuple(s.key for s in n.schemas) for n in NODES}
    assert PAGES == expected
    assert pages_with_tables() == expected          # and no other page carries a table
    text = (REPO / "docs" / "nodes.md").read_text(encoding="utf-8")
    sections = dict(s.split("\n", 1) for s in re.split(r"^## ", text, flags=re.M)[1:])
    assert [title for title in sections if title != "Parameters"] == [n.executable for n in NODES]
    for node in NODES:
        assert f"]({Path(node.docs).name}" in sections[node.executable], \
            f"docs/nodes.md: {node.executable} links no {node.docs}"


def node_module(node):
    """The node's module; the test is skipped when a package it imports is not installed here."""
    try:
        return importlib.import_module(node.module)
    except ModuleNotFoundError as exc:
        pytest.skip(f"{node.module} needs {exc.name}, not installed here")


@pytest.mark.parametrize("node", NODES, ids=[n.name for n in NODES])
def test_every_schema_entry_is_well_formed(node):
    """Names unique, defaults satisfy their own constraints, every parameter described."""
    from robot_bridge.ros import params

    module = node_module(node)
    for attribute in (s.attribute for s in node.schemas):
        schema = getattr(module, attribute)
        names = [p.name for p in schema]
        assert len(names) == len(set(names)), attribute
        for p in schema:
            assert isinstance(p, params.Param) and p.description, (attribute, p.name)
            default = [] if isinstance(p.default, params.EmptyArray) else p.default
            assert p.refusal(default) is None, (attribute, p.name)


@pytest.mark.parametrize("node", NODES, ids=[n.name for n in NODES])
def test_the_generated_parameter_tables_are_current(node):
    """Each page's tables as its node's schemas generate them (python -m robot_bridge.nodes.parameter_tables
    rewrites them)."""
    from robot_bridge.nodes.parameter_tables import node_tables
    from robot_bridge.ros.params import update_tables

    node_module(node)
    page = (REPO / node.docs).read_text(encoding="utf-8")
    assert update_tables(page, node_tables(node)) == page, \
        f"{node.docs}: parameter tables are stale: python -m robot_bridge.nodes.parameter_tables"
