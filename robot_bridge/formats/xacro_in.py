"""``.xacro`` files (``arm.urdf.xacro``), expanded by the ``xacro`` package as robot_state_publisher users
run it, then read as URDF.

``xacro_args`` (a reader option): the xacro arguments, ``"name:=value other:=value"`` as on the ``xacro``
command line, or a mapping.  Every file xacro opens (the document, its ``<xacro:include>``\\ s, ``load_yaml``)
is bounded as the URDF reader bounds its document: inside the allowed roots (the file's folder tree and
search path, see :mod:`.paths`, or the share folder of an installed package ``$(find pkg)`` names) and at
most ``limits.MAX_XML_BYTES`` each, ``limits.MAX_INCLUDE_TOTAL_BYTES`` together.  An error of xacro is a
typed error naming the file (the include it happened in) and, where the text shows it, the line.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import threading
from pathlib import Path
from typing import Mapping, Optional

from ..errors import DescriptionError, MissingFileError, SchemaError, UnsafeInputError
from . import limits
from .paths import in_package_share, roots_for

SUFFIXES = (".xacro",)
ROOT_TAGS = ()
_LOCK = threading.Lock()            # xacro keeps its state (file stack, includes) in module globals
ARG = re.compile(r"([A-Za-z_][\w]*):=(.*)", re.S)


def parse_args(xacro_args: Optional[str | Mapping[str, str]]) -> dict[str, str]:
    """``"a:=1 b:='x y'"`` (shell quoting) or a mapping -> {name: value}; SchemaError naming a bad one."""
    if not xacro_args:
        return {}
    if isinstance(xacro_args, Mapping):
        return {str(k): str(v) for k, v in xacro_args.items()}
    try:
        words = shlex.split(xacro_args)
    except ValueError as exc:
        raise SchemaError(f"xacro_args {xacro_args[:200]!r}: {exc}") from None
    out = {}
    for word in words:
        match = ARG.fullmatch(word)
        if not match:
            raise SchemaError(f"xacro_args: {word[:200]!r} is not name:=value")
        out[match.group(1)] = match.group(2)
    return out


class _BoundedOpen:
    """``open`` as xacro sees it: read-only, files inside the roots, each and all of them size-bounded."""

    def __init__(self, roots, file: str):
        self.roots, self.file, self.total = roots, file, 0

    def __call__(self, name, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+"):
            raise UnsafeInputError(f"xacro may not write {str(name)[:200]!r}", file=self.file)
        path = Path(os.path.realpath(os.fspath(name)))
        if not (self.roots.contains(path) or in_package_share(path)):
            raise UnsafeInputError(f"xacro opens {str(name)[:200]!r}, resolving to {path}, outside the "
                                   f"allowed roots ({', '.join(map(str, self.roots.roots)) or 'none'})",
                                   file=self.file)
        data = limits.bounded_read(path, limits.MAX_XML_BYTES, "xacro file", limit_name="MAX_XML_BYTES")
        self.total += len(data)
        if self.total > limits.MAX_INCLUDE_TOTAL_BYTES:
            raise UnsafeInputError(f"xacro files together over {limits.MAX_INCLUDE_TOTAL_BYTES} bytes "
                                   "(MAX_INCLUDE_TOTAL_BYTES)", file=self.file)
        return io.BytesIO(data) if "b" in mode else io.StringIO(data.decode("utf-8", errors="replace"))


def _line_of(file: str, message: str) -> Optional[int]:
    """The first line of ``file`` holding a name or expression the message quotes (xacro's DOM has no
    line numbers), or None."""
    quoted = [q for q in re.findall(r"['\"]([^'\"\n]{1,200})['\"]", message) if q.strip()]
    if not quoted:
        return None
    try:
        data = limits.bounded_read(file, limits.MAX_XML_BYTES, "xacro file")
        lines = data.decode(errors="replace").splitlines()
    except (DescriptionError, OSError):
        return None
    for candidate in quoted:
        for number, line in enumerate(lines, 1):
            if candidate in line and ("${" in line or "xacro:" in line or "$(" in line):
                return number
    return None


def expand(path: str | os.PathLike, search_path=None, xacro_args=None, allowed_roots=None) -> str:
    """The URDF text of the .xacro file ``path`` with ``xacro_args``."""
    return expand_noting(path, search_path, xacro_args, allowed_roots)[0]


def expand_noting(path, search_path=None, xacro_args=None, allowed_roots=None) -> tuple[str, list[str]]:
    """The URDF text and xacro's warnings (each once, one line each)."""
    import contextlib
    import xml.parsers.expat

    try:
        import xacro
    except ImportError:
        raise SchemaError("reading .xacro files needs the xacro package (pip install xacro, or apt install "
                          "ros-$ROS_DISTRO-xacro)", file=str(path)) from None
    from . import normalize_search_path

    p = Path(path)
    limits.check_regular_file(p, limits.MAX_XML_BYTES, "xacro file")
    roots = roots_for(p, normalize_search_path(search_path), allowed_roots)
    mappings = parse_args(xacro_args)
    bounded = _BoundedOpen(roots, str(p))
    said = io.StringIO()
    with _LOCK, contextlib.redirect_stderr(said):
        xacro.open = bounded                # module globals come before builtins: every open of xacro
        xacro.all_includes = []
        try:
            doc = xacro.process_file(str(p.resolve()), mappings=mappings)
            notes = [f"xacro: {line.strip()[:300]}" for line in said.getvalue().splitlines()
                     if line.strip().startswith("warning:")]
            return doc.toxml(), list(dict.fromkeys(notes))
        except DescriptionError:
            raise
        except xml.parsers.expat.ExpatError as exc:
            where = _stack_file(xacro, p)
            raise SchemaError(f"xacro: {xml.parsers.expat.ErrorString(exc.code)}", file=where,
                              line=exc.lineno) from None
        except xacro.XacroException as exc:
            where = _stack_file(xacro, p)
            text = str(exc).strip()
            error = MissingFileError if isinstance(getattr(exc, "exc", None), OSError) else SchemaError
            raise error(f"xacro: {text}", file=where, line=_line_of(where, text)) from None
        except (ArithmeticError, KeyError, NameError, TypeError, ValueError, RecursionError) as exc:
            where = _stack_file(xacro, p)
            raise SchemaError(f"xacro: {type(exc).__name__}: {exc}", file=where,
                              line=_line_of(where, str(exc))) from None
        finally:
            del xacro.open


def _stack_file(xacro, top: Path) -> str:
    stack = getattr(xacro, "filestack", None) or []
    return str(stack[-1]) if stack and stack[-1] else str(top)


def read(path, search_path=None, **options):
    """The robot of a .xacro file (``xacro_args`` option: its arguments)."""
    from . import normalize_search_path, urdf

    p = Path(path)
    text, said = expand_noting(p, search_path, options.get("xacro_args"), options.get("allowed_roots"))
    tree, notes = urdf.parse_tolerant(text.encode(), str(p))
    notes = said + notes
    search = normalize_search_path(search_path)
    return urdf._read_tree(tree, str(p), search, notes, roots_for(p, search, options.get("allowed_roots")))


__all__ = ["expand", "expand_noting", "parse_args", "read", "SUFFIXES", "ROOT_TAGS"]
