"""Mesh files: OpenRAVE's Inventor / VRML subset, COLLADA through :mod:`.collada`, the rest through trimesh.

rviz and pinocchio cannot load Inventor (.iv) or VRML (.wrl) files, so the URDF
writer converts them to STL.  The subset read here is what robot model files
use (see the OpenRAVE corpus models):

- Inventor V1/V2 and VRML 1 ASCII: ``Separator``/``Group``, ``Coordinate3``,
  ``FaceSet`` (``numVertices``, ``startIndex``), ``IndexedFaceSet``
  (``coordIndex``), ``IndexedTriangleStripSet``, ``Translation``, ``Rotation``,
  ``RotationXYZ``, ``Scale``, ``Transform``, ``MatrixTransform``, ``Units``,
  ``File`` (relative include), and the ``Cube``/``Sphere``/``Cylinder``/``Cone``
  primitives (Inventor's y-axis convention);
- VRML 2: ``Transform`` with ``children``, ``Shape``/``geometry``,
  ``IndexedFaceSet`` with ``coord Coordinate { point [...] }``, ``DEF``/``USE``.

- Inventor V2.1 binary (Coin's writer) with the same nodes, ``VertexProperty``
  included (see :class:`_BinaryParser`); older binary files are refused.

``Material`` diffuse colours (bound per face or part by ``MaterialBinding``; ``VertexProperty``
``orderedRGBA``; VRML 2 ``Color`` per face or vertex) are kept per triangle (:func:`read_inventor_coloured`);
everything else (normals, hints, textures) is ignored: only geometry matters here.

This module is the one mesh loader: the URDF writer, the sensor simulation
scene and ``robot-bridge render`` all read mesh geometry through
:func:`load_triangles` / :func:`mesh_arrays`.  Every failure, including paths the
OS refuses (too long, a directory, unreadable, a broken link), is a typed
:class:`~robot_bridge.errors.DescriptionError` naming the file.
"""

from __future__ import annotations

import bisect
import os
import re
import stat
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import (DescriptionError, MissingFileError, SchemaError, UnsafeInputError,
                      UnsupportedFormatError, WorkBudgetError)
from ..model import transform as tf

INVENTOR_SUFFIXES = (".iv", ".wrl", ".vrml")
TRIMESH_SUFFIXES = ("stl", "obj", "off", "ply", "dae", "glb", "gltf")    # trimesh (.dae: formats.collada)
_UNITS = {"METERS": 1.0, "CENTIMETERS": 0.01, "MILLIMETERS": 0.001, "MICROMETERS": 1e-6, "MICRONS": 1e-6,
          "NANOMETERS": 1e-9, "ANGSTROMS": 1e-10, "KILOMETERS": 1000.0, "INCHES": 0.0254, "FEET": 0.3048,
          "FEET_US_SURVEY": 1200.0 / 3937.0, "YARDS": 0.9144, "MILES": 1609.344, "NAUTICAL_MILES": 1852.0}
# tokens, comments and line breaks (whitespace between them is skipped by findall)
_TOKEN = re.compile(r'\n|#[^\n]*|"(?:[^"\\]|\\.)*"|[{}\[\](),|]|[^\s{}\[\](),|"#]+')
_BLANK = np.zeros(256, dtype=bool)                  # byte lookup tables of _token_bound
_BLANK[list(b" \t\r\n\v\f")] = True
_PUNCTUATION = np.zeros(256, dtype=bool)
_PUNCTUATION[list(b"{}[](),|")] = True
_MAX_INCLUDE_DEPTH = 16
_MAX_BINARY_DEPTH = 200
# Bounds on what a file controls, checked before the work or allocation they guard.
MAX_MESH_BYTES = 64 * 1024 * 1024        # a mesh file's size, checked before it is read (as XML's)
MAX_INVENTOR_TRIANGLES = 1_000_000       # triangles of one Inventor/VRML file, its USEs and includes counted
MAX_INVENTOR_VISITS = 10_000             # nodes visited (a USE visits its node again)
# Work of one mesh read, in elements processed: tokens and binary array values read, every visit's field
# values (a USE'd node's again at each use), polygon corners and points transformed, triangles made.  A
# node visit is cheap, its size is not: 9,000 USEs of one 300,000-index face set are 2.7e9 elements.
MAX_MESH_WORK = 8_000_000
# Elements whose cost is more than one array value's, in array values (bench/mesh_work_bench.py measures
# them, docs/benchmarks.md has the numbers): an Inventor/VRML node parsed (its Python objects: ~10 us, the
# time of ~40 values), a COLLADA element of a mesh read (lxml's tree and the reader's pass over it), a token
# of trimesh's ASCII PLY and OFF parsers (twice an OBJ or STL token's time).
NODE_WORK = 40
XML_ELEMENT_WORK = 2
SLOW_TOKEN_WORK = 2
GLTF_NODE_WORK = 600         # a glTF node in trimesh's scene graph (~150 us at load ~11)
PRIMITIVE_WORK = 2_000       # making a Cube/Sphere/Cylinder/Cone (trimesh.creation: ~0.5 ms), once per node
MAX_INVENTOR_INCLUDES = 64               # File/Inline includes read for one mesh
MAX_NESTING = 200                        # nodes nested in nodes
_INT32 = 2 ** 31 - 1


class MeshBudget:
    """What one mesh read may still use, shared by the files it includes; ``work`` counts the elements
    processed so far (see :data:`MAX_MESH_WORK`), checked before the work it pays for."""

    def __init__(self, work: Optional[int] = None):
        self.limit = MAX_MESH_WORK if work is None else int(work)
        self.work = 0
        self.triangles = MAX_INVENTOR_TRIANGLES
        self.visits = MAX_INVENTOR_VISITS
        self.includes = MAX_INVENTOR_INCLUDES

    def left(self) -> int:
        return self.limit - self.work

    def charge(self, n: int, file=None, line: Optional[int] = None, what: str = "") -> None:
        """Count ``n`` elements of work about to be done; past the limit a :class:`WorkBudgetError`
        naming the file and the budget (the work is then not done and not counted)."""
        if self.work + n > self.limit:
            raise WorkBudgetError(
                f"mesh needs more than {self.limit} elements of work (MAX_MESH_WORK: tokens, array values, "
                f"points and corners of every visit, a USE'd node's at each use); {self.work} done"
                + (f", {n} more asked by {what}" if what else ""),
                budget="MAX_MESH_WORK", work=self.work, file=None if file is None else str(file), line=line)
        self.work += n


_Budget = MeshBudget


