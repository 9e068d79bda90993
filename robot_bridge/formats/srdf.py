"""SRDF: MoveIt's semantic elements and hpp-manipulation's handles, grippers and contacts.

``read_srdf(path, robot=None)`` returns :class:`~robot_bridge.model.Semantics`.
Given a robot, names are checked against it the way srdfdom does: unknown
links or joints are reported in ``semantics.warnings`` and that entry skipped.
Names may be model names or the URDF names of :func:`urdf_tree` (multi-DOF
``<joint>_axisN``, generated links) or virtual joints.

An SRDF has no kinematics, so ``formats.load`` on a ``.srdf`` file refuses it
unless the file actually holds URDF content (50 hpp-environments files do),
which is then read as URDF and reported.

Custom tags: ``register_srdf_tag(name, handler, writer=None)`` (in the spirit
of hpp's ``ObjectFactory``).  ``handler(element, context)`` gets the lxml
element and an :class:`SrdfContext` (``position``, ``floats``, ``link``, file
and robot) and returns any value; values are collected in
``semantics.extras[name]``.  ``writer(value)`` returns an lxml element for
:func:`to_srdf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
from lxml import etree

from ..errors import DescriptionError, SchemaError, SemanticMismatchError, UnsupportedFormatError
from ..model import (CollisionPair, Contact, EndEffector, Gripper, Group, GroupState, Handle, Robot,
                     Semantics, VirtualJoint)
from ..model import transform as tf
from ..model.semantics import Sphere
from . import xmlsafe

SUFFIXES = (".srdf",)
ROOT_TAGS = ()             # <robot> roots are URDF / OpenRAVE: an SRDF is only chosen by its suffix

_TRUE = {"1", "true", "True", "TRUE"}
_FALSE = {"0", "false", "False", "FALSE"}


def claims(path: Path) -> bool:
    return True


def _local_children(el, tag: Optional[str] = None):
    return [c for c in el if isinstance(c.tag, str) and (tag is None or xmlsafe.local_name(c) == tag)]


def holds_urdf(root) -> bool:
    """True for a <robot> with URDF content (top-level <link>/<joint>), which SRDF never has."""
    return any(xmlsafe.local_name(c) in ("link", "joint") for c in _local_children(root))


# ---------------------------------------------------------------------------------------------- context
class SrdfContext:
    """What a tag handler gets besides its element: parsing helpers that raise located errors."""

    def __init__(self, file: Optional[str], robot: Optional[Robot], semantics: Semantics):
        self.file = file
        self.robot = robot
        self.semantics = semantics
        self._links: Optional[set[str]] = None
        self._joints: Optional[set[str]] = None
        self.known = 0                                      # link/joint references found in the robot
        self.unknown: list[str] = []                        # those not found (each skipped)

    def error(self, message: str, el) -> SchemaError:
        return SchemaError(message, file=self.file, line=getattr(el, "sourceline", None),
                           element=xmlsafe.element_path(el) if el is not None else None)

    def warn(self, message: str, el=None) -> None:
        where = f" (line {el.sourceline})" if el is not None and el.sourceline else ""
        text = message + where
        if text not in self.semantics.warnings:
            self.semantics.warnings.append(text)

    def attr(self, el, name: str, required: bool = True) -> Optional[str]:
        value = el.get(name)
        if required and not value:
            raise self.error(f"<{xmlsafe.local_name(el)}> needs attribute {name!r}", el)
        return value

    def floats(self, el, text: Optional[str] = None, count: Optional[int] = None, multiple: int = 1,
               what: str = "values") -> np.ndarray:
        text = el.text if text is None else text
        try:
            values = np.array([float(v) for v in (text or "").split()], dtype=float)
        except ValueError:
            raise self.error(f"{what}: expected numbers, got {(text or '').strip()[:60]!r}", el) from None
        if (count is not None and values.size != count) or values.size % multiple:
            n = count if count is not None else f"a multiple of {multiple}"
            raise self.error(f"{what}: expected {n} numbers, got {values.size}", el)
        if not np.all(np.isfinite(values)):
            raise self.error(f"{what}: non-finite number", el)
        return values

    def position(self, el) -> np.ndarray:
        """hpp position: text ``x y z qw qx qy qz`` or attributes xyz + rpy / wxyz / xyzw."""
        if el.text and el.text.strip():
            v = self.floats(el, count=7, what="position (x y z qw qx qy qz)")
            return tf.make(self._quat(el, v[3:], "wxyz"), v[:3])
        xyz = self.floats(el, el.get("xyz", "0 0 0"), 3, what="xyz")
        given = [k for k in ("rpy", "wxyz", "xyzw") if el.get(k) is not None]
        if len(given) > 1:
            raise self.error(f"position has both {given[0]} and {given[1]}", el)
        if not given:
            return tf.translation(xyz)
        if given[0] == "rpy":
            return tf.make(tf.from_rpy(self.floats(el, el.get("rpy"), 3, what="rpy")), xyz)
        return tf.make(self._quat(el, self.floats(el, el.get(given[0]), 4, what=given[0]), given[0]), xyz)

    def _quat(self, el, q: np.ndarray, order: str) -> np.ndarray:
        if np.linalg.norm(q) < 1e-9:
            raise self.error("zero quaternion", el)
        return tf.from_quat_wxyz(q) if order == "wxyz" else tf.from_quat_xyzw(q)

    # -- model checks ---------------------------------------------------------------------------------
    def _names(self):
        if self._links is None:
            from ..kinematics.urdf_tree import urdf_tree

            links, joints = urdf_tree(self.robot)
            self._links = {link.name for link in links}
            self._links |= {f"{m}_tool" for m in self.robot.manipulators}   # urdf.to_urdf(tool_frames=True)
            self._joints = set(self.robot.joints) | {j.name for j in joints}
        return self._links, self._joints

    def known_link(self, name: str, el, what: str) -> bool:
        if self.robot is None or name in self._names()[0]:
            self.known += self.robot is not None
            return True
        self.unknown.append(f"link {name}")
        return False

    def known_joint(self, name: str, el, what: str) -> bool:
        if self.robot is None or name in self._names()[1] or name in self.semantics.virtual_joints:
            self.known += self.robot is not None
            return True
        self.unknown.append(f"joint {name}")
        return False

    def link(self, el, what: str) -> tuple[Optional[str], Any]:
        """The ``<link name=...>`` child of ``el`` (exactly one), or (None, None) if unknown to the robot."""
        links = _local_children(el, "link")
        if len(links) != 1:
            raise self.error(f"{what} needs exactly one <link>, found {len(links)}", el)
        name = self.attr(links[0], "name")
        return (name, links[0]) if self.known_link(name, links[0], what) else (None, None)


# ---------------------------------------------------------------------------------------------- handlers
Handler = Callable[[Any, SrdfContext], Any]
Writer = Callable[[Any], Any]


@dataclass
class _Tag:
    handler: Handler
    writer: Optional[Writer] = None
    builtin: bool = False


_TAGS: dict[str, _Tag] = {}


def register_srdf_tag(name: str, handler: Handler, writer: Optional[Writer] = None,
                      replace: bool = False) -> None:
    """Handle ``<name>`` elements found at the top level of an SRDF.

    ``handler(element, context)`` returns a value stored in ``semantics.extras[name]`` (a list, one entry per
    element; return None to store nothing).  Built-in tags can only be replaced with ``replace=True``.
    """
    current = _TAGS.get(name)
    if current is not None and current.builtin and not replace:
        raise ValueError(f"SRDF tag <{name}> is built in; pass replace=True to override it")
    _TAGS[name] = _Tag(handler, writer)


def unregister_srdf_tag(name: str) -> None:
    tag = _TAGS.get(name)
    if tag is not None and not tag.builtin:
        del _TAGS[name]


def _builtin(name: str):
    def deco(fn):
        _TAGS[name] = _Tag(fn, builtin=True)
        return fn
    return deco


@_builtin("group")
def _group(el, ctx: SrdfContext):
    g = Group(ctx.attr(el, "name"))
    what = f"group {g.name!r}"
    for c in _local_children(el):
        tag = xmlsafe.local_name(c)
        if tag == "link":
            name = ctx.attr(c, "name")
            if ctx.known_link(name, c, what):
                g.links.append(name)
        elif tag == "joint":
            name = ctx.attr(c, "name")
            if ctx.known_joint(name, c, what):
                g.joints.append(name)
        elif tag == "chain":
            base, tip = ctx.attr(c, "base_link"), ctx.attr(c, "tip_link")
            if ctx.known_link(base, c, what) and ctx.known_link(tip, c, what):
                g.chains.append((base, tip))
        elif tag == "group":
            g.subgroups.append(ctx.attr(c, "name"))
        else:
            ctx.warn(f"{what}: unknown element <{tag}> skipped", c)
    ctx.semantics.groups[g.name] = g


@_builtin("group_state")
def _group_state(el, ctx: SrdfContext):
    s = GroupState(ctx.attr(el, "name"), ctx.attr(el, "group"))
    for c in _local_children(el, "joint"):
        name = ctx.attr(c, "name")
        values = ctx.floats(c, ctx.attr(c, "value"), what=f"group_state {s.name!r} joint {name!r} value")
        if values.size == 0:
            raise ctx.error("joint value is empty", c)
        if ctx.known_joint(name, c, f"group_state {s.name!r}"):
            s.values[name] = [float(v) for v in values]
    ctx.semantics.group_states.append(s)


@_builtin("end_effector")
def _end_effector(el, ctx: SrdfContext):
    ee = EndEffector(ctx.attr(el, "name"), ctx.attr(el, "group"), ctx.attr(el, "parent_link"),
                     el.get("parent_group") or None)
    if ctx.known_link(ee.parent_link, el, f"end_effector {ee.name!r}"):
        ctx.semantics.end_effectors[ee.name] = ee


@_builtin("virtual_joint")
def _virtual_joint(el, ctx: SrdfContext):
    vj = VirtualJoint(ctx.attr(el, "name"), ctx.attr(el, "type"), ctx.attr(el, "parent_frame"),
                      ctx.attr(el, "child_link"))
    if vj.type not in ("fixed", "floating", "planar"):
        raise ctx.error(f"virtual_joint type {vj.type!r}: expected fixed, floating or planar", el)
    if ctx.known_link(vj.child_link, el, f"virtual_joint {vj.name!r}"):
        ctx.semantics.virtual_joints[vj.name] = vj


@_builtin("passive_joint")
def _passive_joint(el, ctx: SrdfContext):
    name = ctx.attr(el, "name")
    if ctx.known_joint(name, el, "passive_joint"):
        ctx.semantics.passive_joints.append(name)


def _pair(el, ctx: SrdfContext, enabled: bool):
    a, b = ctx.attr(el, "link1"), ctx.attr(el, "link2")
    what = "enable_collisions" if enabled else "disable_collisions"
    if ctx.known_link(a, el, what) and ctx.known_link(b, el, what):
        ctx.semantics.collision_pairs.append(CollisionPair(a, b, el.get("reason"), enabled))


_builtin("disable_collisions")(lambda el, ctx: _pair(el, ctx, False))
_builtin("enable_collisions")(lambda el, ctx: _pair(el, ctx, True))


@_builtin("disable_default_collisions")
def _disable_default(el, ctx: SrdfContext):
    name = ctx.attr(el, "link")
    if ctx.known_link(name, el, "disable_default_collisions"):
        ctx.semantics.disable_default_collisions.append(name)


@_builtin("link_sphere_approximation")
def _spheres(el, ctx: SrdfContext):
    link = ctx.attr(el, "link")
    spheres = []
    for c in _local_children(el, "sphere"):
        center = ctx.floats(c, ctx.attr(c, "center"), 3, what="sphere center")
        radius = ctx.floats(c, ctx.attr(c, "radius"), 1, what="sphere radius")[0]
        if radius < 0:
            raise ctx.error("sphere radius must be >= 0", c)
        spheres.append(Sphere(center, float(radius)))
    if ctx.known_link(link, el, "link_sphere_approximation"):
        ctx.semantics.link_spheres[link] = spheres


@_builtin("joint_property")
def _joint_property(el, ctx: SrdfContext):
    joint, prop = ctx.attr(el, "joint_name"), ctx.attr(el, "property_name")
    value = ctx.attr(el, "value", required=False) or ""
    if ctx.known_joint(joint, el, "joint_property"):
        ctx.semantics.joint_properties.setdefault(joint, {})[prop] = value


def _frame(el, ctx: SrdfContext, what: str, legacy_tag: str = "local_position") -> np.ndarray:
    positions = _local_children(el, "position")
    legacy = _local_children(el, legacy_tag)
    if legacy:
        ctx.warn(f"{what}: <{legacy_tag}> is deprecated, use <position>", legacy[0])
    found = positions + legacy
    if len(found) != 1:
        raise ctx.error(f"{what} needs exactly one <position>, found {len(found)}", el)
    return ctx.position(found[0])


def _clearance(el, ctx: SrdfContext) -> float:
    text = el.get("clearance")
    return 0.0 if text is None else float(ctx.floats(el, text, 1, what="clearance")[0])


# what hpp-manipulation-urdf reads of each of its tags (src/srdf/factories/*.cc); anything else is reported
# once per tag and name (never dropped without a word)
_HPP_READ = {
    "handle": ({"name", "clearance", "approaching_direction"},
               {"position", "local_position", "link", "mask", "mask_complement", "approaching_direction"}),
    "gripper": ({"name", "clearance"}, {"position", "handle_position_in_joint", "link", "joint"}),
    "contact": ({"name"}, {"link", "point", "shape", "triangle"}),
}


def _report_unused(el, ctx: SrdfContext, tag: str) -> None:
    """One warning per attribute / child element of an hpp tag that is not read (per tag and name)."""
    attributes, children = _HPP_READ[tag]
    for name in el.attrib:
        if name not in attributes:
            ctx.warn(f"<{tag}> attribute {name!r} is not used (robot_bridge reads: "
                     f"{', '.join(sorted(attributes))})")
    for c in _local_children(el):
        name = xmlsafe.local_name(c)
        if name not in children:
            ctx.warn(f"<{tag}> element <{name}> is not used (robot_bridge reads: "
                     f"{', '.join(sorted(children))})")
    if tag == "handle" and _local_children(el, "mask_complement"):
        ctx.warn("<handle> element <mask_complement> is not used: the constraint of a grasp's complement "
                 "(hpp's placement of a held object) is not planned here")


def _register_on_link(el, ctx: SrdfContext, what: str, item, registry: dict):
    """Put ``item`` on the link its <link> child names and into ``registry``; skipped (with the warning
    ``ctx.link`` gives) when that link is unknown.  Returns the <link> element, None when skipped."""
    link, link_el = ctx.link(el, what)
    if link is None:
        return None
    item.link = link
    registry[item.name] = item
    return link_el


def _direction(el, ctx: SrdfContext, text: str, what: str) -> np.ndarray:
    d = ctx.floats(el, text, count=3, what=what)
    if np.linalg.norm(d) == 0:
        raise ctx.error(f"{what} must not be zero", el)
    return d / np.linalg.norm(d)


@_builtin("handle")
def _handle(el, ctx: SrdfContext):
    """hpp's handle: ``approaching_direction="x y z"`` (attribute, as hpp-manipulation-urdf reads it; in the
    handle frame, default 1 0 0) is where the gripper comes from: the pre-grasp backs off against it."""
    name = ctx.attr(el, "name")
    what = f"handle {name!r}"
    h = Handle(name, "", pose=_frame(el, ctx, what), clearance=_clearance(el, ctx))
    _report_unused(el, ctx, "handle")
    for m in _local_children(el, "mask"):
        words = (m.text or "").split()
        if len(words) != 6 or any(w not in _TRUE | _FALSE for w in words):
            raise ctx.error(f"{what}: mask needs 6 booleans (1/0 or true/false), got {m.text!r}", m)
        h.mask = [w in _TRUE for w in words]
    if el.get("approaching_direction") is not None:
        h.approaching_direction = _direction(el, ctx, el.get("approaching_direction"),
                                             f"{what}: approaching_direction")
    for a in _local_children(el, "approaching_direction"):          # robot_bridge's older element form
        ctx.warn(f"{what}: <approaching_direction> element: hpp reads the handle's attribute "
                 "approaching_direction=\"x y z\"", a)
        h.approaching_direction = _direction(a, ctx, a.text, "approaching_direction")
    _register_on_link(el, ctx, what, h, ctx.semantics.handles)


@_builtin("gripper")
def _gripper(el, ctx: SrdfContext):
    """hpp's gripper: a frame on a link.  ``<joint>`` children (robot_bridge's extension) name the fingers;
    without them the gripper is a frame only (its fingers, if any, come from the SRDF end effector)."""
    name = ctx.attr(el, "name")
    what = f"gripper {name!r}"
    g = Gripper(name, "", pose=_frame(el, ctx, what, "handle_position_in_joint"),
                clearance=_clearance(el, ctx))
    _report_unused(el, ctx, "gripper")
    g.joints = [ctx.attr(j, "name") for j in _local_children(el, "joint")]
    _register_on_link(el, ctx, what, g, ctx.semantics.grippers)


@_builtin("contact")
def _contact(el, ctx: SrdfContext):
    name = ctx.attr(el, "name")
    what = f"contact {name!r}"
    _report_unused(el, ctx, "contact")
    points = [ctx.floats(p, multiple=3, what=f"{what} point") for p in _local_children(el, "point")]
    c = Contact(name, "", points=np.concatenate(points).reshape(-1, 3) if points else np.zeros((0, 3)))
    for s in _local_children(el, "shape"):
        values = ctx.floats(s, what=f"{what} shape")
        i = 0
        while i < values.size:
            n = int(values[i])
            if n < 1 or i + 1 + n > values.size:
                raise ctx.error(f"{what}: shape needs 'N i1 .. iN' groups, got {s.text.strip()!r}", s)
            c.shapes.append([int(v) for v in values[i + 1:i + 1 + n]])
            i += 1 + n
    for t in _local_children(el, "triangle"):
        ctx.warn(f"{what}: <triangle> is deprecated, use <shape>", t)
        triangles = ctx.floats(t, multiple=3, what="triangle").reshape(-1, 3)
        c.shapes += [[int(v) for v in tri] for tri in triangles]
    if any(i < 0 or i >= len(c.points) for shape in c.shapes for i in shape):
        raise ctx.error(f"{what}: a shape refers to a point that does not exist ({len(c.points)} points)", el)
    link_el = _register_on_link(el, ctx, what, c, ctx.semantics.contacts)
    if link_el is not None and link_el.get("index") is not None:
        c.index = int(ctx.floats(link_el, link_el.get("index"), 1, what="index")[0])


# ---------------------------------------------------------------------------------------------- reading
def parse_srdf(tree, file: Optional[str] = None, robot: Optional[Robot] = None) -> Semantics:
    root = tree.getroot()
    semantics = Semantics(robot_name=root.get("name"), source=file)
    ctx = SrdfContext(file, robot, semantics)
    if xmlsafe.local_name(root) != "robot":
        raise ctx.error(f"root element <{xmlsafe.local_name(root)}>: expected <robot>", root)
    if holds_urdf(root):
        raise UnsupportedFormatError("this .srdf file holds URDF content (top-level <link>/<joint>), "
                                     "not SRDF", file=file, line=root.sourceline)
    children = _local_children(root)
    # virtual joints first: groups and states may name them
    for el in sorted(children, key=lambda c: xmlsafe.local_name(c) != "virtual_joint"):
        tag = xmlsafe.local_name(el)
        entry = _TAGS.get(tag)
        if entry is None:
            ctx.warn(f"unknown SRDF element <{tag}> skipped", el)
            continue
        try:
            value = entry.handler(el, ctx)
        except DescriptionError as exc:
            raise exc.with_location(file=file, line=el.sourceline, element=xmlsafe.element_path(el)) from None
        if not entry.builtin and value is not None:
            semantics.extras.setdefault(tag, []).append(value)
    groups = semantics.groups
    for g in groups.values():
        for s in g.subgroups:
            if s not in groups:
                ctx.warn(f"group {g.name!r}: subgroup {s!r} is not defined; skipped")
        g.subgroups = [s for s in g.subgroups if s in groups]
    for s in semantics.group_states:
        if s.group not in groups:
            ctx.warn(f"group_state {s.name!r}: group {s.group!r} is not defined; skipped")
    semantics.group_states = [s for s in semantics.group_states if s.group in groups]
    for name, ee in list(semantics.end_effectors.items()):
        for g in (ee.group, ee.parent_group):
            if g is not None and g not in groups:
                ctx.warn(f"end_effector {name!r}: group {g!r} is not defined; skipped")
                semantics.end_effectors.pop(name, None)
    if robot is not None:
        _check_match(ctx, root)
    return semantics


def _check_match(ctx: SrdfContext, root) -> None:
    """Refuse an SRDF for another robot; one summary warning for a partial match.

    Another robot: its name differs and some of its link/joint references are not in the model, or more
    of them are unknown than known.  A partial match (fewer unknown than known, or a renamed robot whose
    references all match) is accepted; the unknown references are skipped, as srdfdom does."""
    semantics, robot, unknown, known = ctx.semantics, ctx.robot, ctx.unknown, ctx.known
    renamed = bool(semantics.robot_name) and semantics.robot_name != robot.name
    total = known + len(unknown)
    counts = f"{len(unknown)} of {total} link/joint references are not in the model"
    if (renamed and unknown) or len(unknown) > known:
        raise SemanticMismatchError(
            f"SRDF for robot {semantics.robot_name!r} does not match the model {robot.name!r}: {counts} "
            f"({robot.name!r} has {len(robot.links)} links, {len(robot.joints)} joints); refused",
            file=ctx.file, line=root.sourceline)
    if renamed:
        ctx.warn(f"SRDF is for robot {semantics.robot_name!r}, the model is {robot.name!r} (every "
                 f"link/joint reference matches)")
    if unknown:
        shown = ", ".join(dict.fromkeys(unknown))
        ctx.warn(f"{counts} (skipped): {shown if len(shown) < 300 else shown[:300] + '...'}")


def read_srdf(path, robot: Optional[Robot] = None) -> Semantics:
    """Semantics from an SRDF file, checked against ``robot`` when given."""
    from .urdf import parse_tolerant, read_bytes

    data = read_bytes(path)
    tree, notes = parse_tolerant(data, str(path))
    semantics = parse_srdf(tree, str(path), robot)
    semantics.warnings[:0] = notes
    return semantics


def read_srdf_string(text: str | bytes, robot: Optional[Robot] = None,
                     file: Optional[str] = None) -> Semantics:
    from .urdf import parse_tolerant

    tree, notes = parse_tolerant(text.encode() if isinstance(text, str) else text, file)
    semantics = parse_srdf(tree, file, robot)
    semantics.warnings[:0] = notes
    return semantics


def attach_semantics(robot: Robot, semantics: Semantics) -> Robot:
    """Set ``robot.semantics`` (its warnings joined to the robot's) and return the robot."""
    robot.semantics = semantics
    for w in semantics.warnings:
        robot.warn(f"SRDF: {w}")
    return robot


def read(path, search_path=None, **options) -> Robot:
    """``formats.load`` on a .srdf: URDF content is read as URDF; real SRDF is refused (no kinematics)."""
    from . import urdf

    p = Path(path)
    tree, notes = urdf.parse_tolerant(urdf.read_bytes(p), str(p))
    if not holds_urdf(tree.getroot()):
        raise UnsupportedFormatError("SRDF is semantic only; load it with a URDF/OpenRAVE model "
                                     "(formats.srdf.read_srdf(path, robot))", file=str(p))
    from . import normalize_search_path
    from .paths import roots_for

    search = normalize_search_path(search_path)
    robot = urdf._read_tree(tree, str(p), search, notes, roots_for(p, search, options.get("allowed_roots")))
    robot.warn("file named .srdf holds URDF content; read as URDF")
    return robot


# ---------------------------------------------------------------------------------------------- writing
def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


def _position_el(parent, pose: np.ndarray) -> None:
    el = etree.SubElement(parent, "position")
    el.text = _fmt([*pose[:3, 3], *tf.to_quat_wxyz(pose[:3, :3])])


def to_srdf(semantics: Semantics, robot_name: Optional[str] = None) -> str:
    """SRDF text: MoveIt elements, hpp handles/grippers/contacts, registered custom tags."""
    root = etree.Element("robot", name=robot_name or semantics.robot_name or "robot")
    sub = etree.SubElement
    for vj in semantics.virtual_joints.values():
        sub(root, "virtual_joint", name=vj.name, type=vj.type, parent_frame=vj.parent_frame,
            child_link=vj.child_link)
    for g in semantics.groups.values():
        el = sub(root, "group", name=g.name)
        for link in g.links:
            sub(el, "link", name=link)
        for joint in g.joints:
            sub(el, "joint", name=joint)
        for base, tip in g.chains:
            sub(el, "chain", base_link=base, tip_link=tip)
        for s in g.subgroups:
            sub(el, "group", name=s)
    for s in semantics.group_states:
        el = sub(root, "group_state", name=s.name, group=s.group)
        for joint, values in s.values.items():
            sub(el, "joint", name=joint, value=_fmt(values))
    for ee in semantics.end_effectors.values():
        attrs = {"name": ee.name, "parent_link": ee.parent_link, "group": ee.group}
        if ee.parent_group:
            attrs["parent_group"] = ee.parent_group
        sub(root, "end_effector", **attrs)
    for name in semantics.passive_joints:
        sub(root, "passive_joint", name=name)
    for joint, props in semantics.joint_properties.items():
        for prop, value in props.items():
            sub(root, "joint_property", joint_name=joint, property_name=prop, value=value)
    for link, spheres in semantics.link_spheres.items():
        el = sub(root, "link_sphere_approximation", link=link)
        for s in spheres:
            sub(el, "sphere", center=_fmt(s.center), radius=repr(float(s.radius)))
    for link in semantics.disable_default_collisions:
        sub(root, "disable_default_collisions", link=link)
    for p in semantics.collision_pairs:
        attrs = {"link1": p.link1, "link2": p.link2, **({"reason": p.reason} if p.reason else {})}
        sub(root, "enable_collisions" if p.enabled else "disable_collisions", **attrs)
    for h in semantics.handles.values():
        attrs = {"name": h.name, "clearance": repr(float(h.clearance))}
        if not np.allclose(h.approaching_direction, [1, 0, 0]):
            attrs["approaching_direction"] = _fmt(h.approaching_direction)
        el = sub(root, "handle", **attrs)
        _position_el(el, h.pose)
        sub(el, "link", name=h.link)
        sub(el, "mask").text = " ".join("1" if m else "0" for m in h.mask)
    for g in semantics.grippers.values():
        el = sub(root, "gripper", name=g.name, clearance=repr(float(g.clearance)))
        _position_el(el, g.pose)
        sub(el, "link", name=g.link)
        for joint in g.joints:
            sub(el, "joint", name=joint)
    for c in semantics.contacts.values():
        el = sub(root, "contact", name=c.name)
        sub(el, "link", name=c.link, **({"index": str(c.index)} if c.index is not None else {}))
        sub(el, "point").text = _fmt(np.asarray(c.points).reshape(-1))
        if c.shapes:
            sub(el, "shape").text = " ".join(" ".join(str(i) for i in [len(s), *s]) for s in c.shapes)
    for tag, values in semantics.extras.items():
        entry = _TAGS.get(tag)
        if entry is None or entry.writer is None:
            continue
        for value in values:
            root.append(entry.writer(value))
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="unicode") + "\n"


