"""What rviz sees of every corpus robot (OpenRAVE XML and COLLADA) with the description node's default
mesh handling: every model link with geometry has a <visual> and a <collision>, every mesh URI is a
file:// URI that trimesh loads as STL/DAE/OBJ, and the bounding box of all URDF visuals at the initial
configuration -- URDF forward kinematics by pinocchio, meshes read back from the URIs by trimesh --
equals the model's (1 mm).  Meshes that are absent upstream are named in the conversion report."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from lxml import etree

from robot_bridge.errors import MissingFileError
from robot_bridge.formats import meshes
from robot_bridge.formats.mesh_cache import MeshCache
from robot_bridge.kinematics import KinematicModel
from robot_bridge.kinematics.urdf_tree import urdf_tree
from robot_bridge.model import Box, Mesh, Sphere

pin = pytest.importorskip("pinocchio")
trimesh = pytest.importorskip("trimesh")
pytest.importorskip("rclpy")

from robot_bridge.nodes.description import PARAMETERS, load_model, mesh_target  # noqa: E402

from fixtures.urdf_export import CORPUS, load_or_skip, pinocchio_q  # noqa: E402

BBOX_TOL = 1e-3          # m
LOADABLE = (".stl", ".dae", ".obj")
DEFAULTS = {name: default for name, default, _ in PARAMETERS}


def robot_files() -> list[Path]:
    files = []
    sources = {"openrave": (".xml", ".dae", ".zae"), "robot_model/collada_urdf": (".dae",)}
    for sub, suffixes in sources.items():
        root = CORPUS / sub
        if root.is_dir():
            files += [p for p in sorted(root.rglob("*")) if p.is_file() and p.name.lower().endswith(suffixes)]
    return files


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> MeshCache:
    return MeshCache(tmp_path_factory.mktemp("mesh_cache"))


def _primitive(shape) -> "trimesh.Trimesh":
    if isinstance(shape, Box):
        return trimesh.creation.box(extents=shape.size)
    if isinstance(shape, Sphere):
        return trimesh.creation.icosphere(radius=shape.radius)
    return trimesh.creation.cylinder(radius=shape.radius, height=shape.length)


def model_points(robot) -> np.ndarray:
    """World points of every visual of the model at its initial configuration (the model's own geometry)."""
    poses = KinematicModel(robot).link_poses()
    pts = []
    for name, link in robot.links.items():
        for g in link.visuals:
            s = g.shape
            if isinstance(s, Mesh):
                if s.vertices is not None:
                    v = np.asarray(s.vertices) * s.scale
                elif _present(g):
                    v = meshes.load_triangles(s.path, s.scale)[0]
                else:
                    continue
            else:
                v = np.asarray(_primitive(s).vertices)
            t = poses[name] @ g.origin
            pts.append(v @ t[:3, :3].T + t[:3, 3])
    return np.concatenate(pts) if pts else np.zeros((0, 3))


def _origin(el) -> np.ndarray:
    o = el.find("origin")
    xyz = [float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
    rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz)).homogeneous


