"""COLLADA mesh primitives to triangles (formats/collada/geometry.py, issue 33): every primitive kind,
uniform and mixed polygon sizes, several primitives on one source and on two; each mesh holds the
vertices its triangles use, in source order, and its triangles renumbered into them.  Expected
triangles are written out by hand from the COLLADA spec (fans (v0, vi, vi+1), strips with every odd
triangle flipped)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import SchemaError
from robot_bridge.formats.collada.document import Document, parse
from robot_bridge.formats.collada.geometry import read_geometry

N = 12                                     # source vertices; vertex i is at (i, i * i, 1)


def _source(sid: str, n: int = N) -> str:
    pts = " ".join(f"{i} {i * i} 1" for i in range(n))
    return (f'<source id="{sid}_pos"><float_array id="{sid}_arr" count="{3 * n}">{pts}</float_array>'
            f'<technique_common><accessor source="#{sid}_arr" count="{n}" stride="3"/></technique_common>'
            f'</source><vertices id="{sid}_v"><input semantic="POSITION" source="#{sid}_pos"/></vertices>')


def _inputs(sid: str = "a", normals: bool = False) -> str:
    vertex = f'<input semantic="VERTEX" source="#{sid}_v" offset="0"/>'
    return vertex + ('<input semantic="NORMAL" source="#n" offset="1"/>' if normals else "")


def _with_normals(indices: str) -> str:
    """Each vertex index followed by a normal index (ignored, but it shifts every vertex index)."""
    return " ".join(f"{v} 99" for v in indices.split())


# (primitive element, its triangles as source vertex indices)
PRIMITIVES = {
    "triangles": (f'<triangles count="2">{_inputs()}<p>0 1 2 2 1 3</p></triangles>', [(0, 1, 2), (2, 1, 3)]),
    "triangles with normals": (f'<triangles count="2">{_inputs(normals=True)}'
                               f'<p>{_with_normals("4 5 6 6 5 7")}</p></triangles>', [(4, 5, 6), (6, 5, 7)]),
    "polylist of triangles": (f'<polylist count="2">{_inputs()}<vcount>3 3</vcount><p>0 2 4 4 2 6</p>'
                              '</polylist>', [(0, 2, 4), (4, 2, 6)]),
    "polylist of quads": (f'<polylist count="2">{_inputs(normals=True)}<vcount>4 4</vcount>'
                          f'<p>{_with_normals("0 1 2 3 4 5 6 7")}</p></polylist>',
                          [(0, 1, 2), (0, 2, 3), (4, 5, 6), (4, 6, 7)]),
    "polylist of mixed sizes": (f'<polylist count="4">{_inputs()}<vcount>3 5 2 4</vcount>'
                                '<p>0 1 2 3 4 5 6 7 8 9 10 11 0 1</p></polylist>',
                                [(0, 1, 2), (3, 4, 5), (3, 5, 6), (3, 6, 7), (10, 11, 0), (10, 0, 1)]),
    "polylist of pentagons": (f'<polylist count="2">{_inputs()}<vcount>5 5</vcount>'
                              '<p>1 2 3 4 5 6 7 8 9 10</p></polylist>',
                              [(1, 2, 3), (1, 3, 4), (1, 4, 5), (6, 7, 8), (6, 8, 9), (6, 9, 10)]),
    "polylist cut short": (f'<polylist count="2">{_inputs()}<vcount>4 4</vcount><p>0 1 2 3 4 5 6</p>'
                           '</polylist>', [(0, 1, 2), (0, 2, 3), (4, 5, 6)]),
    "polylist of lines": (f'<polylist count="2">{_inputs()}<vcount>2 2</vcount><p>0 1 2 3</p></polylist>',
                          []),
    "polygons of quads": (f'<polygons count="2">{_inputs()}<p>8 9 10 11</p><p>0 4 8 11</p></polygons>',
                          [(8, 9, 10), (8, 10, 11), (0, 4, 8), (0, 8, 11)]),
    "polygons with a hole": (f'<polygons count="2">{_inputs()}<ph><p>0 1 2 3 4</p><h>1 2 3</h></ph>'
                             '<p>5 6 7</p></polygons>', [(5, 6, 7), (0, 1, 2), (0, 2, 3), (0, 3, 4)]),
    "trifans": (f'<trifans count="2">{_inputs(normals=True)}<p>{_with_normals("0 1 2 3")}</p>'
                '<p>4 99 5 99 6 99</p></trifans>', [(0, 1, 2), (0, 2, 3), (4, 5, 6)]),
    "one tristrip": (f'<tristrips count="1">{_inputs()}<p>0 1 2 3 4 5</p></tristrips>',
                     [(0, 1, 2), (2, 1, 3), (2, 3, 4), (4, 3, 5)]),
    "tristrip of one triangle": (f'<tristrips count="1">{_inputs()}<p>3 2 1</p></tristrips>', [(3, 2, 1)]),
    "two tristrips": (f'<tristrips count="2">{_inputs()}<p>0 1 2 3 4</p><p>6 7 8 9</p></tristrips>',
                      [(0, 1, 2), (2, 1, 3), (2, 3, 4), (6, 7, 8), (8, 7, 9)]),
    "empty": (f'<triangles count="0">{_inputs()}</triangles>', []),
}


def _document(prims: str) -> tuple[Document, object]:
    text = ('<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">'
            f'<library_geometries><geometry id="g"><mesh>{_source("a")}{_source("b", 6)}{prims}</mesh>'
            '</geometry></library_geometries></COLLADA>')
    tree, namespaces = parse(text.encode(), "mesh.dae")
    doc = Document(tree, "mesh.dae", namespaces)
    return doc, next(doc.root.iter("geometry"))


def _position(i: int) -> list[float]:
    return [float(i), float(i * i), 1.0]


def _check(geometry, expected) -> None:
    vertices, triangles = geometry.shape.vertices, geometry.shape.triangles
    used = sorted({v for t in expected for v in t})
    assert vertices.tolist() == [_position(i) for i in used]           # the vertices it uses, in source order
    assert triangles.dtype == np.int64 and triangles.shape == (len(expected), 3)
    assert vertices[triangles].tolist() == [[_position(v) for v in t] for t in expected]


@pytest.mark.parametrize("kind", list(PRIMITIVES))
def test_one_primitive(kind):
    doc, geometry = _document(PRIMITIVES[kind][0])
    [g] = read_geometry(doc, geometry, {}, None, lambda _msg: None)
    _check(g, PRIMITIVES[kind][1])


def test_every_primitive_on_one_source_and_on_two():
    """All kinds in one mesh (the primitives on one source are compacted together), and every other one
    moved to a second source (two groups)."""
    kinds = list(PRIMITIVES)
    doc, geometry = _document("".join(PRIMITIVES[k][0] for k in kinds))
    geometries = read_geometry(doc, geometry, {}, None, lambda _msg: None)
    assert [g.name for g in geometries] == [f"g_{i}" for i in range(len(kinds))]
    for g, kind in zip(geometries, kinds):
        _check(g, PRIMITIVES[kind][1])
    # every other primitive on source b (6 vertices): the ones that fit in it
    small = [k for k in kinds if all(v < 6 for t in PRIMITIVES[k][1] for v in t)]
    mixed = [PRIMITIVES[k][0].replace("#a_v", "#b_v") if i % 2 else PRIMITIVES[k][0]
             for i, k in enumerate(small)]
    doc, geometry = _document("".join(mixed))
    for g, kind in zip(read_geometry(doc, geometry, {}, None, lambda _msg: None), small):
        _check(g, PRIMITIVES[kind][1])


def test_many_primitives_on_a_large_source_are_sorted_once():
    """A source much larger than its primitives (CATIA's case): the (primitive, vertex) keys are sorted,
    not marked over the whole source; same result."""
    n = 5000
    pts = " ".join(f"{i} {i * i} 1" for i in range(n))
    source = (f'<source id="a_pos"><float_array id="a_arr" count="{3 * n}">{pts}</float_array>'
              f'<technique_common><accessor source="#a_arr" count="{n}" stride="3"/></technique_common>'
              '</source><vertices id="a_v"><input semantic="POSITION" source="#a_pos"/></vertices>')
    expected = [[(7 * k, 7 * k + 3000, 7 * k + 1), (7 * k + 1, 7 * k + 3000, 4999 - k)] for k in range(40)]
    prims = "".join(f'<triangles count="2">{_inputs()}<p>{" ".join(str(v) for t in e for v in t)}</p>'
                    '</triangles>' for e in expected)
    text = (f'<COLLADA version="1.4.1"><library_geometries><geometry id="g"><mesh>{source}{prims}</mesh>'
            '</geometry></library_geometries></COLLADA>')
    tree, namespaces = parse(text.encode())
    doc = Document(tree, "big.dae", namespaces)
    geometries = read_geometry(doc, next(doc.root.iter("geometry")), {}, None, lambda _msg: None)
    for g, e in zip(geometries, expected, strict=True):
        _check(g, e)


@pytest.mark.parametrize("p, bad", [("0 1 12", 12), ("0 -1 2", 2), ("0 1 99999999999", 99999999999)])
def test_an_index_beyond_the_source_names_its_primitive(p, bad):
    doc, geometry = _document(PRIMITIVES["triangles"][0] + f'\n<triangles count="1">{_inputs()}<p>{p}</p>'
                              '</triangles>')
    with pytest.raises(SchemaError, match=f"index {bad} out of range of {N} vertices") as info:
        read_geometry(doc, geometry, {}, None, lambda _msg: None)
    assert info.value.line == 2                     # the second <triangles>
