"""World-frame scene of a robot and its environment bodies, for ray casting.

``Scene(robot)`` collects the collision geometry (visuals when a link has no
collision geometry) of the robot and of every body in ``robot.environment``;
``set_joint_positions`` moves the robot's links by forward kinematics
(``robot.placement`` maps the root link into the world); ``cast`` returns the
first hit of each ray.  Primitives are intersected analytically, meshes (read by the one mesh loader,
:func:`robot_bridge.formats.meshes.mesh_arrays`, so VRML/Inventor too) with
:class:`~robot_bridge.sim.raycast.TriangleMesh`; a mesh that cannot be loaded is
one entry in ``warnings`` and invisible; rays are brought into each
shape's own frame, so moving links never rebuild an acceleration structure.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

import numpy as np

from ..errors import DescriptionError
from ..formats import meshes
from ..kinematics.fk import KinematicModel
from ..kinematics.frames import optical_offset
from ..model import AttachedSensor, Box, Cylinder, Geometry, Mesh, Robot, Sphere
from . import raster, raycast
from .merged import MERGED_KINDS, MIN_RAYS_FOR_ROBOT, MergedTriangles, local_triangles
from .pinhole import PinholeView


@dataclass
class Shape:
    """One geometry of one link, with its static pose in the link frame."""

    body: str
    link: str
    geometry: Geometry
    kind: str                                # box | sphere | cylinder | mesh
    mesh: Optional[raycast.TriangleMesh] = None
    bound_radius: float = np.inf             # bounding sphere about bound_centre
    bound_centre: Optional[np.ndarray] = None    # in the geometry frame; None: its origin

    def world_centre(self, pose: np.ndarray) -> np.ndarray:
        return pose[:3, 3] if self.bound_centre is None else pose[:3, :3] @ self.bound_centre + pose[:3, 3]

    @property
    def rgb(self) -> np.ndarray:
        return np.asarray(self.geometry.material.rgba[:3], dtype=float)


@dataclass
class Hits:
    distance: np.ndarray     # (N,) metres along the unit ray, inf where nothing was hit
    shape: np.ndarray        # (N,) index into Scene.shapes, -1 where nothing was hit
    normal: Optional[np.ndarray]   # (N, 3) world-frame unit surface normal facing the ray (if asked)
    cosine: Optional[np.ndarray] = None   # (N,) |normal . direction|, 0 where nothing was hit (if asked)


class Scene:
    """The robot (moving with its joints) and its static environment bodies."""

    def __init__(self, robot: Robot, *, environment: bool = True, backend: str = "auto",
                 bodies: Iterable[Robot] = ()):
        self.robot = robot
        self.backend = raycast.resolve_backend(backend)
        self.warnings: list[str] = []
        self.bodies: dict[str, Robot] = {robot.name: robot}
        if environment:
            self.bodies.update(robot.environment)
        for body in bodies:
            self.bodies[body.name] = body
        self.models = {name: KinematicModel(body) for name, body in self.bodies.items()}
        # Environment boxes and meshes as one Embree triangle set (other backends: one shape at a time)
        self._merged = MergedTriangles(self.backend) if self.backend == "embree" else None
        # a camera's boxes and meshes by z-buffer (numba) when available: sets only transformed, never built
        self.raster = raster.AVAILABLE
        self._raster_sets = MergedTriangles("numpy")
        self.shapes: list[Shape] = []
        self._mesh_cache: dict[tuple, raycast.TriangleMesh] = {}
        for name, body in self.bodies.items():
            self.shapes += self._body_shapes(name, body)
        self._link_poses: dict[str, dict[str, np.ndarray]] = {}
        for name in self.bodies:
            self.set_joint_positions({}, body=name)
        self._objects: dict[str, tuple[Robot, np.ndarray]] = {}     # bodies added by set_objects

    def _body_shapes(self, name: str, body: Robot) -> list[Shape]:
        shapes = []
        for link in body.links.values():
            for geom in (link.collisions or link.visuals):
                shape = self._shape(name, link.name, geom, self._mesh_cache)
                if shape is not None:
                    shapes.append(shape)
        return shapes

    # -- bodies that come and go (detected objects) ----------------------------------------------------
    def set_objects(self, objects: Mapping[str, tuple[Robot, np.ndarray]]) -> tuple[list, list, list]:
        """Make the scene's detected objects exactly ``objects`` (name -> (body, pose of the body file's
        frame in the world)): new names are added, known ones moved (or replaced when their body changed),
        missing ones removed.  Only bodies added here are touched; a name taken by the robot or its
        environment is refused (ValueError).  Returns (added, moved, removed) names."""
        clash = sorted(n for n in objects if n in self.bodies and n not in self._objects)
        if clash:
            raise ValueError(f"object names already used by the scene's bodies: {', '.join(clash)}")
        added, moved, removed = [], [], []
        gone = [n for n in self._objects if n not in objects or objects[n][0] is not self._objects[n][0]]
        for name in gone:
            self._remove_body(name)
            if name not in objects:
                removed.append(name)
        for name, (body, pose) in objects.items():
            pose = np.array(pose, dtype=float)
            if name not in self._objects:
                placed = copy.copy(body)                 # the same links, placed at the object's pose
                placed.placement = pose @ body.placement
                self.bodies[name] = placed
                self.models[name] = KinematicModel(placed)
                self.shapes += self._body_shapes(name, placed)
                self._objects[name] = (body, pose)
                self.set_joint_positions({}, body=name)
                added.append(name)
            elif not np.array_equal(pose, self._objects[name][1]):
                placed = copy.copy(body)                 # a new object: snapshots keep the old placement
                placed.placement = pose @ body.placement
                self.bodies[name] = placed
                self.models[name] = KinematicModel(placed)
                self._objects[name] = (body, pose)
                self.set_joint_positions({}, body=name)
                moved.append(name)
        return added, moved, removed

    def _remove_body(self, name: str) -> None:
        del self.bodies[name], self.models[name], self._link_poses[name], self._objects[name]
        self.shapes = [s for s in self.shapes if s.body != name]
        self._world = None

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _shape(self, body: str, link: str, geom: Geometry, cache) -> Optional[Shape]:
        s = geom.shape
        if isinstance(s, Box):
            h = np.asarray(s.half_extents, dtype=float)
            return Shape(body, link, geom, "box", bound_radius=float(np.linalg.norm(h)))
        if isinstance(s, Sphere):
            return Shape(body, link, geom, "sphere", bound_radius=float(s.radius))
        if isinstance(s, Cylinder):
            return Shape(body, link, geom, "cylinder", bound_radius=float(np.hypot(s.radius, 0.5 * s.length)))
        if isinstance(s, Mesh):
            key = (s.path, s.uri, tuple(np.ravel(s.scale)), id(s.vertices), id(s.triangles))
            if key not in cache:
                cache[key] = None                    # warned once per mesh, however many links use it
                try:
                    vertices, triangles = meshes.mesh_arrays(s)
                except DescriptionError as exc:
                    self._warn(f"mesh {s.uri!r} cannot be loaded ({exc}); it is invisible to simulated "
                               "sensors and pictures")
                else:
                    if len(triangles):
                        cache[key] = raycast.TriangleMesh(vertices, triangles, backend=self.backend)
                    else:
                        self._warn(f"mesh {s.uri!r} has no triangles; it is invisible to simulated sensors "
                                   "and pictures")
            mesh = cache[key]
            if mesh is None:
                return None
            # a link mesh often starts at its joint, far from its middle: bound it about its box's centre
            v = mesh.vertices if len(mesh.vertices) else np.zeros((1, 3))
            centre = 0.5 * (v.min(axis=0) + v.max(axis=0))
            radius = float(np.linalg.norm(v - centre, axis=1).max())
            return Shape(body, link, geom, "mesh", mesh=mesh, bound_radius=radius, bound_centre=centre)
        self._warn(f"{body}/{link}: geometry {type(s).__name__} is not simulated")
        return None

    # -- state ---------------------------------------------------------------
    def set_joint_positions(self, positions: Mapping[str, object], body: Optional[str] = None) -> None:
        """Move ``body`` (default: the robot) to these joint values (others: initial values)."""
        name = body or self.robot.name
        placement = self.bodies[name].placement
        poses = self.models[name].link_poses(positions)
        self._link_poses[name] = {link: placement @ pose for link, pose in poses.items()}
        self._world = None

    def link_pose(self, link: str, body: Optional[str] = None) -> np.ndarray:
        return self._link_poses[body or self.robot.name][link]

    def sensor_pose(self, sensor: AttachedSensor, body: Optional[str] = None) -> np.ndarray:
        """World pose of the frame the sensor's data is expressed in (cameras: the optical frame)."""
        pose = self.link_pose(sensor.link, body) @ sensor.origin
        return pose @ optical_offset(sensor) if sensor.type == "camera" else pose

    def snapshot(self) -> "Scene":
        """This scene frozen at its current poses, for queries on another thread while it moves on.

        Geometry (shapes, meshes) is shared, not copied; poses and the lists that index them are."""
        view = copy.copy(self)
        view.bodies, view.models, view.shapes = dict(self.bodies), dict(self.models), list(self.shapes)
        view._link_poses = dict(self._link_poses)
        view._objects = dict(self._objects)
        view._world = list(self.shape_poses())
        return view

    def shape_poses(self) -> list[np.ndarray]:
        if self._world is None:
            self._world = [self._link_poses[s.body][s.link] @ s.geometry.origin for s in self.shapes]
        return self._world

    # -- queries -------------------------------------------------------------
    def cast(self, origins: np.ndarray, directions: np.ndarray, max_range: float = np.inf,
             exclude: Iterable[tuple[str, str]] = (), apex: Optional[np.ndarray] = None,
             normals: bool = True, cosine: bool = False, pinhole: Optional[PinholeView] = None) -> Hits:
        """First hit of each ray (world frame, unit directions) within ``max_range`` of its origin.

        ``exclude`` lists (body, link) pairs to ignore, e.g. the sensor's own link.  ``apex``: a point
        every ray's line passes through, behind its origin (a sensor's centre); it allows culling all
        shapes against all rays with one matrix product.  ``cosine``: also ``|normal . direction|`` per
        ray (what shading needs, cheaper than the normals).  ``pinhole``: the rays are that camera's
        pixels (row-major, from its optical centre or ``range_min`` along each ray); with :attr:`raster`
        its boxes and meshes are found by z-buffer instead of one ray at a time (same hits).
        """
        origins = np.asarray(origins, dtype=float).reshape(-1, 3)
        directions = np.ascontiguousarray(directions, dtype=float).reshape(-1, 3)
        shared = len(origins) == 1            # one origin for every ray (a camera): moved once per shape
        n = len(directions)
        best = np.full(n, np.inf)
        which = np.full(n, -1, dtype=np.int64)
        normal = np.zeros((n, 3)) if normals else None
        cos = np.zeros(n) if cosine else None
        skip = set(exclude)
        active = [i for i, s in enumerate(self.shapes) if (s.body, s.link) not in skip]
        poses = self.shape_poses()
        merged = [i for i in active if self._merged is not None and self.shapes[i].kind in MERGED_KINDS
                  and self.shapes[i].body != self.robot.name]
        if pinhole is not None and self.raster:
            merged = []
            rastered = [i for i in active if self.shapes[i].kind in MERGED_KINDS]
            if rastered:
                best, which, normal, cos = self._raster(pinhole, rastered, poses, origins, directions,
                                                        normals, cosine)
                done = set(rastered)
                active = [i for i in active if i not in done]
        if merged and len(directions) >= MIN_RAYS_FOR_ROBOT:
            links = [i for i in active if self.shapes[i].kind in MERGED_KINDS and i not in merged]
            if links and self._merged.settled(self.shapes, links, poses):
                merged += links
        if merged:                            # the environment's boxes and meshes: one query
            triangles = self._merged.get(self.shapes, merged, poses)
            hits = triangles.mesh.intersect_indexed(origins, directions, normals, cosine)
            best = hits.distance
            which = np.where(hits.triangle >= 0, np.take(triangles.owner, hits.triangle), -1)
            normal, cos = hits.normal, hits.cosine
            done = set(merged)
            active = [i for i in active if i not in done]
        rows_of = None
        if pinhole is not None and self.raster and active:     # primitives: pixels of their bounding box
            rows_of = {i: self._pixel_rect(pinhole, self.shapes[i], poses[i]) for i in active}
            if apex is not None:
                rest = [i for i in active if rows_of[i] is None]
                rows_of.update(self._cone_cull(apex, directions, rest, poses, max_range) if rest else {})
        elif apex is not None:
            rows_of = self._cone_cull(apex, directions, active, poses, max_range)
        for index in active:
            shape, pose = self.shapes[index], poses[index]
            if rows_of is not None:
                rows = rows_of.get(index)
            else:
                rows = self._candidates(np.broadcast_to(origins, directions.shape), directions,
                                        shape.world_centre(pose), shape.bound_radius, max_range)
            if rows is not None and len(rows) == 0:
                continue
            d = directions if rows is None else directions[rows]
            rot = np.ascontiguousarray(pose[:3, :3])
            if shared:
                o_local = (origins - pose[:3, 3]) @ rot
            else:
                o_local = ((origins if rows is None else origins[rows]) - pose[:3, 3]) @ rot
            d_local = d @ rot
            t, n_local = self._intersect(shape, o_local, d_local, normals or cosine)
            current = best if rows is None else best[rows]
            closer = t < current
            if not closer.any():
                continue
            idx = np.flatnonzero(closer) if rows is None else rows[closer]
            best[idx] = t[closer]
            which[idx] = index
            if normals:
                normal[idx] = n_local[closer] @ np.ascontiguousarray(rot.T)
            if cosine:
                cos[idx] = np.abs(np.einsum("ij,ij->i", n_local[closer], d_local[closer]))
        raycast.clear_misses(best > max_range, best, which, normal, cos)
        return Hits(best, which, normal, cos)

    def _raster(self, view: PinholeView, indices, poses, origins, directions, normals, cosine):
        """Hits of the pixels' rays on the boxes and meshes ``indices``: the z-buffer finds the triangle,
        :func:`raycast.plane_hits` the distance (as after any ray caster backend).  The still bodies are one
        cached world-frame set; the robot's links are drawn from their own meshes at their poses (a moving
        arm rebuilds nothing)."""
        still = [i for i in indices if self.shapes[i].body != self.robot.name]
        parts = []                      # (mesh, its pose in the world or None: world frame, owner per face)
        if still:
            merged = self._raster_sets.get(self.shapes, still, poses)
            parts.append((merged.mesh, None, merged.owner))
        for i in indices:
            if self.shapes[i].body == self.robot.name:
                mesh = self._local_mesh(self.shapes[i])
                parts.append((mesh, poses[i], np.full(len(mesh), i, dtype=np.int64)))
        grid = view.grid
        tri = raster.nearest_triangles([(m.vertices, m.faces, pose) for m, pose, _ in parts], view.rotation,
                                       view.position, grid.width, grid.height, grid.fx, grid.fy, grid.cx,
                                       grid.cy, view.range_min)
        face_normals, offsets = [], []
        for mesh, pose, _ in parts:
            if pose is None:
                face_normals.append(mesh.face_normals)
                offsets.append(mesh.plane_offset)
            else:                       # n_w = R n, n_w . x_w = n . x + n_w . p
                n = mesh.face_normals @ pose[:3, :3].T
                face_normals.append(n)
                offsets.append(mesh.plane_offset + n @ pose[:3, 3])
        face_normals = np.concatenate(face_normals)
        columns = [np.ascontiguousarray(face_normals[:, k]) for k in range(3)]
        hits = raycast.plane_hits(columns, np.concatenate(offsets), face_normals, tri, origins, directions,
                                  normals, cosine)
        owner = np.concatenate([o for _, _, o in parts])
        which = np.where(hits.triangle >= 0, np.take(owner, hits.triangle, mode="wrap"), -1)
        return hits.distance, which, hits.normal, hits.cosine

    def _local_mesh(self, shape: Shape) -> raycast.TriangleMesh:
        """A box or mesh shape's triangles in its geometry frame (boxes: 12 exact triangles, cached)."""
        if shape.mesh is not None:
            return shape.mesh
        key = ("box", tuple(np.ravel(shape.geometry.shape.half_extents)))
        mesh = self._mesh_cache.get(key)
        if mesh is None:
            mesh = self._mesh_cache[key] = raycast.TriangleMesh(*local_triangles(shape), backend="numpy")
        return mesh

    @staticmethod
    def _pixel_rect(view: PinholeView, shape: Shape, pose: np.ndarray) -> Optional[np.ndarray]:
        """Pixel rows (row-major indices) whose centres lie within the image of the cube about the shape's
        bounding sphere (it contains the sphere's image); None when the cube reaches behind the camera."""
        radius = shape.bound_radius
        if not np.isfinite(radius):
            return None
        centre = (shape.world_centre(pose) - view.position) @ view.rotation      # optical frame
        corners = centre + radius * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        if corners[:, 2].min() <= 1e-9:
            return None
        grid = view.grid
        u = grid.fx * corners[:, 0] / corners[:, 2] + grid.cx
        v = grid.fy * corners[:, 1] / corners[:, 2] + grid.cy
        u0, u1 = max(0, int(np.ceil(u.min() - 1e-3))), min(grid.width - 1, int(np.floor(u.max() + 1e-3)))
        v0, v1 = max(0, int(np.ceil(v.min() - 1e-3))), min(grid.height - 1, int(np.floor(v.max() + 1e-3)))
        if u0 > u1 or v0 > v1:
            return np.zeros(0, dtype=np.int64)
        return (np.arange(v0, v1 + 1)[:, None] * grid.width + np.arange(u0, u1 + 1)).ravel()

    def _cone_cull(self, apex, directions, active, poses, max_range) -> dict[int, Optional[np.ndarray]]:
        """Per shape, the rows whose line from ``apex`` passes its bounding sphere (None: all rows)."""
        apex = np.asarray(apex, dtype=float).reshape(3)
        out: dict[int, Optional[np.ndarray]] = {}
        cone_shapes, axes, cosines = [], [], []
        for index in active:
            radius = self.shapes[index].bound_radius
            rel = self.shapes[index].world_centre(poses[index]) - apex
            dist = float(np.linalg.norm(rel))
            if not np.isfinite(radius) or dist <= radius:
                out[index] = None                    # apex inside the bound: test every ray
            elif dist - radius > max_range + 1e-9:
                out[index] = np.zeros(0, dtype=np.int64)
            else:
                cone_shapes.append(index)
                axes.append(rel / dist)
                cosines.append(np.sqrt(1.0 - (radius / dist) ** 2) - 1e-9)
        if cone_shapes:
            inside = (np.asarray(axes) @ directions.T) >= np.asarray(cosines)[:, None]   # (shapes, rays)
            for k, index in enumerate(cone_shapes):
                out[index] = np.flatnonzero(inside[k])
        return out

    @staticmethod
    def _candidates(origins, directions, centre, radius, max_range):
        """Rows whose ray passes within ``radius`` of ``centre`` (None = all rows, cheap case)."""
        if not np.isfinite(radius):
            return None
        rel = centre - origins
        along = np.einsum("ij,ij->i", rel, directions)
        closest2 = np.einsum("ij,ij->i", rel, rel) - along * along
        ok = ((closest2 <= radius * radius * (1 + 1e-9) + 1e-12) & (along >= -radius)
              & (along <= max_range + radius))
        if ok.all():
            return None
        return np.flatnonzero(ok)

    @staticmethod
    def _intersect(shape: Shape, o: np.ndarray, d: np.ndarray, normals: bool = True):
        """Distances and local normals; ``o`` is (1, 3) when every ray starts there."""
        s = shape.geometry.shape
        if shape.kind == "mesh":
            return shape.mesh.intersect(o, d, normals)
        o = np.broadcast_to(o, d.shape)
        if shape.kind == "box":
            return raycast.intersect_box(o, d, s.half_extents)
        if shape.kind == "sphere":
            return raycast.intersect_sphere(o, d, float(s.radius))
        return raycast.intersect_cylinder(o, d, float(s.radius), float(s.length))

    def triangle_count(self) -> int:
        return sum(len(s.mesh) for s in self.shapes if s.mesh is not None)