class _Node:
    __slots__ = ("type", "fields", "children", "line", "byte", "memo")

    def __init__(self, type_: str, line: Optional[int] = None, byte: Optional[int] = None):
        self.type = type_
        self.fields: dict[str, list] = {}
        self.children: list[_Node] = []
        self.memo: dict[str, object] = {}     # fields as numbers, a primitive's mesh: made once per node
        self.line, self.byte = line, byte       # where it starts: ASCII line, binary byte offset

    def where(self) -> str:
        return f"{self.type} (byte {self.byte})" if self.byte is not None else self.type


def _token_bound(text: str | bytes) -> int:
    """At least the tokens, comments and line breaks :data:`_TOKEN` finds in ``text``, counted in a few
    array passes before the tokenizer runs: runs of non-blanks, twice the punctuation (each splits a run),
    and the line breaks."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    data = np.frombuffer(raw, dtype=np.uint8)
    if not data.size:
        return 0
    blank = _BLANK[data]
    runs = int(np.count_nonzero(~blank[1:] & blank[:-1])) + int(not blank[0])
    return runs + 2 * int(np.count_nonzero(_PUNCTUATION[data])) + int(np.count_nonzero(data == 10))


def _is_number(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


class _Parser:
    def __init__(self, text: str, file: str, budget: Optional[MeshBudget] = None):
        """Tokens and their lines; every token and comment is work (``budget``), counted as it is found:
        the scan stops at the budget, not at the end of a 64 MB file."""
        budget = budget if budget is not None else MeshBudget()
        budget.charge(_token_bound(text), file, what="the file's tokens (at most)")
        raw = _TOKEN.findall(text)
        self.at = [i for i, t in enumerate(raw) if t != "\n" and t[0] != "#"]     # raw index of each token
        self.tokens = [raw[i] for i in self.at]
        # raw indices of line breaks (a string spanning lines: one per break in it) for line numbers
        self.breaks = [i for i, t in enumerate(raw) if t == "\n"]
        if '"' in text:
            spanning = [i for i, t in enumerate(raw) if t[0] == '"' and "\n" in t]
            self.breaks = sorted(self.breaks + [i for i in spanning for _ in range(raw[i].count("\n"))])
        self.pos = 0
        self.depth = 0
        self.file = file
        self.budget = budget
        self.defs: dict[str, _Node] = {}

    def line(self, pos: Optional[int] = None) -> int:
        """The 1-based line of token ``pos`` (default: the current one; past the end: the last line)."""
        pos = self.pos if pos is None else pos
        if not self.at:
            return 1
        return bisect.bisect_left(self.breaks, self.at[min(pos, len(self.at) - 1)]) + 1

    def error(self, message: str, at: Optional[int] = None) -> SchemaError:
        at = self.pos if at is None else at
        near = " ".join(self.tokens[max(0, at - 3):at + 3])
        return SchemaError(f"{message} (near {near!r})", file=self.file, line=self.line(at))

    def peek(self, k: int = 0) -> Optional[str]:
        i = self.pos + k
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of file")
        self.pos += 1
        return tok

    def nodes(self) -> list[_Node]:
        out = []
        while self.peek() is not None:
            out.append(self.node())
        return out

    def starts_node(self) -> bool:
        tok = self.peek()
        return tok in ("DEF", "USE") or (tok is not None and self.peek(1) == "{" and tok[0].isalpha())

    def node(self) -> _Node:
        line = self.line()
        tok = self.take()
        self.budget.charge(NODE_WORK, self.file, line, f"node {tok!r}")
        if tok == "USE":
            name = self.take()
            if name not in self.defs:     # also a USE inside its own DEF: a node cannot contain itself
                raise self.error(f"USE of undefined node {name!r}", at=self.pos - 1)
            return self.defs[name]
        def_name = None
        if tok == "DEF":
            def_name, tok = self.take(), self.take()
        if self.take() != "{":
            raise self.error(f"expected '{{' after node type {tok!r}")
        if self.depth >= MAX_NESTING:
            raise self.error(f"nodes nested deeper than {MAX_NESTING}")
        self.depth += 1
        node = _Node(tok, line=line)
        while True:
            nxt = self.peek()
            if nxt is None:
                raise self.error(f"unterminated node {tok!r}")
            if nxt == "}":
                self.pos += 1
                break
            if self.starts_node():
                node.children.append(self.node())
            else:
                name = self.take()
                node.fields[name] = self.value()
        self.depth -= 1
        if def_name:
            self.defs[def_name] = node
        return node

    def value(self) -> list:
        tok = self.peek()
        if tok == "[":
            self.pos += 1
            tokens = self.tokens
            try:
                end = tokens.index("]", self.pos)
            except ValueError:
                raise self.error("unterminated '['") from None
            run = tokens[self.pos:end]
            if "{" not in run and "DEF" not in run and "USE" not in run:     # values only: one slice
                self.pos = end + 1
                return [t for t in run if t != ","]
            items = []
            while self.peek() != "]":
                if self.peek() is None:
                    raise self.error("unterminated '['")
                if self.starts_node():
                    items.append(self.node())
                elif self.peek() == ",":
                    self.pos += 1
                else:
                    items.append(self.take())
            self.pos += 1
            return items
        if tok == "(":                  # e.g. SFImage, SFBitMask: not geometry
            while self.take() != ")":
                pass
            return []
        if self.starts_node():
            return [self.node()]
        if tok is not None and _is_number(tok):
            items = []
            while self.peek() is not None and _is_number(self.peek()):
                items.append(self.take())
                if self.peek() == ",":
                    self.pos += 1
            return items
        return [self.take()]


class _BinaryParser:
    """Inventor V2.1 binary (Coin's writer): big-endian int32/float32 words; a string is its length, its
    characters and zero padding to 4 bytes; a node is its type, an int of flags, an int whose low byte
    counts the fields that follow (each: name, value, an int of flags), then -- for groups -- a child
    count and the children; ``DEF name node`` / ``USE name`` as in ASCII.  A field's encoding depends on
    its type, which the file does not say: the fields robot meshes use are known here by name, anything
    else is refused naming the node and field."""

    _VEC3 = {"point", "vector", "vertex", "normal", "ambientColor", "diffuseColor", "specularColor",
             "emissiveColor", "translation", "scaleFactor", "center"}
    _MULTI_VEC3 = {"point", "vector", "vertex", "normal", "ambientColor", "diffuseColor", "specularColor",
                   "emissiveColor"}
    _MULTI_FLOAT = {"shininess", "transparency"}
    _MULTI_INT = {"coordIndex", "materialIndex", "normalIndex", "textureCoordIndex", "numVertices"}
    _MULTI_UINT = {"orderedRGBA"}
    _FLOAT = {"creaseAngle", "radius", "height", "width", "depth", "bottomRadius", "angle"}
    _INT = {"startIndex"}
    _ROTATION = {"rotation", "scaleOrientation"}
    _WORD = {"vertexOrdering", "shapeType", "faceType", "value", "units", "normalBinding", "materialBinding",
             "axis", "name", "filename"}
    _NODE = {"vertexProperty"}
    _GROUPS = {"Separator", "TransformSeparator", "Group", "Switch", "LOD", "LevelOfDetail", "Anchor"}

    def __init__(self, data: bytes, pos: int, file: str, budget: Optional[MeshBudget] = None):
        self.data, self.pos, self.file = data, pos, file
        self.defs: dict[str, _Node] = {}
        self.depth = 0
        self.budget = budget if budget is not None else MeshBudget()

    def error(self, message: str) -> SchemaError:
        return SchemaError(f"binary Inventor: {message} (byte {self.pos})", file=self.file)

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise self.error("unexpected end of file")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int32(self) -> int:
        return int(np.frombuffer(self._take(4), ">i4")[0])

    def floats(self, n: int) -> list[float]:
        return np.frombuffer(self._take(4 * n), ">f4").astype(float).tolist()

    def string(self) -> str:
        self.budget.charge(1, self.file, what=f"a string at byte {self.pos}")
        n = self.int32()
        if not 0 <= n <= 1 << 20:
            raise self.error(f"string length {n}")
        text = self._take(n).decode("latin-1")
        self._take(-n % 4)
        return text

    def nodes(self) -> list[_Node]:
        out = []
        while self.pos + 4 <= len(self.data):
            out.append(self.node())
        return out

    def node(self) -> _Node:
        start = self.pos
        self.budget.charge(NODE_WORK, self.file, what=f"a node at byte {start}")
        kind = self.string()
        if kind == "USE":
            name = self.string()
            if name not in self.defs:     # also a USE inside its own DEF: a node cannot contain itself
                raise self.error(f"USE of undefined node {name!r}")
            return self.defs[name]
        def_name = None
        if kind == "DEF":
            def_name, kind = self.string(), self.string()
        if self.depth >= _MAX_BINARY_DEPTH:
            raise self.error(f"nodes nested deeper than {_MAX_BINARY_DEPTH}")
        self.depth += 1
        node = self._body(_Node(kind, byte=start))
        self.depth -= 1
        if def_name is not None:
            self.defs[def_name] = node
        return node

    def _body(self, node: _Node) -> _Node:
        kind = node.type
        flags = self.int32()
        for _ in range(self.int32() & 0xFF):
            name = self.string()
            node.fields[name] = self.value(kind, name)
            self.int32()                                   # field flags
        if kind in self._GROUPS or flags & 0x2:
            count = self.int32()
            if not 0 <= count <= (len(self.data) - self.pos) // 8:      # a child is at least 8 bytes
                raise self.error(f"unexpected end of file: {kind} child count {count}, more than the bytes "
                                 "left hold")
            node.children = [self.node() for _ in range(count)]
        return node

    def value(self, kind: str, name: str) -> list:
        if name in self._NODE:
            return [self.node()]
        if name in self._WORD:
            return [self.string()]
        if name in self._MULTI_INT:
            return np.frombuffer(self._take(4 * self._count()), ">i4").tolist()
        if name in self._MULTI_UINT:
            return np.frombuffer(self._take(4 * self._count()), ">u4").tolist()
        if name in self._MULTI_FLOAT:
            return self.floats(self._count())
        if name in self._MULTI_VEC3 and not (kind == "Transform" or name in ("translation", "center")):
            return self.floats(3 * self._count())
        if name in self._VEC3:
            return self.floats(3)
        if name in self._ROTATION:
            return self.floats(4)
        if name in self._FLOAT:
            return self.floats(1)
        if name in self._INT:
            return [self.int32()]
        if name == "matrix":
            return self.floats(16)
        raise self.error(f"field {kind}.{name}: encoding not known (convert the file to ASCII)")

    def _count(self) -> int:
        n = self.int32()
        if not 0 <= n <= (len(self.data) - self.pos) // 4:     # checked before the array is allocated
            raise self.error(f"unexpected end of file: array length {n}, more than the bytes left hold")
        self.budget.charge(n, self.file, what=f"an array of {n} values at byte {self.pos}")
        return n


def _floats(node: _Node, name: str, default=None) -> np.ndarray:
    """A field's numbers (read-only: converted once per node, shared by every use of it)."""
    raw = node.fields.get(name)
    if raw is None:
        return np.asarray(default if default is not None else [], dtype=float)
    values = node.memo.get(name)
    if values is None:
        try:
            values = np.array([float(v) for v in raw if not isinstance(v, _Node)], dtype=float)
        except (TypeError, ValueError):
            got = " ".join(map(str, raw[:6]))
            raise SchemaError(f"{node.type}.{name}: expected numbers, got {got!r}") from None
        values.setflags(write=False)
        node.memo[name] = values
    return values


def _fixed(node: _Node, name: str, default) -> np.ndarray:
    """A field of exactly as many numbers as ``default`` has (a vector, a rotation, one number)."""
    values = _floats(node, name, default)
    if values.size != len(default):
        raise SchemaError(f"{node.type}.{name}: expected {len(default)} numbers, got {values.size}")
    return values


def _finite(node: _Node, name: str, default) -> np.ndarray:
    """:func:`_fixed`, refusing NaN and infinities (sizes of primitives)."""
    values = _fixed(node, name, default)
    if not np.all(np.isfinite(values)):
        raise SchemaError(f"{node.type}.{name}: expected finite numbers, got {values.tolist()}")
    return values


def _ints(node: _Node, name: str, default=None) -> np.ndarray:
    """An index or count field: whole numbers within int32 (-1 separates faces)."""
    values = _floats(node, name, default)
    bad = ~np.isfinite(values) | (np.abs(values) > _INT32) | (values != np.round(values))
    if bad.any():
        raise SchemaError(f"{node.type}.{name}: expected whole numbers, got {values[bad][0]!r}")
    return values.astype(np.int64)


def _triples(node: _Node, name: str) -> np.ndarray:
    """A field of 3-vectors (points) as (n, 3)."""
    values = _floats(node, name)
    if values.size % 3:
        raise SchemaError(f"{node.type}.{name}: expected x y z triples, got {values.size} numbers")
    return values.reshape(-1, 3)


class _Polys:
    """Polygons (or index groups) as one flat index array and each one's size."""

    __slots__ = ("flat", "sizes")

    def __init__(self, flat: np.ndarray, sizes: np.ndarray):
        self.flat = np.asarray(flat, dtype=np.int64).reshape(-1)
        self.sizes = np.asarray(sizes, dtype=np.int64).reshape(-1)

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.sizes) - self.sizes

    def firsts(self) -> np.ndarray:
        """Each polygon's first index (0 for an empty one)."""
        out = np.zeros(len(self.sizes), dtype=np.int64)
        full = self.sizes > 0
        out[full] = self.flat[self.starts[full]]
        return out


