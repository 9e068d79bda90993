"""OpenRAVE ``<geom>`` and ``<mass>`` elements -> model geometries and inertials."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...errors import SchemaError
from ...model import Box, Cylinder, Geometry, Inertial, Material, Mesh, Sphere
from ...model import transform as tf
from .common import (Context, Notes, apply_transform_tag, attrs, children, find_file, floats, is_true, tag,
                     text)

_ROT_X_90 = tf.make(tf.rotation_axis_angle((1, 0, 0), math.pi / 2))   # XML cylinder (y) -> model (z)
GEOM_TYPES = ("box", "sphere", "cylinder", "trimesh")


def _mesh_spec(el, ctx: Context, notes: Notes) -> Optional[tuple[str, np.ndarray]]:
    """``<render>``/``<data>``/``<collision>``: "file [scale [sy sz]]" text or file=/scale= attributes."""
    a = attrs(el)
    words = text(el).split()
    name = a.get("file") or (words[0] if words else "")
    if not name:
        return None
    scale_words = a["scale"].split() if "scale" in a else words[1:]
    try:
        scale = [float(w) for w in scale_words]
    except ValueError:
        raise ctx.error(SchemaError, f"mesh scale must be numbers, got {' '.join(scale_words)!r}",
                        el) from None
    if len(scale) == 0:
        scale = [1.0]
    if len(scale) not in (1, 3):
        raise ctx.error(SchemaError, f"mesh scale takes 1 or 3 numbers, got {len(scale)}", el)
    return name, np.array(scale * 3 if len(scale) == 1 else scale, dtype=float)


def resolve_mesh(uri: str, scale: np.ndarray, ctx: Context, notes: Notes, el=None) -> Mesh:
    """Mesh lookup: ``<modelsdir>`` first, then the usual file lookup; a missing file is a warning."""
    extra = (ctx.directory / ctx.modelsdir,) if ctx.modelsdir else ()
    path = find_file(uri, ctx, extra, el)
    if path is None:
        notes.warn(f"{ctx.file.name}: mesh file {uri!r} not found; geometry kept without a file")
    return Mesh(uri=uri, path=str(path) if path else None, scale=scale)


def read_geom(el, ctx: Context, notes: Notes) -> tuple[list[Geometry], list[Geometry]]:
    """One ``<geom>`` -> (visuals, collisions) in the link frame."""
    a = attrs(el)
    kind = a.get("type", "box").lower()
    if kind not in GEOM_TYPES:
        notes.warn(f"{ctx.file.name}:{el.sourceline}: geometry type {kind!r} is not supported; skipped")
        return [], []
    if a.get("group", "self").lower() != "self":
        notes.warn(f"{ctx.file.name}:{el.sourceline}: geometry group {a['group']!r} skipped "
                   "(only the 'self' group is kept)")
        return [], []
    origin = np.eye(4)
    material = Material()
    half = radius = height = None
    render = data = None
    vertices = None
    for c in children(el):
        name = tag(c)
        if apply_transform_tag(origin, c, ctx):
            continue
        if name == "extents":
            half = np.array(floats(c, ctx, 3))
        elif name == "fullextents":
            half = 0.5 * np.array(floats(c, ctx, 3))
        elif name == "radius":
            radius = floats(c, ctx, 1)[0]
        elif name == "height":
            height = floats(c, ctx, 1)[0]
        elif name == "render":
            render = _mesh_spec(c, ctx, notes)
        elif name in ("data", "collision"):
            data = _mesh_spec(c, ctx, notes)
        elif name == "diffusecolor":
            material.diffuse = tuple(floats(c, ctx, 3))
        elif name == "ambientcolor":
            material.ambient = tuple(floats(c, ctx, 3))
        elif name == "transparency":
            material.transparency = floats(c, ctx, 1)[0]
        elif name == "vertices":
            values = floats(c, ctx)
            if len(values) % 9:
                raise ctx.error(SchemaError, "<vertices> needs 9 numbers per triangle", c)
            vertices = np.array(values).reshape(-1, 3)
        else:
            notes.unknown_element(c, "geom", ctx)
    visible = is_true(a.get("render", "true"))
    shape = None
    if kind == "box":
        if half is None:
            raise ctx.error(SchemaError, "box geometry needs <extents>", el)
        shape = Box(half_extents=half)
    elif kind == "sphere":
        if radius is None:
            raise ctx.error(SchemaError, "sphere geometry needs <radius>", el)
        shape = Sphere(radius=radius)
    elif kind == "cylinder":
        if radius is None or height is None:
            raise ctx.error(SchemaError, "cylinder geometry needs <radius> and <height>", el)
        shape = Cylinder(radius=radius, length=height)
        origin = origin @ _ROT_X_90
    else:  # trimesh
        if data is None and render is None and vertices is None:
            raise ctx.error(SchemaError, "trimesh geometry needs <data>, <render> or <vertices>", el)
        if data is not None:
            shape = resolve_mesh(*data, ctx, notes, el)
        elif vertices is not None:
            shape = Mesh(uri="", vertices=vertices, triangles=np.arange(len(vertices)).reshape(-1, 3))
        else:
            shape = resolve_mesh(*render, ctx, notes, el)
    gname = a.get("name")
    collision = Geometry(shape=shape, origin=origin, material=material, name=gname)
    visual_shape = resolve_mesh(*render, ctx, notes, el) if render is not None else shape
    visual = Geometry(shape=visual_shape, origin=origin.copy(), material=material, name=gname,
                      visible=visible)
    return [visual], [collision]


# -- mass -------------------------------------------------------------------

def _primitive_mass(shape, density: float) -> Optional[tuple[float, np.ndarray]]:
    """(mass, inertia about the shape's centre in its frame) for a solid primitive."""
    if isinstance(shape, Box):
        x, y, z = 2.0 * np.asarray(shape.half_extents, dtype=float)
        m = density * x * y * z
        return m, np.diag([m * (y * y + z * z), m * (x * x + z * z), m * (x * x + y * y)]) / 12.0
    if isinstance(shape, Sphere):
        r = shape.radius
        m = density * 4.0 / 3.0 * math.pi * r ** 3
        return m, np.eye(3) * 0.4 * m * r * r
    if isinstance(shape, Cylinder):
        r, h = shape.radius, shape.length
        m = density * math.pi * r * r * h
        side = m * (3 * r * r + h * h) / 12.0
        return m, np.diag([side, side, 0.5 * m * r * r])
    return None


def _combine(parts: list[tuple[float, np.ndarray, np.ndarray]]) -> Inertial:
    """Sum (mass, inertia about own centre, 4x4 pose in link) into one Inertial about the com."""
    total = sum(p[0] for p in parts)
    if total <= 0.0:
        return Inertial(mass=0.0)
    com = sum(m * pose[:3, 3] for m, _, pose in parts) / total
    inertia = np.zeros((3, 3))
    for m, i_local, pose in parts:
        r = pose[:3, :3]
        d = pose[:3, 3] - com
        inertia += r @ i_local @ r.T + m * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    return Inertial(mass=total, origin=tf.translation(com), inertia=inertia)


def read_mass(el, collisions: list[Geometry], ctx: Context, notes: Notes) -> Inertial:
    """``<mass type="mimicgeom|box|sphere|custom">`` with density/total/radius/extents/com/inertia."""
    kind = attrs(el).get("type", "sphere").lower()
    values: dict[str, list[float]] = {}
    for c in children(el):
        name = tag(c)
        if name in ("density", "total", "radius", "extents", "com", "inertia"):
            values[name] = floats(c, ctx, {"extents": 3, "com": 3, "inertia": 9}.get(name, 1))
        else:
            notes.unknown_element(c, "mass", ctx)
    density = values.get("density", [None])[0]
    total = values.get("total", [None])[0]
    if kind == "custom":
        com = values.get("com", [0.0, 0.0, 0.0])
        inertia = np.array(values.get("inertia", [0.0] * 9)).reshape(3, 3)
        return Inertial(mass=total or 0.0, origin=tf.translation(com), inertia=inertia)
    if kind == "mimicgeom":
        parts = []
        for g in collisions:
            pm = _primitive_mass(g.shape, density if density is not None else 1000.0)
            if pm is not None:
                parts.append((pm[0], pm[1], g.origin))
        if total is not None and density is None:     # distribute the total by volume
            dummy = sum(p[0] for p in parts)
            parts = [(m * total / dummy, i * total / dummy, pose) for m, i, pose in parts] if dummy else []
        return _combine(parts)
    if kind == "box":
        half = np.array(values.get("extents", [1.0, 1.0, 1.0]))
        if total is not None and density is None:
            density = total / float(np.prod(2 * half)) if np.prod(half) > 0 else 0.0
        m, i = _primitive_mass(Box(half_extents=half), density if density is not None else 1.0)
        return Inertial(mass=m, inertia=i)
    if kind != "sphere":
        notes.warn(f"{ctx.file.name}:{el.sourceline}: unknown mass type {kind!r}, read as sphere")
    r = values.get("radius", [1.0])[0]
    if total is not None and density is None:
        density = total / (4.0 / 3.0 * math.pi * r ** 3) if r > 0 else 0.0
    m, i = _primitive_mass(Sphere(radius=r), density if density is not None else 1.0)
    return Inertial(mass=m, inertia=i)
