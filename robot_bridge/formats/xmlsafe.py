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

from ..errors import UnsafeInputError, WorkBudgetError, XMLSyntaxError
from . import limits

MAX_FILE_BYTES = limits.MAX_XML_BYTES        # kept for callers; the limit in force is limits.MAX_XML_BYTES
# A DOCTYPE in the prolog (after an optional BOM, XML declaration, comments, PIs): refused before
# libxml2 sees its entity declarations.  The post-parse docinfo check covers other encodings.
# (each alternative matches one way only: nested quantifiers here backtrack exponentially)
_PROLOG_DOCTYPE = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s|<\?(?:(?!\?>).)*\?>|<!--(?:(?!-->).)*-->)*<!DOCTYPE",
                             re.DOTALL)
_XINCLUDE = "{http://www.w3.org/2001/XInclude}*"
# elements nested in elements: libxml2's own limit without XML_PARSE_HUGE (huge_tree=False), checked as it
# parses; reported as a budget so that callers and tests see which bound stopped the file
MAX_XML_DEPTH = 256


def _parser(recover: bool = False) -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                           dtd_validation=False, huge_tree=False, remove_comments=False,
                           remove_pis=True, recover=recover)


def parse_bytes(data: bytes, *, file: str | os.PathLike | None = None,
                recover: bool = False) -> etree._ElementTree:
    """Parse ``data`` safely; raise XMLSyntaxError / UnsafeInputError naming ``file``."""
    name = str(file) if file is not None else None
    limits.check_size(len(data), limits.MAX_XML_BYTES, "XML document", name, "MAX_XML_BYTES")
    if not data.removeprefix(b"\xef\xbb\xbf").strip(b" \t\r\n"):
        raise XMLSyntaxError("empty file" if not data else "empty file (only whitespace)", file=name)
    if _PROLOG_DOCTYPE.match(data, 0, 1 << 20):
        _refuse_doctype(data, name)
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise XMLSyntaxError("binary data, not XML (NUL bytes)", file=name)
    try:
        tree = etree.ElementTree(etree.fromstring(data, _parser(recover)))
    except etree.XMLSyntaxError as exc:
        line = exc.lineno if getattr(exc, "lineno", None) else None
        msg = " ".join((exc.msg if getattr(exc, "msg", None) else str(exc)).split())   # one line
        if msg.startswith("Excessive depth in document"):
            raise WorkBudgetError(f"elements nested deeper than {MAX_XML_DEPTH} (MAX_XML_DEPTH, libxml2's "
                                  "limit)", budget="MAX_XML_DEPTH", work=MAX_XML_DEPTH, file=name,
                                  line=line) from None
        kind = "not well-formed XML" if _starts_like_xml(data) else "not XML"
        raise XMLSyntaxError(f"{kind}: {msg}", file=name, line=line) from None
    except ValueError as exc:  # e.g. unicode strings with encoding declaration
        raise XMLSyntaxError(f"cannot parse: {exc}", file=name) from None
    if tree.docinfo.internalDTD or tree.docinfo.doctype:
        raise UnsafeInputError("document type declarations (DTD/entities) are not allowed",
                               file=name, line=1)
    root = tree.getroot()
    if root is None:
        raise XMLSyntaxError("empty document", file=name)
    # two C-level filtered walks instead of a Python loop over every element; an entity is reported
    # before any XInclude element
    for el in root.iter(etree.Entity):
        raise UnsafeInputError(f"entity reference &{el.name}; is not allowed", file=name, line=el.sourceline)
    for el in root.iter(_XINCLUDE):
        raise UnsafeInputError("XInclude is not allowed", file=name, line=el.sourceline)
    return tree


def _refuse_doctype(data: bytes, name) -> None:
    """UnsafeInputError for a DOCTYPE in the prolog, naming its first entity declaration if any."""
    start = data.find(b"<!DOCTYPE")
    entity = re.compile(rb"<!ENTITY\s+(%\s+)?([^\s>]{1,80})").search(data, start, start + (1 << 20))
    if entity is not None:
        label = entity.group(2).decode("utf-8", "replace")
        raise UnsafeInputError(f"entity declaration <!ENTITY {label} ...> "
                               "refused: document type declarations (DTD/entities) are not allowed",
                               file=name, line=data.count(b"\n", 0, entity.start()) + 1)
    raise UnsafeInputError("document type declaration <!DOCTYPE ...> refused: document type declarations "
                           "(DTD/entities) are not allowed", file=name, line=data.count(b"\n", 0, start) + 1)


def _starts_like_xml(data: bytes) -> bool:
    """True when the first non-blank character is '<' (the file at least tries to be XML)."""
    head = data[:4096].lstrip(b" \t\r\n")
    return head.startswith((b"<", b"\xef\xbb\xbf<", b"\xff\xfe", b"\xfe\xff"))


def parse_file(path: str | os.PathLike, *, recover: bool = False,
               budget: limits.ReadBudget | None = None) -> etree._ElementTree:
    """Parse the file at ``path``: a regular file of at most ``limits.MAX_XML_BYTES`` (checked before
    reading; ``budget`` charged with its size), else a DescriptionError naming it."""
    return parse_bytes(read_file(path, budget=budget), file=Path(path), recover=recover)


def read_file(path: str | os.PathLike, *, budget: limits.ReadBudget | None = None) -> bytes:
    """The bytes :func:`parse_file` parses (same checks and errors)."""
    return limits.bounded_read(Path(path), limits.MAX_XML_BYTES, "XML document", limit_name="MAX_XML_BYTES",
                               budget=budget)


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
