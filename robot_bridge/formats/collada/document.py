"""A parsed COLLADA document: namespace-free element tree, id index, SIDREF and
``<param>`` resolution, units and transform elements.

Tags are stripped of their namespace so COLLADA 1.4.1 and 1.5 documents, and MathML with or without
a prefix, read the same way: :func:`parse` drops the root's default namespace declaration
from the text before parsing (no element of the COLLADA namespace is then renamed one by one) and renames
only the elements of the namespaces still declared (MathML's); a tree parsed elsewhere has every
namespaced element renamed.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Iterable, Optional

import numpy as np
from lxml import etree

from ...errors import SchemaError
from ...model import transform as tf
from ..xmlsafe import element_path, parse_bytes

# instance_* elements whose target is searched when resolving SIDREFs through them
_FOLLOW = {"instance_node", "instance_kinematics_model", "instance_articulated_system", "instance_joint",
           "instance_kinematics_scene", "instance_physics_model"}


def _fromstring_is_strict() -> bool:
    """True when numpy's text parser refuses trailing garbage (numpy >= 2.3) instead of warning and
    returning the numbers before it."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            np.fromstring("1 x", sep=" ")
        except ValueError:
            return True
    return False


_STRICT_FROMSTRING = _fromstring_is_strict()


def floats(text: Optional[str]) -> np.ndarray:
    """Whitespace-separated numbers, in one numpy parse of the text."""
    if not text or text.isspace():     # numpy reads a blank string as [-1.0]
        return np.zeros(0)
    if _STRICT_FROMSTRING:
        try:
            return np.fromstring(text, sep=" ")
        except ValueError:
            pass                        # Python's float() spellings (1_000) and the error message below
    try:
        return np.array(text.split(), dtype=float)
    except ValueError:
        raise ValueError(f"expected numbers, got {text.strip()[:60]!r}") from None


# the root element's start tag after the prolog (BOM, XML declaration, comments, PIs), in an ASCII-compatible
# encoding; its ``xmlns="..."`` declaration; a namespace declaration (its URI).  Every quantifier is bounded
# or followed by what it cannot match: no backtracking on hostile text.
_ROOT_START = re.compile(rb"\A(?:\xef\xbb\xbf)?(?:\s|<\?(?:(?!\?>).)*\?>|<!--(?:(?!-->).)*-->)*"
                         rb"<[A-Za-z_][^<>]*>", re.DOTALL)
_DEFAULT_NS = re.compile(rb"""\sxmlns\s*=\s*(?:"[^"<]*"|'[^'<]*')""")
_NS_DECL = re.compile(rb"""xmlns(?::[\w.-]{1,256})?[ \t\r\n]{0,256}=[ \t\r\n]{0,256}"""
                      rb"""(?:"([^"<&{}]{0,4096})"|'([^'<&{}]{0,4096})')""")


def _drop_default_namespace(data: bytes) -> tuple[bytes, Optional[frozenset]]:
    """``data`` with the root start tag's ``xmlns="..."`` blanked out (newlines kept, so every line and
    element keeps its number), and the namespace URIs still declared in it; ``(data, None)`` when the root
    has no such declaration, or when a declaration's URI cannot be read from the bytes (not ASCII, a
    character reference, or "xmlns" written elsewhere): then every element is looked at."""
    root = _ROOT_START.match(data, 0, 1 << 20)
    decl = _DEFAULT_NS.search(data, root.start(), root.end()) if root is not None else None
    if decl is None:
        return data, None
    blank = re.sub(rb"[^\n]", b" ", decl.group())
    data = b"".join((data[:decl.start()], blank, data[decl.end():]))
    found = _NS_DECL.findall(data) if b"xmlns" in data else ()
    if len(found) != data.count(b"xmlns"):
        return data, None
    try:
        uris = {(dq or sq).decode("ascii") for dq, sq in found}
    except UnicodeDecodeError:
        return data, None
    uris.discard("")
    return data, frozenset(uris)


