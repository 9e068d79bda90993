"""Structured hostile files per format, next to the random mutations of test_fuzz_files.py (which flip,
repeat and inflate what is there, and never built the amplification class of issue 41: a small node
used again and again, a reference expanded at every use, nesting, a header's count).

Each case is generated small (well under a few MB, in tmp_path) and must be refused with a typed error
naming its file, stopped by a bound the error names: a :class:`WorkBudgetError` carries the budget and
the work done when it stopped (never more than the budget), and the :class:`MeshBudget` the read was
given shows the work actually spent.  Wall time is never judged (pytest-timeout is the hang guard).
Where the hostile shape needs a file over these tests' size to pass the default budget (a 64 MB index
run), the budget is scaled down with the file by the same factor.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from fixtures.inventor import iv_binary
from robot_bridge import errors as E
from robot_bridge.formats import collada, load, meshes
from robot_bridge.formats.collada import geometry as collada_geometry
from robot_bridge.formats.xmlsafe import MAX_XML_DEPTH

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRIANGLE = "Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] }"
LIMITS = {"MAX_MESH_WORK": meshes.MAX_MESH_WORK, "MAX_INVENTOR_VISITS": meshes.MAX_INVENTOR_VISITS,
          "MAX_INVENTOR_TRIANGLES": meshes.MAX_INVENTOR_TRIANGLES,
          "MAX_VISUAL_NODES": collada_geometry.MAX_VISUAL_NODES, "MAX_XML_DEPTH": MAX_XML_DEPTH,
          "MAX_INSTANCED_TRIANGLES": collada.MAX_INSTANCED_TRIANGLES}
SMALL = 3 * 1024 * 1024                        # the largest file a case writes


def _write(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    assert path.stat().st_size < SMALL, path
    return path


def _refused(call, path: Path, error=E.DescriptionError):
    """The error ``call()`` raises: typed, naming ``path``, one line; a budget error within its budget."""
    with pytest.raises(error) as caught:
        call()
    err = caught.value
    assert getattr(err, "internal", None) is None, err            # a check, not the reader's safety net
    assert err.file is not None and str(path) in err.file and str(path) in str(err), str(err)
    assert "\n" not in str(err)
    if isinstance(err, E.WorkBudgetError):
        assert err.budget in str(err)
        assert 0 <= err.work <= LIMITS[err.budget], (err.budget, err.work)
    return err


def _read_mesh(path: Path, budget=None):
    budget = budget if budget is not None else meshes.MeshBudget()
    return lambda: meshes.load_triangles(path, budget=budget)


# -- DEF/USE amplification (Inventor ASCII and binary, VRML 1 and 2) ------------------------------------

def test_inventor_def_use_of_a_large_face_set(tmp_path):
    """Issue 41's shape at a tenth of its size: 30,000 ``-1`` indices (no triangle) USE'd 2,000 times."""
    path = _write(tmp_path / "wide.iv", "#Inventor V2.1 ascii\nSeparator {\n  " + TRIANGLE + "\n"
                  "  DEF F IndexedFaceSet { coordIndex [ " + "-1 " * 30_000 + "] }\n" + "  USE F\n" * 2_000
                  + "}\n")
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and err.work == budget.work
    assert budget.work > meshes.MAX_MESH_WORK - 30_002                # stopped at the visit that passed it
    assert meshes.MAX_INVENTOR_VISITS - budget.visits < 300           # ~265 of the 2,001 visits ran


@pytest.mark.parametrize("header, group", [("#Inventor V2.1 ascii", "Group"), ("#VRML V1.0 ascii", "Group"),
                                           ("#VRML V2.0 utf8", "Transform")])
def test_doubling_uses_are_stopped_at_the_visit_budget(tmp_path, header, group):
    """Each level USEs the one below twice: 2^40 nodes in 40 lines (a billion laughs of nodes)."""
    if group == "Transform":
        first = ("DEF A0 Transform { children [ Shape { geometry IndexedFaceSet { coord Coordinate "
                 "{ point [ 0 0 0, 1 0 0, 0 1 0 ] } coordIndex [ 0 1 2 -1 ] } } ] }")
        lines = [f"DEF A{i} Transform {{ children [ USE A{i - 1} USE A{i - 1} ] }}" for i in range(1, 41)]
    else:
        first = f"DEF A0 Group {{ {TRIANGLE} FaceSet {{ numVertices [ 3 ] }} }}"
        lines = [f"DEF A{i} Group {{ USE A{i - 1} USE A{i - 1} }}" for i in range(1, 41)]
    path = _write(tmp_path / ("doubling.wrl" if "VRML" in header else "doubling.iv"),
                  "\n".join([header, first, *lines]) + "\n")
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_INVENTOR_VISITS" and budget.visits == 0
    assert budget.work < 200_000                                      # 10,000 small visits' values
    assert meshes.MAX_INVENTOR_TRIANGLES - budget.triangles < meshes.MAX_INVENTOR_VISITS


def test_vrml2_shape_used_by_many_transforms(tmp_path):
    """A VRML 2 Shape of 10,000 triangles DEF'd once and USE'd 2,000 times: 2e7 triangles from ~200 KB."""
    faces = "0 1 2 -1 " * 10_000
    shape = ("DEF S Shape { geometry IndexedFaceSet { coord Coordinate { point [ 0 0 0, 1 0 0, 0 1 0 ] } "
             f"coordIndex [ {faces}] }} }}")
    path = _write(tmp_path / "shapes.wrl", "#VRML V2.0 utf8\nTransform { children [ " + shape + " ] }\n"
                  + "Transform { translation 1 0 0 children [ USE S ] }\n" * 2_000)
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget in ("MAX_MESH_WORK", "MAX_INVENTOR_TRIANGLES")
    assert budget.work <= meshes.MAX_MESH_WORK
    assert meshes.MAX_INVENTOR_TRIANGLES - budget.triangles <= meshes.MAX_INVENTOR_TRIANGLES


def test_binary_inventor_def_use_amplification(tmp_path):
    """The binary encoding of the same attack: a DEF'd 30,000-index face set USE'd 2,000 times."""
    words = ["Separator", 0, 0, 2 + 2_000, "Coordinate3", 0, 1, "point", 3,
             *map(float, [0, 0, 0, 1, 0, 0, 0, 1, 0]), 0,
             "DEF", "F", "IndexedFaceSet", 0, 1, "coordIndex", 30_000, *([-1] * 30_000), 0]
    words += ["USE", "F"] * 2_000
    path = _write(tmp_path / "binary_uses.iv", iv_binary(*words))
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and budget.work <= meshes.MAX_MESH_WORK
    assert meshes.MAX_INVENTOR_VISITS - budget.visits < 300


@pytest.mark.parametrize("primitive, maker", [("Sphere { radius 1 }", "icosphere"),
                                              ("Cylinder { radius 1 height 2 }", "cylinder"),
                                              ("Cone { bottomRadius 1 height 2 }", "cone"),
                                              ("Cube { width 1 height 1 depth 1 }", "box")])
def test_a_used_primitive_is_made_once(tmp_path, monkeypatch, primitive, maker):
    """A DEF'd Cone USE'd 9,990 times (70 KB) made 9,991 trimesh cones (~6 s); it is made once, charged
    PRIMITIVE_WORK once, and each use costs its triangles (within the visit and triangle budgets)."""
    import trimesh

    made = []
    real = getattr(trimesh.creation, maker)
    monkeypatch.setattr(trimesh.creation, maker, lambda *a, **k: made.append(1) or real(*a, **k))
    path = _write(tmp_path / "primitive.iv", "#Inventor V2.1 ascii\nSeparator {\n DEF S " + primitive + "\n"
                  + " USE S\n" * 9_990 + "}\n")
    budget = meshes.MeshBudget()
    try:
        meshes.load_triangles(path, budget=budget)
    except E.WorkBudgetError as err:
        assert err.budget in ("MAX_INVENTOR_TRIANGLES", "MAX_MESH_WORK") and str(path) in str(err)
    assert len(made) == 1
    assert budget.work < meshes.MAX_MESH_WORK


def test_file_includes_of_one_another_are_bounded(tmp_path):
    """Inventor ``File`` includes: each file includes the next one twice (2^k reads from k small files)."""
    for i in range(12):
        body = f'File {{ name "f{i + 1}.iv" }} File {{ name "f{i + 1}.iv" }}' if i < 11 else \
            f"{TRIANGLE} FaceSet {{ numVertices [ 3 ] }}"
        _write(tmp_path / f"f{i}.iv", f"#Inventor V2.1 ascii\nSeparator {{ {body} }}\n")
    path = tmp_path / "f0.iv"
    budget = meshes.MeshBudget()
    with pytest.raises(E.WorkBudgetError) as caught:
        meshes.load_triangles(path, budget=budget)
    err = caught.value
    assert err.budget == "MAX_INVENTOR_INCLUDES" and budget.includes == 0
    assert err.file and Path(err.file).parent == tmp_path and str(err.file) in str(err)   # the including file


# -- long index runs -------------------------------------------------------------------------------------

def test_long_index_run_is_refused_from_its_byte_count_before_tokenizing(tmp_path):
    """A run of 64 MB of ``-1`` (22 million indices, under the size cap) is more tokens than the budget;
    here 1 MB of them against a budget scaled down 64 times: refused before the tokenizer runs."""
    path = _write(tmp_path / "run.iv", "#Inventor V2.1 ascii\nSeparator {\n  " + TRIANGLE + "\n"
                  "  IndexedFaceSet { coordIndex [ " + "-1 " * 350_000 + "] }\n}\n")
    budget = meshes.MeshBudget(work=meshes.MAX_MESH_WORK // 64)
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and err.work == 0 == budget.work


def test_one_polygon_of_many_corners_is_paid_for_by_its_triangles(tmp_path):
    """One face of 200,000 corners is a fan of 199,998 triangles: its corners and triangles are charged
    before the fan is made; USE'd 20 times it passes the budget."""
    face = " ".join(str(i % 3) for i in range(200_000))
    path = _write(tmp_path / "fan.iv", "#Inventor V2.1 ascii\nSeparator {\n  " + TRIANGLE + "\n"
                  f"  DEF F IndexedFaceSet {{ coordIndex [ {face} ] }}\n" + "  USE F\n" * 20 + "}\n")
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget in ("MAX_MESH_WORK", "MAX_INVENTOR_TRIANGLES")
    assert meshes.MAX_INVENTOR_TRIANGLES - budget.triangles <= meshes.MAX_INVENTOR_TRIANGLES


