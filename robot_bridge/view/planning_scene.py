"""MoveIt's planning scene as the view draws it, rclpy-free: the world's collision objects and the bodies
attached to the robot's links, with their colours.

The node turns each moveit_msgs message into plain data (:class:`ObjectUpdate`) and hands it here; what
changed comes back as body ids for the page to redraw.  Semantics are MoveIt's planning scene's:

- ``/collision_object``: ADD creates or replaces a body (its shapes posed in the object's frame, the object
  posed in its header frame); APPEND adds shapes (creates the body when new); MOVE changes the pose only
  (not of an attached body: its link moves it); REMOVE deletes it (an empty id: every world body).
- ``/attached_collision_object``: ADD attaches to ``link_name``: a world body of that id (no shapes in the
  message: the planner's and move_group's way) keeps where it is now and follows the link from then on; an
  object with shapes is created on the link.  REMOVE detaches: the body stays in the world where the link
  holds it now (an empty id: every attached body).
- ``/planning_scene`` ObjectColor: a body's colour by id (kept for ids not seen yet: colours may come first).
- ``/planning_scene`` world.octomap: the occupancy map's occupied cells as one body (:data:`OCTOMAP_ID`, one
  mesh of merged boxes, at most :data:`MAX_OCTOMAP_BOXES`: cells twice as large beyond), decoded with OctoMap
  (:func:`robot_bridge.world.occupancy.body_from_octomap`); each map replaces the last (MoveIt's
  processOctomapMsg), an empty one removes it, a diff without one (no id, no data) leaves it.

Poses of frames come from the caller (``poses(fixed, frames)``: the view's latest TF).  Bad input (unknown
operation or shape, non-finite numbers, an unknown body to move) is one line in :attr:`PlanningScene.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..errors import DescriptionError
from ..model.geometry import Box, Cylinder, Sphere
from .scene import Part, _part, primitive_part

ADD, REMOVE, APPEND, MOVE = 0, 1, 2, 3           # moveit_msgs/CollisionObject operations
BOX, SPHERE, CYLINDER, CONE = 1, 2, 3, 4         # shape_msgs/SolidPrimitive types
DEFAULT_RGBA = (0.45, 0.75, 0.45, 1.0)           # a body without an ObjectColor (rviz's scene green-ish)
MAX_BODIES = 10_000
MAX_TRIANGLES = 1_000_000                        # per body
MAX_NOTES = 100
OCTOMAP_ID = "<octomap>"                         # not a collision object id: REMOVE of every object keeps it
OCTOMAP_RGBA = (0.55, 0.6, 0.9, 0.85)
MAX_OCTOMAP_BOXES = 4000                         # 48,000 triangles at most

Poses = Callable[[str, list], dict]


@dataclass
class ObjectUpdate:
    """A moveit_msgs/CollisionObject as plain data: shapes posed in the object's frame."""

    id: str
    operation: int
    frame: str                                    # header.frame_id
    pose: np.ndarray                              # 4x4: the object in ``frame``
    primitives: list = field(default_factory=list)    # (type, dimensions, 4x4 pose)
    meshes: list = field(default_factory=list)        # ((n, 3) vertices, (m, 3) triangles, 4x4 pose)


@dataclass
class Body:
    id: str
    frame: str                   # the TF frame it is posed in (a link while attached)
    pose: np.ndarray             # 4x4 in ``frame``
    parts: list[Part]            # triangles in the body's own frame
    attached_to: str = ""
    cell: float = 0.0            # the octomap body: the edge of its drawn cells (the map's, or coarser)
    shape_serial: int = 0        # bumped whenever the parts change (the page re-sends meshes then)


def _primitive_shape(kind: int, dims) -> object:
    d = [float(v) for v in dims]
    if kind == BOX and len(d) >= 3:
        return Box(np.array(d[:3]) / 2.0)
    if kind == SPHERE and len(d) >= 1:
        return Sphere(d[0])
    if kind in (CYLINDER, CONE) and len(d) >= 2:          # [height, radius]; a cone drawn as its cylinder
        return Cylinder(d[1], d[0])
    raise DescriptionError(f"SolidPrimitive type {kind} with dimensions {d} is not drawn (BOX, SPHERE, "
                           "CYLINDER, CONE are)")


