"""Inventor/VRML ASCII subset, trimesh formats, scale, STL export and the URDF writer's conversion."""

from __future__ import annotations

import re

import numpy as np
import pytest
import trimesh

from robot_bridge.errors import MissingFileError, SchemaError, UnsafeInputError, UnsupportedFormatError
from robot_bridge.formats import meshes, urdf
from fixtures.inventor import iv_binary
from robot_bridge.model import Geometry, Link, Mesh, Robot


def _sorted_rows(a):
    a = np.round(np.asarray(a, dtype=float), 9)
    return a[np.lexsort(a.T[::-1])]


def test_inventor_units_transforms_separators_and_primitives(fixtures):
    v, t = meshes.read_inventor(fixtures / "urdf/two_quads_mm.iv")
    assert v.shape == (16, 3) and t.shape == (16, 3)
    np.testing.assert_allclose(v[:4], [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], atol=1e-15)   # mm -> m
    np.testing.assert_array_equal(t[:2], [[0, 1, 2], [0, 2, 3]])                                   # fan
    # translated 500 mm up and turned 90 deg about z, only inside its Separator
    np.testing.assert_allclose(v[4:8], [[0, 0, 0.5], [0, 1, 0.5], [-1, 1, 0.5], [-1, 0, 0.5]], atol=1e-15)
    cube = v[8:]
    np.testing.assert_allclose(cube.max(0) - cube.min(0), [0.002, 0.004, 0.006], atol=1e-15)
    np.testing.assert_allclose(cube.mean(0), 0, atol=1e-15)


def test_vrml2_transform_children(fixtures):
    v, t = meshes.read_inventor(fixtures / "urdf/tri_vrml2.wrl")
    np.testing.assert_allclose(v, [[1, 0, 0], [3, 0, 0], [1, 2, 0]])
    np.testing.assert_array_equal(t, [[0, 1, 2]])


def test_refusals(fixtures, tmp_path):
    v, t = meshes.read_inventor(fixtures / "urdf/binary_header.iv")      # V2.1 binary without nodes
    assert len(v) == len(t) == 0
    old = tmp_path / "v1.iv"
    old.write_bytes(b"#Inventor V1.0 binary\n\0\0\0\0")
    with pytest.raises(UnsupportedFormatError, match="binary"):
        meshes.read_inventor(old)
    with pytest.raises(MissingFileError):
        meshes.read_inventor(tmp_path / "absent.iv")
    bad = tmp_path / "bad.iv"
    bad.write_text("#Inventor V2.1 ascii\nSeparator { Coordinate3 { point [ 0 0 0 ] }\n"
                   "FaceSet { numVertices [ 3 ] } }")
    with pytest.raises(SchemaError, match="out of range"):
        meshes.read_inventor(bad)


def test_corpus_inventor_files_match_their_face_counts(openrave_data):
    for rel in ("models/WAM/wam1.iv", "models/barrett/link3.iv", "models/furniture/shelf.wrl"):
        path = openrave_data / rel
        text = path.read_text(errors="replace")
        v, t = meshes.read_inventor(path)
        if "numVertices" in text:      # FaceSets of triangles: one triangle per listed face
            faces = [int(n) for block in re.findall(r"numVertices\s*\[([^\]]*)\]", text)
                     for n in block.replace(",", " ").split()]
            assert len(t) == sum(n - 2 for n in faces)
        assert len(v) and t.max() < len(v)


def test_trimesh_formats_scale_and_stl_export(corpus, tmp_path):
    stl = corpus / "moveit_resources/panda_description/meshes/collision/link0.stl"
    reference = trimesh.load(str(stl), force="mesh")
    v, t = meshes.load_triangles(stl, scale=[2.0, 3.0, 4.0])
    np.testing.assert_allclose(v, reference.vertices * [2.0, 3.0, 4.0])
    out = tmp_path / "out.stl"
    meshes.export_stl(v, t, out)
    back = trimesh.load(str(out), force="mesh")
    expected = np.unique(v.astype(np.float32), axis=0)       # STL is float32; trimesh merges duplicates
    np.testing.assert_allclose(_sorted_rows(back.vertices), _sorted_rows(expected), atol=1e-6)