def urdf_points(text: str, robot) -> tuple[np.ndarray, dict[str, tuple[int, int]]]:
    """World points of every URDF visual at the model's initial configuration, pinocchio FK, meshes
    loaded by trimesh from their URIs; and (visuals, collisions) per URDF link."""
    root = etree.fromstring(text.encode())
    model = pin.buildModelFromXML(text)
    data = model.createData()
    links, joints = urdf_tree(robot)
    pin.forwardKinematics(model, data, pinocchio_q(model, joints, KinematicModel(robot).joint_values()))
    pin.updateFramePlacements(model, data)
    base_inv = data.oMf[model.getFrameId(robot.root, pin.BODY)].inverse()
    counts, pts, loaded = {}, [], {}
    for link in root.findall("link"):
        name = link.get("name")
        counts[name] = (len(link.findall("visual")), len(link.findall("collision")))
        pose = (base_inv * data.oMf[model.getFrameId(name, pin.BODY)]).homogeneous
        for tag in ("visual", "collision"):
            for v in link.findall(tag):
                geom = v.find("geometry")[0]
                if geom.tag == "mesh":
                    uri = geom.get("filename")
                    assert uri.startswith("file://"), uri
                    path = Path(unquote(urlsplit(uri).path))
                    assert path.is_file() and path.suffix.lower() in LOADABLE, uri
                    if path not in loaded:
                        loaded[path] = trimesh.load(str(path), force="mesh", process=False)
                    mesh = loaded[path]
                    assert len(mesh.faces) > 0, uri
                    scale = [float(s) for s in geom.get("scale", "1 1 1").split()]
                    vertices = np.asarray(mesh.vertices) * scale
                elif geom.tag == "box":
                    size = [float(s) for s in geom.get("size").split()]
                    vertices = trimesh.creation.box(extents=size).vertices
                elif geom.tag == "sphere":
                    vertices = trimesh.creation.icosphere(radius=float(geom.get("radius"))).vertices
                else:
                    vertices = trimesh.creation.cylinder(radius=float(geom.get("radius")),
                                                         height=float(geom.get("length"))).vertices
                if tag == "visual":
                    t = pose @ _origin(v)
                    pts.append(np.asarray(vertices) @ t[:3, :3].T + t[:3, 3])
    return (np.concatenate(pts) if pts else np.zeros((0, 3))), counts


def _present(g) -> bool:
    """False for a mesh absent upstream (the file, or a file it includes, is missing)."""
    s = g.shape
    if not isinstance(s, Mesh) or s.vertices is not None:
        return True
    if s.path is None:
        return False
    try:
        meshes.load_triangles(s.path)
    except MissingFileError:
        return False
    return True


@pytest.mark.parametrize("path", robot_files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_default_description_shows_every_link(path, cache):
    robot = load_or_skip(path)
    target = mesh_target(DEFAULTS["mesh_uri"], cache)
    loaded = load_model(str(path), search_path=[str(CORPUS / "openrave" / "src")], meshes=target)
    # the node reads the file itself: the same model
    assert set(loaded.robot.links) == set(robot.links)
    text, report = loaded.urdf, loaded.report
    pts, counts = urdf_points(text, loaded.robot)
    tree_links, _ = urdf_tree(loaded.robot)
    for tl in tree_links:
        link = loaded.robot.links.get(tl.source) if tl.source else None
        if link is None:
            continue
        if any(_present(g) for g in link.visuals):
            assert counts[tl.name][0] >= 1, f"link {tl.name}: no <visual>"
        if any(_present(g) for g in link.collisions):
            assert counts[tl.name][1] >= 1, f"link {tl.name}: no <collision>"
        for g in link.visuals + link.collisions:        # absent upstream: each named in the report
            if not _present(g):
                assert any(repr(g.shape.uri) in w for w in report.warnings), g.shape.uri
    expected = model_points(loaded.robot)
    assert len(pts) > 0 or len(expected) == 0
    if len(expected):
        np.testing.assert_allclose(pts.min(0), expected.min(0), atol=BBOX_TOL)
        np.testing.assert_allclose(pts.max(0), expected.max(0), atol=BBOX_TOL)
    assert not [w for w in report.not_expressible if "mesh" in w and "not found" not in w]


def test_restart_converts_nothing(corpus, tmp_path):
    robot = corpus / "openrave" / "src" / "robots" / "barrettwam.robot.xml"
    cache = MeshCache(tmp_path / "cache")
    search = [str(corpus / "openrave" / "src")]
    def target():
        return mesh_target("file", cache)

    first = load_model(str(robot), search_path=search, meshes=target())
    assert len(first.report.meshes_converted) > 10 and not first.report.meshes_cached
    files = sorted(cache.directory.iterdir())
    second = load_model(str(robot), search_path=search, meshes=target())
    assert not second.report.meshes_converted
    assert sorted(second.report.meshes_cached) == sorted(first.report.meshes_converted)
    assert second.urdf == first.urdf and sorted(cache.directory.iterdir()) == files
