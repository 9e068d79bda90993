"""library_geometries meshes, materials and the visual-scene node tree."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ...errors import SchemaError, WorkBudgetError
from ...model import Box, Cylinder, Geometry, Material, Mesh, Sphere
from .document import _STRICT_FROMSTRING, Document, floats

_PRIMITIVES = ("triangles", "polylist", "polygons", "trifans", "tristrips")
# read-only values shared by the geometries read_geometry returns (templates: the reader places a copy of
# each per instance) and by their meshes' unit scale (replaced, never changed in place, when scaled)
_IDENTITY = np.eye(4)
_IDENTITY.setflags(write=False)
_UNIT_SCALE = np.ones(3)
_UNIT_SCALE.setflags(write=False)


@dataclass
class VNode:
    """A visual-scene node with instance_node references expanded."""

    el: object
    parent: Optional["VNode"]
    world: np.ndarray                               # in the visual scene frame (may carry scale)
    children: list["VNode"] = field(default_factory=list)


# nodes of a visual scene once <instance_node> references are expanded: each reference builds its node's
# subtree again, so a few nodes referencing each other ten times a level are 10^depth nodes
MAX_VISUAL_NODES = 100_000


def visual_tree(doc: Document, scene_el, max_nodes: Optional[int] = None) -> list[VNode]:
    """Expanded node trees of a <visual_scene> (world transforms at the file's values); more than
    ``max_nodes`` (:data:`MAX_VISUAL_NODES`) expanded nodes is a :class:`WorkBudgetError`, raised when
    the count is passed (before the next node is built)."""
    roots: list[VNode] = []
    limit = MAX_VISUAL_NODES if max_nodes is None else max_nodes
    built = 0

    def build(el, parent: Optional[VNode], depth: int) -> VNode:
        nonlocal built
        if depth > 64:
            raise doc.error(SchemaError, "visual scene nodes nest deeper than 64 (instance_node cycle?)", el)
        if built >= limit:
            err = doc.error(WorkBudgetError, f"visual scene expands to more than {limit} nodes "
                            "(MAX_VISUAL_NODES: <instance_node> references built again at each use)", el)
            err.budget, err.work = "MAX_VISUAL_NODES", built
            raise err
        built += 1
        world = (parent.world if parent else np.eye(4)) @ doc.transform(el, allow_scale=True)
        node = VNode(el, parent, world)
        for child in el:
            if child.tag == "node":
                node.children.append(build(child, node, depth + 1))
            elif child.tag == "instance_node":
                target = doc.url(child.get("url"))
                if target is not None and target.tag == "node":
                    node.children.append(build(target, node, depth + 1))
        return node

    for el in scene_el.findall("node"):
        roots.append(build(el, None, 0))
    return roots


def walk(nodes: list[VNode]):
    for n in nodes:
        yield n
        yield from walk(n.children)


def _color(doc: Document, el) -> Optional[np.ndarray]:
    if el is None:
        return None
    c = el.find("color")
    if c is None:
        return None
    return doc.numbers(c)


def material_of(doc: Document, material_el) -> Material:
    """Material from a <material> (phong/lambert/blinn/constant of its effect),
    with OpenRAVE's transparency rules (colour alpha, then <transparency>)."""
    mat = Material(name=material_el.get("name") or material_el.get("id"))
    inst = material_el.find("instance_effect")
    effect = doc.url(inst.get("url")) if inst is not None else None
    if effect is None:
        return mat
    shading = None
    for tech in effect.iter("technique"):
        for name in ("phong", "blinn", "lambert", "constant"):
            shading = tech.find(name)
            if shading is not None:
                break
        if shading is not None:
            break
    if shading is None:
        return mat
    transparency = 0.0
    ambient = _color(doc, shading.find("ambient"))
    diffuse = _color(doc, shading.find("diffuse"))
    if ambient is not None and ambient.size >= 3:
        mat.ambient = tuple(float(v) for v in ambient[:3])
        if ambient.size >= 4:
            transparency = 1.0 - float(ambient[3])
    if diffuse is not None and diffuse.size >= 3:
        mat.diffuse = tuple(float(v) for v in diffuse[:3])
        if diffuse.size >= 4:
            transparency = 1.0 - float(diffuse[3])
    tr = shading.find("transparency/float")
    if tr is not None:
        transparency = 1.0 - doc.number(tr)
    mat.transparency = 0.0 if transparency >= 1.0 or transparency < 0.0 else transparency
    return mat


def _int_attr(doc: Document, el, name: str, default: int, low: int, high: int = 1 << 16) -> int:
    """A whole-number attribute within [low, high] (offsets, strides), else a SchemaError at ``el``."""
    text = el.get(name)
    try:
        value = default if text is None else int(text)
    except ValueError:
        raise doc.error(SchemaError, f"{name}={text!r}: expected a whole number", el) from None
    if not low <= value <= high:
        raise doc.error(SchemaError, f"{name}={value}: expected {low} to {high}", el)
    return value


_INT32 = 2 ** 31 - 1


def _indices(doc: Document, el, bounded: bool = True) -> np.ndarray:
    """A <p> or <vcount> list as int64 (whole numbers within int32, else a SchemaError at ``el``): one
    integer parse of the text; what it refuses (``1e3``, ``2.0``, junk) goes through the float parse,
    which accepts whole numbers in any spelling and names the first bad value.  ``bounded=False`` (a
    <p>) skips the int32 bounds of integers the integer parse took: the vertex indices are range-checked
    against their source after it (``_meshes``), the other inputs' indices are not used."""
    text = el.text
    if _STRICT_FROMSTRING and text and not text.isspace():
        try:
            values = np.fromstring(text, dtype=np.int64, sep=" ")
        except ValueError:
            pass
        else:
            if not bounded or not values.size or (values.max() <= _INT32 and values.min() >= -_INT32):
                return values
    try:
        values = floats(el.text)
    except ValueError as exc:
        raise doc.error(SchemaError, f"<{el.tag}>: {exc}", el) from None
    bad = ~np.isfinite(values) | (np.abs(values) > _INT32) | (values != np.round(values))
    if bad.any():
        raise doc.error(SchemaError, f"<{el.tag}>: expected whole numbers, got {values[bad][0]!r}", el)
    return values.astype(np.int64)


class _Parts:
    """A primitive's children read in one pass: its <vertices>, VERTEX input offset, index stride, <p>
    elements (those of <ph> after them) and first <vcount>."""

    __slots__ = ("vertices", "offset", "stride", "ps", "vcount")

    def __init__(self, doc: Document, primitive):
        self.vertices = self.offset = self.vcount = None
        self.stride = 0
        self.ps: list = []
        holes = None
        for child in primitive:
            tag = child.tag
            if tag == "input":
                offset = _int_attr(doc, child, "offset", 0, 0)
                if offset >= self.stride:
                    self.stride = offset + 1
                if child.get("semantic") == "VERTEX":
                    self.offset = offset
                    self.vertices = doc.url(child.get("source"))
            elif tag == "p":
                self.ps.append(child)
            elif tag == "vcount":
                if self.vcount is None:
                    self.vcount = child
            elif tag == "ph":
                p = child.find("p")
                if p is not None:
                    holes = [p] if holes is None else holes + [p]
        if self.offset is None or self.vertices is None:
            raise doc.error(SchemaError, "primitive has no VERTEX input", primitive)
        if holes:
            self.ps += holes


def _source_positions(doc: Document, parts: _Parts) -> np.ndarray:
    """The vertex positions (N,3) in metres of a primitive's <vertices>, computed once per document:
    CATIA shares one source among hundreds of primitives."""
    key = ("positions", parts.vertices)
    positions = doc.derived.get(key)
    if positions is None:
        positions = doc.derived[key] = _positions(doc, parts.vertices)
    return positions


def _positions(doc: Document, vertices) -> np.ndarray:
    pos = next((i for i in vertices.findall("input") if i.get("semantic") == "POSITION"), None)
    source = doc.url(pos.get("source")) if pos is not None else None
    array = source.find("float_array") if source is not None else None
    if array is None:
        raise doc.error(SchemaError, "vertices have no POSITION float_array source", vertices)
    values = doc.array(array)
    accessor = source.find("technique_common/accessor")
    vstride = _int_attr(doc, accessor, "stride", 3, 1) if accessor is not None else 3
    offset = _int_attr(doc, accessor, "offset", 0, 0, 1 << 31) if accessor is not None else 0
    if vstride < 3:
        raise doc.error(SchemaError, f"position accessor stride {vstride} < 3", accessor)
    values = values[offset:]
    count = values.size // vstride
    positions = values[:count * vstride].reshape(count, vstride)[:, :3] * doc.unit_of(source)
    positions.setflags(write=False)
    return positions


def _fans(idx: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Fan triangles (v0, vi, vi+1) of the polygons idx[start:start+size] (sizes < 3 give none)."""
    ntri = np.maximum(sizes - 2, 0)
    total = int(ntri.sum())
    if total == 0:
        return np.zeros((0, 3), np.int64)
    first = np.repeat(starts, ntri)
    i = np.arange(total) - np.repeat(np.cumsum(ntri) - ntri, ntri) + 1     # 1 .. size-2 per polygon
    return np.column_stack([idx[first], idx[first + i], idx[first + i + 1]])


def _strips(idx: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Strip triangles (vi, vi+1, vi+2), odd ones flipped to (vi+1, vi, vi+2), of each strip."""
    ntri = np.maximum(sizes - 2, 0)
    total = int(ntri.sum())
    if total == 0:
        return np.zeros((0, 3), np.int64)
    i = np.arange(total) - np.repeat(np.cumsum(ntri) - ntri, ntri)         # 0 .. size-3 per strip
    at = np.repeat(starts, ntri) + i
    a, b, c = idx[at], idx[at + 1], idx[at + 2]
    odd = (i % 2) == 1
    return np.column_stack([np.where(odd, b, a), np.where(odd, a, b), c])


_FAN_COLUMNS: dict[int, np.ndarray] = {}


def _uniform_fans(idx: np.ndarray, n: int, k: int) -> np.ndarray:
    """Fan triangles of ``n`` polygons of ``k`` vertices each, written one after the other in ``idx``:
    the columns (0, j, j+1) of each polygon's row, in one gather."""
    if k < 3 or n == 0:
        return np.zeros((0, 3), np.int64)
    if k == 3:
        return idx[:3 * n].reshape(n, 3)
    columns = _FAN_COLUMNS.get(k)
    if columns is None:
        columns = _FAN_COLUMNS[k] = np.array([c for j in range(1, k - 1) for c in (0, j, j + 1)])
    return idx[:k * n].reshape(n, k)[:, columns].reshape(-1, 3)


def _strip(idx: np.ndarray) -> np.ndarray:
    """``_strips`` of one strip: (vi, vi+1, vi+2), odd ones (vi+1, vi, vi+2)."""
    m = idx.size
    if m < 3:
        return np.zeros((0, 3), np.int64)
    tris = np.empty((m - 2, 3), np.int64)
    tris[:, 0] = idx[:-2]
    tris[:, 1] = idx[1:-1]
    tris[:, 2] = idx[2:]
    tris[1::2, 0] = idx[2:-1:2]
    tris[1::2, 1] = idx[1:-2:2]
    return tris


def _triangles(doc: Document, primitive, parts: _Parts) -> np.ndarray:
    kind = primitive.tag
    vertex_offset, stride = parts.offset, parts.stride
    if kind == "triangles" or kind == "polylist":
        idx = _indices(doc, parts.ps[0], bounded=False) if parts.ps else np.zeros(0, np.int64)
        if stride > 1 and idx.size:
            idx = idx[vertex_offset::stride]
        if kind == "triangles":
            n = idx.size // 3
            return idx[:n * 3].reshape(n, 3)
        vcount_el = parts.vcount
        counts = _indices(doc, vcount_el) if vcount_el is not None else np.zeros(0, np.int64)
        if not counts.size:
            return np.zeros((0, 3), np.int64)
        low, high = int(counts.min()), int(counts.max())
        if low < 0:
            raise doc.error(SchemaError, f"negative <vcount> {low}", vcount_el)
        if low == high and idx.size >= low * counts.size:     # one polygon size (as most exporters write)
            return _uniform_fans(idx, counts.size, low)
        starts = np.cumsum(counts) - counts
        sizes = np.clip(idx.size - starts, 0, counts)       # a short <p> ends the last polygons early
        return _fans(idx, starts, sizes)
    polygons = [_indices(doc, p, bounded=False)[vertex_offset::stride] for p in parts.ps]
    if not polygons:
        return np.zeros((0, 3), np.int64)
    if kind == "tristrips":
        if len(polygons) == 1:
            return _strip(polygons[0])
    else:
        sizes = [len(p) for p in polygons]
        if min(sizes) == max(sizes):
            return _uniform_fans(np.concatenate(polygons), len(sizes), sizes[0])
    sizes = np.array([len(p) for p in polygons], np.int64)
    starts = np.cumsum(sizes) - sizes
    idx = np.concatenate(polygons)
    return (_strips if kind == "tristrips" else _fans)(idx, starts, sizes)


def _primitive_shape(doc: Document, info, warn: Callable[[str], None]):
    """OpenRAVE geometry_info primitive (box/sphere/cylinder) and its transform."""
    unit = doc.unit_of(info)
    origin = doc.transform(info)
    box = info.find("box/half_extents")
    if box is not None:
        return Box(half_extents=doc.numbers(box, 3) * unit), origin
    sphere = info.find("sphere/radius")
    if sphere is not None:
        return Sphere(radius=doc.number(sphere) * unit), origin
    cyl = info.find("cylinder")
    if cyl is not None and cyl.find("radius") is not None and cyl.find("height") is not None:
        radius = doc.numbers(cyl.find("radius"))
        return Cylinder(radius=float(radius[0]) * unit, length=doc.number(cyl.find("height")) * unit), origin
    for child in info:
        if child.tag not in ("translate", "rotate", "matrix", "visible") and isinstance(child.tag, str):
            warn(f"geometry_info <{child.tag}> is not modelled; the geometry's mesh is used")
    return None, origin


def read_geometry(doc: Document, geometry_el, materials: dict[str, Material], path: Optional[str],
                  warn: Callable[[str], None], with_meshes: bool = True) -> list[Geometry]:
    """Geometries (in the geometry frame) of one <geometry>: an OpenRAVE primitive
    when geometry_info gives one, else one triangle mesh per primitive element."""
    gid = geometry_el.get("id") or geometry_el.get("name") or "geometry"
    visible = True
    info = geometry_el.find("extra[@type='geometry_info']/technique")
    if info is not None:
        vis = info.find("visible/bool")
        if vis is not None:
            visible = (vis.text or "").strip().lower() in ("true", "1")
        shape, origin = _primitive_shape(doc, info, warn)
        if shape is not None:
            mesh = geometry_el.find("mesh")
            first = next((p for p in mesh if p.tag in _PRIMITIVES), None) if mesh is not None else None
            material = materials.get(first.get("material")) if first is not None else None
            return [Geometry(shape=shape, origin=origin, material=material or Material(), name=gid,
                             visible=visible)]
    mesh = geometry_el.find("mesh")
    if mesh is None:
        kinds = sorted({c.tag for c in geometry_el if isinstance(c.tag, str) and c.tag != "extra"})
        warn(f"<geometry> kinds {kinds} are not read (only <mesh>)")
        return []
    out = []
    uri = f"{path}#{gid}" if path else f"#{gid}"
    prims = [p for p in mesh if p.tag in _PRIMITIVES]
    for child in mesh:
        if child.tag in ("lines", "linestrips"):
            warn(f"mesh <{child.tag}> primitives are not read (no surface)")
    meshes = _meshes(doc, prims) if with_meshes else {}
    for i, prim in enumerate(prims):
        name = gid if len(prims) == 1 else f"{gid}_{i}"
        vertices, triangles = meshes.get(i, (None, None))
        out.append(Geometry(shape=Mesh(uri=uri, path=path, scale=_UNIT_SCALE, vertices=vertices,
                                       triangles=triangles),
                            origin=_IDENTITY, material=materials.get(prim.get("material")) or Material(),
                            name=name, visible=visible))
    return out


def _meshes(doc: Document, prims: list) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{primitive index: (the vertices its triangles use, its triangles renumbered into them)}.  The
    primitives on one source are checked and compacted together: a few numpy calls per source, not per
    primitive (CATIA writes hundreds of small primitives on one source)."""
    groups: dict[int, tuple[np.ndarray, list[int], list[np.ndarray]]] = {}
    for i, prim in enumerate(prims):
        parts = _Parts(doc, prim)
        positions = _source_positions(doc, parts)
        group = groups.get(id(positions))
        if group is None:
            group = groups[id(positions)] = (positions, [], [])
        group[1].append(i)
        group[2].append(_triangles(doc, prim, parts))
    out = {}
    for positions, indices, tris in groups.values():
        count = len(positions)
        every = np.concatenate(tris) if len(tris) > 1 else tris[0]
        if every.size and (every.max() >= count or every.min() < 0):
            bad = next(k for k, t in enumerate(tris) if t.size and (t.max() >= count or t.min() < 0))
            raise doc.error(SchemaError, f"index {int(tris[bad].max())} out of range of {count} vertices",
                            prims[indices[bad]])
        if not every.size:
            for i in indices:
                out[i] = (np.zeros((0, 3)), np.zeros((0, 3), np.int64))
            continue
        if len(tris) == 1:
            used, inverse = _compact(every, count)
            out[indices[0]] = (positions[used], inverse)
            continue
        # (primitive, vertex) keys: each primitive's used vertices (sorted) and their renumbering, marked in
        # one pass when the keys' range is small, else sorted once
        sizes = [t.size for t in tris]
        base = np.arange(len(tris) + 1, dtype=np.int64) * count
        keys = every.reshape(-1) + np.repeat(base[:-1], sizes)
        if base[-1] <= 4 * keys.size + 256:
            mark = np.zeros(base[-1], np.bool_)
            mark[keys] = True
            used = np.flatnonzero(mark)
            inverse = (np.cumsum(mark) - 1)[keys]
        else:
            used, inverse = np.unique(keys, return_inverse=True)
        first = np.searchsorted(used, base)
        vertices = positions[used % count]
        inverse = inverse.reshape(-1) - np.repeat(first[:-1], sizes)
        firsts = first.tolist()
        start = 0
        for k, i in enumerate(indices):
            end = start + sizes[k]
            out[i] = (vertices[firsts[k]:firsts[k + 1]], inverse[start:end].reshape(-1, 3))
            start = end
    return out


def _compact(tris: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted vertex indices ``tris`` uses, ``tris`` renumbered into them as int64), as
    ``np.unique(tris, return_inverse=True)``.  A source at most a few times the primitive's size is
    marked in one pass over it (no sort); a larger one (CATIA shares one among hundreds of primitives)
    is never passed over whole: then the indices are sorted."""
    if count > 4 * tris.size + 256:
        used, inverse = np.unique(tris, return_inverse=True)
        return used, inverse.reshape(-1, 3).astype(np.int64)
    mark = np.zeros(count, np.bool_)
    mark[tris] = True
    used = np.flatnonzero(mark)
    renumber = np.empty(count, np.int64)
    renumber[used] = np.arange(used.size)
    return used, renumber[tris].reshape(-1, 3)


def bound_materials(doc: Document, instance_geometry) -> dict[str, Material]:
    out = {}
    for im in instance_geometry.findall("bind_material/technique_common/instance_material"):
        target = doc.url(im.get("target"))
        if target is not None:
            out[im.get("symbol")] = material_of(doc, target)
    return out


def mesh_triangles(doc: Document, charge: Callable[..., None]) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (metres) and triangles of a COLLADA document read as one mesh: the ``<instance_geometry>``
    of its visual scene (``scene/instance_visual_scene``, else the first ``<visual_scene>``; none: each
    ``<geometry>`` once), every instance placed by its node's world transform.  ``<instance_node>``
    references expand within :data:`MAX_VISUAL_NODES` (counted while the tree is built, before anything
    is read), and ``charge(n, line, what)`` is called with each instance's vertices and triangles before
    it is copied: a geometry instanced at many nodes costs its size at each."""
    ivs = doc.root.find("scene/instance_visual_scene")
    scene = doc.url(ivs.get("url")) if ivs is not None else None
    if scene is None:
        scene = doc.root.find("library_visual_scenes/visual_scene")
    if scene is not None:
        instances = [(ig, vn.world) for vn in walk(visual_tree(doc, scene)) for ig in vn.el
                     if ig.tag == "instance_geometry"]
        placed = [(doc.url(ig.get("url")), world, ig) for ig, world in instances]
    else:
        placed = [(g, _IDENTITY, g) for g in doc.root.iterfind("library_geometries/geometry")]
    read: dict = {}
    vertices, triangles, count = [], [], 0
    for geometry, world, where in placed:
        if geometry is None or geometry.tag != "geometry":
            continue
        if geometry not in read:
            mesh = geometry.find("mesh")
            prims = [p for p in mesh if p.tag in _PRIMITIVES] if mesh is not None else []
            charge(sum(len(p) for p in prims), getattr(geometry, "sourceline", None),
                   f"<geometry id={geometry.get('id')!r}>'s primitives")
            read[geometry] = list(_meshes(doc, prims).values())
        for v, t in read[geometry]:
            charge(v.size + t.size, getattr(where, "sourceline", None),
                   f"an instance of <geometry id={geometry.get('id')!r}> ({len(t)} triangles)")
            vertices.append(v @ world[:3, :3].T + world[:3, 3])
            triangles.append(t + count)
            count += len(v)
    if not triangles:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    return np.vstack(vertices), np.vstack(triangles)