def test_long_collada_index_run_is_charged(tmp_path):
    """A ``<p>`` of 300,000 indices on one triangle's three points, read as a mesh, against a budget
    scaled down: charged as tokens first, refused before pycollada or the instance copies."""
    p = " ".join(["0 1 2"] * 100_000)
    path = _write(tmp_path / "run.dae", _collada(f'<triangles count="100000">{_INPUT}<p>{p}</p></triangles>',
                                                 '<instance_geometry url="#g"/>'))
    budget = meshes.MeshBudget(work=200_000)
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and err.work == 0 == budget.work
    assert len(meshes.load_triangles(path)[1]) == 100_000                # the default budget reads it


def test_many_small_nodes_are_paid_for_as_they_are_parsed(tmp_path):
    """A file of small nodes costs its nodes' Python objects, more than their few tokens: each parsed node
    is NODE_WORK, charged before it is built, so 64 MB of them stop at the budget while parsing (here
    60,000 ASCII and 100,000 binary nodes against a budget scaled down to 1 million)."""
    text = _write(tmp_path / "nodes.iv",
                  "#Inventor V2.1 ascii\n" + "Translation { translation 1 2 3 } " * 60_000)
    budget = meshes.MeshBudget(work=1_000_000)
    err = _refused(_read_mesh(text, budget), text, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and "node 'Translation'" in str(err)
    assert budget.visits == meshes.MAX_INVENTOR_VISITS                   # stopped while parsing
    node = iv_binary("Info", 0, 0)[len(b"#Inventor V2.1 binary  \n"):]
    binary = _write(tmp_path / "nodes_binary.iv", b"#Inventor V2.1 binary  \n" + node * 100_000)
    budget = meshes.MeshBudget(work=1_000_000)
    err = _refused(_read_mesh(binary, budget), binary, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and "a node at byte" in str(err)
    assert 1_000_000 - budget.work < meshes.NODE_WORK + 2
    elements = _write(tmp_path / "elements.dae", '<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/'
                      '2005/11/COLLADASchema" version="1.4.1">' + "<a/>" * 500_000 + "</COLLADA>")
    budget = meshes.MeshBudget(work=meshes.XML_ELEMENT_WORK * 400_000)
    err = _refused(_read_mesh(elements, budget), elements, E.WorkBudgetError)
    assert err.work == 0 == budget.work and "elements" in str(err)       # counted before lxml parses it


# -- deep nesting ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opening, closing", [("Separator { ", "} "), ("Group { ", "} "),
                                              ("Transform { children [ ", "] } ")])