def test_urdf_writer_converts_inventor_for_rviz_and_pinocchio(fixtures, tmp_path):
    pin = pytest.importorskip("pinocchio")
    r = Robot("m", links={"a": Link("a")})
    r.links["a"].visuals = [Geometry(Mesh("two_quads_mm.iv", str(fixtures / "urdf/two_quads_mm.iv"),
                                          scale=np.array([1.0, 2.0, 1.0])))]
    text, report = urdf.to_urdf(r, mesh_dir=tmp_path / "meshes")
    (stl,) = report.meshes_converted
    assert f'filename="{(tmp_path / "meshes/two_quads_mm.stl").as_uri()}" scale="1.0 2.0 1.0"' in text
    written = trimesh.load(stl, force="mesh")
    v, _ = meshes.read_inventor(fixtures / "urdf/two_quads_mm.iv")
    np.testing.assert_allclose(written.bounds, [v.min(0), v.max(0)], atol=1e-6)
    model = pin.buildModelFromXML(text)
    geom = pin.buildGeomFromUrdfString(model, text, pin.GeometryType.VISUAL)
    assert geom.ngeoms == 1 and geom.geometryObjects[0].meshPath == stl
    np.testing.assert_array_equal(geom.geometryObjects[0].meshScale, [1, 2, 1])


def test_binary_inventor_strip_with_material(tmp_path):
    from robot_bridge.formats import meshes

    # Separator { Material { diffuseColor 0.5 0.25 1 }
    #             Translation { translation 1 0 0 }
    #             IndexedTriangleStripSet { vertexProperty VertexProperty { vertex [4 points] }
    #                                       coordIndex [0 1 2 3 -1] } }
    data = iv_binary(
        "Separator", 2, 0, 3,
        "DEF", "paint", "Material", 0, 1, "diffuseColor", 1, 0.5, 0.25, 1.0, 0,
        "Translation", 0, 1, "translation", 1.0, 0.0, 0.0, 0,
        "IndexedTriangleStripSet", 0, 2,
        "vertexProperty", "VertexProperty", 0, 1, "vertex", 4, *[float(c) for c in
                                                                 (0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0)], 0, 0,
        "coordIndex", 5, 0, 1, 2, 3, -1, 0)
    path = tmp_path / "strip.iv"
    path.write_bytes(data)
    v, t, c = meshes.read_inventor_coloured(path)
    np.testing.assert_allclose(v[:, 0], [1, 2, 1, 2])                        # translated by x + 1
    assert t.tolist() == [[0, 1, 2], [2, 1, 3]]                               # strip winding alternates
    np.testing.assert_allclose(c, [[0.5, 0.25, 1.0]] * 2)
    path.write_bytes(data.replace(b"coordIndex", b"coordIndez"))
    with pytest.raises(SchemaError, match="IndexedTriangleStripSet.coordIndez"):
        meshes.read_inventor(path)
    path.write_bytes(data[:-20])
    with pytest.raises(SchemaError, match="unexpected end of file"):
        meshes.read_inventor(path)
    path.write_bytes(iv_binary(*["Separator", 0, 0, 1] * 500))           # hostile nesting
    with pytest.raises(SchemaError, match="nested deeper"):
        meshes.read_inventor(path)


# Two faces side by side: a triangle (points 0 1 2) and a quad (1 3 4 2: two triangles).
_FACES = "coordIndex [ 0, 1, 2, -1, 1, 3, 4, 2, -1 ]"
_POINTS = "0 0 0, 1 0 0, 0 1 0, 2 0 0, 2 1 0"
RED, GREEN, BLUE, WHITE = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]


def _inventor(binding: str, extra: str = "") -> str:
    return f"""#Inventor V2.0 ascii
Separator {{
  Material {{ diffuseColor [ 1 0 0, 0 1 0, 0 0 1, 1 1 1 ] }}
  MaterialBinding {{ value {binding} }}
  Coordinate3 {{ point [ {_POINTS} ] }}
  IndexedFaceSet {{ {_FACES} {extra} }}
}}
"""


