"""Walk OpenRAVE XML elements with the upstream reader's semantics (xmlreaders-core.cpp).

Elements are processed in document order, like OpenRAVE's SAX readers: a
``<Body>`` re-opens an existing link, ``</joint>`` freezes the two bodies'
relative pose, and KinBody/Robot-level transforms and prefixes are applied at
the element's end to what was created inside it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np
from lxml import etree

from ...errors import (DescriptionError, IncludeCycleError, SchemaError, UnknownReferenceError,
                       UnsupportedFormatError)
from ...model import AttachedSensor, Manipulator, Mimic
from ...model import transform as tf
from ..limits import check_regular_file
from ..xmlsafe import parse_file
from . import sensors
from .common import (Context, Notes, apply_transform_tag, attrs, children, floats, is_true, require_file, tag,
                     text)
from .geometry import read_geom, read_mass
from .state import (DEFAULT_LIMITS, OPENRAVE_DOF, BodyState, JointState, LinkState, rename_mimic)

COLLADA_SUFFIXES = (".dae", ".zae")
# Elements kept as opaque extras (plugins, viewers, physics...) -- reported once each.
OPAQUE = ("controller", "module", "plugin", "physicsengine", "collisionchecker", "planner", "viewer",
          "server", "sensorsystem", "trajectory", "inversekinematicssolver", "iksolver", "camtrans",
          "camrotaxis", "camrotationaxis", "camfocal", "bkgndcolor", "unit")


def opaque(el) -> dict:
    return {"attributes": dict(el.attrib), "xml": etree.tostring(el, encoding="unicode", with_tail=False),
            "line": el.sourceline}


def keep_extra(extras: dict, el, where: str, ctx: Context, notes: Notes) -> None:
    """Keep ``el`` in ``extras`` under its tag, as a list of :func:`opaque` entries; when a value read
    from the file already has that name (a sensor's ``file``, a joint's per-DOF list), under
    ``<tag>_elements`` (appending to it failed, or mixed element dicts into its numbers)."""
    kept = extras.setdefault(tag(el), [])
    if not isinstance(kept, list) or (kept and not isinstance(kept[0], dict)):
        kept = extras.setdefault(f"{tag(el)}_elements", [])
    kept.append(opaque(el))
    notes.unknown_element(el, where, ctx)


def parse_root(path: Path, ctx: Context, el=None):
    """Parse an included file (cycle-checked) and return its root element."""
    if path in ctx.stack:
        chain = " -> ".join(p.name for p in (*ctx.stack, path))
        raise ctx.error(IncludeCycleError, f"include cycle: {chain}", el)
    try:
        return parse_file(path, budget=ctx.budget).getroot()
    except DescriptionError as exc:          # name the including element too
        if el is not None:
            exc.message += f" (included by {ctx.file.name}:{el.sourceline})"
            exc.args = (str(exc),)
        raise


# -- KinBody / Robot -----------------------------------------------------------

def read_interface(el, body: BodyState, ctx: Context, notes: Notes, kind: str,
                   forwarded: Optional[dict[str, str]] = None) -> None:
    """Read a ``<KinBody>`` or ``<Robot>`` element (and its ``file=``) into ``body``."""
    a = attrs(el)
    a.update(forwarded or {})
    if kind == "robot":
        body.is_robot = True
    first_link = len(body.links)
    if "file" in a:
        path = require_file(a["file"], ctx, el)
        passed = {k: v for k, v in a.items() if k != "file"}
        if path.name.lower().endswith(COLLADA_SUFFIXES):
            merge_collada(path, body, ctx, notes, el, passed, kind)
        else:
            root = parse_root(path, ctx, el)
            rk = tag(root)
            if rk not in ("kinbody", "robot"):
                raise ctx.error(SchemaError, f"included file {path.name} has root <{root.tag}>, expected "
                                "<KinBody> or <Robot>", el)
            read_interface(root, body, ctx.child(path), notes, rk, passed)
    # what this element itself creates (after its file) gets its prefix
    own_link, own_joint = len(body.links), len(body.joints)
    own_manip, own_sensor = len(body.manipulators), len(body.sensors)
    ctx = dataclasses.replace(ctx, modelsdir=None, default_mass=None)
    trans = np.eye(4)
    for c in children(el):
        name = tag(c)
        if apply_transform_tag(trans, c, ctx):
            continue
        if name in ("kinbody", "robot"):
            read_interface(c, body, ctx, notes, name)
        elif name == "body":
            read_body(c, body, ctx, notes)
        elif name == "joint":
            read_joint(c, body, ctx, notes)
        elif name == "mass":
            ctx.default_mass = c
        elif name == "adjacent":
            words = text(c).split()
            if len(words) != 2:
                raise ctx.error(SchemaError, f"<adjacent> needs two link names, got {len(words)}", c)
            body.adjacent.append((words[0], words[1]))
        elif name == "modelsdir":
            ctx.modelsdir = text(c)
        elif name == "jointvalues":
            body.jointvalues = floats(c, ctx)
        elif name == "transparency":
            value = floats(c, ctx, 1)[0]
            for link in body.links:
                for g in link.visuals + link.collisions:
                    g.material = dataclasses.replace(g.material, transparency=value)
        elif name in ("diffusecolor", "ambientcolor"):
            notes.warn(f"{ctx.file.name}:{c.sourceline}: <{c.tag}> on a {kind} is ignored (as upstream does)")
        elif name == "manipulator" and kind == "robot":
            body.manipulators.append(read_manipulator(c, ctx, notes, len(body.manipulators)))
        elif name == "attachedsensor" and kind == "robot":
            read_attached_sensor(c, body, ctx, notes)
        else:
            keep_extra(body.extras, c, kind, ctx, notes)
    if a.get("name"):
        body.name = a["name"]
    prefix = a.get("prefix")
    if prefix:
        apply_prefix(body, prefix, own_link, own_joint, own_manip, own_sensor, robot=(kind == "robot"))
    if kind == "robot" and own_manip:
        _new_first(body.manipulators, own_manip)
    if kind == "robot" and own_sensor:
        _new_first(body.sensors, own_sensor)
    if not np.array_equal(trans, np.eye(4)):
        for link in body.links[first_link:]:
            link.T = trans @ link.T


def _new_first(items: list, first_new: int) -> None:
    """Upstream puts manipulators/sensors declared by an extending Robot in front, newest first."""
    new = items[first_new:]
    items[:] = list(reversed(new)) + items[:first_new]


def apply_prefix(body: BodyState, prefix: str, link0: int, joint0: int, manip0: int, sensor0: int,
                 robot: bool) -> None:
    """``prefix=``: links and joints created inside get it; a Robot prefix also rewrites mimic
    equations, manipulators and sensors (a KinBody prefix does not)."""
    for link in body.links[link0:]:
        link.name = prefix + link.name
    body.renamed_links()
    renamed = {}
    for j in body.joints[joint0:]:
        renamed[j.name] = prefix + j.name
        j.name = prefix + j.name
    if not robot:
        return
    for j in body.joints[joint0:]:
        j.mimic = [rename_mimic(m, renamed) for m in j.mimic]
    for s in body.sensors[sensor0:]:
        s.name = prefix + s.name
    for m in body.manipulators[manip0:]:
        m.name = prefix + m.name
        m.base = prefix + m.base
        m.effector = prefix + m.effector
        m.gripper_joints = [prefix + g for g in m.gripper_joints]


# -- Body ---------------------------------------------------------------------------

def read_body(el, body: BodyState, ctx: Context, notes: Notes) -> None:
    a = attrs(el)
    name = a.get("name")
    link = body.link(name) if name else None
    new = link is None
    if new:
        link = LinkState(name=name if name else f"link{len(body.links)}")
        if not name:
            notes.warn(f"{ctx.file.name}:{el.sourceline}: unnamed <Body> called {link.name!r}")
    if a.get("type", "").lower() == "static":
        link.static = True
    elements = children(el)
    if "file" in a:
        path = require_file(a["file"], ctx, el)
        root = parse_root(path, ctx, el)
        if tag(root) != "body":
            raise ctx.error(SchemaError, f"body file {path.name} has root <{root.tag}>, expected <Body>", el)
        elements = children(root) + elements
    offsetfrom = None
    mass_el = None
    for c in elements:
        cname = tag(c)
        if apply_transform_tag(link.T, c, ctx):
            continue
        if cname == "geom":
            visuals, collisions = read_geom(c, ctx, notes)
            link.visuals += visuals
            link.collisions += collisions
        elif cname == "mass":
            mass_el = c
        elif cname == "offsetfrom":
            offsetfrom = body.link(text(c))
            if offsetfrom is None:
                raise ctx.error(UnknownReferenceError, f"<offsetfrom> names unknown link {text(c)!r}", c)
        else:
            keep_extra(link.extras, c, "body", ctx, notes)
    if offsetfrom is not None:
        link.T = offsetfrom.T @ link.T
    if mass_el is None and link.inertial is None:
        mass_el = ctx.default_mass
    if mass_el is not None:
        link.inertial = read_mass(mass_el, link.collisions, ctx, notes)
    if new:
        body.links.append(link)


# -- Joint -----------------------------------------------------------------------------

def _mimic_from_attrs(a: dict[str, str], dof: int, ctx: Context, el, notes: Notes) -> list[Optional[Mimic]]:
    from ...kinematics.expr import parse_partials

    eqs: list[list[Optional[str]]] = [[None, None, None] for _ in range(dof)]
    for key, value in a.items():
        if key == "mimic":                      # deprecated "J a b": J*a+b
            words = value.split()
            try:
                joint, scale, offset = words[0], float(words[1]) if len(words) > 1 else 1.0, \
                    float(words[2]) if len(words) > 2 else 0.0
            except (IndexError, ValueError):
                raise ctx.error(SchemaError, f"mimic={value!r}: expected 'joint scale offset'", el) from None
            notes.warn(f"{ctx.file.name}:{el.sourceline}: deprecated mimic= attribute (use mimic_pos)")
            eqs[0] = [f"{joint}*{scale!r}+{offset!r}", f"|{joint} {scale!r}", f"|{joint} {scale!r}"]
            continue
        for i, stem in enumerate(("mimic_pos", "mimic_vel", "mimic_accel")):
            if key.startswith(stem):
                suffix = key[len(stem):]
                index = int(suffix) if suffix.isdigit() else 0
                if index >= dof:
                    raise ctx.error(SchemaError, f"{key}: joint has only {dof} DOF", el)
                eqs[index][i] = value.strip()
    out: list[Optional[Mimic]] = []
    for pos, vel, acc in eqs:
        if pos is None:
            if vel or acc:
                notes.warn(f"{ctx.file.name}:{el.sourceline}: mimic velocity/acceleration without mimic_pos "
                           "ignored")
            out.append(None)
            continue
        out.append(Mimic(position=pos, velocity=parse_partials(vel) if vel else {},
                         acceleration=parse_partials(acc) if acc else {}))
    return out


_ANCHOR_TYPES = ("hinge", "universal", "hinge2", "spherical")
_AXIS_TAGS = {"hinge": {"axis": 0}, "slider": {"axis": 0}, "universal": {"axis1": 0, "axis2": 1},
              "hinge2": {"axis1": 0, "axis2": 1}, "spherical": {}}


def _per_dof(el, ctx: Context, dof: int, factor: float = 1.0) -> np.ndarray:
    values = floats(el, ctx, minimum=1)
    if len(values) == 1:
        values = values * dof
    if len(values) < dof:
        raise ctx.error(SchemaError, f"expected {dof} numbers (one per DOF), got {len(values)}", el)
    return np.array(values[:dof]) * factor


def read_joint(el, body: BodyState, ctx: Context, notes: Notes) -> None:
    a = attrs(el)
    name = a.get("name") or f"J_{len(body.joints)}"
    jtype = a.get("type", "hinge").lower()
    if jtype not in OPENRAVE_DOF:
        raise ctx.error(SchemaError, f"unknown joint type {a.get('type')!r}; expected hinge, slider, "
                        "universal, hinge2 or spherical", el)
    dof = OPENRAVE_DOF[jtype]
    ratio = 1.0 if jtype == "slider" else math.pi / 180.0
    lim = DEFAULT_LIMITS[jtype]
    js_kw: dict = dict(lower=np.full(dof, -lim), upper=np.full(dof, lim))
    axes = [np.array(v, dtype=float) for v in ((1, 0, 0), (0, 1, 0), (0, 0, 1))] if jtype == "spherical" \
        else [np.array([0.0, 0.0, 1.0]) for _ in range(dof)]
    anchor = np.zeros(3)
    bodies: list[LinkState] = []
    offsetfrom = None
    negate = False
    extras: dict = {}
    for c in children(el):
        cname = tag(c)
        if cname == "body":
            link = body.link_nocase(text(c))
            if link is None:
                raise ctx.error(UnknownReferenceError, f"joint {name!r}: unknown body {text(c)!r}", c)
            if len(bodies) == 2:
                raise ctx.error(SchemaError, f"joint {name!r} has more than two <body> elements", c)
            bodies.append(link)
        elif cname == "offsetfrom":
            offsetfrom = body.link(text(c))
            if offsetfrom is None:
                raise ctx.error(UnknownReferenceError, f"<offsetfrom> names unknown link {text(c)!r}", c)
        elif cname in ("limits", "limitsrad", "limitsdeg"):
            if negate:
                raise ctx.error(SchemaError, "cannot mix <limits> with deprecated <lostop>/<histop>", c)
            values = floats(c, ctx)
            if len(values) != 2 * dof:
                notes.warn(f"{ctx.file.name}:{c.sourceline}: <{c.tag}> has {len(values)} values, expected "
                           f"{2 * dof}; ignored")
                continue
            factor = ratio if cname == "limitsdeg" else 1.0
            pairs = np.array(values).reshape(dof, 2) * factor
            js_kw["lower"], js_kw["upper"] = pairs.min(axis=1), pairs.max(axis=1)
            js_kw["explicit_limits"] = True
        elif cname in ("lostop", "histop"):
            if js_kw.get("explicit_limits") and not negate:
                raise ctx.error(SchemaError, "cannot mix deprecated <lostop>/<histop> with <limits>", c)
            negate = True
            notes.warn(f"{ctx.file.name}:{c.sourceline}: deprecated <{c.tag}> (degrees, negates the axis)")
            js_kw["lower" if cname == "lostop" else "upper"] = _per_dof(c, ctx, dof, ratio)
            js_kw["explicit_limits"] = True
        elif cname in ("maxvel", "maxveldeg"):
            js_kw["velocity"] = _per_dof(c, ctx, dof, math.pi / 180.0 if cname == "maxveldeg" else 1.0)
        elif cname in ("maxaccel", "maxacceldeg"):
            js_kw["acceleration"] = _per_dof(c, ctx, dof, math.pi / 180.0 if cname == "maxacceldeg" else 1.0)
        elif cname in ("maxtorque", "maxforce"):
            js_kw["effort"] = _per_dof(c, ctx, dof)
        elif cname in ("hardmaxvel", "maxinertia"):
            extras[cname] = _per_dof(c, ctx, dof).tolist()
        elif cname == "weight":
            js_kw["weight"] = _per_dof(c, ctx, dof)
        elif cname == "resolution":
            js_kw["resolution"] = np.full(dof, floats(c, ctx, minimum=1)[0] * ratio)
        elif cname == "initial":
            js_kw["initial"] = _per_dof(c, ctx, dof)
        elif cname == "anchor":
            if jtype in _ANCHOR_TYPES:
                anchor = np.array(floats(c, ctx, 3))
            else:
                notes.warn(f"{ctx.file.name}:{c.sourceline}: <anchor> ignored for a {jtype} joint")
        elif cname in ("axis", "axis1", "axis2", "axis3"):
            index = _AXIS_TAGS[jtype].get(cname)
            if index is None:
                notes.warn(f"{ctx.file.name}:{c.sourceline}: <{c.tag}> ignored for a {jtype} joint "
                           "(as upstream does)")
                continue
            v = np.array(floats(c, ctx, 3))
            if not np.any(v):
                raise ctx.error(SchemaError, "joint axis must not be zero", c)
            axes[index] = v / np.linalg.norm(v)
        else:
            keep_extra(extras, c, "joint", ctx, notes)
    if not bodies:
        raise ctx.error(SchemaError, f"joint {name!r} needs at least one <body>", el)
    if negate:
        axes = [-v for v in axes]
    if len(bodies) == 2 and bodies[0] is bodies[1]:
        raise ctx.error(SchemaError, f"joint {name!r} connects link {bodies[0].name!r} to itself", el)
    if len(bodies) == 1:
        # one body: attached to the environment; here to the root link, moving the body by -q
        if bodies[0] is body.links[0]:
            raise ctx.error(SchemaError, f"joint {name!r} attaches the root link {bodies[0].name!r} to the "
                            "world; not expressible in a link tree", el)
        notes.warn(f"{ctx.file.name}:{el.sourceline}: joint {name!r} has one body; attached to the root "
                   f"link {body.links[0].name!r}")
        bodies = [body.links[0], bodies[0]]
        axes = [-v for v in axes]
    toffset = offsetfrom.T if offsetfrom is not None else np.eye(4)
    if jtype in ("hinge", "universal", "hinge2"):
        lower, upper = js_kw["lower"], js_kw["upper"]
        outside = (lower < -math.pi) | (upper > math.pi)
        if outside.any():
            js_kw["offset"] = np.where(outside, 0.5 * (lower + upper), 0.0)
    passive = "enable" in a and not is_true(a["enable"])
    js = JointState(name=name, type=jtype, body0=bodies[0], body1=bodies[1], T0=bodies[0].T.copy(),
                    T1=bodies[1].T.copy(), anchor=(toffset @ np.append(anchor, 1.0))[:3],
                    axes=[toffset[:3, :3] @ v for v in axes],
                    circular="circular" in a and is_true(a["circular"]),
                    passive=passive, mimic=_mimic_from_attrs(a, dof, ctx, el, notes), extras=extras,
                    line=el.sourceline, file=str(ctx.file), **js_kw)
    body.joints.append(js)


# -- Manipulator / AttachedSensor ----------------------------------------------------------------

def read_manipulator(el, ctx: Context, notes: Notes, index: int) -> Manipulator:
    a = attrs(el)
    m = Manipulator(name=a.get("name") or f"manipulator{index}", base="", effector="")
    for c in children(el):
        cname = tag(c)
        if apply_transform_tag(m.tool, c, ctx):
            continue
        if cname == "base":
            m.base = text(c)
        elif cname == "effector":
            m.effector = text(c)
        elif cname in ("joints", "gripperjoints"):
            m.gripper_joints = text(c).split()
        elif cname in ("closingdirection", "closingdir", "chuckingdirection"):
            signs = [float(np.sign(v)) for v in floats(c, ctx)]
            m.closing_directions = signs
            m.chucking_directions = list(signs)
        elif cname in ("direction", "palmdirection"):
            v = np.array(floats(c, ctx, 3))
            m.direction = v / np.linalg.norm(v) if np.any(v) else np.array([0.0, 0.0, 1.0])
        elif cname == "iksolver":
            words = text(c).split(None, 1)
            m.ik_solver = words[0] if words else None
            m.ik_solver_args = words[1] if len(words) > 1 else None
        elif cname == "armjoints":
            notes.warn(f"{ctx.file.name}:{c.sourceline}: <armjoints> is deprecated upstream and not used")
            m.extras["armjoints"] = text(c).split()
        else:
            keep_extra(m.extras, c, "manipulator", ctx, notes)
    if not m.base or not m.effector:
        raise ctx.error(SchemaError, f"manipulator {m.name!r} needs <base> and <effector>", el)
    return m


def read_attached_sensor(el, body: BodyState, ctx: Context, notes: Notes) -> None:
    a = attrs(el)
    name = a.get("name") or f"sensor{len(body.sensors)}"
    sensor = next((s for s in body.sensors if a.get("name") and s.name == name), None)
    if sensor is None:
        sensor = AttachedSensor(name=name, link="")
        body.sensors.append(sensor)
    for c in children(el):
        cname = tag(c)
        if apply_transform_tag(sensor.origin, c, ctx):
            continue
        if cname == "link":
            link = body.link(text(c))
            if link is None:
                raise ctx.error(UnknownReferenceError, f"attached sensor {name!r}: unknown link {text(c)!r}",
                                c)
            body.sensor_links[id(sensor)] = link     # follows later prefixes, like upstream's pointer
        elif cname == "sensor":
            sensors.read_sensor(c, sensor, ctx, notes)
        else:
            keep_extra(sensor.raw, c, "attachedsensor", ctx, notes)


# -- COLLADA includes ---------------------------------------------------------------------

def collada_reader(ctx: Context, el, path: Path):
    """``robot_bridge.formats.collada`` once it provides ``read``; else a clear error naming the file."""
    try:
        from .. import collada
    except ModuleNotFoundError as exc:
        if not (exc.name and exc.name.endswith("formats.collada")):
            raise
        collada = None
    if getattr(collada, "read", None) is None:
        raise ctx.error(UnsupportedFormatError, f"includes COLLADA file {path}: COLLADA reader not "
                        "available", el)
    return collada


def merge_collada(path: Path, body: BodyState, ctx: Context, notes: Notes, el, passed: dict[str, str],
                  kind: str) -> None:
    """Load a COLLADA robot with the COLLADA reader and append it to ``body`` (body appending)."""
    from ...kinematics.fk import KinematicModel

    reader = collada_reader(ctx, el, path)
    ctx.budget.charge(check_regular_file(path, None, "COLLADA file"), path)
    sub = reader.read(path, search_path=ctx.search_path)
    prefix = passed.get("prefix", "")
    model = KinematicModel(sub, compiled=False)      # one evaluation: reading compiles no kernel
    poses = model.link_poses(values={j.name: np.zeros(j.dof) for j in sub.joints.values() if j.dof})
    # a link already in the body (e.g. an arm's last link that a gripper file starts from) is
    # re-opened: its geometry is appended and the included links are placed relative to it
    shared = [n for n in sub.links if body.link(prefix + n) is not None]
    shift = np.eye(4)
    if shared:
        shift = body.link(prefix + shared[0]).T @ tf.inverse(sub.placement @ poses[shared[0]])
        notes.warn(f"{path.name}: links {', '.join(prefix + n for n in shared)} already exist; re-opened")
    states: dict[str, LinkState] = {}
    for lname, link in sub.links.items():
        existing = body.link(prefix + lname)
        if existing is not None:
            existing.visuals += link.visuals
            existing.collisions += link.collisions
            existing.inertial = existing.inertial or link.inertial
            states[lname] = existing
            continue
        states[lname] = LinkState(name=prefix + lname, T=shift @ sub.placement @ poses[lname],
                                  static=link.static, visuals=list(link.visuals),
                                  collisions=list(link.collisions), inertial=link.inertial,
                                  extras=dict(link.extras))
        body.links.append(states[lname])
    renamed = {j: prefix + j for j in sub.joints}
    for j in sub.joints.values():
        parent, child = states[j.parent], states[j.child]
        frame = parent.T @ j.origin
        if j.type == "fixed":
            jtype, axes, lower, upper = "hinge", [frame[:3, :3] @ np.array([0.0, 0.0, 1.0])], np.zeros(1), \
                np.zeros(1)
            passive = True
        else:
            jtype = {"revolute": "hinge", "continuous": "hinge", "prismatic": "slider"}.get(j.type, j.type)
            axes = [frame[:3, :3] @ np.asarray(v, dtype=float) for v in j.axes]
            lower, upper, passive = j.lower, j.upper, j.passive
        mimic = [rename_mimic(m, renamed) for m in j.mimic] if prefix else list(j.mimic)
        body.joints.append(JointState(
            name=prefix + j.name, type=jtype, body0=parent, body1=child, T0=parent.T.copy(),
            T1=child.T.copy(),
            anchor=frame[:3, 3].copy(), axes=axes, lower=np.array(lower), upper=np.array(upper),
            explicit_limits=True, velocity=j.velocity, acceleration=j.acceleration, effort=j.effort,
            weight=j.weight, resolution=j.resolution, initial=j.initial, offset=j.offset,
            circular=any(j.circular) or j.type == "continuous", passive=passive, pose_at_initial=False,
            mimic=mimic if j.type != "fixed" else [None], extras=dict(j.extras), file=str(path)))
    for m in sub.manipulators.values():
        body.manipulators.append(dataclasses.replace(
            m, name=prefix + m.name, base=prefix + m.base, effector=prefix + m.effector,
            gripper_joints=[prefix + g for g in m.gripper_joints],
            ik_free_joints=[prefix + g for g in m.ik_free_joints]))
    for s in sub.sensors.values():
        body.sensors.append(dataclasses.replace(s, name=prefix + s.name, link=prefix + s.link))
    body.adjacent += [(prefix + a, prefix + b) for a, b in sub.collision_ignore]
    body.is_robot = body.is_robot or sub.is_robot or kind == "robot"
    if passed.get("name"):
        body.name = passed["name"]
    elif body.name is None:
        body.name = sub.name
    for key, value in sub.extras.items():
        body.extras.setdefault(key, value)
    for w in sub.warnings:
        notes.warn(w)
