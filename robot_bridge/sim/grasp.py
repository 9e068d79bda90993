"""Where closing fingers meet a body of the world: the simulated gripper's contact position.

:func:`contact_position` moves the gripper's driving joint (mimic fingers follow) from its position toward a
target and returns the first position at which a finger's collision geometry touches an environment body,
by ray casting (the one :class:`~robot_bridge.sim.scene.Scene`) from points on every finger's collision
shapes along the direction those points move.  The robot's own links are not obstacles.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..model import Box, Cylinder, Sphere
from .scene import Scene

_GRID = np.linspace(-1.0, 1.0, 5)


def _box_points(half: np.ndarray) -> np.ndarray:
    """Points on the surface of a box (5 x 5 per face, corners and edges included)."""
    u, v = np.meshgrid(_GRID, _GRID)
    u, v = u.ravel(), v.ravel()
    faces = []
    for axis in range(3):
        for side in (-1.0, 1.0):
            p = np.zeros((u.size, 3))
            others = [a for a in range(3) if a != axis]
            p[:, axis] = side
            p[:, others[0]], p[:, others[1]] = u, v
            faces.append(p)
    return np.unique(np.vstack(faces), axis=0) * np.asarray(half, dtype=float)


def _shape_points(shape) -> np.ndarray:
    if isinstance(shape, Box):
        return _box_points(shape.half_extents)
    if isinstance(shape, Sphere):
        return _box_points(np.full(3, shape.radius))           # its bounding box: a little early
    if isinstance(shape, Cylinder):
        return _box_points(np.array([shape.radius, shape.radius, shape.length / 2.0]))
    return np.zeros((0, 3))          # meshes: not sampled (a finger mesh is rare; its link origin is used)


def contact_position(scene: Scene, positions: Mapping[str, float], joint: str, target: float,
                     step: float = 1e-4) -> float | None:
    """The driving ``joint``'s position between its current value (in ``positions``) and ``target`` where a
    finger first touches an environment body, or None when the way is free."""
    found = contact(scene, positions, joint, target, step)
    return None if found is None else found[0]


def contact(scene: Scene, positions: Mapping[str, float], joint: str, target: float,
            step: float = 1e-4) -> tuple[float, str] | None:
    """:func:`contact_position` and the name of the body touched (a scene body: an environment body or a
    detected object), or None when the way is free."""
    robot = scene.robot
    start = float(positions[joint])
    travel = target - start
    if abs(travel) < 1e-12:
        return None
    direction = np.sign(travel)
    here = dict(positions)
    there = dict(positions, **{joint: start + direction * step})
    scene.set_joint_positions(here)
    before = {name: scene.link_pose(name) for name in robot.links}
    scene.set_joint_positions(there)
    after = {name: scene.link_pose(name) for name in robot.links}
    scene.set_joint_positions(here)
    origins, moves = [], []
    for name, link in robot.links.items():
        if np.allclose(before[name], after[name], atol=1e-12):
            continue                                           # does not move with the gripper
        for geom in (link.collisions or link.visuals):
            local = _shape_points(geom.shape)
            if not len(local):
                local = np.zeros((1, 3))
            homogeneous = np.c_[local, np.ones(len(local))] @ geom.origin.T
            p0 = homogeneous @ before[name].T
            p1 = homogeneous @ after[name].T
            origins.append(p0[:, :3])
            moves.append((p1 - p0)[:, :3] / step)              # metres per unit of joint travel
    if not origins:
        return None
    origins, moves = np.vstack(origins), np.vstack(moves)
    speed = np.linalg.norm(moves, axis=1)
    keep = speed > 1e-9
    origins, moves, speed = origins[keep], moves[keep], speed[keep]
    own = [(robot.name, name) for name in robot.links]
    hits = scene.cast(origins, moves / speed[:, None], max_range=float(np.max(speed) * abs(travel)),
                      exclude=own, normals=False)
    joint_travel = hits.distance / speed                       # inf where the way is free
    if not len(joint_travel):
        return None
    k = int(np.argmin(joint_travel))
    first = float(joint_travel[k])
    if not np.isfinite(first) or first >= abs(travel):
        return None
    return start + direction * first, scene.shapes[int(hits.shape[k])].body