@pytest.mark.parametrize("binding, extra, triangle, quad", [
    ("OVERALL", "", RED, RED),                                              # the first colour everywhere
    ("PER_FACE", "", RED, GREEN),                                           # in order, face by face
    ("PER_PART", "", RED, GREEN),                                           # a face set's part is a face
    ("PER_FACE_INDEXED", "materialIndex [ 2, 0 ]", BLUE, RED),
    ("PER_VERTEX", "", RED, WHITE),             # the colour of each face's first corner: corner 0, corner 3
    ("PER_VERTEX_INDEXED", "materialIndex [ 1, 0, 0, -1, 2, 0, 0, 0, -1 ]", GREEN, BLUE),
    ("PER_VERTEX_INDEXED", "", RED, GREEN),     # no materialIndex: by vertex (first corners 0 and 1)
    ("PER_FACE_INDEXED", "materialIndex [ 5, 0 ]", GREEN, RED),             # past the table: wraps around
])
def test_inventor_material_bindings_colour_each_face(tmp_path, binding, extra, triangle, quad):
    path = tmp_path / "faces.iv"
    path.write_text(_inventor(binding, extra))
    v, t, c = meshes.read_inventor_coloured(path)
    assert len(t) == 3                                                      # the quad is two triangles
    np.testing.assert_allclose(c, [triangle, quad, quad])


@pytest.mark.parametrize("fields, triangle, quad", [
    ("colorPerVertex FALSE", RED, GREEN),
    ("colorPerVertex FALSE colorIndex [ 2, 2 ]", BLUE, BLUE),
    ("", RED, GREEN),                                             # per vertex (default): first corners 0, 1
    ("colorIndex [ 2, 0, 0, -1, 1, 0, 0, 0, -1 ]", BLUE, GREEN),
])
def test_vrml2_color_node_colours_each_face(tmp_path, fields, triangle, quad):
    path = tmp_path / "faces.wrl"
    path.write_text(f"""#VRML V2.0 utf8
Shape {{
  appearance Appearance {{ material Material {{ diffuseColor 0.5 0.5 0.5 }} }}
  geometry IndexedFaceSet {{
    coord Coordinate {{ point [ {_POINTS} ] }}
    color Color {{ color [ 1 0 0, 0 1 0, 0 0 1 ] }}
    {_FACES} {fields}
  }}
}}
""")
    _, t, c = meshes.read_inventor_coloured(path)
    np.testing.assert_allclose(c, [triangle, quad, quad])


def test_strip_parts_and_faces_take_their_colours(tmp_path):
    path = tmp_path / "strips.iv"
    strips = "IndexedTriangleStripSet { coordIndex [ 0, 1, 2, 4, -1, 1, 3, 4, -1 ] }"
    for binding, want in (("PER_PART", [RED, RED, GREEN]), ("PER_FACE", [RED, GREEN, BLUE])):
        path.write_text(_inventor(binding).replace(f"IndexedFaceSet {{ {_FACES}  }}", strips))
        _, t, c = meshes.read_inventor_coloured(path)
        assert len(t) == 3
        np.testing.assert_allclose(c, want)


def test_per_face_colours_reach_the_urdf_as_a_visual_each(tmp_path):
    from lxml import etree

    from robot_bridge.formats.mesh_cache import MeshCache

    path = tmp_path / "faces.iv"
    path.write_text(_inventor("PER_FACE"))
    robot = Robot("r", links={"a": Link("a", visuals=[Geometry(Mesh("faces.iv", str(path)))])})
    text, _ = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=MeshCache(tmp_path / "cache")))
    rgba = [[float(x) for x in c.get("rgba").split()] for c in
            etree.fromstring(text.encode()).iterfind("link/visual/material/color")]
    assert rgba == [GREEN + [1.0], RED + [1.0]]                            # the quad's larger area first


def test_vertex_property_packed_colours_ascii_and_binary(tmp_path):
    # VertexProperty { vertex [...] orderedRGBA [0xff0000ff, 0x0000ffff] materialBinding PER_FACE }
    path = tmp_path / "packed.iv"
    path.write_text(f"""#Inventor V2.0 ascii
Separator {{
  Material {{ diffuseColor 0.5 0.5 0.5 }}
  IndexedFaceSet {{
    vertexProperty VertexProperty {{ vertex [ {_POINTS} ] orderedRGBA [ 0xff0000ff, 0x0000ffff ]
                                     materialBinding PER_FACE }}
    {_FACES}
  }}
}}
""")
    np.testing.assert_allclose(meshes.read_inventor_coloured(path)[2], [RED, BLUE, BLUE])
    points = [float(c) for c in _POINTS.replace(",", " ").split()]
    path.write_bytes(iv_binary(
        "Separator", 2, 0, 1,
        "IndexedFaceSet", 0, 2,
        "vertexProperty", "VertexProperty", 0, 3, "vertex", 5, *points, 0,
        "orderedRGBA", 2, 0x00FF00FF, 0x0000FFFF, 0, "materialBinding", "PER_FACE", 0, 0,
        "coordIndex", 9, 0, 1, 2, -1, 1, 3, 4, 2, -1, 0))
    np.testing.assert_allclose(meshes.read_inventor_coloured(path)[2], [GREEN, BLUE, BLUE])
    bad = _inventor("OVERALL").replace("IndexedFaceSet {", "IndexedFaceSet { vertexProperty VertexProperty { "
                                       f"vertex [ {_POINTS} ] orderedRGBA [ red ] }}")
    path.write_text(bad)
    with pytest.raises(SchemaError, match="orderedRGBA: expected 0xRRGGBBAA"):
        meshes.read_inventor_coloured(path)


