"""The mesh cache: content keys, atomic files, the size bound, deletion at any time; and the URDF
writer's mesh rules (cache, as-written URIs, package URIs)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from lxml import etree

from robot_bridge.formats import urdf
from robot_bridge.formats.mesh_cache import MeshCache, array_key, default_cache_dir, file_key
from robot_bridge.model import Geometry, Link, Mesh, Robot

CUBE_IV = """#Inventor V2.0 ascii
Separator { Cube { width 2 height 2 depth 2 } }
"""


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros"))
    assert default_cache_dir() == tmp_path / "ros" / "robot_bridge" / "mesh_cache"
    monkeypatch.delenv("ROS_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "robot_bridge" / "meshes"


def test_keys_follow_content_not_names(tmp_path):
    a, b = tmp_path / "a.iv", tmp_path / "b.iv"
    a.write_text(CUBE_IV)
    b.write_text(CUBE_IV)
    assert file_key(a) == file_key(b)
    b.write_text(CUBE_IV.replace("width 2", "width 3"))
    assert file_key(a) != file_key(b)
    # an Inventor include is part of the content
    (tmp_path / "part.iv").write_text(CUBE_IV)
    top = tmp_path / "top.iv"
    top.write_text('#Inventor V2.0 ascii\nSeparator { File { name "part.iv" } }\n')
    before = file_key(top)
    (tmp_path / "part.iv").write_text(CUBE_IV.replace("depth 2", "depth 5"))
    assert file_key(top) != before
    v, t = np.eye(3), np.array([[0, 1, 2]])
    assert array_key(v, t) == array_key(v.copy(), t.copy()) != array_key(v * 2, t)


def test_put_get_prune_and_delete(tmp_path):
    cache = MeshCache(tmp_path / "c", max_bytes=250)
    keys = [array_key(np.eye(3) * i, np.array([[0, 1, 2]])) for i in range(4)]
    files = [cache.put(k, bytes(100)) for k in keys]
    assert all(f.stat().st_size == 100 for f in files)
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".tmp")]   # atomic writes
    for age, f in enumerate(files):            # oldest first
        os.utime(f, (1000 + age, 1000 + age))
    assert cache.get(keys[0]) == files[0]      # a hit refreshes the use time
    # least recently used first, never a kept file, until the bound holds: 400 -> 200 bytes
    assert cache.prune(keep=[files[1]]) == [files[2], files[3]]
    assert sorted(cache.directory.iterdir()) == sorted([files[0], files[1]])
    for f in cache.directory.iterdir():        # safe to delete: a miss, then converted again
        f.unlink()
    assert cache.get(keys[0]) is None


def _robot(*meshes: Mesh) -> Robot:
    r = Robot("m", links={"a": Link("a")})
    r.links["a"].visuals = [Geometry(m) for m in meshes]
    r.links["a"].collisions = [Geometry(m) for m in meshes]
    return r


def test_writer_converts_once_into_the_cache(tmp_path):
    iv = tmp_path / "cube.iv"
    iv.write_text(CUBE_IV)
    inline = Mesh("robot.zae#g", None, vertices=np.eye(3), triangles=np.array([[0, 1, 2]]))
    robot = _robot(Mesh("cube.iv", str(iv), scale=np.array([2.0, 2.0, 2.0])), inline)
    cache = MeshCache(tmp_path / "cache")
    text, report = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=cache))
    assert len(report.meshes_converted) == 2 and not report.warnings
    uris = [m.get("filename") for m in etree.fromstring(text.encode()).iter("mesh")]
    assert len(uris) == 4 and all(u.startswith("file://") and cache.contains(u[7:]) for u in uris)
    text2, report2 = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=cache))
    assert text2 == text and not report2.meshes_converted and len(report2.meshes_cached) == 2
    assert 'scale="2.0 2.0 2.0"' in text


def test_uris_as_written_and_unresolved_package_kept(tmp_path):
    stl = tmp_path / "pkg" / "meshes" / "part.stl"
    stl.parent.mkdir(parents=True)
    stl.write_bytes(b"solid x\nendsolid x\n")
    (tmp_path / "pkg" / "package.xml").write_text("<package><name>my_pkg</name></package>")
    robot = _robot(Mesh("package://my_pkg/meshes/part.stl", str(stl)),
                   Mesh("package://elsewhere/meshes/gone.dae", None),
                   Mesh("http://example.org/m.stl", None),
                   Mesh("models/gone.iv", None))
    text, report = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=MeshCache(tmp_path / "c")))
    uris = [m.get("filename") for m in etree.fromstring(text.encode()).iter("mesh")]
    assert uris[:3] == ["package://my_pkg/meshes/part.stl", "package://elsewhere/meshes/gone.dae",
                        "http://example.org/m.stl"]
    assert len(uris) == 6                                # visual + collision each; the .iv is dropped
    assert [w for w in report.unresolved if "gone.dae" in w and "as written" in w]
    assert [w for w in report.not_expressible if "models/gone.iv" in w and "dropped" in w]
    # a plain path that resolves: file:// of the file; in package mode package:// of its package
    robot = _robot(Mesh("meshes/part.stl", str(stl)))
    text, _ = urdf.to_urdf(robot)
    assert stl.resolve().as_uri() in text
    text, report = urdf.to_urdf(robot, target=urdf.MeshTarget(locate=urdf.package_uri))
    assert "package://my_pkg/meshes/part.stl" in text and not report.warnings


def test_package_mode_outside_a_package_warns(tmp_path):
    iv = tmp_path / "cube.iv"
    iv.write_text(CUBE_IV)
    target = urdf.MeshTarget(cache=MeshCache(tmp_path / "c"), locate=urdf.package_uri)
    text, report = urdf.to_urdf(_robot(Mesh("cube.iv", str(iv))), target=target)
    assert "file://" in text
    assert len(report.unresolved) == 1 and "not inside a ROS package" in report.unresolved[0]


@pytest.mark.parametrize("rel", ["example-robot-data/robots/panda_description/urdf/panda.urdf",
                                 "example-robot-data/robots/talos_data/robots/talos_reduced.urdf"])
def test_corpus_package_meshes_kept_as_written(corpus, rel, tmp_path):
    path = corpus / rel
    robot = urdf.read(path)
    text, report = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=MeshCache(tmp_path)))
    source = etree.parse(str(path)).getroot()
    out = etree.fromstring(text.encode())
    for link in source.findall("link"):
        got = out.find(f"link[@name='{link.get('name')}']")
        for tag in ("visual", "collision"):
            want = [m.get("filename") for m in link.findall(f"{tag}/geometry/mesh")]
            assert [m.get("filename") for m in got.findall(f"{tag}/geometry/mesh")] == want
            assert len(got.findall(tag)) == len(link.findall(tag))
    visuals = len(source.findall("link/visual"))
    assert visuals >= 11 and len(out.findall("link/visual")) == visuals
    assert not report.meshes_converted and not report.not_expressible
    # one warning per mesh file the host cannot resolve (a file used twice is named once; installed: resolved)
    from fixtures.installed import installed_file

    missing = {m.get("filename") for m in source.iter("mesh") if installed_file(m.get("filename")) is None}
    assert sorted(w.split("'")[1] for w in report.unresolved) == sorted(missing)


COLOURED_IV = """#Inventor V2.0 ascii
Separator {
  Material { diffuseColor 0.9 0.1 0.1 }
  Cube { width 2 height 2 depth 2 }
  Translation { translation 3 0 0 }
  Material { diffuseColor [ 0.1 0.1 0.9 ] }
  Cube { width 0.2 height 0.2 depth 0.2 }
}
"""
COLOURED_VRML2 = """#VRML V2.0 utf8
Transform { children [ Shape {
  appearance Appearance { material Material { diffuseColor 0.2 0.6 0.3 } }
  geometry IndexedFaceSet { coord Coordinate { point [ 0 0 0, 1 0 0, 0 1 0 ] } coordIndex [ 0 1 2 -1 ] }
} ] }
"""


def _file_of(uri: str):
    from pathlib import Path
    from urllib.parse import unquote, urlsplit

    return Path(unquote(urlsplit(uri).path))


def _visuals(text: str) -> list[tuple[str, list[float] | None]]:
    """(mesh file, rgba or None) of each visual."""
    out = []
    for v in etree.fromstring(text.encode()).iterfind("link/visual"):
        colour = v.find("material/color")
        out.append((v.find("geometry/mesh").get("filename"),
                    [float(x) for x in colour.get("rgba").split()] if colour is not None else None))
    return out


def test_inventor_colours_become_a_visual_per_colour(tmp_path):
    import trimesh

    from robot_bridge.formats import meshes

    iv, wrl = tmp_path / "two.iv", tmp_path / "tri.wrl"
    iv.write_text(COLOURED_IV)
    wrl.write_text(COLOURED_VRML2)
    v, t, c = meshes.read_inventor_coloured(iv)
    assert len(t) == 24 and np.allclose(c[:12], [0.9, 0.1, 0.1]) and np.allclose(c[12:], [0.1, 0.1, 0.9])
    assert meshes.dominant_colour(v, t, c) == (0.9, 0.1, 0.1)          # the larger cube's
    cache = MeshCache(tmp_path / "cache")
    for attempt in range(2):                                              # converted, then from the cache
        robot = _robot(Mesh("two.iv", str(iv)), Mesh("tri.wrl", str(wrl)))
        text, report = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=cache))
        assert len(report.meshes_cached) == 2 * attempt and len(report.meshes_converted) == 2 * (1 - attempt)
        visuals = _visuals(text)
        # the two cubes: one visual each in its own colour, largest surface first; the triangle: one
        assert len(visuals) == 3
        np.testing.assert_allclose([rgba for _, rgba in visuals],
                                   [[0.9, 0.1, 0.1, 1], [0.1, 0.1, 0.9, 1], [0.2, 0.6, 0.3, 1]], atol=1 / 255)
        big, small = (trimesh.load(str(_file_of(uri)), force="mesh", process=False) for uri, _ in visuals[:2])
        np.testing.assert_allclose(big.bounds, [[-1, -1, -1], [1, 1, 1]])
        np.testing.assert_allclose(small.bounds, [[2.9, -0.1, -0.1], [3.1, 0.1, 0.1]])
        assert len(big.faces) == len(small.faces) == 12
        # the collision keeps the whole mesh, one file
        collisions = [el.get("filename") for el in etree.fromstring(text.encode()).iterfind(
            "link/collision/geometry/mesh")]
        whole = trimesh.load(str(_file_of(collisions[0])), force="mesh", process=False)
        assert len(collisions) == 2 and len(whole.faces) == 24
        assert {str(_file_of(u)) for u, _ in visuals} | {str(_file_of(u)) for u in collisions} == \
            set(report.mesh_files)                                      # every file named (served, kept)
    # a part deleted from the cache: the mesh is converted again, not shown without it
    _file_of(visuals[1][0]).unlink()
    text, report = urdf.to_urdf(_robot(Mesh("two.iv", str(iv))), target=urdf.MeshTarget(cache=cache))
    assert len(report.meshes_converted) == 1 and len(_visuals(text)) == 2
    assert _file_of(visuals[1][0]).is_file()
    # a colour the model gives wins over the file's: the whole mesh in that colour
    robot = _robot(Mesh("two.iv", str(iv)))
    robot.links["a"].visuals[0].material.diffuse = (0.0, 0.0, 0.0)
    text, _ = urdf.to_urdf(robot, target=urdf.MeshTarget(cache=cache))
    assert [rgba for _, rgba in _visuals(text)] == [[0.0, 0.0, 0.0, 1.0]]
    assert _visuals(text)[0][0] == collisions[0]
    # named files: the whole mesh and its parts beside it
    text, _ = urdf.to_urdf(_robot(Mesh("two.iv", str(iv))), mesh_dir=tmp_path / "named")
    assert [_file_of(u).name for u, _ in _visuals(text)] == ["two_part0.stl", "two_part1.stl"]
    assert sorted(p.name for p in (tmp_path / "named").iterdir()) == \
        ["two.stl", "two_part0.stl", "two_part1.stl"]
    # a mesh named like a part gets a name of its own (the part is not overwritten)
    (tmp_path / "two_part0.iv").write_text(CUBE_IV)
    robot = _robot(Mesh("two.iv", str(iv)), Mesh("two_part0.iv", str(tmp_path / "two_part0.iv")))
    text, _ = urdf.to_urdf(robot, mesh_dir=tmp_path / "both")
    assert [_file_of(u).name for u, _ in _visuals(text)] == \
        ["two_part0.stl", "two_part1.stl", "two_part0_1.stl"]
    np.testing.assert_allclose(urdf.stl_colour(tmp_path / "both" / "two_part0.stl"), [0.9, 0.1, 0.1],
                               atol=1 / 255)                               # still the red part


def test_faces_without_a_material_are_a_part_of_their_own(tmp_path):
    iv = tmp_path / "half.iv"
    iv.write_text("""#Inventor V2.0 ascii
Separator {
  Cube { width 2 height 2 depth 2 }
  Translation { translation 3 0 0 }
  Material { diffuseColor 0 0 1 }
  Cube { width 1 height 1 depth 1 }
}
""")
    target = urdf.MeshTarget(cache=MeshCache(tmp_path / "cache"))
    text, _ = urdf.to_urdf(_robot(Mesh("half.iv", str(iv))), target=target)
    # the uncoloured cube is the larger part: no material of its own (the viewer's default)
    assert [rgba for _, rgba in _visuals(text)] == [None, [0.0, 0.0, 1.0, 1.0]]
