"""The world's bodies as MoveIt collision objects, without ROS: their shapes, and what to send on a change.

:func:`body_shapes` turns a body file (a :class:`~robot_bridge.model.Robot`, every link at its initial pose)
into what ``moveit_msgs/CollisionObject`` carries: primitives in shape_msgs' dimension order (BOX: x, y, z
full sizes; SPHERE: radius; CYLINDER: height, radius, along z) and triangle meshes, each with its pose in
the body frame (the frame world_node publishes the body as).  Collision geometry is used, else the visuals.
Mesh files are read up to ``max_bytes`` and ``max_triangles``; a bigger one goes as its bounding box (said
in the notes).

:class:`SceneSync` keeps what was sent and says which operations bring a subscriber to the current world:
ADD for a new body (or one whose shapes changed: MoveIt replaces an object on ADD), MOVE for a body that
moved, REMOVE for one gone; :meth:`SceneSync.current` is every body as ADD, for a subscriber that joins late.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from ..model import Box, Cylinder, Mesh, Robot, Sphere

MAX_MESH_BYTES = 16 << 20          # a mesh file read for a collision object (bigger: its bounding box)
MAX_MESH_TRIANGLES = 100_000       # triangles of one body's meshes together (beyond: bounding boxes)

ADD, MOVE, REMOVE = "add", "move", "remove"


@dataclass
class Primitive:
    kind: str                          # "box", "sphere", "cylinder"
    dimensions: tuple[float, ...]      # shape_msgs/SolidPrimitive order
    pose: np.ndarray                   # 4x4, body frame -> primitive frame


@dataclass
class TriangleMesh:
    vertices: np.ndarray               # (n, 3) float, scale applied
    triangles: np.ndarray              # (m, 3) int
    pose: np.ndarray                   # 4x4, body frame -> mesh frame


@dataclass
class BodyShapes:
    primitives: list[Primitive] = field(default_factory=list)
    meshes: list[TriangleMesh] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.primitives or self.meshes)


def _bounding_box(vertices: np.ndarray, pose: np.ndarray) -> Primitive:
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    centre = np.eye(4)
    centre[:3, 3] = (lo + hi) / 2.0
    return Primitive("box", tuple(float(v) for v in np.maximum(hi - lo, 1e-6)), pose @ centre)


def body_shapes(body: Robot, max_bytes: int = MAX_MESH_BYTES,
                max_triangles: int = MAX_MESH_TRIANGLES) -> BodyShapes:
    """The collision shapes of ``body`` in its own frame (see the module doc)."""
    from ..formats.meshes import mesh_arrays
    from ..kinematics.fk import KinematicModel

    out = BodyShapes()
    poses = KinematicModel(body, compiled=False).link_poses()   # once: no kernel compile
    triangles_left = max_triangles
    for link in body.links.values():
        for geom in (link.collisions or link.visuals):
            s = geom.shape
            at = body.placement @ poses[link.name] @ geom.origin
            if isinstance(s, Box):
                out.primitives.append(Primitive("box", tuple(float(v) for v in s.size), at))
            elif isinstance(s, Sphere):
                out.primitives.append(Primitive("sphere", (float(s.radius),), at))
            elif isinstance(s, Cylinder):
                out.primitives.append(Primitive("cylinder", (float(s.length), float(s.radius)), at))
            elif isinstance(s, Mesh):
                where = f"link {link.name!r}: mesh {s.uri!r}"
                if s.vertices is None and s.path is not None:
                    try:
                        size = os.stat(s.path).st_size
                    except OSError as exc:
                        out.notes.append(f"{where} left out: {exc.strerror or exc}")
                        continue
                    if size > max_bytes:
                        out.notes.append(f"{where} left out: {size} bytes, more than {max_bytes}")
                        continue
                try:
                    vertices, triangles = mesh_arrays(s)
                except Exception as exc:        # any reader failure: the body goes without this mesh
                    out.notes.append(f"{where} left out: {exc}")
                    continue
                if len(triangles) == 0:
                    out.notes.append(f"{where} left out: no triangles")
                elif len(triangles) > triangles_left:
                    out.primitives.append(_bounding_box(vertices, at))
                    out.notes.append(f"{where}: {len(triangles)} triangles beyond the {max_triangles} of a "
                                     "body, sent as its bounding box")
                else:
                    triangles_left -= len(triangles)
                    out.meshes.append(TriangleMesh(np.asarray(vertices, dtype=float),
                                                   np.asarray(triangles, dtype=np.int64), at))
    if not out:
        out.notes.append("no collision or visual geometry")
    return out


class SceneSync:
    """What the collision object subscribers were told, and what brings them to the current world."""

    def __init__(self):
        self.sent: dict[str, tuple[object, np.ndarray]] = {}     # name -> (shapes key, pose)

    def changes(self, bodies: Iterable[tuple[str, object, np.ndarray]]) -> list[tuple[str, str]]:
        """(operation, name) for the current ``bodies`` (name, shapes key, 4x4 pose): ADD for a new name
        or changed shapes key, MOVE for a changed pose, REMOVE for a name no longer there; sent ones are
        remembered."""
        ops, seen = [], set()
        for name, key, pose in bodies:
            seen.add(name)
            old = self.sent.get(name)
            if old is None or old[0] is not key:
                ops.append((ADD, name))
            elif not np.array_equal(old[1], pose):
                ops.append((MOVE, name))
            else:
                continue
            self.sent[name] = (key, np.array(pose, dtype=float))
        for name in [n for n in self.sent if n not in seen]:
            del self.sent[name]
            ops.append((REMOVE, name))
        return ops

    def current(self) -> list[str]:
        """Every body sent and not removed (a late subscriber gets them as ADD)."""
        return list(self.sent)

    def pose(self, name: str) -> Optional[np.ndarray]:
        entry = self.sent.get(name)
        return None if entry is None else entry[1]


def attach_topic(objects_topic: str) -> str:
    """world_node's ``~/attach`` next to its ``~/objects`` (``world_node/objects`` -> ``world_node/attach``):
    where the controller and planner nodes say what a gripper holds."""
    return objects_topic.rsplit("/", 1)[0] + "/attach" if "/" in objects_topic else "attach"


def body_color(body: Robot) -> tuple[float, float, float, float]:
    """The colour of a body for MoveIt's ObjectColor: its first visual's (else collision's) material."""
    for link in body.links.values():
        for geom in (link.visuals or link.collisions):
            return geom.material.rgba
    return (0.7, 0.7, 0.7, 1.0)
