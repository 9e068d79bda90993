"""robot-bridge dispatch: verbs discovered from VERBS, exit codes, one-line errors."""

from __future__ import annotations

import sys
import types

import pytest

from robot_bridge.cli import main as cli
from robot_bridge.errors import SchemaError

VERBS_PKG = cli.VERB_PACKAGE


def _register(monkeypatch, name: str, run, help_text: str = "a test verb") -> types.ModuleType:
    """Make robot_bridge.cli.verbs.<name> importable and list it as the only verb besides absent ones."""
    module = types.ModuleType(f"{VERBS_PKG}.{name}")
    module.HELP = help_text

    def add_arguments(parser):
        parser.add_argument("path")
        parser.add_argument("--count", type=int, default=1)

    module.add_arguments = add_arguments
    module.main = run
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


@pytest.fixture
def dummy(monkeypatch):
    calls = []

    def run(args):
        calls.append((args.verb, args.path, args.count))
        return 3 if args.path == "fail" else 0

    _register(monkeypatch, "dummy", run)
    # "absent_verb" has no module: it must be skipped, not crash the command.
    monkeypatch.setattr(cli, "VERBS", ("dummy", "absent_verb"))
    return calls


def test_verb_receives_parsed_arguments_and_its_exit_code_is_returned(dummy):
    assert cli.main(["dummy", "robot.xml", "--count", "4"]) == 0
    assert dummy == [("dummy", "robot.xml", 4)]
    assert cli.main(["dummy", "fail"]) == 3


def test_absent_verb_module_is_skipped(dummy, capsys):
    assert list(cli.load_verbs()) == ["dummy"]
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "dummy" in out and "a test verb" in out and "absent_verb" not in out


def test_unknown_verb_is_a_usage_error(dummy, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["absent_verb", "x"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_description_error_gives_exit_2_and_one_line(monkeypatch, capsys):
    def run(args):
        raise SchemaError("expected a number,\n got 'abc'", file="robot.xml", line=7, element="joint")

    _register(monkeypatch, "broken", run)
    monkeypatch.setattr(cli, "VERBS", ("broken",))
    assert cli.main(["broken", "robot.xml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.strip() == "robot-bridge broken: error: robot.xml:7 <joint>: expected a number, got 'abc'"


def test_missing_dependency_inside_a_verb_is_not_hidden(monkeypatch, tmp_path):
    # A verb module that exists but cannot import one of ITS dependencies must raise, not vanish.
    import robot_bridge.cli.verbs as verbs_pkg

    (tmp_path / "needs_missing_dep.py").write_text("import not_installed_lib_4f2a\n")
    monkeypatch.setattr(verbs_pkg, "__path__", [*verbs_pkg.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, f"{VERBS_PKG}.needs_missing_dep", raising=False)
    monkeypatch.setattr(cli, "VERBS", ("needs_missing_dep",))
    with pytest.raises(ModuleNotFoundError) as exc:
        cli.load_verbs()
    assert exc.value.name == "not_installed_lib_4f2a"


def test_no_verbs_at_all(monkeypatch, capsys):
    monkeypatch.setattr(cli, "VERBS", ("absent_verb",))
    assert cli.main([]) == 1
    assert "no verbs" in capsys.readouterr().err


def test_module_entry_point_runs_in_a_fresh_interpreter():
    import subprocess

    import robot_bridge

    result = subprocess.run([sys.executable, "-m", "robot_bridge.cli.main", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"robot-bridge {robot_bridge.__version__}"