def _index_groups(indices: np.ndarray) -> _Polys:
    """An index field split at its -1 separators (coordIndex, colorIndex, materialIndex); a separator
    closes a group (two in a row: an empty one), a last group without one counts when not empty."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    negative = indices < 0
    ends = np.flatnonzero(negative)
    sizes = np.diff(np.concatenate([[-1], ends])) - 1
    tail = len(indices) - (int(ends[-1]) + 1 if ends.size else 0)
    if tail > 0:
        sizes = np.append(sizes, tail)
    return _Polys(indices[~negative], sizes)


def _strip_triangles(strips: _Polys) -> _Polys:
    """The triangles of triangle strips: (vi, vi+1, vi+2), odd ones (vi+1, vi, vi+2)."""
    ntri = np.maximum(strips.sizes - 2, 0)
    total = int(ntri.sum())
    i = np.arange(total) - np.repeat(np.cumsum(ntri) - ntri, ntri)         # 0 .. size-3 per strip
    at = np.repeat(strips.starts, ntri) + i
    idx = strips.flat
    a, b, c = idx[at], idx[at + 1], idx[at + 2]
    odd = (i % 2) == 1
    tris = np.column_stack([np.where(odd, b, a), np.where(odd, a, b), c])
    return _Polys(tris.reshape(-1), np.full(total, 3))


def _packed_colours(node: _Node, name: str) -> np.ndarray:
    """A field of 0xRRGGBBAA words (``orderedRGBA``: hexadecimal or decimal in ASCII) as uint32."""
    out = []
    for v in node.fields.get(name, []):
        try:
            out.append((int(v, 0) if isinstance(v, str) else int(v)) & 0xFFFFFFFF)
        except (TypeError, ValueError):
            raise SchemaError(f"{node.type}.{name}: expected 0xRRGGBBAA words, got {v!r}") from None
    return np.array(out, dtype=np.int64).reshape(-1)


def _colour_table(node: _Node, state: dict) -> tuple[Optional[np.ndarray], str]:
    """(diffuse colours (k, 3) or None, MaterialBinding) in force for an Inventor shape node: its
    ``VertexProperty``'s packed ``orderedRGBA`` and ``materialBinding`` replace the Material's."""
    for vp in node.fields.get("vertexProperty", []):
        if isinstance(vp, _Node) and vp.fields.get("orderedRGBA"):
            packed = _packed_colours(vp, "orderedRGBA")
            table = ((packed[:, None] >> np.array([24, 16, 8])) & 0xFF) / 255.0
            return table, str((vp.fields.get("materialBinding") or ["OVERALL"])[0])
    return state.get("diffuse_list"), state.get("binding", "OVERALL")


def _per_triangle(colour: Optional[np.ndarray], faces: _Polys) -> Optional[np.ndarray]:
    """A colour per face spread over the face's triangles (a fan of len - 2); one colour as it is."""
    if colour is None or np.ndim(colour) == 1 or len(colour) != len(faces):
        return colour
    return np.repeat(colour, np.maximum(faces.sizes - 2, 0), axis=0)