def test_deeply_nested_inventor_nodes(tmp_path, opening, closing):
    path = _write(tmp_path / "deep.wrl", "#VRML V2.0 utf8\n" + opening * 20_000 + closing * 20_000)
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.SchemaError)
    assert f"nested deeper than {meshes.MAX_NESTING}" in str(err)
    assert budget.work <= meshes.MAX_MESH_WORK
    assert budget.visits == meshes.MAX_INVENTOR_VISITS                   # refused while parsing: none visited


def test_deeply_nested_brackets_and_binary_nodes(tmp_path):
    """Brackets do not nest in this reader (a field's ``[`` runs to the first ``]``): 200,000 of them are
    one flat field, read in one pass of its tokens; left open, they are refused at the end of the file."""
    brackets = _write(tmp_path / "brackets.iv", "#Inventor V2.1 ascii\nSeparator { Info { string "
                      + "[ " * 200_000 + "] }\n}\n")
    budget = meshes.MeshBudget()
    assert meshes.load_triangles(brackets, budget=budget)[1].shape == (0, 3)
    assert budget.work <= 4 * 200_000 + 200           # the tokens (at most twice per bracket), one visit's
    unclosed = _write(tmp_path / "unclosed.iv", "#Inventor V2.1 ascii\nSeparator { Info { string "
                      + "[ " * 200_000 + "\n")
    assert "unterminated" in str(_refused(_read_mesh(unclosed), unclosed, E.SchemaError))
    binary = _write(tmp_path / "deep_binary.iv", iv_binary(*["Separator", 0, 0, 1] * 20_000))
    err = _refused(_read_mesh(binary), binary, E.SchemaError)
    assert "nested deeper than" in str(err)


