"""The test tree as pytest collects it: test folders have no __init__.py (rootdir import mode), so two test
modules of the same file name collide at collection and stop the whole run (a CI run was lost to that); the
helpers tests share live in test/fixtures/ and no test module imports another; every test file has a layer."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

TEST_ROOT = Path(__file__).parent


def test_every_test_module_has_a_unique_file_name():
    by_name = collections.defaultdict(list)
    for path in TEST_ROOT.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TEST_ROOT)))
    clashes = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a file name (rename one): {clashes}"


def test_modules() -> list[Path]:
    """Every test module: test/test_*.py and test/<folder>/test_*.py (fixtures/ holds none)."""
    return sorted([*TEST_ROOT.glob("test_*.py"), *(p for p in TEST_ROOT.glob("*/test_*.py")
                                                    if p.parent.name != "fixtures")])


test_modules.__test__ = False       # a helper, not a test


def _imports_and_path_edits(path: Path) -> tuple[set[str], list[int]]:
    """The top-level names of every module ``path`` imports, and the lines that change sys.path."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names, edits = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "sys" \
                and node.value.attr == "path" and node.attr in ("insert", "append", "extend"):
            edits.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                target = target.value if isinstance(target, ast.Subscript) else target
                if isinstance(target, ast.Attribute) and target.attr == "path" \
                        and isinstance(target.value, ast.Name) and target.value.id == "sys":
                    edits.append(node.lineno)
    return names, edits


def test_no_test_module_imports_another_or_edits_sys_path():
    """Helpers the tests share live in test/fixtures/ (imported as ``fixtures.X``): a test module imported
    by another runs its module-level code (skips, rclpy.init fixtures) twice under two names, and a folder put
    on sys.path makes every module there importable by its bare name from anywhere."""
    modules = test_modules()
    # every module in a test folder outside fixtures/: the test modules, conftest and scripts beside them
    in_test_folders = {p.stem for folder in [TEST_ROOT, *(d for d in TEST_ROOT.iterdir() if d.is_dir())]
                       if folder.name != "fixtures" for p in folder.glob("*.py")}
    found, edits = {}, {}
    for path in modules:
        rel = path.relative_to(TEST_ROOT).as_posix()
        names, lines = _imports_and_path_edits(path)
        bad = names & in_test_folders
        if bad:
            found[rel] = bad
        if lines:
            edits[rel] = lines
    assert not edits, f"test modules that edit sys.path (import fixtures.X instead): {edits}"
    assert not found, \
        f"test modules importing test-folder modules (move what they share to test/fixtures/): {found}"


def test_the_checks_see_an_import_of_a_test_module_and_a_sys_path_insert(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import sys\nsys.path.insert(0, 'x')\nsys.path += ['y']\nfrom test_world import start\n"
                   "import fixtures.waiting\nsys.path[:0] = ['z']\n")
    names, lines = _imports_and_path_edits(bad)
    assert names == {"sys", "test_world", "fixtures"} and sorted(lines) == [2, 3, 6]


def test_every_test_file_has_exactly_one_layer():
    from fixtures.layers import LAYERS, TABLE, layer_of

    rels = [p.relative_to(TEST_ROOT).as_posix() for p in test_modules()]
    assert [r for r in rels if layer_of(r) not in LAYERS] == [], "add them to test/fixtures/layers.py"
    stale = [entry for entry in TABLE if not (TEST_ROOT / entry).exists()]
    assert not stale, f"test/fixtures/layers.py names paths that do not exist: {stale}"
    assert layer_of("not_there/test_x.py") is None              # no default: a new folder must be placed