def _first_of_groups(indices: np.ndarray, n: int) -> np.ndarray:
    """The first entry of each of the first ``n`` groups of a per-vertex index field (0 where short)."""
    firsts = _index_groups(indices).firsts()[:n]
    return np.concatenate([firsts, np.zeros(n - len(firsts), dtype=np.int64)])


class _Collector:
    def __init__(self, file: Path, depth: int = 0, budget: Optional[MeshBudget] = None):
        self.file = file
        self.depth = depth
        self.budget = budget if budget is not None else MeshBudget()
        self.vertices: list[np.ndarray] = []
        self.triangles: list[np.ndarray] = []
        self.colours: list[np.ndarray] = []       # per triangle diffuse rgb (NaN: no Material)
        self.count = 0

    def add(self, points: np.ndarray, polygons: _Polys, t: np.ndarray, colour=None) -> None:
        """Polygons as triangle fans; indices, the triangle budget and the work (corners, points,
        triangles) are checked before the triangles are made."""
        sizes, flat = polygons.sizes, polygons.flat
        fans = np.maximum(sizes - 2, 0)
        n = int(fans.sum())
        if n == 0:
            return
        if n > self.budget.triangles:
            raise WorkBudgetError(f"more than {MAX_INVENTOR_TRIANGLES} triangles (MAX_INVENTOR_TRIANGLES: "
                                  "USE and includes counted)", budget="MAX_INVENTOR_TRIANGLES",
                                  work=MAX_INVENTOR_TRIANGLES - self.budget.triangles)
        self.budget.charge(flat.size + n, self.file, what=f"{n} triangles")
        self.budget.triangles -= n
        if flat.size and (flat.min() < 0 or flat.max() >= len(points)):
            bad = int(flat.max()) if flat.max() >= len(points) else int(flat.min())
            raise SchemaError(f"face index {bad} out of range ({len(points)} points)")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        first = np.repeat(starts, fans)                              # each triangle's polygon start
        k = np.arange(n) - np.repeat(np.cumsum(fans) - fans, fans) + 1   # its fan step, from 1
        tri = np.stack([flat[first], flat[first + k], flat[first + k + 1]], axis=1)
        rgb = np.full((1, 3), np.nan) if colour is None else np.asarray(colour, dtype=float).reshape(-1, 3)
        self.colours.append(np.broadcast_to(rgb if len(rgb) in (1, n) else rgb[:1], (n, 3)))
        # only the points the triangles use: a small face on a large Coordinate3 costs its corners
        if len(points) > 4 * flat.size + 256:
            used, inverse = np.unique(tri, return_inverse=True)
        else:
            mark = np.zeros(len(points), dtype=bool)
            mark[tri] = True
            used = np.flatnonzero(mark)
            renumber = np.empty(len(points), dtype=np.int64)
            renumber[used] = np.arange(used.size)
            inverse = renumber[tri]
        world = points[used] @ t[:3, :3].T + t[:3, 3]
        self.vertices.append(world)
        self.triangles.append(inverse.reshape(-1, 3) + self.count)
        self.count += len(world)

    # state: dict(t=4x4, coords=array, units=float)
    def walk(self, nodes: list[_Node], state: dict) -> None:
        """Visit nodes; every failure is a typed error naming this file and the node's line."""
        for node in nodes:
            if self.budget.visits <= 0:
                raise WorkBudgetError(f"more than {MAX_INVENTOR_VISITS} nodes to visit (MAX_INVENTOR_VISITS: "
                                      "USE counted)", budget="MAX_INVENTOR_VISITS", work=MAX_INVENTOR_VISITS,
                                      file=str(self.file), line=node.line)
            self.budget.visits -= 1
            # a visit reads the node's field values again, however often it is USE'd
            self.budget.charge(1 + sum(len(v) for v in node.fields.values()), self.file, node.line,
                               f"{node.where()}'s values")
            try:
                self.visit(node, state)
            except DescriptionError as err:
                if err.file is None:
                    err.message = f"{node.where()}: {err.message}" if node.byte is not None else err.message
                    err.with_location(file=self.file, line=node.line,
                                      element=None if err.message.startswith(node.type) else node.type)
                raise
            except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
                # a reader bug on malformed input: still typed and placed; ``internal`` marks it for the
                # fuzz tests, which count it as a failure
                err = SchemaError(f"{node.where()}: cannot read this node ({type(exc).__name__}: {exc})",
                                  file=str(self.file), line=node.line)
                err.internal = exc
                raise err from exc

    def visit(self, node: _Node, state: dict) -> None:
        kind = node.type
        t = state["t"]
        if kind in ("Separator", "TransformSeparator", "Group", "Switch", "Anchor", "Collision", "Billboard",
                    "LOD", "Shape"):
            children = node.children + [v for vs in node.fields.values() for v in vs if isinstance(v, _Node)]
            # an Inventor Group shares its state with what follows; everything else scopes it
            self.walk(children, state if kind == "Group" else dict(state))
        elif kind == "Transform":
            m = self._transform(node)
            children = node.children + [v for v in node.fields.get("children", []) if isinstance(v, _Node)]
            if "children" in node.fields or node.children:       # VRML 2: scopes its children
                self.walk(children, dict(state, t=t @ m))
            else:
                state["t"] = t @ m
        elif kind == "Translation":
            state["t"] = t @ tf.translation(_fixed(node, "translation", [0, 0, 0]))
        elif kind == "Rotation":
            state["t"] = t @ self._rotation(node, "rotation")
        elif kind == "RotationXYZ":
            name = str((node.fields.get("axis") or ["X"])[0])
            axis = {"X": [1, 0, 0], "Y": [0, 1, 0], "Z": [0, 0, 1]}.get(name)
            if axis is None:
                raise SchemaError(f"RotationXYZ.axis: expected X, Y or Z, got {name!r}")
            state["t"] = t @ tf.make(tf.rotation_axis_angle(axis, float(_fixed(node, "angle", [0])[0])))
        elif kind == "Scale":
            state["t"] = t @ np.diag([*_fixed(node, "scaleFactor", [1, 1, 1]), 1.0])
        elif kind == "MatrixTransform":
            m = _floats(node, "matrix")
            if m.size != 16:
                raise SchemaError(f"MatrixTransform.matrix: expected 16 numbers, got {m.size}")
            state["t"] = t @ m.reshape(4, 4).T           # Inventor matrices are row-vector convention
        elif kind == "Units":
            unit = (node.fields.get("units") or ["METERS"])[0]
            if unit not in _UNITS:
                raise SchemaError(f"Units: unknown unit {unit!r}")
            state["t"] = t @ np.diag([_UNITS[unit] / state["units"]] * 3 + [1.0])   # units scale what follows
            state["units"] = _UNITS[unit]
        elif kind in ("Coordinate3", "Coordinate"):
            state["coords"] = _triples(node, "point")
        elif kind == "FaceSet":
            start = _ints(node, "startIndex", [0])
            if start.size != 1:
                raise SchemaError(f"FaceSet.startIndex: expected 1 number, got {start.size}")
            start = int(start[0])
            available = len(state["coords"])
            if not 0 <= start <= available:
                raise SchemaError(f"FaceSet.startIndex {start} out of range ({available} points)")
            sizes, i = [], start
            for n in _ints(node, "numVertices", []).tolist():
                if n < 0:             # -1: the remaining points
                    n = available - i
                if i + n > available:        # checked before the face is made
                    raise SchemaError(f"FaceSet.numVertices: a face of {n} vertices from point {i} is out of "
                                      f"range ({available} points)")
                sizes.append(n)
                i += n
            polys = _Polys(np.arange(start, i), sizes)
            self.add(state["coords"], polys, t, _per_triangle(self._face_colours(node, state, polys), polys))
        elif kind in ("IndexedFaceSet", "IndexedTriangleStripSet"):
            coords = state["coords"]
            for v in node.fields.get("coord", []) + node.fields.get("vertexProperty", []):
                if isinstance(v, _Node):
                    coords = _triples(v, "point" if "point" in v.fields else "vertex")
            groups = _index_groups(_ints(node, "coordIndex"))
            faces = groups                                   # what a colour is bound to
            if kind == "IndexedTriangleStripSet":
                groups = _strip_triangles(faces)
                if not _colour_table(node, state)[1].startswith("PER_PART"):   # a part is a strip
                    faces = groups
            self.add(coords, groups, t, _per_triangle(self._face_colours(node, state, faces), faces))
        elif kind in ("Cube", "Box", "Sphere", "Cylinder", "Cone"):
            made = node.memo.get("primitive")
            if made is None:          # made once per node: a USE costs its triangles again, not the making
                self.budget.charge(PRIMITIVE_WORK, self.file, node.line, f"making a {kind}")
                made = node.memo["primitive"] = self._primitive(node)
            vertices, faces, placement = made
            self.add(vertices, _Polys(faces.reshape(-1), np.full(len(faces), 3)), t @ placement,
                     state.get("diffuse"))
        elif kind in ("File", "Inline"):
            name = str((node.fields.get("name") or node.fields.get("url") or [""])[0]).strip('"')
            if self.depth >= _MAX_INCLUDE_DEPTH:
                raise SchemaError(f"File includes nested deeper than {_MAX_INCLUDE_DEPTH}")
            if self.budget.includes <= 0:
                raise WorkBudgetError(f"more than {MAX_INVENTOR_INCLUDES} File/Inline includes "
                                      "(MAX_INVENTOR_INCLUDES)", budget="MAX_INVENTOR_INCLUDES",
                                      work=MAX_INVENTOR_INCLUDES)
            self.budget.includes -= 1
            if not name:
                raise SchemaError(f"{kind}: no file name")
            sub = _Collector(self.file.parent / name, self.depth + 1, self.budget)
            v, f = sub.read()
            self.add(v, _Polys(f.reshape(-1), np.full(len(f), 3)), t,
                     np.vstack(sub.colours) if sub.colours else None)
        elif kind == "Material":                 # several diffuse colours: per face as MaterialBinding says
            diffuse = _floats(node, "diffuseColor")
            if diffuse.size >= 3:
                state["diffuse_list"] = diffuse[:diffuse.size // 3 * 3].reshape(-1, 3)
                state["diffuse"] = state["diffuse_list"][0]
        elif kind == "MaterialBinding":
            state["binding"] = str((node.fields.get("value") or ["OVERALL"])[0])
        elif kind == "Appearance":               # VRML 2: Shape { appearance Appearance { material ... } }
            self.walk([v for vs in node.fields.values() for v in vs if isinstance(v, _Node)], state)
        else:
            self.walk(node.children, state)      # materials, normals, hints: no geometry

    @staticmethod
    def _face_colours(node: _Node, state: dict, faces: _Polys) -> Optional[np.ndarray]:
        """A colour per face of a face set ((len(faces), 3)), or the one colour in force (None: none).

        VRML 2: a ``Color`` node replaces the material's diffuse colour, per face (``colorPerVertex
        FALSE``: ``colorIndex`` or in order) or per vertex.  Inventor: the ``Material``'s diffuse colours
        as ``MaterialBinding`` binds them (``PER_FACE``/``PER_PART`` in order, ``*_INDEXED`` by
        ``materialIndex``).  A colour per vertex colours each face by its first corner (an STL face has one
        colour); an index past the table's end wraps around."""
        n = len(faces)
        first_corners = faces.firsts()
        color = [v for v in node.fields.get("color", []) if isinstance(v, _Node)]
        if color:
            table = _floats(color[0], "color")
            if table.size < 3:
                return state.get("diffuse")
            table = table[:table.size // 3 * 3].reshape(-1, 3)
            index = _ints(node, "colorIndex")
            if str((node.fields.get("colorPerVertex") or ["TRUE"])[0]).upper() == "FALSE":
                which = index[:n] if index.size >= n else np.arange(n)
            else:
                which = _first_of_groups(index, n) if index.size else first_corners
            return table[np.maximum(which, 0) % len(table)]
        table, binding = _colour_table(node, state)
        if table is None or len(table) < 2 or binding in ("OVERALL", "DEFAULT"):
            return table[0] if table is not None else None
        index = _ints(node, "materialIndex")
        if binding in ("PER_FACE", "PER_PART"):
            which = np.arange(n)
        elif binding in ("PER_FACE_INDEXED", "PER_PART_INDEXED"):
            which = index[:n] if index.size >= n else np.arange(n)
        elif binding == "PER_VERTEX":
            which = faces.starts
        elif binding == "PER_VERTEX_INDEXED":
            which = _first_of_groups(index, n) if index.size else first_corners
        else:
            return state.get("diffuse")
        return table[np.maximum(which, 0) % len(table)]

    @staticmethod
    def _primitive(node: _Node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(vertices, triangles, placement) of a Cube/Box, Sphere, Cylinder or Cone (Inventor's y axis)."""
        import trimesh

        kind = node.type
        if kind in ("Cube", "Box"):
            if "size" in node.fields:
                size = _finite(node, "size", [2, 2, 2])
            else:
                size = np.array([_finite(node, k, [2])[0] for k in ("width", "height", "depth")])
            mesh, placement = trimesh.creation.box(extents=size), np.eye(4)
        elif kind == "Sphere":
            mesh = trimesh.creation.icosphere(radius=float(_finite(node, "radius", [1])[0]))
            placement = np.eye(4)
        else:
            h = float(_finite(node, "height", [2])[0])
            y_up = tf.make(tf.rotation_axis_angle([1, 0, 0], -np.pi / 2))       # trimesh z -> Inventor y
            if kind == "Cylinder":
                mesh = trimesh.creation.cylinder(radius=float(_finite(node, "radius", [1])[0]), height=h)
                placement = y_up
            else:
                mesh = trimesh.creation.cone(radius=float(_finite(node, "bottomRadius", [1])[0]), height=h)
                placement = y_up @ tf.translation([0, 0, -h / 2])
        vertices = np.asarray(mesh.vertices, dtype=float)
        faces = np.asarray(mesh.faces, dtype=np.int64)
        vertices.setflags(write=False)
        faces.setflags(write=False)
        return vertices, faces, placement

    @staticmethod
    def _transform(node: _Node) -> np.ndarray:
        trans = _fixed(node, "translation", [0, 0, 0])
        scale = _fixed(node, "scaleFactor" if "scaleFactor" in node.fields else "scale", [1, 1, 1])
        center = _fixed(node, "center", [0, 0, 0])
        r = _Collector._rotation(node, "rotation")
        return (tf.translation(trans + center) @ r @ np.diag([*scale, 1.0]) @ tf.translation(-center))

    @staticmethod
    def _rotation(node: _Node, name: str) -> np.ndarray:
        """An axis-angle field (x y z angle) as a 4x4 transform (a zero axis: no rotation)."""
        rot = _fixed(node, name, [0, 0, 1, 0])
        if not np.all(np.isfinite(rot)):
            raise SchemaError(f"{node.type}.{name}: expected finite numbers, got {rot.tolist()}")
        return tf.make(tf.rotation_axis_angle(rot[:3], rot[3])) if np.any(rot[:3]) else np.eye(4)

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        data = read_mesh_bytes(self.file)
        head = data[:64].decode("latin-1")
        first = head.split("\n", 1)[0]
        if "binary" in first:
            if not first.startswith("#Inventor V2"):
                raise UnsupportedFormatError(f"{first.strip()!r} files are not supported (convert to ASCII)",
                                             file=str(self.file))
            self.walk(_BinaryParser(data, len(first) + 1, str(self.file), self.budget).nodes(),
                      {"t": np.eye(4), "coords": np.zeros((0, 3)), "units": 1.0})
            if not self.triangles:
                return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
            return np.vstack(self.vertices), np.vstack(self.triangles)
        if not head.startswith(("#Inventor", "#VRML")):
            raise UnsupportedFormatError("not an Inventor/VRML ASCII file (no '#Inventor' / '#VRML' header)",
                                         file=str(self.file))
        nodes = _Parser(data.decode("utf-8", errors="replace"), str(self.file), self.budget).nodes()
        self.walk(nodes, {"t": np.eye(4), "coords": np.zeros((0, 3)), "units": 1.0})
        if not self.triangles:
            return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
        return np.vstack(self.vertices), np.vstack(self.triangles)


def os_refusal(path: Path, exc: OSError, what: str = "mesh file") -> DescriptionError:
    """A typed error for a path the OS refused (too long, a directory, unreadable, a broken link)."""
    reason = exc.strerror or exc.__class__.__name__
    if isinstance(exc, FileNotFoundError):
        broken = " (broken symbolic link)" if _is_link(path) else ""
        return MissingFileError(f"{what} not found{broken}", file=str(path))
    return MissingFileError(f"{what} cannot be read: {reason}", file=str(path))


def _is_link(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:
        return False


def read_mesh_bytes(path: Path, limit: Optional[int] = None) -> bytes:
    """The bytes of a mesh file (at most ``limit``, default :data:`MAX_MESH_BYTES`), its size checked
    before it is read; OS refusals become :class:`MissingFileError`, a larger file or one that is not a
    regular file (a FIFO, a device) :class:`UnsafeInputError`."""
    limit = MAX_MESH_BYTES if limit is None else limit
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise MissingFileError("mesh path is a directory, not a file", file=str(path)) from None
    except OSError as exc:
        raise os_refusal(path, exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise MissingFileError("mesh path is a directory, not a file", file=str(path))
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeInputError("mesh path is not a regular file (a device, FIFO or socket)",
                                   file=str(path))
        if info.st_size > limit:
            raise UnsafeInputError(f"mesh file is {info.st_size} bytes, more than the {limit} allowed",
                                   file=str(path))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:                     # grew since fstat
            raise UnsafeInputError(f"mesh file is more than the {limit} bytes allowed", file=str(path))
        return data
    except OSError as exc:
        raise os_refusal(path, exc) from None
    finally:
        os.close(fd)


def read_inventor(path, budget: Optional[MeshBudget] = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (N x 3, metres when the file says its units) and triangles (M x 3) of an
    Inventor/VRML ASCII file, all transforms applied; ``budget`` (default: a new :class:`MeshBudget`)
    bounds the work and counts it."""
    return _Collector(Path(path), budget=budget).read()


def read_inventor_coloured(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`read_inventor` plus each triangle's diffuse colour (M x 3 rgb, NaN where no Material
    applies)."""
    collector = _Collector(Path(path))
    vertices, triangles = collector.read()
    colours = np.vstack(collector.colours) if collector.colours else np.zeros((0, 3))
    return vertices, triangles, colours


def colour_parts(vertices, triangles, colours
                 ) -> list[tuple[Optional[tuple[float, float, float]], np.ndarray]]:
    """The triangles grouped by diffuse colour, the largest surface area first: (rgb, or None for faces
    without a Material; the group's triangle rows)."""
    colours = np.asarray(colours, dtype=float).reshape(-1, 3)
    if len(colours) == 0:
        return []
    tri = np.asarray(vertices, dtype=float)[np.asarray(triangles)]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    keys = np.where(np.isnan(colours), -1.0, colours)          # no Material: one group of its own
    unique, index = np.unique(keys, axis=0, return_inverse=True)
    index = index.reshape(-1)
    totals = np.bincount(index, weights=area, minlength=len(unique))
    parts = []
    for g in sorted(range(len(unique)), key=lambda g: -totals[g]):
        rgb = None if unique[g][0] < 0 else tuple(float(c) for c in unique[g])
        parts.append((rgb, np.flatnonzero(index == g)))
    return parts


def dominant_colour(vertices, triangles, colours) -> Optional[tuple[float, float, float]]:
    """The diffuse colour covering the largest surface area (None when no face has one)."""
    return next((rgb for rgb, _ in colour_parts(vertices, triangles, colours) if rgb is not None), None)


def submesh(vertices, triangles, rows) -> tuple[np.ndarray, np.ndarray]:
    """The triangles ``rows`` as a mesh of their own (only the vertices they use)."""
    used, inverse = np.unique(np.asarray(triangles)[rows], return_inverse=True)
    return np.asarray(vertices)[used], inverse.reshape(-1, 3)


def is_inventor(path) -> bool:
    """Whether a mesh file is Inventor/VRML: by suffix, else by content (e.g. OpenRAVE's ``x.wrl.or``)."""
    path = Path(path)
    if path.suffix.lower() in INVENTOR_SUFFIXES:
        return True
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 16).startswith((b"#Inventor", b"#VRML"))
    except OSError:
        return False
    finally:
        os.close(fd)


def load_triangles(path, scale=None, budget: Optional[MeshBudget] = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of any supported mesh file, ``scale`` (per axis) applied; ``budget``
    (default: a new :class:`MeshBudget`) bounds the work and counts it."""
    p = Path(path)
    budget = budget if budget is not None else MeshBudget()
    if is_inventor(p):
        vertices, triangles = read_inventor(p, budget)
    elif p.suffix.lower() == ".dae":
        vertices, triangles = read_collada_mesh(p, budget)
    else:
        import io

        import trimesh

        data = read_mesh_bytes(p)            # first: a directory, a FIFO, a missing file say so
        kind = p.suffix.lower().lstrip(".")
        if kind not in TRIMESH_SUFFIXES:       # not archives or compressed files (trimesh reads those too)
            known = ", ".join("." + k for k in TRIMESH_SUFFIXES)
            raise UnsupportedFormatError(f"mesh format {p.suffix or 'without suffix'!r} is not read "
                                         f"(expected {known} or Inventor/VRML)", file=str(p))
        if kind == "stl":
            _check_stl(data, p)
        budget.charge(_trimesh_work(data, kind), p, what=f"the file's elements ({kind})")
        if kind in ("ply", "off"):
            _check_header_counts(data, kind, p, budget)
        if kind in ("gltf", "glb"):
            nodes = _gltf_nodes(data, kind)
            budget.charge(GLTF_NODE_WORK * nodes, p, what=f"{nodes} glTF nodes")
        try:
            scene = trimesh.load_scene(io.BytesIO(data), file_type=kind, resolver=_resolver(p, budget))
        except Exception as exc:       # trimesh raises many types for unreadable files
            raise UnsupportedFormatError(f"cannot read mesh: {type(exc).__name__}: {exc}",
                                         file=str(p)) from None
        # every instance of a geometry (glTF/COLLADA nodes) is a copy in the one mesh made of the scene
        for node in scene.graph.nodes_geometry:
            geometry = scene.geometry.get(scene.graph[node][1])
            size = len(getattr(geometry, "faces", ())) + len(getattr(geometry, "vertices", ()))
            budget.charge(size, p, what=f"instance {node!r} ({size} faces and vertices)")
        try:
            mesh = scene.to_mesh()
        except Exception as exc:
            raise UnsupportedFormatError(f"cannot read mesh: {type(exc).__name__}: {exc}",
                                         file=str(p)) from None
        vertices = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=float).reshape(-1, 3)
        triangles = np.asarray(getattr(mesh, "faces", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    if scale is not None:
        vertices = vertices * _scale3(scale)
    return vertices, triangles


def read_collada_mesh(path, budget: Optional[MeshBudget] = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a ``.dae`` file read as a mesh, by the package's own COLLADA reader (not
    trimesh's pycollada, which expands ``<instance_node>`` references before anything could count them):
    the hardened XML parser, the file's tokens charged first, ``<instance_node>`` expansion bounded by
    ``MAX_VISUAL_NODES``, and each geometry instance charged with its size before it is copied."""
    from .collada import open_document
    from .collada.geometry import mesh_triangles

    p = Path(path)
    budget = budget if budget is not None else MeshBudget()
    data = read_mesh_bytes(p)                # size and kind checked first, as for every mesh
    budget.charge(_token_bound(data) + XML_ELEMENT_WORK * data.count(b"<"), p,
                  what="the file's tokens and elements (at most)")
    doc = open_document(p)
    if doc.root.tag.lower() != "collada":
        raise UnsupportedFormatError(f"root element is <{doc.root.tag}>, not <COLLADA>", file=str(p))
    return mesh_triangles(doc, lambda n, line, what: budget.charge(n, p, line, what))


def _check_header_counts(data: bytes, kind: str, path: Path, budget: MeshBudget) -> None:
    """A PLY's element counts and an OFF's vertex and face counts, before trimesh allocates by them:
    the values they declare are work (charged), and the file must be able to hold them (an ASCII element
    is at least one token per property, a binary one at least one byte per property)."""
    if kind == "off":
        m = re.match(rb"\s*[A-Z]*OFF\s+(\d+)\s+(\d+)", data[:256])
        counts = [("vertex", int(m.group(1)), 3), ("face", int(m.group(2)), 4)] if m else []
        body, binary = data[m.end():] if m else b"", False
    else:
        end = data.find(b"end_header", 0, 1 << 16)
        if end < 0:
            return                                  # trimesh refuses it
        header = data[:end].decode("latin-1").split("\n")
        binary = any(line.startswith("format binary") for line in header)
        counts = []
        for line in header:
            words = line.split()
            if words[:1] == ["element"] and len(words) >= 3 and words[2].isdigit():
                counts.append((words[1], int(words[2]), 0))
            elif words[:1] == ["property"] and counts:
                name, n, props = counts[-1]
                counts[-1] = (name, n, props + 1)
        body = data[end + len(b"end_header"):]
    declared = sum(n * max(props, 1) for _, n, props in counts)
    budget.charge(declared, path, what=f"the {kind.upper()} header's element counts "
                  f"({', '.join(f'{n} {name}' for name, n, _ in counts)})")
    room = len(body) if binary else _token_bound(body)
    if declared > room:
        raise SchemaError(f"{kind.upper()} header counts {', '.join(f'{n} {name}' for name, n, _ in counts)} "
                          f"({declared} values), but the file holds at most {room}", file=str(path))


def _gltf_nodes(data: bytes, kind: str) -> int:
    """The nodes of a glTF document (its JSON chunk for .glb), counted before trimesh builds its scene graph;
    0 when it is not readable JSON (trimesh then refuses the file)."""
    import json

    if kind == "glb":
        if len(data) < 20 or data[16:20] != b"JSON":
            return 0
        data = data[20:20 + int.from_bytes(data[12:16], "little")]
    try:
        nodes = json.loads(data).get("nodes", [])
    except (ValueError, RecursionError, AttributeError):
        return 0
    return len(nodes) if isinstance(nodes, list) else 0


def _resolver(path: Path, budget: MeshBudget):
    """trimesh's resolver for the files a mesh names (OBJ materials, glTF buffers and images): inside the
    mesh's folder (trimesh's own rule), each a regular file within :data:`MAX_MESH_BYTES`, its words charged
    to ``budget`` before it is read -- never a FIFO that blocks or a device."""
    import trimesh

    class Bounded(trimesh.resolvers.FilePathResolver):
        def get(self, name: str) -> bytes:
            for candidate in (name.strip(), name.strip().lstrip("/"), os.path.split(name)[-1]):
                try:
                    found = self.absolute(candidate)
                except ValueError:
                    continue
                if found.exists():
                    size = found.stat().st_size
                    budget.charge(size // 4, path, what=f"the file it names, {found.name} ({size} bytes)")
                    return read_mesh_bytes(found)
            self.absolute(name)                  # outside the folder: trimesh's ValueError
            raise FileNotFoundError(name)

    return Bounded(path)


def _trimesh_work(data: bytes, kind: str) -> int:
    """The elements trimesh will read of a file, counted before it runs: a binary STL's triangles (9
    coordinates each), a binary glTF/PLY's 4-byte words, a text format's tokens (at most)."""
    if kind == "stl" and len(data) >= 84 and 84 + 50 * int.from_bytes(data[80:84], "little") == len(data):
        return 9 * int.from_bytes(data[80:84], "little")
    if kind == "glb" or (kind == "ply" and b"binary" in data[:200]):
        return len(data) // 4
    return _token_bound(data) * (SLOW_TOKEN_WORK if kind in ("ply", "off") else 1)


def _check_stl(data: bytes, path: Path) -> None:
    """A binary STL's triangle count against the file's size, before anything is allocated (an ASCII
    STL starts with ``solid`` and has no count)."""
    if len(data) < 84:
        if not data.lstrip()[:5].lower() == b"solid":
            raise SchemaError(f"binary STL shorter than its 84-byte header ({len(data)} bytes)",
                              file=str(path))
        return
    count = int.from_bytes(data[80:84], "little")
    if 84 + 50 * count == len(data):
        return
    if data.lstrip()[:5].lower() == b"solid":       # ASCII (a binary one's header may start so too)
        return
    raise SchemaError(f"binary STL header counts {count} triangles ({84 + 50 * count} bytes), but the file "
                      f"has {len(data)} bytes", file=str(path))


def _scale3(scale) -> np.ndarray:
    s = np.asarray(scale, dtype=float).reshape(-1)
    return np.full(3, s[0]) if s.size == 1 else s


def mesh_arrays(mesh, scaled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of a model :class:`~robot_bridge.model.Mesh`: its inline data, else its
    file through :func:`load_triangles`; ``scaled`` applies ``mesh.scale``.  A mesh whose file was
    not found, or cannot be read, raises a :class:`DescriptionError` naming it."""
    if mesh.vertices is not None and mesh.triangles is not None:
        vertices = np.asarray(mesh.vertices, dtype=float).reshape(-1, 3)
        triangles = np.asarray(mesh.triangles, dtype=np.int64).reshape(-1, 3)
    elif mesh.path is None:
        raise MissingFileError(f"mesh {mesh.uri!r} was not found")
    else:
        vertices, triangles = load_triangles(mesh.path)
    if scaled:
        vertices = vertices * _scale3(mesh.scale)
    return vertices, triangles


def stl_bytes(vertices, triangles) -> bytes:
    """A binary STL file's bytes."""
    import trimesh

    mesh = trimesh.Trimesh(vertices=np.asarray(vertices, dtype=float), faces=np.asarray(triangles),
                           process=False)
    return mesh.export(file_type="stl")


def export_stl(vertices, triangles, path) -> None:
    """Write a binary STL file."""
    Path(path).write_bytes(stl_bytes(vertices, triangles))