def write_srdf(semantics: Semantics, path, robot_name: Optional[str] = None) -> None:
    Path(path).write_text('<?xml version="1.0"?>\n' + to_srdf(semantics, robot_name))


# ---------------------------------------------------------------------------------------------- generation
def moveit_semantics(robot: Robot) -> Semantics:
    """The SRDF written for ``robot``: generated from the model (chains end at the tool links) with the
    semantics read with it winning; group states name only their group's driven joints, plus ``home``."""
    generated = semantics_from_model(robot, tool_frames=True)
    given = robot.semantics
    if given is not None:                     # semantics read with the model win over generated ones
        generated.groups.update(given.groups)
        generated.group_states = given.group_states + [s for s in generated.group_states
                                                       if given.state(s.name) is None]
        generated.end_effectors.update(given.end_effectors)
        generated.virtual_joints.update(given.virtual_joints)
        generated.passive_joints = list(dict.fromkeys(given.passive_joints + generated.passive_joints))
        generated.collision_pairs = given.collision_pairs + generated.collision_pairs
        generated.joint_properties.update(given.joint_properties)
    driven_group_states(generated, robot)
    return generated


def arm_groups(semantics: Semantics) -> list[str]:
    """Groups with a chain: the arms a trajectory controller moves (MoveIt's planning groups)."""
    return [name for name, g in semantics.groups.items() if g.chains]