def _nested_urdf(depth: int) -> str:
    return ('<robot name="r"><link name="a"><visual><geometry><box size="1 1 1"/></geometry></visual>'
            + "<x>" * depth + "</x>" * depth + "</link></robot>")


def _nested_openrave(depth: int) -> str:
    return ('<KinBody name="r"><Body name="b">' + '<Geom type="box"><extents>1 1 1</extents>' * depth
            + "</Geom>" * depth + "</Body></KinBody>")


def _nested_collada(depth: int) -> str:
    text = (FIXTURES / "collada" / "interface_type.dae").read_text()
    anchor = '<rotate sid="j3_axis">0 0 1 0</rotate>'
    return text.replace(anchor, anchor + "<node>" * depth + "</node>" * depth)


@pytest.mark.parametrize("suffix, make", [(".urdf", _nested_urdf), (".kinbody.xml", _nested_openrave),
                                          (".dae", _nested_collada)])
def test_deeply_nested_xml_is_stopped_by_the_parser(tmp_path, suffix, make):
    """20,000 elements deep (< 1 MB): libxml2 stops at MAX_XML_DEPTH as it parses; just under it, the
    reader loads or refuses the file (COLLADA's visual scene: 64 levels) with a typed error."""
    path = _write(tmp_path / f"deep{suffix}", make(20_000))
    err = _refused(lambda: load(str(path)), path, E.WorkBudgetError)
    assert err.budget == "MAX_XML_DEPTH" and err.work == MAX_XML_DEPTH and err.line is not None
    shallow = _write(tmp_path / f"shallow{suffix}", make(MAX_XML_DEPTH - 12))
    try:
        load(str(shallow))
    except E.DescriptionError as caught:
        assert getattr(caught, "internal", None) is None and str(shallow) in str(caught)


# -- COLLADA instance amplification ----------------------------------------------------------------------

_INPUT = '<input semantic="VERTEX" source="#v" offset="0"/>'


