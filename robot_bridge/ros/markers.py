"""MarkerArray of what rviz's RobotModel display does not show.

Manipulator tool frames with approach arrows, hpp handles (approach arrow,
clearance sphere, mask label), grippers (clearance sphere), contact polygons,
camera frusta and laser fans.  Every marker is frame-locked to a TF frame the
description node publishes, so it follows the robot; the array starts with a
DELETEALL so a reload removes markers of the previous model.
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..kinematics import frames
from ..model import Robot

ARROW_LENGTH = 0.1          # m
FRUSTUM_DEPTH = 0.3         # m, camera frusta are drawn this deep
LASER_FAN_RANGE = 1.0       # m, laser fans are drawn at most this far

TOOL_COLOR = (1.0, 0.6, 0.0, 1.0)
HANDLE_COLOR = (0.1, 0.8, 0.1, 1.0)
GRIPPER_COLOR = (0.9, 0.1, 0.9, 1.0)
CONTACT_COLOR = (0.2, 0.6, 1.0, 1.0)
SENSOR_COLOR = (1.0, 1.0, 0.2, 0.8)


def _color(rgba, alpha=None) -> ColorRGBA:
    r, g, b, a = rgba
    return ColorRGBA(r=r, g=g, b=b, a=a if alpha is None else alpha)


def _point(xyz) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


class _Builder:
    def __init__(self, stamp):
        self.stamp = stamp
        self.markers = [Marker(action=Marker.DELETEALL)]
        self.ids: dict[str, int] = {}

    def add(self, ns: str, frame: str, kind: int, rgba, *, scale=(1.0, 1.0, 1.0), points=(), text="",
            alpha=None) -> Marker:
        m = Marker(type=kind, action=Marker.ADD, ns=ns, text=text, frame_locked=True)
        m.header.frame_id = frame
        m.header.stamp = self.stamp
        m.id = self.ids[ns] = self.ids.get(ns, -1) + 1
        m.pose.orientation.w = 1.0
        m.scale.x, m.scale.y, m.scale.z = (float(s) for s in scale)
        m.color = _color(rgba, alpha)
        m.points = [_point(p) for p in points]
        return m

    def arrow(self, ns, frame, direction, rgba, length=ARROW_LENGTH):
        d = np.asarray(direction, dtype=float)
        n = np.linalg.norm(d)
        if n == 0.0:
            return
        self.markers.append(self.add(ns, frame, Marker.ARROW, rgba, scale=(0.01, 0.02, 0.02),
                                     points=[(0, 0, 0), d / n * length]))

    def sphere(self, ns, frame, radius, rgba, alpha=0.3):
        if radius > 0.0:
            d = 2.0 * radius
            self.markers.append(self.add(ns, frame, Marker.SPHERE, rgba, scale=(d, d, d), alpha=alpha))

    def label(self, ns, frame, text, rgba):
        m = self.add(ns, frame, Marker.TEXT_VIEW_FACING, rgba, scale=(0.0, 0.0, 0.03), text=text)
        m.pose.position.z = 0.03
        self.markers.append(m)

    def lines(self, ns, frame, segments, rgba):
        if segments:
            self.markers.append(self.add(ns, frame, Marker.LINE_LIST, rgba, scale=(0.005, 0, 0),
                                         points=[p for seg in segments for p in seg]))


def camera_frustum(params: dict, depth: float = FRUSTUM_DEPTH) -> list[tuple]:
    """Line segments of a pinhole frustum in the optical frame (z forward, x right, y down)."""
    width, height = float(params.get("width", 640)), float(params.get("height", 480))
    fx = float(params.get("fx") or width / (2.0 * math.tan(math.radians(30.0))))
    fy = float(params.get("fy") or fx)
    cx, cy = float(params.get("cx", width / 2.0)), float(params.get("cy", height / 2.0))
    corners = [((u - cx) / fx * depth, (v - cy) / fy * depth, depth)
               for u, v in ((0, 0), (width, 0), (width, height), (0, height))]
    segments = [((0, 0, 0), c) for c in corners]
    segments += [(corners[i], corners[(i + 1) % 4]) for i in range(4)]
    return segments


def laser_fan(params: dict, max_range: float = LASER_FAN_RANGE, steps: int = 32) -> list[tuple]:
    """Outline of a planar scan (ROS LaserScan convention: angles about z from +x)."""
    lo = float(params.get("angle_min", -math.pi / 2))
    hi = float(params.get("angle_max", math.pi / 2))
    r = min(float(params.get("range_max", max_range)), max_range)
    arc = [(r * math.cos(a), r * math.sin(a), 0.0) for a in np.linspace(lo, hi, steps + 1)]
    segments = [((0, 0, 0), arc[0]), ((0, 0, 0), arc[-1])]
    segments += [(arc[i], arc[i + 1]) for i in range(steps)]
    return segments


def mask_text(mask) -> str:
    return "".join("1" if m else "0" for m in mask)


def robot_markers(robot: Robot, prefix: str, stamp) -> MarkerArray:
    b = _Builder(stamp)
    for m in robot.manipulators.values():
        frame = frames.tool_frame(m, prefix)
        b.arrow("tool", frame, m.direction, TOOL_COLOR)
        b.label("tool", frame, m.name, TOOL_COLOR)
    sem = robot.semantics
    if sem is not None:
        for h in sem.handles.values():
            frame = frames.handle_frame(h.name, prefix)
            b.arrow("handle", frame, h.approaching_direction, HANDLE_COLOR)
            b.sphere("handle", frame, h.clearance, HANDLE_COLOR)
            b.label("handle", frame, f"{h.name} mask {mask_text(h.mask)}", HANDLE_COLOR)
        for g in sem.grippers.values():
            frame = frames.gripper_frame(g.name, prefix)
            b.arrow("gripper", frame, (1.0, 0.0, 0.0), GRIPPER_COLOR)
            b.sphere("gripper", frame, g.clearance, GRIPPER_COLOR)
            b.label("gripper", frame, g.name, GRIPPER_COLOR)
        for c in sem.contacts.values():
            pts = np.asarray(c.points, dtype=float).reshape(-1, 3)
            segments = [(pts[poly[i]], pts[poly[(i + 1) % len(poly)]])
                        for poly in c.shapes for i in range(len(poly))]
            b.lines("contact", frames.link_frame(c.link, prefix), segments, CONTACT_COLOR)
    for s in robot.sensors.values():
        if s.type == "camera":
            b.lines("sensor", frames.optical_frame(s, prefix), camera_frustum(s.params), SENSOR_COLOR)
        elif s.type == "laser":
            b.lines("sensor", frames.sensor_frame(s, prefix), laser_fan(s.params), SENSOR_COLOR)
    return MarkerArray(markers=b.markers)


def body_markers(body: Robot, frame: str, ns: str, stamp, alpha: float | None = None) -> list[Marker]:
    """The geometry of a body (visuals, else collisions, of every link at its initial pose) as markers in
    ``frame`` -- the frame the body file's own frame is published as.  Primitives become CUBE / SPHERE /
    CYLINDER, meshes MESH_RESOURCE (file://) or, when inline, TRIANGLE_LIST; ids count from 0 in ``ns``."""
    from ..kinematics.fk import KinematicModel
    from ..model import Box, Cylinder, Mesh, Sphere

    b = _Builder(stamp)
    b.markers = []
    poses = KinematicModel(body, compiled=False).link_poses()   # once: no kernel compile
    for link in body.links.values():
        for geom in (link.visuals or link.collisions):
            if not geom.visible:
                continue
            s = geom.shape
            at = body.placement @ poses[link.name] @ geom.origin
            if isinstance(s, Box):
                m = b.add(ns, frame, Marker.CUBE, geom.material.rgba, scale=s.size, alpha=alpha)
            elif isinstance(s, Sphere):
                d = 2.0 * float(s.radius)
                m = b.add(ns, frame, Marker.SPHERE, geom.material.rgba, scale=(d, d, d), alpha=alpha)
            elif isinstance(s, Cylinder):
                d = 2.0 * float(s.radius)
                m = b.add(ns, frame, Marker.CYLINDER, geom.material.rgba, scale=(d, d, s.length), alpha=alpha)
            elif isinstance(s, Mesh) and s.vertices is not None and s.triangles is not None:
                scale = np.broadcast_to(np.asarray(s.scale, dtype=float).reshape(-1), 3)
                vertices = np.asarray(s.vertices, dtype=float) * scale
                m = b.add(ns, frame, Marker.TRIANGLE_LIST, geom.material.rgba,
                          points=vertices[np.asarray(s.triangles).reshape(-1)], alpha=alpha)
            elif isinstance(s, Mesh) and s.path:
                scale = np.broadcast_to(np.asarray(s.scale, dtype=float).reshape(-1), 3)
                m = b.add(ns, frame, Marker.MESH_RESOURCE, geom.material.rgba, scale=scale, alpha=alpha)
                m.mesh_resource = "file://" + str(s.path)
            else:
                continue
            _set_pose(m, at)
            b.markers.append(m)
    return b.markers


def _set_pose(marker: Marker, matrix: np.ndarray) -> None:
    from ..model.transform import to_quat_xyzw

    p, q = marker.pose.position, marker.pose.orientation
    p.x, p.y, p.z = (float(v) for v in matrix[:3, 3])
    q.x, q.y, q.z, q.w = (float(v) for v in to_quat_xyzw(matrix))


def delete_markers(frame: str, ns: str, count: int, stamp) -> list[Marker]:
    """DELETE markers for ids 0..count-1 of ``ns``."""
    out = []
    for i in range(count):
        m = Marker(action=Marker.DELETE, ns=ns, id=i)
        m.header.frame_id = frame
        m.header.stamp = stamp
        out.append(m)
    return out
