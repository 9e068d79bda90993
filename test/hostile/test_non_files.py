"""A file no reader can take says what it is (issue 29): entity declarations refused (file and line), an
empty file, binary data, text that is not XML (lxml's message and line), a directory, device or FIFO that
is not a regular file (never opened blocking) -- through ``formats.load`` and ``robot-bridge check``
(one line on stderr, exit 2).  Before, these said "no reader for this file (... root element <?>)" or
"file not found"."""

from __future__ import annotations

import contextlib
import io
import os
import random
import threading
from pathlib import Path

import pytest

from robot_bridge import errors as E
from robot_bridge.formats import load

from fixtures.hostile_cases import openrave  # noqa: E402

LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
          + "".join(f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
                    for i in range(1, 10))
          + "]>\n<lolz>&lol9;</lolz>\n")


def _laughs(tmp: Path) -> Path:
    p = tmp / "lol.xml"
    p.write_text(LAUGHS)
    return p


def _doctype_only(tmp: Path) -> Path:
    p = tmp / "doc.xml"
    p.write_text('<?xml version="1.0"?>\n\n<!DOCTYPE robot SYSTEM "robot.dtd">\n<robot name="r"/>\n')
    return p


def _empty(name: str, content: bytes = b""):
    def make(tmp: Path) -> Path:
        p = tmp / name
        p.write_bytes(content)
        return p
    return make


def _random(name: str):
    def make(tmp: Path) -> Path:
        rng = random.Random(29)
        p = tmp / name
        p.write_bytes(bytes(rng.getrandbits(8) for _ in range(4096)))
        return p
    return make


def _text(tmp: Path) -> Path:
    p = tmp / "notes.xml"
    p.write_text("these are\nnot robots\n")
    return p


def _directory(tmp: Path) -> Path:
    p = tmp / "robot.urdf"
    p.mkdir()
    return p


def _fifo(tmp: Path) -> Path:
    p = tmp / "robot.xml"
    os.mkfifo(p)
    return p


# (id, maker, error type, words the one-line message holds, line the error names or None)
CASES = [
    ("billion-laughs", _laughs, E.UnsafeInputError, ("entity declaration <!ENTITY lol ", "not allowed"), 3),
    ("doctype", _doctype_only, E.UnsafeInputError, ("document type declaration",), 3),
    ("empty-xml", _empty("empty.xml"), E.XMLSyntaxError, ("empty file",), None),
    ("empty-robot-xml", _empty("empty.robot.xml"), E.XMLSyntaxError, ("empty file",), None),
    ("empty-urdf", _empty("empty.urdf"), E.XMLSyntaxError, ("empty file",), None),
    ("empty-dae", _empty("empty.dae"), E.XMLSyntaxError, ("empty file",), None),
    ("empty-unknown-suffix", _empty("empty.txt"), E.XMLSyntaxError, ("empty file",), None),
    ("blank-xml", _empty("blank.xml", b" \n\n\t\n"), E.XMLSyntaxError, ("empty file (only whitespace)",),
     None),
    ("random-xml", _random("noise.xml"), E.XMLSyntaxError, ("binary data, not XML",), None),
    ("random-unknown-suffix", _random("noise.bin"), E.XMLSyntaxError, ("binary data, not XML",), None),
    ("text-not-xml", _text, E.XMLSyntaxError, ("not XML: Start tag expected",), 1),
    ("directory", _directory, E.NotRegularFileError, ("is a directory",), None),
    ("fifo", _fifo, E.NotRegularFileError, ("not a regular file (a FIFO",), None),
    ("dev-zero", lambda tmp: Path("/dev/zero"), E.NotRegularFileError,
     ("not a regular file (a character device",), None),
]
PARAMS = [pytest.param(*c[1:], id=c[0]) for c in CASES]


def _load_in_thread(path: Path, fifo: Path | None = None):
    """load(path) in a daemon thread; (finished, exception).  A FIFO open that blocks is unblocked by
    opening its write end, so a regression fails the test instead of hanging it."""
    outcome: list = []

    def run():
        try:
            load(path)
            outcome.append(None)
        except Exception as exc:          # noqa: BLE001 -- returned to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30.0)
    pipe = fifo or path
    if thread.is_alive() and pipe.exists() and not pipe.is_file() and not pipe.is_dir():
        with contextlib.suppress(OSError):
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5.0)
        return False, None
    return bool(outcome), outcome[0] if outcome else None


@pytest.mark.parametrize("make, kind, words, line", PARAMS)
def test_load_says_what_the_file_is(make, kind, words, line, tmp_path):
    path = make(tmp_path)
    finished, exc = _load_in_thread(path)
    assert finished, "load blocked"
    assert isinstance(exc, kind), f"{type(exc).__name__}: {exc}"
    text = str(exc)
    assert "\n" not in text and exc.file and Path(exc.file).name == path.name, text
    for w in words:
        assert w in text, text
    assert "no reader for this file" not in text and "file not found" not in text, text
    assert exc.line == line, text


@pytest.mark.parametrize("make, kind, words, line", PARAMS)
def test_check_cli_prints_it_and_exits_2(make, kind, words, line, tmp_path):
    from robot_bridge.cli.main import main

    path = make(tmp_path)
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = main(["check", str(path)])
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], lines
    for w in words:
        assert w in lines[0], lines


def test_a_well_formed_document_of_no_known_kind_names_its_root(tmp_path):
    p = tmp_path / "config.xml"
    p.write_text('<?xml version="1.0"?>\n<launch><node/></launch>\n')
    with pytest.raises(E.UnsupportedFormatError, match=r"root element <launch>"):
        load(p)


def test_an_include_that_is_a_fifo_is_named_as_such(tmp_path):
    """An OpenRAVE include that is a FIFO: not a regular file, said at the including element (was: "included
    file not found"), and never opened."""
    os.mkfifo(tmp_path / "pipe.kinbody.xml")
    path = tmp_path / "r.robot.xml"
    path.write_text(openrave(BODYEXTRA='<KinBody file="pipe.kinbody.xml"/>'))
    finished, exc = _load_in_thread(path, tmp_path / "pipe.kinbody.xml")
    assert finished, "load blocked"
    assert isinstance(exc, E.NotRegularFileError), f"{type(exc).__name__}: {exc}"
    text = str(exc)
    assert "r.robot.xml:" in text and exc.line and "KinBody" in (exc.element or ""), text
    assert "pipe.kinbody.xml" in text and "a FIFO" in text, text