def _collada(primitive: str, root_children: str, library_nodes: str = "") -> str:
    """A mesh-only COLLADA document: geometry ``g`` (points of one triangle and ``primitive``), optional
    ``<library_nodes>``, a visual scene whose one node holds ``root_children``."""
    return ('<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" '
            'version="1.4.1"><asset><unit meter="1"/><up_axis>Z_UP</up_axis></asset><library_geometries>'
            '<geometry id="g"><mesh><source id="p"><float_array id="pa" count="9">0 0 0 1 0 0 0 1 0'
            '</float_array><technique_common><accessor source="#pa" count="3" stride="3"><param name="X" '
            'type="float"/><param name="Y" type="float"/><param name="Z" type="float"/></accessor>'
            '</technique_common></source><vertices id="v"><input semantic="POSITION" source="#p"/></vertices>'
            f'{primitive}</mesh></geometry></library_geometries>'
            + (f"<library_nodes>{library_nodes}</library_nodes>" if library_nodes else "")
            + '<library_visual_scenes><visual_scene id="s"><node id="root">'
            f'{root_children}</node></visual_scene></library_visual_scenes>'
            '<scene><instance_visual_scene url="#s"/></scene></COLLADA>')


def _levels(n: int, fan: int, leaf: str) -> str:
    return ("".join(f'<node id="a{i}">' + f'<instance_node url="#a{i + 1}"/>' * fan + "</node>"
                    for i in range(n)) + f'<node id="a{n}">{leaf}</node>')


def test_collada_mesh_instance_node_amplification(tmp_path):
    """A ``.dae`` read as a mesh (not a robot): six levels instancing the next ten times are 10^6 nodes
    from 2 KB; the package's reader counts them as it expands (pycollada never sees the file)."""
    triangle = f'<triangles count="1">{_INPUT}<p>0 1 2</p></triangles>'
    path = _write(tmp_path / "nodes.dae", _collada(triangle, '<instance_node url="#a0"/>',
                                                   _levels(6, 10, '<instance_geometry url="#g"/>')))
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_VISUAL_NODES" and err.work == collada_geometry.MAX_VISUAL_NODES
    assert budget.work < 1_000                                      # the file's tokens: no instance copied
    # three levels (1,000 instances) read, each instance placed
    small = _write(tmp_path / "small.dae", _collada(triangle, '<instance_node url="#a0"/>',
                                                    _levels(3, 10, '<instance_geometry url="#g"/>')))
    vertices, triangles = meshes.load_triangles(small)
    assert triangles.shape == (1_000, 3) and vertices.shape == (3_000, 3)


def test_collada_geometry_instanced_at_many_nodes(tmp_path):
    """A 20,000-triangle geometry instanced at 1,000 nodes (three levels of ten): 2e7 triangles."""
    p = " ".join(["0 1 2"] * 20_000)
    primitive = f'<triangles count="20000">{_INPUT}<p>{p}</p></triangles>'
    path = _write(tmp_path / "instances.dae", _collada(primitive, '<instance_node url="#a0"/>',
                                                       _levels(3, 10, '<instance_geometry url="#g"/>')))
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and budget.work <= meshes.MAX_MESH_WORK
    assert "instance of <geometry id='g'>" in str(err)


def test_collada_robot_geometry_instanced_at_many_nodes(tmp_path):
    """The same amplification inside a robot file (its link's node instances the node tree)."""
    p = " ".join(["0 1 2"] * 20_000)
    geometry = (f'<geometry id="big"><mesh><source id="bp"><float_array id="bpa" count="9">0 0 0 1 0 0 0 1 0'
                '</float_array><technique_common><accessor source="#bpa" count="3" stride="3">'
                '<param name="X" type="float"/><param name="Y" type="float"/><param name="Z" type="float"/>'
                '</accessor>'
                '</technique_common></source><vertices id="bv"><input semantic="POSITION" source="#bp"/>'
                '</vertices><triangles count="20000"><input semantic="VERTEX" source="#bv" offset="0"/>'
                f'<p>{p}</p></triangles></mesh></geometry>')
    text = (FIXTURES / "collada" / "interface_type.dae").read_text()
    assert "<library_geometries>" in text
    text = text.replace("<library_geometries>", "<library_geometries>" + geometry, 1)
    text = text.replace("<library_visual_scenes>", "<library_nodes>" + _levels(3, 20, '<instance_geometry '
                        'url="#big"/>') + "</library_nodes><library_visual_scenes>", 1)
    anchor = '<rotate sid="j3_axis">0 0 1 0</rotate>'
    text = text.replace(anchor, anchor + '<instance_node url="#a0"/>')
    path = _write(tmp_path / "robot_instances.dae", text)
    err = _refused(lambda: load(str(path)), path, E.WorkBudgetError)
    assert err.budget == "MAX_INSTANCED_TRIANGLES"
    assert collada.MAX_INSTANCED_TRIANGLES - 20_000 < err.work <= collada.MAX_INSTANCED_TRIANGLES


