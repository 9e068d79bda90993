"""The robot of a robot_description (URDF text) as coloured triangle meshes, one group per link.

Mesh URIs are loaded as a viewer on this host would: ``file://`` and ``package://`` paths (what
description_node writes with ``mesh_uri: file`` / ``package``: the converted meshes of its mesh cache) and
``http://`` (``mesh_uri: http``: the node's read-only mesh server) fetched with a size and time bound.
A visual's colour is its URDF material's, else the ``COLOR=`` its converted STL's header names, else grey.
Nothing is dropped silently: each visual that cannot be drawn is one line in :attr:`RobotScene.notes`.
"""

from __future__ import annotations

import io
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..errors import DescriptionError
from ..formats import urdf
from ..model.geometry import Box, Cylinder, Mesh, Sphere

DEFAULT_RGBA = (0.7, 0.7, 0.7, 1.0)
MAX_HTTP_MESH_BYTES = 64 << 20
HTTP_TIMEOUT = 5.0                      # s per mesh request
MAX_TRIANGLES = 2_000_000               # over the whole robot; further visuals are noted, not drawn
MESH_SUFFIXES = (".stl", ".dae", ".obj", ".ply", ".off", ".glb", ".gltf")


@dataclass
class Part:
    """One visual: triangles in its link's frame (origin applied), one colour."""

    link: str
    vertices: np.ndarray                 # (n, 3) float32, link frame
    faces: np.ndarray                    # (m, 3) uint32
    rgba: tuple[float, float, float, float]


@dataclass
class JointSlider:
    """A joint the page offers a slider for (revolute, prismatic, continuous; not mimic)."""

    name: str
    lower: float
    upper: float                     # lower == upper: continuous (the slider spans -pi..pi)
    velocity: float                  # URDF limit, 0 when none


@dataclass
class RobotScene:
    name: str
    links: list[str]
    parts: list[Part]
    notes: list[str] = field(default_factory=list)
    sliders: list[JointSlider] = field(default_factory=list)
    root: str = ""
    joints: list = field(default_factory=list)          # urdf_tree TreeJoints, parents before children

    def tip_path(self, names: list[str], positions: list[list[float]]) -> tuple[str, np.ndarray]:
        """(tip link, (k, 4, 4) its poses in the root link) along a joint trajectory: the tip is the child
        of the deepest joint the trajectory names; other joints stay at 0."""
        from ..kinematics.urdf_tree import tree_joint_transform

        index = {n: i for i, n in enumerate(names)}
        named = [j for j in self.joints if j.name in index]
        if not named:
            return "", np.zeros((0, 4, 4))
        tip = named[-1].child
        chain = []
        link = tip
        by_child = {j.child: j for j in self.joints}
        while link in by_child and len(chain) <= len(self.joints):
            chain.append(by_child[link])
            link = by_child[link].parent
        chain.reverse()
        out = np.empty((len(positions), 4, 4))
        for k, row in enumerate(positions):
            pose = np.eye(4)
            for j in chain:
                q = row[index[j.name]] if j.name in index and index[j.name] < len(row) else 0.0
                if j.mimic is not None and j.mimic[0] in index and index[j.mimic[0]] < len(row):
                    q = row[index[j.mimic[0]]] * j.mimic[1] + j.mimic[2]
                pose = pose @ tree_joint_transform(j, q)
            out[k] = pose
        return tip, out

    def anchor(self, world_frame: str) -> tuple[str, np.ndarray]:
        """(frame TF places, 4x4 the root link in it): the root itself, or, for a root that is the world
        frame itself (robot_bridge.model.placement: TF places its children), its first fixed child."""
        from ..model.placement import root_is_world

        if root_is_world(self.root, world_frame):
            for j in self.joints:
                if j.parent == self.root and j.type == "fixed":
                    return j.child, np.linalg.inv(j.origin)
        return self.root, np.eye(4)

    @property
    def triangles(self) -> int:
        return sum(len(p.faces) for p in self.parts)


def fetch_http(uri: str, limit: int = MAX_HTTP_MESH_BYTES, timeout: float = HTTP_TIMEOUT) -> bytes:
    """The body of an http(s):// mesh URI, refused past ``limit`` bytes or ``timeout`` seconds a read."""
    if urllib.parse.urlsplit(uri).scheme not in ("http", "https"):
        raise DescriptionError(f"mesh {uri!r}: expected an http:// URI")
    try:
        with urllib.request.urlopen(uri, timeout=timeout) as response:      # noqa: S310 (scheme checked)
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise DescriptionError(f"mesh {uri!r}: {declared} bytes, over the limit of {limit}")
            data = response.read(limit + 1)
    except (OSError, ValueError) as exc:
        raise DescriptionError(f"mesh {uri!r}: cannot fetch: {exc}") from None
    if len(data) > limit:
        raise DescriptionError(f"mesh {uri!r}: over the limit of {limit} bytes")
    return data