def driven_group_states(semantics: Semantics, robot: Robot) -> None:
    """Every group state restricted to its group's driven joints (no mimic, passive or other groups'
    joints; a state left empty is dropped), and a ``home`` state for each arm group that has none: the
    SRDF's home values where given, else the description's initial values (what controller_node's ~/home
    moves to)."""
    import copy

    from ..model.groups import driven_joints, group_joints

    view = copy.copy(robot)
    view.semantics = semantics
    driven = driven_joints(robot)
    members = {}
    for name in semantics.groups:
        try:
            members[name] = [j for j in driven if j in group_joints(view, name)]
        except ValueError:
            members[name] = []
    kept = []
    for state in semantics.group_states:
        joints = members.get(state.group, [])
        values = {j: v for j, v in state.values.items() if j in joints}
        if values:
            kept.append(GroupState(state.name, state.group, values))
    homes = {}
    for state in kept:
        if state.name == "home":
            homes.update(state.values)
    for group in arm_groups(semantics):
        if any(s.name == "home" and s.group == group for s in kept):
            continue
        values = {j: list(homes[j]) if j in homes else [float(robot.joints[j].initial[0])]
                  for j in members.get(group, [])}
        if values:
            kept.append(GroupState("home", group, values))
    semantics.group_states = kept