def _gltf(nodes: list, roots: list) -> str:
    """A glTF document of one triangle (its buffer inline) placed by ``nodes``."""
    import base64
    import json

    data = struct.pack("<9f", 0, 0, 0, 1, 0, 0, 0, 1, 0) + struct.pack("<3I", 0, 1, 2)
    return json.dumps({
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": roots}], "nodes": nodes,
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3", "max": [1, 1, 0],
                       "min": [0, 0, 0]},
                      {"bufferView": 1, "componentType": 5125, "count": 3, "type": "SCALAR"}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 36},
                        {"buffer": 0, "byteOffset": 36, "byteLength": 12}],
        "buffers": [{"byteLength": 48, "uri": "data:application/octet-stream;base64,"
                     + base64.b64encode(data).decode()}]})


@pytest.mark.parametrize("shape", ["wide", "deep"])
def test_gltf_nodes_are_counted_before_trimesh_builds_its_scene(tmp_path, monkeypatch, shape):
    """20,000 glTF nodes (390 KB), side by side or each the child of the one before, took ~3 s of trimesh's
    scene graph (a deep chain grows with the square of its depth) at 300,000 units of work: each is
    GLTF_NODE_WORK, counted from the JSON before trimesh runs."""
    n = 20_000
    if shape == "wide":
        text = _gltf([{"mesh": 0}] * n, list(range(n)))
    else:
        text = _gltf([{"children": [i + 1]} for i in range(n - 1)] + [{"mesh": 0}], [0])
    path = _write(tmp_path / f"{shape}.gltf", text)
    _no_trimesh(monkeypatch)
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and "20000 glTF nodes" in str(err)
    assert err.work == budget.work < 300_000                     # the file's tokens only
    monkeypatch.undo()
    small = _write(tmp_path / "small.gltf", _gltf([{"mesh": 0}] * 100, list(range(100))))
    assert meshes.load_triangles(small)[1].shape == (100, 3)


@pytest.mark.timeout(120)
def test_a_file_a_mesh_names_is_read_only_if_regular_and_bounded(tmp_path, monkeypatch):
    """An OBJ's ``mtllib`` naming a FIFO beside it blocked trimesh's resolver for ever (open() waits for a
    writer); one naming a large file was read whole.  Files a mesh names are regular files, their size
    charged before they are read."""
    os_fifo = tmp_path / "materials.mtl"
    import os

    os.mkfifo(os_fifo)
    path = _write(tmp_path / "fifo.obj", "mtllib materials.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    try:
        meshes.load_triangles(path)                 # trimesh may go on without the materials
    except E.DescriptionError as err:
        assert str(path) in str(err)
    big = tmp_path / "big.mtl"
    with open(big, "wb") as f:                     # sparse: 40 MB of size, nothing written
        f.truncate(40 << 20)
    path = _write(tmp_path / "big.obj", "mtllib big.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    read = []
    real = meshes.read_mesh_bytes
    monkeypatch.setattr(meshes, "read_mesh_bytes", lambda p, *a: read.append(Path(p).name) or real(p, *a))
    budget = meshes.MeshBudget(work=1_000_000)
    try:
        meshes.load_triangles(path, budget=budget)
    except E.DescriptionError as err:
        assert str(path) in str(err)
    assert "big.mtl" not in read and budget.work <= 1_000_000      # refused from its size, unread


# -- huge counts in headers ------------------------------------------------------------------------------

def _box(kind: str, **options) -> bytes:
    import trimesh

    data = trimesh.creation.box().export(file_type=kind, **options)
    return data if isinstance(data, bytes) else data.encode()


def _no_trimesh(monkeypatch):
    import trimesh

    def refuse(*args, **kwargs):
        raise AssertionError("trimesh was asked to read a file its header should have refused")

    monkeypatch.setattr(trimesh, "load_scene", refuse)


@pytest.mark.parametrize("count", [2 ** 32 - 1, 2 ** 31, 13, 11])
def test_binary_stl_triangle_count(tmp_path, monkeypatch, count):
    box = _box("stl")                                                   # 12 triangles
    path = _write(tmp_path / "count.stl", box[:80] + struct.pack("<I", count) + box[84:])
    _no_trimesh(monkeypatch)
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.SchemaError)
    assert f"header counts {count} triangles" in str(err) and budget.work == 0


_PLY_HEAD = ("ply\nformat {fmt} 1.0\nelement vertex {nv}\nproperty float x\nproperty float y\n"
             "property float z\nelement face {nf}\nproperty list uchar int vertex_indices\nend_header\n")


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian"])
@pytest.mark.parametrize("nv, nf, budget_name", [(2_000_000_000, 1, "MAX_MESH_WORK"),
                                                 (3, 4_000_000_000, "MAX_MESH_WORK"), (3, 100_000, None)])
def test_ply_element_counts(tmp_path, monkeypatch, fmt, nv, nf, budget_name):
    """A PLY header claiming more elements than the budget (refused as work) or than the file holds
    (refused as a schema error), either way before trimesh runs."""
    body = (b"0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n" if fmt == "ascii"
            else struct.pack("<9f", 0, 0, 0, 1, 0, 0, 0, 1, 0) + b"\x03" + struct.pack("<3i", 0, 1, 2))
    path = _write(tmp_path / "count.ply", _PLY_HEAD.format(fmt=fmt, nv=nv, nf=nf).encode() + body)
    _no_trimesh(monkeypatch)
    budget = meshes.MeshBudget()
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError if budget_name else E.SchemaError)
    if budget_name:
        assert err.budget == budget_name and err.work == budget.work < 1_000    # the header's tokens only
    else:
        assert "header counts" in str(err) and budget.work < meshes.MAX_MESH_WORK
    # the true counts read
    good = _write(tmp_path / "good.ply", _PLY_HEAD.format(fmt=fmt, nv=3, nf=1).encode() + body)
    monkeypatch.undo()
    assert meshes.load_triangles(good)[1].tolist() == [[0, 1, 2]]


