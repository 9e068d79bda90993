"""Pictures of a robot in its world with matplotlib (Agg, no display, no rclpy).

The geometry is the simulation's: :class:`robot_bridge.sim.Scene` collects every shape of the robot and
its environment bodies and places them by forward kinematics; primitives are triangulated with
``trimesh.creation`` and meshes drawn as loaded.  Faces are lit by one directional light.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from .formats import xmlsafe
from .model import AttachedSensor, Robot
from .sim import Scene
from .sim.scene import Shape

PATH_RGB = (1.0, 0.0, 1.0)              # magenta: the planned path of render(path=...)
LIGHT = np.array([0.4, -0.3, 0.87]) / np.linalg.norm([0.4, -0.3, 0.87])
DEFAULT_VIEW = (25.0, -50.0)           # elevation, azimuth in degrees
TOP_VIEW = (90.0, -90.0)               # x to the right, y up
SPHERE_SUBDIVISIONS = 2
CYLINDER_SECTIONS = 24
MAX_EDGE = 0.06       # m: primitives are subdivided so that matplotlib's per-face depth sort stays right


class NothingToDraw(ValueError):
    """No shape of the robot or its environment could be drawn (every mesh failed, or no geometry)."""


def parse_joint_values(items: Sequence[str], robot: Robot) -> dict[str, list[float]]:
    """``["j1=0.5", "ball=0,0.1,0"]`` -> {joint: values}; names and value counts are checked."""
    values: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"joint value {item!r}: expected name=value")
        joint = robot.joints.get(name)
        if joint is None:
            raise ValueError(f"joint value {item!r}: robot {robot.name!r} has no joint {name!r} "
                             f"(joints: {', '.join(robot.joints)})")
        try:
            numbers = [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"joint value {item!r}: expected {joint.dof} comma-separated numbers") from None
        if len(numbers) != joint.dof or not all(math.isfinite(v) for v in numbers):
            raise ValueError(f"joint value {item!r}: joint {name!r} takes {joint.dof} finite value(s)")
        values[name] = numbers
    return values


def shape_triangles(shape: Shape, pose: np.ndarray) -> np.ndarray:
    """World-frame triangles (T, 3, 3) of one scene shape at ``pose`` (world -> geometry frame)."""
    import trimesh

    s = shape.geometry.shape
    if shape.kind == "box":
        vertices, faces = _arrays(trimesh.creation.box(extents=2.0 * np.asarray(s.half_extents, dtype=float)))
    elif shape.kind == "sphere":
        vertices, faces = _arrays(trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS,
                                                             radius=float(s.radius)))
    elif shape.kind == "cylinder":     # along z, centred (model.geometry convention, as trimesh's)
        vertices, faces = _arrays(trimesh.creation.cylinder(radius=float(s.radius), height=float(s.length),
                                                            sections=CYLINDER_SECTIONS))
    else:
        vertices, faces = shape.mesh.vertices, shape.mesh.faces
    if shape.kind != "mesh":
        vertices, faces = trimesh.remesh.subdivide_to_size(vertices, faces, max_edge=MAX_EDGE)
    world = vertices @ pose[:3, :3].T + pose[:3, 3]
    return world[faces]


def _arrays(mesh) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(mesh.vertices, dtype=float), np.asarray(mesh.faces, dtype=np.int64)


def visuals_only(robot: Robot) -> Robot:
    """A copy of ``robot`` whose links keep only their visuals (with their materials), so that a picture
    shows what rviz's RobotModel display shows; the scene otherwise draws collision geometry first."""
    import copy

    out = copy.copy(robot)
    out.links = {name: dataclasses.replace(link, collisions=[]) for name, link in robot.links.items()}
    return out


def scene_triangles(scene: Scene) -> list[tuple[Shape, np.ndarray]]:
    """Every visible shape of the scene with its world-frame triangles."""
    return [(shape, shape_triangles(shape, pose)) for shape, pose in zip(scene.shapes, scene.shape_poses())
            if shape.geometry.visible and shape.geometry.material.transparency < 1.0]


def scan_points(scene: Scene, sensor: AttachedSensor, ranges: Sequence[float], angle_min: float,
                angle_increment: float) -> np.ndarray:
    """World points (N, 3) of the finite readings of a planar laser scan (LaserScan conventions)."""
    r = np.asarray(ranges, dtype=float)
    angles = angle_min + angle_increment * np.arange(len(r))
    hit = np.isfinite(r)
    local = np.stack([r[hit] * np.cos(angles[hit]), r[hit] * np.sin(angles[hit]), np.zeros(hit.sum())], 1)
    pose = scene.sensor_pose(sensor)
    return local @ pose[:3, :3].T + pose[:3, 3]


def camtrans_view(robot: Robot, centre: np.ndarray) -> Optional[tuple[float, float]]:
    """(elevation, azimuth) looking from an environment's ``<camtrans>`` viewpoint at ``centre``."""
    for entry in (robot.extras or {}).get("camtrans", []):
        root = xmlsafe.parse_bytes(entry["xml"].encode("utf-8")).getroot()
        try:
            eye = np.array([float(v) for v in (root.text or "").split()], dtype=float)
        except ValueError:
            return None
        if eye.shape != (3,):
            return None
        d = eye - centre
        return math.degrees(math.atan2(d[2], math.hypot(d[0], d[1]))), math.degrees(math.atan2(d[1], d[0]))
    return None