def test_strip_parts_follow_the_vertex_property_binding(tmp_path):
    path = tmp_path / "strips.iv"
    path.write_text(f"""#Inventor V2.0 ascii
IndexedTriangleStripSet {{
  vertexProperty VertexProperty {{ vertex [ {_POINTS} ] orderedRGBA [ 0xff0000ff, 0x00ff00ff ]
                                   materialBinding PER_PART }}
  coordIndex [ 0, 1, 2, 4, -1, 1, 3, 4, -1 ]
}}
""")
    np.testing.assert_allclose(meshes.read_inventor_coloured(path)[2], [RED, RED, GREEN])


# -- bounds and typed errors (issue 29) -------------------------------------------------------------------

_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from robot_bridge.formats import meshes
try:
    v, t = meshes.load_triangles(sys.argv[1])
    print("loaded", len(t))
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def _read_in_child(path, seconds=60.0) -> str:
    """What reading a mesh gives, in a child limited to 1 GiB of address space and ``seconds``."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                              timeout=seconds, env=env)
    except subprocess.TimeoutExpired:
        return f"no answer within {seconds} s"
    return (done.stdout.strip() or done.stderr.strip().splitlines()[-1])


def _doubling_uses(levels: int) -> str:
    lines = ["#Inventor V2.1 ascii",
             "DEF A0 Group { Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] } FaceSet { numVertices [ 3 ] } }"]
    lines += [f"DEF A{i} Group {{ USE A{i - 1} USE A{i - 1} }}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_counts_are_checked_against_the_file_before_allocating(tmp_path):
    import struct

    face_set = tmp_path / "faceset.iv"        # the 14 GB / 92 s file of the issue, in short
    face_set.write_text("#Inventor V2.1 ascii\nSeparator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] }\n"
                        "  FaceSet { numVertices [ 99999999 ] }\n}\n")
    binary = tmp_path / "binary.iv"
    triangle = map(float, [0, 0, 0, 1, 0, 0, 0, 1, 0])
    binary.write_bytes(iv_binary("Separator", 0, 0, 2, "Coordinate3", 0, 1, "point", 3, *triangle, 0,
                                  "FaceSet", 0, 1, "numVertices", 1, 99999999, 0))
    uses = tmp_path / "uses.iv"               # 2^40 triangles through USE
    uses.write_text(_doubling_uses(40))
    stl = tmp_path / "count.stl"              # a binary STL whose header claims 4 billion triangles
    box = trimesh.creation.box().export(file_type="stl")
    stl.write_bytes(box[:80] + struct.pack("<I", 4_000_000_000) + box[84:])
    expected = {face_set: "SchemaError " + f"{face_set}:4: FaceSet.numVertices: a face of 99999999 vertices",
                binary: "SchemaError ", uses: "WorkBudgetError ", stl: "SchemaError "}
    for path, start in expected.items():
        answer = _read_in_child(path)
        assert answer.startswith(start), (path.name, answer)
        assert str(path) in answer
    assert "numVertices" in _read_in_child(binary) and "byte" in _read_in_child(binary)
    assert "more than 10000 nodes" in _read_in_child(uses)
    assert "header counts 4000000000 triangles" in _read_in_child(stl)


@pytest.mark.parametrize("body, line, words", [
    ("Separator {\n  Rotation { rotation 0 0 1 }\n}", 2, "Rotation.rotation: expected 4 numbers"),
    ("Separator {\n  Coordinate3 { point [ 0 0 0, 1 0 ] }\n}", 2, "expected x y z triples"),
    ("Separator {\n\n  RotationXYZ { axis W angle 1 }\n}", 3, "expected X, Y or Z"),
    ("Separator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] }\n"
     "  FaceSet { startIndex nan numVertices 3 }\n}", 3, "startIndex"),
    ("Separator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] }\n"
     "  IndexedFaceSet { coordIndex [ 0 1 1e300 -1 ] }\n}", 3, "expected whole numbers"),
    ("DEF A Separator {\n  USE A\n}", 2, "USE of undefined node 'A'"),
    ("Separator {\n  Transform { scaleFactor 1 2 }\n}", 2, "scaleFactor: expected 3 numbers"),
    ("Separator {\n  Cube { width nan }\n}", 2, "expected finite numbers"),
])
def test_malformed_inventor_is_a_schema_error_with_its_line(tmp_path, body, line, words):
    path = tmp_path / "bad.iv"
    path.write_text("#Inventor V2.1 ascii\n" + body + "\n")
    with pytest.raises(SchemaError) as caught:
        meshes.read_inventor_coloured(path)
    err = caught.value
    assert getattr(err, "internal", None) is None, err          # a check, not the safety net
    assert f"{path}:{line + 1}" in str(err) and words in str(err), str(err)


def test_binary_inventor_header_without_a_line_break(tmp_path):
    path = tmp_path / "b.iv"
    path.write_bytes(b"#Inventor V2.1 binary" + b"\0" * 8)       # all header: nothing after it
    v, t = meshes.read_inventor(path)
    assert len(v) == len(t) == 0
    path.write_bytes(b"#Inventor V2.1 binary\n" + b"\0\0\0\x09Separator")
    with pytest.raises(SchemaError, match="binary Inventor: unexpected end of file"):
        meshes.read_inventor(path)


def test_mesh_size_and_kind_are_checked_before_reading(tmp_path, monkeypatch):
    import os

    big = tmp_path / "big.stl"
    big.write_bytes(trimesh.creation.box().export(file_type="stl"))
    monkeypatch.setattr(meshes, "MAX_MESH_BYTES", 200)
    with pytest.raises(UnsafeInputError, match=r"mesh file is 684 bytes, more than the 200 allowed"):
        meshes.load_triangles(big)
    fifo = tmp_path / "fifo.iv"
    os.mkfifo(fifo)
    assert _read_in_child(fifo, seconds=30).startswith("UnsafeInputError ") and "not a regular file" in \
        _read_in_child(fifo, seconds=30)
    packed = tmp_path / "m.bz2"               # trimesh would decompress it (a bomb): not a mesh format here
    packed.write_bytes(b"BZh9")
    with pytest.raises(UnsupportedFormatError, match="not read"):
        meshes.load_triangles(packed)


def test_an_unreadable_mesh_is_one_warning_and_the_robot_converts(tmp_path, capsys):
    import argparse

    from robot_bridge.cli.verbs import check

    (tmp_path / "bad.iv").write_text("#Inventor V2.1 ascii\nSeparator {\n  Rotation { rotation 0 0 1 }\n}\n")
    (tmp_path / "r.robot.xml").write_text(
        '<Robot name="r"><KinBody name="r">\n'
        '<Body name="a"><Geom type="trimesh"><data>bad.iv</data></Geom></Body>\n'
        '<Body name="b"><Geom type="box"><extents>1 1 1</extents></Geom></Body>\n'
        '<Joint name="j" type="hinge"><Body>a</Body><Body>b</Body></Joint></KinBody></Robot>')
    from robot_bridge.formats import load

    robot = load(tmp_path / "r.robot.xml")
    text, report = urdf.to_urdf(robot, mesh_dir=tmp_path / "meshes")
    assert '<link name="b">' in text and "<box" in text
    bad = [line for line in report.not_expressible if "bad.iv" in line]
    assert len(bad) == 1 and "bad.iv:3: Rotation.rotation: expected 4 numbers" in bad[0], bad   # once
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    assert check.main(parser.parse_args([str(tmp_path / "r.robot.xml")])) == 0
    out = capsys.readouterr()
    assert out.err.count("warning: mesh 'bad.iv' of link 'a' cannot be read") == 1
    assert "bad.iv:3: Rotation.rotation" in out.err and "1 warnings" in out.out