def semantics_from_model(robot: Robot, tool_frames: bool = False) -> Semantics:
    """MoveIt/hpp semantics for a model read from OpenRAVE XML or COLLADA.

    Each manipulator becomes a chain group base -> effector (-> its tool link with ``tool_frames``, see
    ``urdf.to_urdf``) and, when it has gripper joints, a group of them plus an end_effector;
    collision_ignore pairs become disable_collisions; initial joint values become group_state "initial" of a
    group "all" of every moving joint, naming only driven joints (no mimic or passive joints); existing
    handles, grippers and contacts are kept.  Joint names are the URDF names (see urdf_tree).
    """
    from ..kinematics.urdf_tree import urdf_tree

    _, tree_joints = urdf_tree(robot)
    urdf_names: dict[str, list[str]] = {}
    for tj in tree_joints:
        if tj.dof >= 0:
            urdf_names.setdefault(tj.source, []).append(tj.name)
    s = Semantics(robot_name=robot.name, source=robot.source)
    tools = {}
    if tool_frames:
        from .urdf import tool_link_names

        tools = tool_link_names(robot)
    for m in robot.manipulators.values():
        tip = tools[m.name][0] if m.name in tools else m.effector
        s.groups[m.name] = Group(m.name, chains=[(m.base, tip)])
        if m.gripper_joints:
            gname = f"{m.name}_gripper"
            joints = [n for j in m.gripper_joints for n in urdf_names.get(j, [j])]
            s.groups[gname] = Group(gname, joints=joints)
            ee = f"{m.name}_end_effector"
            s.end_effectors[ee] = EndEffector(ee, gname, m.effector, m.name)
    for a, b in robot.collision_ignore:
        adjacent = any({j.parent, j.child} == {a, b} for j in robot.joints.values())
        s.collision_pairs.append(CollisionPair(a, b, "Adjacent" if adjacent else "Never"))
    moving = [tj for tj in tree_joints if tj.dof >= 0]
    if moving:
        s.groups["all"] = Group("all", joints=[tj.name for tj in moving])
        from ..kinematics import KinematicModel

        initial = KinematicModel(robot).joint_values()          # initial values, mimic DOFs computed
        state = GroupState("initial", "all")
        for tj in moving:
            if tj.source in robot.joints and robot.joints[tj.source].is_active:
                state.values[tj.name] = [float(initial[tj.source][tj.dof])]
        s.group_states.append(state)
    if robot.semantics is not None:
        s.handles.update(robot.semantics.handles)
        s.grippers.update(robot.semantics.grippers)
        s.contacts.update(robot.semantics.contacts)
    return s