def render(robot: Robot, output: str | Path, joints: Optional[Mapping[str, object]] = None, *,
           points: Optional[np.ndarray] = None, points_origin: Optional[np.ndarray] = None,
           title: Optional[str] = None, view: Optional[tuple[float, float]] = None,
           top_view: bool = False, size: tuple[float, float] = (7.0, 6.0), dpi: int = 110,
           scene: Optional[Scene] = None, bounds: Optional[tuple[np.ndarray, np.ndarray]] = None,
           path: Optional[np.ndarray] = None, path_label: str = "planned path") -> Path:
    """Draw ``robot`` (at ``joints``, others at their initial values) and its environment into a PNG.

    ``points`` (N, 3) world points (e.g. laser hits) are drawn in red, with faint rays from
    ``points_origin`` when given; ``path`` (M, 3) world points are drawn as a magenta polyline (e.g. where a
    planned trajectory takes the gripper), labelled ``path_label``.  The view looks from the environment's
    ``<camtrans>`` when it has one;
    ``top_view`` adds a second panel seen from above.  ``bounds`` (lo, hi) fixes the world box shown
    (default: what is drawn), so that pictures of the same robot compare pixel for pixel.  Returns the
    written path.  Raises
    :class:`NothingToDraw` (nothing written) when no shape at all can be drawn; the scene's
    ``warnings`` say why.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Line3DCollection, Poly3DCollection

    if scene is None:
        scene = Scene(robot, backend="numpy")
    scene.set_joint_positions(joints or {})
    drawn = scene_triangles(scene)
    if not drawn and (points is None or not len(points)) and bounds is None:
        reasons = f": {len(scene.warnings)} warning(s), first: {scene.warnings[0]}" if scene.warnings else ""
        raise NothingToDraw(f"nothing to draw: {robot.name!r} has no geometry that could be loaded{reasons}")
    tris = np.concatenate([t for _, t in drawn]) if drawn else np.zeros((0, 3, 3))
    colours = np.concatenate([np.tile(shape.rgb, (len(t), 1)) for shape, t in drawn]) if drawn \
        else np.zeros((0, 3))
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    norm = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, norm, out=np.zeros_like(normals), where=norm > 0)
    shade = 0.45 + 0.55 * np.abs(normals @ LIGHT)          # two-sided: triangle winding varies by source
    faces = np.clip(colours * shade[:, None], 0.0, 1.0)

    cloud = [tris.reshape(-1, 3)]
    if points is not None and len(points):
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        cloud.append(points)
    if path is not None and len(path):
        path = np.asarray(path, dtype=float).reshape(-1, 3)
        cloud.append(path)
    cloud = np.concatenate(cloud) if any(len(c) for c in cloud) else np.zeros((1, 3))
    lo, hi = cloud.min(axis=0), cloud.max(axis=0)
    if bounds is not None:
        lo, hi = (np.array(b, dtype=float) for b in bounds)
    lo[2] = min(lo[2], 0.0)                                  # keep the floor in view
    centre, half = 0.5 * (lo + hi), 0.5 * float((hi - lo).max()) + 0.05
    views = [view or camtrans_view(robot, centre) or DEFAULT_VIEW] + ([TOP_VIEW] if top_view else [])

    fig = plt.figure(figsize=(size[0] * len(views), size[1]), dpi=dpi)
    for index, (elev, azim) in enumerate(views):
        ax = fig.add_subplot(1, len(views), index + 1, projection="3d")
        ax.computed_zorder = False           # laser hits stay visible in front of the geometry
        ax.add_collection3d(Poly3DCollection(tris, facecolors=faces, edgecolors="none", linewidths=0,
                                             zorder=1))
        if points is not None and len(points):
            if points_origin is not None:
                origin = np.asarray(points_origin, dtype=float)
                ax.add_collection3d(Line3DCollection([(origin, p) for p in points], colors=[(1, 0, 0, 0.15)],
                                                     linewidths=0.6, zorder=2))
            ax.scatter(points[:, 0], points[:, 1], points[:, 2], s=6, c="red", depthshade=False, zorder=3,
                       label=f"{len(points)} laser hits")
        if path is not None and len(path):
            ax.plot(path[:, 0], path[:, 1], path[:, 2], color=PATH_RGB, linewidth=2.5, zorder=4,
                    label=path_label)
        if (points is not None and len(points)) or (path is not None and len(path)):
            ax.legend(loc="upper left", fontsize=8)
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        z0 = max(lo[2], centre[2] - half)
        ax.set_zlim(z0, z0 + 2 * half)
        ax.set_box_aspect((1, 1, 1))
        ax.view_init(elev=elev, azim=azim)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        if (elev, azim) == TOP_VIEW:
            ax.set_zticks([])
        else:
            ax.set_zlabel("z [m]")
        label = "top view" if (elev, azim) == TOP_VIEW else f"elevation {elev:.0f}°, azimuth {azim:.0f}°"
        ax.set_title(label, fontsize=9)
    fig.suptitle(title or f"{robot.name}: {len(robot.links)} links, {len(robot.environment)} environment "
                          "bodies", fontsize=11)
    fig.tight_layout()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    plt.close(fig)
    return output