def object_parts(update: ObjectUpdate, rgba=DEFAULT_RGBA) -> list[Part]:
    """The triangles of an update's shapes in the object's frame; DescriptionError names a bad shape."""
    parts = []
    total = 0
    for kind, dims, pose in update.primitives:
        if not np.isfinite(np.asarray(dims, dtype=float)).all() or not np.isfinite(pose).all():
            raise DescriptionError(f"object {update.id!r}: non-finite primitive")
        parts.append(primitive_part("", _primitive_shape(int(kind), dims), pose, rgba))
    for vertices, triangles, pose in update.meshes:
        v = np.asarray(vertices, dtype=float).reshape(-1, 3)
        t = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        if not np.isfinite(v).all() or not np.isfinite(pose).all():
            raise DescriptionError(f"object {update.id!r}: non-finite mesh")
        if len(t) and (t.min() < 0 or t.max() >= len(v)):
            raise DescriptionError(f"object {update.id!r}: mesh triangle index out of its {len(v)} vertices")
        parts.append(_part("", v, t, pose, rgba))
    for p in parts:
        total += len(p.faces)
    if total > MAX_TRIANGLES:
        raise DescriptionError(f"object {update.id!r}: {total} triangles, over {MAX_TRIANGLES}")
    return parts


class PlanningScene:
    def __init__(self, fixed_frame: str = "world"):
        self.fixed_frame = fixed_frame
        self.bodies: dict[str, Body] = {}
        self.colors: dict[str, tuple[float, float, float, float]] = {}
        self.notes: list[str] = []
        self._serial = 0

    def color(self, body_id: str) -> tuple[float, float, float, float]:
        return self.colors.get(body_id, DEFAULT_RGBA)

    def _note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def _new_parts(self, body: Body, parts: list[Part]) -> None:
        self._serial += 1
        body.parts, body.shape_serial = parts, self._serial

    # -- /collision_object -------------------------------------------------------------------------
    def apply_object(self, u: ObjectUpdate) -> set[str]:
        """Changed body ids (a removed id is no longer in :attr:`bodies`)."""
        if not np.isfinite(u.pose).all():
            self._note(f"object {u.id!r}: non-finite pose: ignored")
            return set()
        if u.id == OCTOMAP_ID:
            self._note(f"object {u.id!r}: the octomap's id: ignored")
            return set()
        if u.operation == REMOVE:
            ids = [u.id] if u.id else [i for i, b in self.bodies.items()
                                       if not b.attached_to and i != OCTOMAP_ID]
            return {i for i in ids if self.bodies.pop(i, None) is not None}
        body = self.bodies.get(u.id)
        if u.operation == MOVE:
            if body is None:
                self._note(f"object {u.id!r}: MOVE of an unknown object: ignored")
                return set()
            if body.attached_to:                  # MoveIt: no world object of that id while attached
                return set()
            body.frame, body.pose = u.frame, u.pose
            return {u.id}
        if u.operation not in (ADD, APPEND):
            self._note(f"object {u.id!r}: operation {u.operation} unknown: ignored")
            return set()
        try:
            parts = object_parts(u)
        except DescriptionError as exc:
            self._note(str(exc))
            return set()
        if body is None:
            if len(self.bodies) >= MAX_BODIES:
                self._note(f"object {u.id!r}: over {MAX_BODIES} bodies: not drawn")
                return set()
            body = self.bodies[u.id] = Body(u.id, u.frame, u.pose, [])
        elif u.operation == APPEND:
            parts = body.parts + parts
        body.frame, body.pose = u.frame, u.pose
        if body.attached_to and u.operation == ADD:
            body.attached_to = ""                 # MoveIt: adding a world object of that id detaches it
        self._new_parts(body, parts)
        return {u.id}

    # -- /attached_collision_object ----------------------------------------------------------------
    def apply_attached(self, link: str, u: ObjectUpdate, poses: Poses) -> set[str]:
        link = link.lstrip("/")
        if u.operation == REMOVE:
            ids = [u.id] if u.id else [i for i, b in self.bodies.items() if b.attached_to]
            return {i for i in ids if self._detach(i, poses)}
        if u.operation not in (ADD, APPEND) or not link:
            self._note(f"attached object {u.id!r}: operation {u.operation} on link {link!r}: ignored")
            return set()
        body = self.bodies.get(u.id)
        if u.primitives or u.meshes:
            changed = self.apply_object(ObjectUpdate(u.id, ADD if body is None else u.operation, u.frame,
                                                     u.pose, u.primitives, u.meshes))
            if not changed:
                return set()
            body = self.bodies[u.id]
        elif body is None:
            self._note(f"attached object {u.id!r} is neither a known object nor given shapes: not drawn")
            return set()
        known = poses(self.fixed_frame, [link, body.frame])
        if link not in known or body.frame.lstrip("/") not in known:
            self._note(f"attached object {u.id!r}: no TF from {self.fixed_frame!r} to {link!r} or "
                       f"{body.frame!r}: not attached")
            return set()
        in_fixed = known[body.frame.lstrip("/")] @ body.pose
        body.frame, body.pose, body.attached_to = link, np.linalg.inv(known[link]) @ in_fixed, link
        return {u.id}

    def _detach(self, body_id: str, poses: Poses) -> bool:
        body = self.bodies.get(body_id)
        if body is None or not body.attached_to:
            return False
        link = poses(self.fixed_frame, [body.attached_to]).get(body.attached_to)
        if link is None:
            self._note(f"attached object {body_id!r}: no TF for {body.attached_to!r}: removed on detach")
            del self.bodies[body_id]
            return True
        body.frame, body.pose, body.attached_to = self.fixed_frame, link @ body.pose, ""
        return True

    # -- /planning_scene ObjectColor ---------------------------------------------------------------
    def apply_colors(self, colors: dict) -> set[str]:
        changed = set()
        for body_id, rgba in colors.items():
            rgba = tuple(float(c) for c in rgba)
            if len(rgba) != 4 or not all(np.isfinite(rgba)):
                self._note(f"ObjectColor of {body_id!r}: {rgba} is not a colour: ignored")
                continue
            if self.colors.get(body_id) != rgba:
                if body_id not in self.colors and len(self.colors) >= MAX_BODIES:
                    continue
                self.colors[body_id] = rgba
                if body_id in self.bodies:
                    changed.add(body_id)
        return changed

    # -- /planning_scene world.octomap -------------------------------------------------------------
    def apply_octomap(self, map_id: str, resolution: float, data, frame: str, pose: np.ndarray,
                      binary: bool = True) -> set[str]:
        """An ``octomap_msgs/OctomapWithPose`` (its octomap's id, resolution, data; the header's frame and
        the origin) as the :data:`OCTOMAP_ID` body: {OCTOMAP_ID} when it changed."""
        if not map_id and not len(data):
            return set()                          # a diff without a map
        if not np.isfinite(pose).all():
            self._note("octomap: non-finite origin: ignored")
            return set()
        if not len(data):
            return {OCTOMAP_ID} if self.bodies.pop(OCTOMAP_ID, None) is not None else set()
        if not binary:
            self._note("octomap: only binary maps are drawn (not full probability ones)")
            return set()
        try:
            from ..world.occupancy import OccupancyUnavailable, body_from_octomap

            made = body_from_octomap(data, float(resolution), map_id, MAX_OCTOMAP_BOXES)
        except (ImportError, OccupancyUnavailable, ValueError) as exc:
            self._note(f"octomap: not drawn: {exc}")
            return set()
        if made is None:
            return {OCTOMAP_ID} if self.bodies.pop(OCTOMAP_ID, None) is not None else set()
        mesh = made.links[made.name].collisions[0].shape
        self.colors.setdefault(OCTOMAP_ID, OCTOMAP_RGBA)
        body = self.bodies.get(OCTOMAP_ID) or Body(OCTOMAP_ID, frame, pose, [])
        self.bodies[OCTOMAP_ID] = body
        body.frame, body.pose = frame, pose
        body.cell = float(made.extras["occupancy_cell"])
        self._new_parts(body, [_part(OCTOMAP_ID, np.asarray(mesh.vertices), np.asarray(mesh.triangles),
                                     np.eye(4), self.colors[OCTOMAP_ID])])
        return {OCTOMAP_ID}

    def get(self, body_id: str) -> Optional[Body]:
        return self.bodies.get(body_id)