class _SidSearch:
    """A breadth-first walk below one start element, advanced only as far as lookups need; the first
    element reached for each sid is kept, so every lookup from the same start costs its new steps only."""

    __slots__ = ("queue", "seen", "first")

    def __init__(self, children):
        self.queue = deque(children)
        self.seen: set = set()
        self.first: dict[str, Any] = {}


def parse(data: bytes, file=None) -> tuple[etree._ElementTree, Optional[frozenset]]:
    """The COLLADA text ``data`` parsed by ``xmlsafe.parse_bytes`` with its root's default namespace
    dropped first, and the namespaces its elements may still be in (for :class:`Document`)."""
    data, namespaces = _drop_default_namespace(data)
    return parse_bytes(data, file=file), namespaces


class Document:
    def __init__(self, tree, file: str, namespaces: Optional[Iterable[str]] = None):
        """``namespaces``: every namespace URI an element of ``tree`` may be in (None: unknown)."""
        self.file = file
        self.root = tree.getroot()
        self.version = self.root.get("version", "")
        self.ids: dict[str, Any] = {}
        self._sids: Optional[set[str]] = None  # every sid of the document (at the first sid lookup): a
        #                                        lookup of any other is None
        if namespaces is None:
            named = self.root.iter(etree.Element)       # elements only (no comments/PIs), one pass
        else:                                           # a C-level filtered walk
            named = list(self.root.iter(*[f"{{{uri}}}*" for uri in namespaces])) if namespaces else ()
        for el in named:
            tag = el.tag
            if tag[0] == "{":
                el.tag = tag[tag.index("}") + 1:]
        ids = self.ids                                  # document order: the first of an id wins
        for el in self.root.xpath("descendant-or-self::*[@id]"):    # (faster than "//*[@id]", the same)
            ids.setdefault(el.get("id"), el)
        self.meter = self._unit(self.root)
        # elements holding an <asset> with a unit (keys keep the lxml proxies, so identity holds)
        self._units: dict[Any, float] = {}
        for asset in self.root.iter("asset"):
            holder = asset.getparent()
            if holder is not None and holder not in self._units:
                value = self._unit(holder)
                if value is not None:
                    self._units[holder] = value
        self._searches: dict[Any, _SidSearch] = {}     # start element -> its breadth-first walk
        self._params: dict[Any, dict[str, Any]] = {}   # element -> {sid or ref: first new/setparam child}
        self._scoped: dict[Any, dict[str, Any]] = {}   # element -> {sid: first newparam below it}
        self._paths: dict[str, Any] = {}               # "#id/sid" urls resolved
        self._arrays: dict[Any, np.ndarray] = {}       # parsed number elements (float_array, ...)
        self.derived: dict[tuple, Any] = {}            # readers' values computed once per element

    # -- errors --------------------------------------------------------------
    def error(self, cls, message: str, el=None):
        return cls(message, file=self.file, line=getattr(el, "sourceline", None),
                   element=element_path(el) if el is not None else None)

    def number(self, el, what: str = "number") -> float:
        got = (el.text or "").strip()
        try:
            value = float(got)
        except ValueError:
            raise self.error(SchemaError, f"expected a {what}, got {got[:40]!r}", el) from None
        if not np.isfinite(value):
            raise self.error(SchemaError, f"expected a finite {what}, got {got[:40]!r}", el)
        return value

    def array(self, el) -> np.ndarray:
        """``numbers(el)``, parsed once per document (read-only: sources are shared by primitives)."""
        values = self._arrays.get(el)
        if values is None:
            values = self.numbers(el)
            values.setflags(write=False)
            self._arrays[el] = values
        return values

    def numbers(self, el, count: Optional[int] = None) -> np.ndarray:
        try:
            values = floats(el.text)
        except ValueError as exc:
            raise self.error(SchemaError, str(exc), el) from None
        if count is not None and values.size != count:
            raise self.error(SchemaError, f"expected {count} numbers, got {values.size}", el)
        if not np.all(np.isfinite(values)):
            raise self.error(SchemaError, "numbers must be finite", el)
        return values

    # -- units ---------------------------------------------------------------
    @staticmethod
    def _unit(el) -> Optional[float]:
        unit = el.find("asset/unit")
        if unit is None or unit.get("meter") is None:
            return None if el.getparent() is not None else 1.0
        try:
            value = float(unit.get("meter"))
        except ValueError:
            return 1.0
        return value if value > 0 else 1.0

    def unit_of(self, el) -> float:
        """Metres per document length unit at ``el`` (nearest ``asset/unit``)."""
        node = el
        while node is not None:
            value = self._units.get(node)
            if value is not None:
                return value
            node = node.getparent()
        return self.meter

    # -- lookup --------------------------------------------------------------
    def url(self, url: Optional[str]):
        """The element a local URL (``#id``) points to, or None."""
        if not url:
            return None
        if url.startswith("#"):
            url = url[1:]
        elif "#" in url:
            return None  # external document: caller warns
        el = self.ids.get(url)
        if el is None and "/" in url:   # "#geometry/vertices": id path, as collada-dom resolves it
            if url in self._paths:
                return self._paths[url]
            first, *rest = url.split("/")
            el = self.ids.get(first)
            for part in rest:
                if el is None:
                    break
                el = next((c for c in el.iter() if c.get("id") == part or c.get("sid") == part), None)
            self._paths[url] = el
        return el

    def _children(self, el) -> Iterable:
        for child in el:
            if isinstance(child.tag, str):
                yield child
        if el.tag in _FOLLOW:
            target = self.url(el.get("url"))
            if target is not None:
                yield target

    def find_sid(self, start, sid: str):
        """Breadth-first search for ``sid`` below ``start`` (through instance_* urls): the element of
        that sid reached first.  One walk per start, resumed where the last lookup stopped."""
        search = self._searches.get(start)
        if search is None:
            search = self._searches[start] = _SidSearch(self._children(start))
        found = search.first.get(sid)
        if found is not None:
            return found
        if self._sids is None:                  # a mesh-only read never looks a sid up
            self._sids = set(self.root.xpath("descendant-or-self::*/@sid", smart_strings=False))
        if sid not in self._sids:
            return found
        queue, seen, first = search.queue, search.seen, search.first
        while queue:
            el = queue.popleft()
            if el in seen:
                continue
            seen.add(el)
            queue.extend(self._children(el))
            got = el.get("sid")
            if got is not None and got not in first:
                first[got] = el
                if got == sid:
                    return el
        return None

    def resolve(self, ref: Optional[str], context=None, follow_params: bool = True):
        """Element a SIDREF like ``kmodel1/joint3/axis0`` names (None if unresolved).

        The first component is an id (or ``.`` for ``context``); newparams holding a
        ``<SIDREF>`` are followed.  Falls back to a document-wide sid search."""
        if not ref:
            return None
        parts = [p for p in ref.strip().split("/") if p]
        if not parts:
            return None
        if parts[0] == "." and context is not None:
            el = context
        else:
            el = self.ids.get(parts[0])
            if el is None:
                el = self.find_sid(self.root, parts[0])
        for part in parts[1:]:
            if el is None:
                return None
            el = self._follow(el) if follow_params else el
            el = self.find_sid(el, part)
        return self._follow(el) if follow_params else el

    def _follow(self, el, depth: int = 0):
        while el is not None and el.tag == "newparam" and depth < 32:
            sidref = el.find("SIDREF")
            if sidref is None:
                return el
            el = self.resolve((sidref.text or "").strip(), el, follow_params=False)
            depth += 1
        return el

    def newparam(self, name: str, context):
        """The <newparam sid=name> in scope of ``context`` (nearest ancestor first)."""
        node = context
        while node is not None:
            found = self._params_of(node).get(name)
            if found is not None:
                return found
            if node.tag == "instance_kinematics_scene":
                target = self.url(node.get("url"))
                if target is not None:
                    found = self._newparams_below(target).get(name)
                    if found is not None:
                        return found
            node = node.getparent()
        return self._newparams_below(self.root).get(name)

    def _params_of(self, node) -> dict[str, Any]:
        """{sid or ref: the first <newparam>/<setparam> child of ``node`` carrying it}."""
        table = self._params.get(node)
        if table is None:
            table = self._params[node] = {}
            for child in node:
                if child.tag in ("newparam", "setparam"):
                    for key in (child.get("sid"), child.get("ref")):
                        if key is not None:
                            table.setdefault(key, child)
        return table

    def _newparams_below(self, node) -> dict[str, Any]:
        """{sid: the first <newparam> below ``node`` in document order}."""
        table = self._scoped.get(node)
        if table is None:
            table = self._scoped[node] = {}
            for p in node.iter("newparam"):
                sid = p.get("sid")
                if sid is not None:
                    table.setdefault(sid, p)
        return table

    def value(self, el, context=None):
        """Value of a common_*_or_param element: literal child (float/int/bool/SIDREF)
        or a ``<param>`` reference to a newparam.  Returns float/bool/element/None."""
        if el is None:
            return None
        param = el.find("param")
        if param is not None:
            name = (param.text or param.get("ref") or "").strip()
            p = self.newparam(name, el if context is None else context)
            return self.value(p, context) if p is not None else None
        for child in el:
            if child.tag == "float" or child.tag == "int":
                return self.number(child)
            if child.tag == "bool":
                return (child.text or "").strip().lower() in ("true", "1")
            if child.tag == "SIDREF":
                target = self.resolve((child.text or "").strip(), child)
                return self.value(target) if target is not None and target.tag == "newparam" else target
        text = (el.text or "").strip()
        if text:
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            try:
                number = float(text)
            except ValueError:
                number = float("nan")
            if not np.isfinite(number):
                raise self.error(SchemaError, f"expected a finite number, bool or <param>, got {text[:40]!r}",
                                 el)
            return number
        return None

    # -- transforms ----------------------------------------------------------
    def transform(self, el, scale_units: bool = True, allow_scale: bool = False) -> np.ndarray:
        """Compose ``el``'s transform children (translate/rotate/matrix/...) in order."""
        unit = self.unit_of(el) if scale_units else 1.0
        t = np.eye(4)
        for child in el:
            tag = child.tag
            if tag == "translate":
                t = t @ tf.translation(self.numbers(child, 3) * unit)
            elif tag == "rotate":
                v = self.numbers(child, 4)
                if np.linalg.norm(v[:3]) > 0 and v[3] != 0.0:
                    t = t @ tf.make(tf.rotation_axis_angle(v[:3], np.radians(v[3])))
            elif tag == "matrix":
                m = self.numbers(child, 16).reshape(4, 4).copy()
                m[:3, 3] *= unit
                rounded = tf.nearest_rotation(m[:3, :3], tf.ROUNDING_TOL)
                if rounded is not None:       # written with ~9 digits (CATIA): exact once, here
                    m[:3, :3] = rounded
                t = t @ m
            elif tag == "scale":
                s = self.numbers(child, 3)
                if not allow_scale and not np.allclose(s, 1.0):
                    raise self.error(SchemaError, "non-unit <scale> in a kinematic transform", child)
                t = t @ np.diag([s[0], s[1], s[2], 1.0])
            elif tag == "lookat":
                v = self.numbers(child, 9)
                eye, at, up = v[:3] * unit, v[3:6] * unit, v[6:]
                z = eye - at
                z /= np.linalg.norm(z)
                x = np.cross(up, z)
                x /= np.linalg.norm(x)
                t = t @ tf.make(np.column_stack([x, np.cross(z, x), z]), eye)
            elif tag == "skew":
                raise self.error(SchemaError, "<skew> transforms are not supported", child)
        return t