@pytest.mark.parametrize("counts, error", [("2000000000 1 0", E.WorkBudgetError),
                                           ("3 2000000000 0", E.WorkBudgetError),
                                           ("3000 1 0", E.SchemaError)])
def test_off_counts(tmp_path, monkeypatch, counts, error):
    path = _write(tmp_path / "count.off", f"OFF\n{counts}\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    _no_trimesh(monkeypatch)
    _refused(_read_mesh(path), path, error)


@pytest.mark.parametrize("face", ["f 1 2 2000000000", "f -2000000000 2 3"])
def test_obj_indices_past_the_vertices(tmp_path, face):
    """OBJ has no header: a face's index is its count; one far past the vertices is a typed refusal."""
    path = _write(tmp_path / "index.obj", f"v 0 0 0\nv 1 0 0\nv 0 1 0\n{face}\n")
    _refused(_read_mesh(path), path)


def test_obj_of_more_faces_than_the_budget(tmp_path):
    """A text format's elements are counted before trimesh reads it: 120,000 faces against a budget
    scaled down to 100,000 elements."""
    path = _write(tmp_path / "faces.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\n" + "f 1 2 3\n" * 120_000)
    budget = meshes.MeshBudget(work=100_000)
    err = _refused(_read_mesh(path, budget), path, E.WorkBudgetError)
    assert err.budget == "MAX_MESH_WORK" and budget.work == 0


@pytest.mark.parametrize("where, count", [("float_array", "2000000000"), ("triangles", "2000000000"),
                                          ("accessor", "4000000000")])
def test_collada_count_attributes(tmp_path, where, count):
    """COLLADA's ``count`` attributes are not trusted: the arrays are as long as their text."""
    text = _collada(f'<triangles count="1">{_INPUT}<p>0 1 2</p></triangles>', '<instance_geometry url="#g"/>')
    text = {"float_array": text.replace('count="9"', f'count="{count}"'),
            "triangles": text.replace('<triangles count="1"', f'<triangles count="{count}"'),
            "accessor": text.replace('source="#pa" count="3"', f'source="#pa" count="{count}"')}[where]
    path = _write(tmp_path / "count.dae", text)
    budget = meshes.MeshBudget()
    try:
        vertices, triangles = meshes.load_triangles(path, budget=budget)
    except E.DescriptionError as err:
        assert getattr(err, "internal", None) is None and str(path) in str(err)
    else:
        np.testing.assert_array_equal(vertices[triangles], [[[0, 0, 0], [1, 0, 0], [0, 1, 0]]])
    assert budget.work < 1_000
