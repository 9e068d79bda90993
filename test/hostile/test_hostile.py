"""Every hostile description is refused with a typed, one-line DescriptionError, quickly, and
without opening anything outside its allowed roots (audited with a sys.audit "open" hook, which
sees builtins.open, io.open, pathlib and os.open alike)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from robot_bridge import errors as E
from robot_bridge.formats import _reader

from fixtures.hostile_cases import FORMATS, SUFFIX, all_cases, load_any, valid  # noqa: E402

import trimesh  # noqa: E402,F401  (imported now so its lazy module loads are not audited as reads)

GUARD_SECONDS = 5.0          # generous CI guard; `python test/fixtures/hostile_cases.py` measures the < 1 s
_OPENED: list[str] | None = None


def _audit(event: str, args) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)

# Interpreter and package files (lazy imports) are not description reads.
_CODE_ROOTS = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, Path(E.__file__).parents[1],
                                                   *sysconfig.get_paths().values())})


@contextlib.contextmanager
def audited_opens():
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


MODULES = {"openrave": "openrave_xml", "collada": "collada", "urdf": "urdf", "srdf": "srdf"}


def _reader_available(fmt: str) -> bool:
    return _reader(MODULES[fmt]) is not None


def _skip_if_no_reader(fmt: str) -> None:
    if not _reader_available(fmt):
        pytest.skip(f"no {fmt} reader in robot_bridge.formats yet")


CASES = [pytest.param(c, id=c.id) for c in all_cases()]
CLI_CASES = [p for p in CASES if p.values[0].expect is not None and p.values[0].fmt != "srdf"]


@pytest.mark.parametrize("case", CASES)
def test_refused_within_roots(case, tmp_path, monkeypatch):
    _skip_if_no_reader(case.fmt)
    built = case.build(tmp_path)
    for key, value in (case.env(tmp_path) if case.env else {}).items():
        monkeypatch.setenv(key, value)
    start = time.perf_counter()
    with audited_opens() as opened:
        if case.expect is None:
            robot = load_any(built.path)
        else:
            with pytest.raises(E.DescriptionError) as info:
                load_any(built.path)
    elapsed = time.perf_counter() - start
    if case.expect is None:
        # the warning names where the reference led, or the unresolved package:// reference itself
        named = [w for w in robot.warnings if str(built.outside) in w or "'package://outside/" in w]
        assert named, robot.warnings
    else:
        err = info.value
        assert isinstance(err, case.expect), f"{type(err).__name__}: {err}"
        text = str(err)
        assert "\n" not in text and err.file, text
        assert Path(err.file.split("!")[0]).name in text
    assert elapsed < GUARD_SECONDS
    root = os.path.realpath(built.root)
    stray = [p for p in opened if not os.path.realpath(p).startswith((root + os.sep, *_CODE_ROOTS))]
    assert not stray, f"opened outside the allowed roots: {stray}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_valid_bases_load(fmt, tmp_path):
    """The hostile cases are single mutations of these: they must load, or the cases prove nothing."""
    _skip_if_no_reader(fmt)
    p = tmp_path / ("r" + SUFFIX[fmt])
    p.write_text(valid(fmt))
    load_any(p)


def test_outside_include_would_load(tmp_path):
    """The escaping include points at a valid file: allowed explicitly, the same description loads."""
    _skip_if_no_reader("openrave")
    case = next(p.values[0] for p in CASES if p.id == "openrave-file-escape-relative")
    built = case.build(tmp_path)
    robot = load_any(built.path, allowed_roots=[built.root, built.outside])
    assert robot.links


def _check_verb_available() -> bool:
    from robot_bridge.cli.main import load_verbs

    return "check" in load_verbs()


@pytest.mark.parametrize("case", CLI_CASES)
def test_check_cli_exit_2_one_line(case, tmp_path, monkeypatch):
    if not _check_verb_available():
        pytest.skip("robot-bridge check verb not installed yet")
    _skip_if_no_reader(case.fmt)
    from robot_bridge.cli.main import main

    built = case.build(tmp_path)
    for key, value in (case.env(tmp_path) if case.env else {}).items():
        monkeypatch.setenv(key, value)
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = main(["check", str(built.path)])
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and built.path.name in lines[0], lines


def test_srdf_file_with_urdf_content_uses_the_same_roots(tmp_path):
    """``load()`` reads a .srdf holding URDF content as URDF: its meshes obey the roots too."""
    from fixtures.hostile_cases import urdf
    from robot_bridge.formats import load

    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "mesh.stl").write_text("solid t\nendsolid t\n")
    (tmp_path / "desc").mkdir()
    p = tmp_path / "desc" / "r.srdf"
    p.write_text(urdf(GEOM='<mesh filename="../outside/mesh.stl"/>'))
    with audited_opens() as opened, pytest.raises(E.UnsafeInputError):
        load(p)
    assert not [o for o in opened if "outside" in o]
