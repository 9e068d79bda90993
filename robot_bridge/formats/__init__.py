"""Readers and writers, one module per format, chosen by suffix or root element.

``load(path, search_path=None)`` is the one entry point: it picks the reader
by file suffix first, then by the root element's name, and returns a
:class:`robot_bridge.model.Robot`.

Each reader module exposes ``SUFFIXES`` (lower-case, with dot), ``ROOT_TAGS``
(lower-case local names) and ``read(path, search_path=None, **options)``.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..errors import DescriptionError, MissingFileError, SchemaError, UnsupportedFormatError
from . import limits

# Order matters for root-element sniffing; suffix matches are tried first.
READER_MODULES = ("openrave_xml", "collada", "urdf", "srdf", "xacro_in")
# Each reader's SUFFIXES, so that a file chosen by its suffix imports only its reader (a copy: a test keeps
# it equal to the modules' own)
READER_SUFFIXES = {"openrave_xml": (".env.xml", ".robot.xml", ".kinbody.xml", ".sensor.xml", ".xml"),
                   "collada": (".dae", ".zae"), "urdf": (".urdf",), "srdf": (".srdf",),
                   "xacro_in": (".xacro",)}


def _reader(module: str):
    try:
        return importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{module}":
            return None
        raise


def _readers():
    for name in READER_MODULES:
        mod = _reader(name)
        if mod is not None:
            yield mod


_SNIFF_BYTES = 1 << 20


def _sniff_root(path: Path) -> str:
    """Local name of the root element (lower-case), reading only the file's head (at most 1 MiB)."""
    import io

    from lxml import etree

    try:
        head = limits.read_head(path, _SNIFF_BYTES)
        for _event, el in etree.iterparse(io.BytesIO(head), events=("start",), resolve_entities=False,
                                          no_network=True, load_dtd=False, recover=True):
            return el.tag.rsplit("}", 1)[-1].lower() if isinstance(el.tag, str) else ""
    except (etree.XMLSyntaxError, DescriptionError, ValueError):
        return ""
    return ""


def normalize_search_path(search_path: Optional[Iterable[str | os.PathLike] | str]) -> list[Path]:
    """search_path argument (list or os.pathsep string) + $OPENRAVE_DATA, in that order."""
    out: list[Path] = []
    if search_path is None:
        items: Sequence = []
    elif isinstance(search_path, (str, os.PathLike)):
        items = [p for p in str(search_path).split(os.pathsep) if p]
    else:
        items = list(search_path)
    env = os.environ.get("OPENRAVE_DATA", "")
    for p in list(items) + [p for p in env.split(os.pathsep) if p]:
        path = Path(p).expanduser().resolve()
        if path not in out:
            out.append(path)
    return out


def reader_for(path: str | os.PathLike):
    """The reader module for ``path`` (by suffix, then root element)."""
    p = Path(path)
    name = p.name.lower()
    for module in READER_MODULES:
        if any(name.endswith(s) for s in READER_SUFFIXES.get(module, ())):
            mod = _reader(module)
            if mod is not None and (getattr(mod, "claims", None) is None or mod.claims(p)):
                return mod
    readers = list(_readers())
    root = _sniff_root(p)
    for mod in readers:
        if root in mod.ROOT_TAGS:
            return mod
    # no reader: say what the file is (empty, binary, not XML, a DTD/entities, too big) when it is
    # not a well-formed document with an unknown root
    from .xmlsafe import local_name, parse_file

    root = local_name(parse_file(p).getroot()) or root
    raise UnsupportedFormatError(
        f"no reader for this file (suffix {p.suffix or 'none'!r}, root element <{root or '?'}>); "
        "expected OpenRAVE XML, COLLADA (.dae/.zae), URDF or SRDF", file=str(p))


def load(path: str | os.PathLike, search_path=None, **options):
    """Read a robot description file into a :class:`~robot_bridge.model.Robot`.

    ``allowed_roots=[...]`` (option) replaces the folders includes and meshes may come from
    (default: the file's folder tree plus the search path; see :mod:`.paths`).  The model is
    checked by :func:`.validate.validate` (finite rigid transforms, non-zero axes, mimic)."""
    from .validate import validate

    p = Path(path)
    limits.check_regular_file(p, None, "robot file")      # sizes: each reader, by its kind (limits.py)
    if options.get("allowed_roots", 0) is None:
        del options["allowed_roots"]
    reader = reader_for(p)
    if getattr(reader, "__name__", "").rpartition(".")[2] != "xacro_in":
        options.pop("xacro_args", None)          # the arguments of a .xacro file; other files have none
    try:
        robot = reader.read(p, search_path=search_path, **options)
    except DescriptionError:
        raise
    except OSError as exc:       # a path the OS refused somewhere a reader did not expect it
        name = str(exc.filename)[:120] if exc.filename is not None else "?"
        raise MissingFileError(f"the OS refuses a path this file refers to: {name!r} ({exc.strerror})",
                               file=str(p)) from None
    except (ArithmeticError, AttributeError, IndexError, KeyError, RecursionError, TypeError,
            ValueError) as exc:
        # a reader bug on malformed input must still reach callers (nodes, CLI) as a DescriptionError;
        # ``internal`` keeps the original for the fuzz tests, which treat it as a failure
        line, element = _failing_element(exc)
        err = SchemaError(f"cannot read this file ({type(exc).__name__}: {exc})", file=str(p), line=line,
                          element=element)
        err.internal = exc
        raise err from exc
    return validate(robot)


def _failing_element(exc: BaseException) -> tuple[Optional[int], Optional[str]]:
    """(line, tag) of the XML element the innermost reader frame was working on when ``exc`` escaped
    (a local variable holding an lxml element), so that even a reader bug names its place."""
    from lxml import etree

    tb, found = exc.__traceback__, (None, None)
    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, etree._Element) and isinstance(value.tag, str) and value.sourceline:
                found = (value.sourceline, value.tag.rsplit("}", 1)[-1])
                break
        tb = tb.tb_next
    return found
