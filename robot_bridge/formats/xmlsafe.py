"""Hardened XML parsing shared by every reader.

lxml with no entity expansion, no DTD loading or validation, no network, no
XInclude and huge-tree protection on.  A document that declares a DTD is
refused: robot files never need one and it is where entity attacks live.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from lxml import etree

from ..errors import UnsafeInputError, XMLSyntaxError

MAX_FILE_BYTES = 64 * 1024 * 1024
# A DOCTYPE in the prolog (after an optional BOM, XML declaration, comments, PIs): refused before
# libxml2 sees its entity declarations.  The post-parse docinfo check covers other encodings.
# (each alternative matches one way only: nested quantifiers here backtrack exponentially)
_PROLOG_DOCTYPE = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s|<\?(?:(?!\?>).)*\?>|<!--(?:(?!-->).)*-->)*<!DOCTYPE",
                             re.DOTALL)


def _parser(recover: bool = False) -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=False,
                           remove_pis=True, recover=recover)


def parse_bytes(data: bytes, *, file: str | os.PathLike | None = None,
                recover: bool = False) -> etree._ElementTree:
    """Parse ``data`` safely; raise XMLSyntaxError / UnsafeInputError naming ``file``."""
    name = str(file) if file is not None else None
    if len(data) > MAX_FILE_BYTES:
        raise UnsafeInputError(f"file is {len(data)} bytes, more than the {MAX_FILE_BYTES} allowed",
                               file=name)
    if _PROLOG_DOCTYPE.match(data, 0, 1 << 20):
        raise UnsafeInputError("document type declarations (DTD/entities) are not allowed", file=name,
                               line=data[:data.find(b"<!DOCTYPE")].count(b"\n") + 1)
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise XMLSyntaxError("binary data, not XML", file=name)
    try:
        tree = etree.ElementTree(etree.fromstring(data, _parser(recover)))
    except etree.XMLSyntaxError as exc:
        line = exc.lineno if getattr(exc, "lineno", None) else None
        msg = " ".join((exc.msg if getattr(exc, "msg", None) else str(exc)).split())   # one line
        raise XMLSyntaxError(f"not well-formed XML: {msg}", file=name, line=line) from None
    except ValueError as exc:  # e.g. unicode strings with encoding declaration
        raise XMLSyntaxError(f"cannot parse: {exc}", file=name) from None
    if tree.docinfo.internalDTD or tree.docinfo.doctype:
        raise UnsafeInputError("document type declarations (DTD/entities) are not allowed",
                               file=name, line=1)
    root = tree.getroot()
    if root is None:
        raise XMLSyntaxError("empty document", file=name)
    for el in root.iter():
        if isinstance(el, etree._Entity):
            raise UnsafeInputError(f"entity reference &{el.name}; is not allowed", file=name,
                                   line=el.sourceline)
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag.startswith("{http://www.w3.org/2001/XInclude}"):
            raise UnsafeInputError("XInclude is not allowed", file=name, line=el.sourceline)
    return tree


def parse_file(path: str | os.PathLike, *, recover: bool = False) -> etree._ElementTree:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UnsafeInputError(f"file is {size} bytes, more than the {MAX_FILE_BYTES} allowed",
                                   file=str(p))
        data = p.read_bytes()
    except OSError as exc:
        from ..errors import MissingFileError
        raise MissingFileError(f"cannot read file: {exc.strerror}", file=str(p)) from None
    return parse_bytes(data, file=p, recover=recover)


def local_name(el) -> str:
    """Tag without namespace, or '' for comments/PIs."""
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


def element_path(el) -> str:
    """A readable element path like /robot/joint[@name='j1']/limit."""
    parts = []
    while el is not None and isinstance(el.tag, str):
        name = local_name(el)
        label = el.get("name")
        parts.append(f"{name}[@name='{label}']" if label else name)
        el = el.getparent()
    return "/" + "/".join(reversed(parts))