def _stl_header_colour(data: bytes) -> Optional[tuple[float, float, float]]:
    if data[:6] == b"COLOR=" and len(data) >= 10:
        return tuple(b / 255.0 for b in data[6:9])
    return None


def _mesh_triangles(shape: Mesh, fetch: Callable[[str], bytes]):
    """(vertices, faces, colour named by the file or None) of a URDF mesh."""
    from ..formats.meshes import load_triangles

    scale = np.asarray(shape.scale, dtype=float)
    if shape.path is not None:
        vertices, faces = load_triangles(shape.path, scale)
        return vertices, faces, urdf.stl_colour(shape.path) if shape.path.lower().endswith(".stl") else None
    if shape.uri.startswith(("http://", "https://")):
        import trimesh

        suffix = Path(urllib.parse.urlsplit(shape.uri).path).suffix.lower()
        if suffix not in MESH_SUFFIXES:
            raise DescriptionError(f"mesh {shape.uri!r}: expected one of {', '.join(MESH_SUFFIXES)}")
        data = fetch(shape.uri)
        try:
            mesh = trimesh.load(io.BytesIO(data), file_type=suffix[1:], force="mesh")
        except Exception as exc:               # trimesh raises many types for unreadable files
            raise DescriptionError(f"mesh {shape.uri!r}: cannot read: {exc}") from None
        vertices = np.asarray(mesh.vertices, dtype=float).reshape(-1, 3) * scale
        faces = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
        return vertices, faces, _stl_header_colour(data) if suffix == ".stl" else None
    raise DescriptionError(f"mesh {shape.uri!r} not found on this host")


def _primitive(shape):
    import trimesh

    if isinstance(shape, Box):
        m = trimesh.creation.box(extents=shape.size)
    elif isinstance(shape, Sphere):
        m = trimesh.creation.icosphere(subdivisions=2, radius=float(shape.radius))
    elif isinstance(shape, Cylinder):
        m = trimesh.creation.cylinder(radius=float(shape.radius), height=float(shape.length), sections=24)
    else:
        raise DescriptionError(f"unsupported geometry {type(shape).__name__}")
    return np.asarray(m.vertices, dtype=float), np.asarray(m.faces, dtype=np.int64)


def primitive_part(link: str, shape, origin: np.ndarray, rgba) -> Part:
    vertices, faces = _primitive(shape)
    return _part(link, vertices, faces, origin, rgba)


def _part(link: str, vertices, faces, origin, rgba) -> Part:
    origin = np.asarray(origin, dtype=float)
    v = vertices @ origin[:3, :3].T + origin[:3, 3]
    return Part(link, v.astype(np.float32), np.asarray(faces, dtype=np.uint32), tuple(float(c) for c in rgba))


def robot_scene(urdf_text: str | bytes, search_path=None, fetch: Callable[[str], bytes] = fetch_http,
                max_triangles: int = MAX_TRIANGLES) -> RobotScene:
    """The parts of every link's visuals.  A URDF that does not parse raises its DescriptionError; a visual
    that cannot be drawn (missing or unreadable mesh, over ``max_triangles``) is a note."""
    robot = urdf.read_string(urdf_text, file="robot_description", search_path=search_path)
    parts: list[Part] = []
    notes: list[str] = []
    total = 0
    for link in robot.links.values():
        for g in link.visuals:
            material = g.material
            try:
                if isinstance(g.shape, Mesh):
                    vertices, faces, file_colour = _mesh_triangles(g.shape, fetch)
                else:
                    (vertices, faces), file_colour = _primitive(g.shape), None
            except DescriptionError as exc:
                notes.append(f"link {link.name!r}: visual not drawn: {exc}")
                continue
            if total + len(faces) > max_triangles:
                notes.append(f"link {link.name!r}: visual not drawn: over {max_triangles} triangles in all")
                continue
            if len(faces) == 0:
                notes.append(f"link {link.name!r}: visual without triangles")
                continue
            total += len(faces)
            if material.diffuse is not None:
                rgba = material.rgba
            elif file_colour is not None:
                rgba = (*file_colour, 1.0)
            else:
                rgba = DEFAULT_RGBA
            parts.append(_part(link.name, vertices, faces, g.origin, rgba))
    from ..kinematics.urdf_tree import urdf_tree

    tree_links, tree_joints = urdf_tree(robot)
    sliders = [JointSlider(j.name, float(j.lower), float(j.upper if j.type != "continuous" else j.lower),
                           float(j.velocity))
               for j in tree_joints if j.type in ("revolute", "prismatic", "continuous") and j.mimic is None
               and not j.nonlinear_mimic]
    children = {j.child for j in tree_joints}
    root = next((link.name for link in tree_links if link.name not in children), "")
    return RobotScene(robot.name, [link.name for link in tree_links], parts, notes, sliders, root,
                      tree_joints)
