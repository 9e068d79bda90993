"""URDF reader and writer.

Reading is as tolerant as urdfdom (TinyXML) where real files need it -- comments
or a misspelled declaration before ``<?xml ...?>``, junk after the root element
-- and strict elsewhere: malformed numbers, unknown joint types, missing links,
duplicates, loops and several roots raise typed errors naming file and line.

Writing goes through :func:`robot_bridge.kinematics.urdf_tree.urdf_tree`, the
one definition of how a model maps to URDF links and joints.  Elements this
package does not interpret (``<gazebo>``, ``<transmission>``, ``<ros2_control>``)
are kept verbatim in ``robot.extras["urdf_elements"]`` and written back.
"""

from __future__ import annotations

import dataclasses
import os
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np
from lxml import etree

from ..errors import (DescriptionError, KinematicsError, SchemaError, UnknownReferenceError,
                      UnsafeInputError, UnsupportedFormatError, XMLSyntaxError)
from ..model import (Box, Cylinder, Geometry, Inertial, Joint, Link, Material, Mesh, Mimic, Robot,
                     Sphere)
from ..model import transform as tf
from . import limits, xmlsafe
from .paths import AllowedRoots, package_share, roots_for

SUFFIXES = (".urdf",)
ROOT_TAGS = ("robot",)

_JOINT_TYPES = {"revolute", "continuous", "prismatic", "fixed", "floating", "planar"}
_KEPT_ELEMENTS = ("gazebo", "transmission", "ros2_control")
_SRDF_TAGS = ("group", "group_state", "virtual_joint", "disable_collisions", "end_effector", "handle",
              "gripper", "contact")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ZERO3 = (0.0, 0.0, 0.0)
_EYE4 = np.eye(4)
_ONES3 = np.ones(3)


# ---------------------------------------------------------------------------------------------- reading
def _tolerant_bytes(data: bytes) -> bytes:
    """Drop the XML declaration wherever it is (urdfdom ignores it: comments before it and
    misspelled ones like ``<?xml verison="1.0"?>`` load there)."""
    return re.sub(rb"<\?xml[^>]*\?>", b"", data[:4096], count=1) + data[4096:]


def parse_tolerant(data: bytes, file: Optional[str]) -> tuple[etree._ElementTree, list[str]]:
    """Parse URDF/SRDF bytes with urdfdom's tolerance; returns (tree, notes)."""
    notes = []
    cleaned = _tolerant_bytes(data)
    try:
        return xmlsafe.parse_bytes(cleaned, file=file), notes
    except XMLSyntaxError as exc:
        if "Extra content at the end of the document" not in exc.message:
            raise
        tree = xmlsafe.parse_bytes(cleaned, file=file, recover=True)
        notes.append(f"ignored junk after the root element (line {exc.line})")
        return tree, notes


class _Ctx:
    def __init__(self, file: Optional[str], search_path: list[Path], roots: Optional[AllowedRoots] = None):
        self.file = file
        self.dir = Path(file).resolve().parent if file else Path.cwd()
        self.search_path = search_path
        self.roots = roots
        self.leave_outside = False      # a mesh outside ``roots``: left out (a peer's description)
        self.mesh_paths: dict[str, Optional[str]] = {}     # uri -> resolved path: each uri looked up once
        self.packages: dict = {}                            # package -> its folders (resolve_uri)
        self.parsed: dict[str, tuple[float, ...]] = {}      # attribute text -> its finite numbers
        self.origins: dict[tuple, np.ndarray] = {}          # (rpy, xyz) texts -> the transform (copied)
        self.axes: dict[Optional[str], Optional[np.ndarray]] = {}  # axis text -> unit axis (None: zero)

    def error(self, cls, message: str, el) -> DescriptionError:
        return cls(message, file=self.file, line=el.sourceline if el is not None else None,
                   element=xmlsafe.element_path(el) if el is not None else None)

    def values(self, el, attr: str, n: int, default=None) -> tuple[float, ...]:
        """The ``n`` finite numbers of attribute ``attr`` (``default`` when it is absent).  Each distinct
        text is parsed once per load (``0 0 0`` and the like recur hundreds of times)."""
        text = el.get(attr)
        if text is None:
            if default is None:
                raise self.error(SchemaError, f"missing attribute {attr!r}", el)
            return tuple(float(v) for v in default)
        values = self.parsed.get(text)
        if values is None:
            try:
                values = tuple(map(float, text.split()))
            except ValueError:
                raise self.error(SchemaError, f"attribute {attr}={text!r}: expected {n} numbers",
                                 el) from None
            if not all(map(math.isfinite, values)):
                raise self.error(SchemaError, f"attribute {attr}={text!r}: expected {n} finite numbers", el)
            self.parsed[text] = values
        if len(values) != n:
            raise self.error(SchemaError, f"attribute {attr}={text!r}: expected {n} finite numbers", el)
        return values

    def floats(self, el, attr: str, n: int, default=None) -> np.ndarray:
        return np.array(self.values(el, attr, n, default), dtype=float)

    def number(self, el, attr: str, default: Optional[float] = None) -> float:
        text = el.get(attr)
        values = self.parsed.get(text)             # a text seen before: no checks left
        if values is not None:
            if len(values) == 1:
                return values[0]
        elif text is not None:                     # a new text of one finite number (float() strips
            try:                                   # blanks as str.split() does): the same value
                value = float(text)
            except ValueError:
                value = math.nan                   # not one number: values() names the error
            if math.isfinite(value):
                self.parsed[text] = (value,)
                return value
        return self.values(el, attr, 1, None if default is None else (default,))[0]

    def name(self, el, what: str) -> str:
        name = el.get("name")
        if not name:
            raise self.error(SchemaError, f"{what} without a name", el)
        return name


def _children(el, tag: str):
    """Child elements ``tag`` in any or no namespace (lxml's C-level tag filter)."""
    return list(el.iterchildren("{*}" + tag))


def _child(el, tag: str):
    return next(el.iterchildren("{*}" + tag), None)


def _first_children(el) -> dict:
    """Local name -> the first child element of that name (in any or no namespace), in one pass over
    the children: an element's children are looked up by name many times."""
    kids = {}
    for c in el:
        tag = c.tag
        if isinstance(tag, str):
            name = tag.rpartition("}")[2]
            if name not in kids:
                kids[name] = c
    return kids


def _origin(ctx: _Ctx, el, kids: Optional[dict] = None) -> np.ndarray:
    """The transform of ``el``'s <origin> (a new array); each distinct (rpy, xyz) is computed once."""
    o = _child(el, "origin") if kids is None else kids.get("origin")
    if o is None:
        return _EYE4.copy()
    key = (o.get("rpy"), o.get("xyz"))
    t = ctx.origins.get(key)
    if t is None:
        t = _EYE4.copy()
        rpy = ctx.values(o, "rpy", 3, _ZERO3)
        if rpy[0] or rpy[1] or rpy[2]:                 # from_rpy of zeros is the identity, exactly
            t[:3, :3] = tf.from_rpy(rpy)
        t[:3, 3] = ctx.values(o, "xyz", 3, _ZERO3)
        ctx.origins[key] = t
    return t.copy()


_OUTSIDE = "<outside the trusted roots>"      # ctx.mesh_paths: a URI left out


def _clip_uri(uri: str, limit: int = 200) -> str:
    return uri if len(uri) <= limit else uri[:limit] + "..."


def resolve_uri(uri: str, base_dir: Path, search_path: list[Path], allowed: Optional[AllowedRoots] = None,
                file: Optional[str] = None, line: Optional[int] = None,
                element: Optional[str] = None, packages: Optional[dict] = None) -> Optional[str]:
    """Absolute path for a mesh ``uri`` (package://, file://, relative or absolute), or None.
    With ``allowed``, only files inside those roots are probed (UnsafeInputError if none could be).
    ``packages``: a dict kept for one load (same ``base_dir`` and ``allowed``), where each package's
    folders are looked up once rather than for every URI naming it."""
    candidates: list[Path] = []
    if uri.startswith("package://"):
        pkg, _, rest = uri[len("package://"):].partition("/")
        candidates += [Path(r) / pkg / rest for r in search_path]
        found = packages.get(pkg) if packages is not None else None
        if found is None:
            found = _package_folders(pkg, base_dir, allowed)
            if packages is not None:
                packages[pkg] = found
        share, own, allowed = found
        if share is not None:
            candidates.append(share / rest)
        if own is not None:
            candidates.append(own / rest)
    elif uri.startswith("file://"):
        candidates.append(Path(uri[len("file://"):]))
    elif "://" not in uri:
        p = Path(uri)
        candidates += [p] if p.is_absolute() else [base_dir / p, *(r / p for r in search_path)]
    if allowed is not None:
        found = allowed.first(candidates, uri, file=file, line=line, element=element) if candidates else None
        return str(found) if found else None
    for c in candidates:
        if c.is_file():
            return str(c.resolve())
    return None


def _package_folders(pkg: str, base_dir: Path, allowed: Optional[AllowedRoots]
                     ) -> tuple[Optional[Path], Optional[Path], Optional[AllowedRoots]]:
    """(share folder, the folder above ``base_dir`` that is package ``pkg``, the allowed roots widened by
    the share folder) of a ``package://pkg/`` URI: the share folder only where the package exists (and
    then trusted); the file's own package by folder name or its package.xml's <name>."""
    share = package_share(pkg)
    if share is not None and allowed is not None:
        allowed = allowed.widened(share)
    for ancestor in [base_dir, *base_dir.parents]:          # the package the file lives in
        if allowed is not None and not allowed.contains(ancestor):
            break
        xml = ancestor / "package.xml"
        named = xml.is_file() and f"<name>{pkg}</name>" in _package_xml(xml).decode(errors="replace")
        if ancestor.name.replace("-", "_") == pkg.replace("-", "_") or named:
            return share, ancestor, allowed
    return share, None, allowed


def _package_xml(xml: Path) -> bytes:
    """A package.xml's bytes (b"" when it is not a readable regular file within its limit)."""
    try:
        return limits.bounded_read(xml, limits.MAX_PACKAGE_XML_BYTES, "package.xml",
                                   limit_name="MAX_PACKAGE_XML_BYTES")
    except DescriptionError:
        return b""


def read_bytes(path) -> bytes:
    """A URDF/SRDF file's bytes, refused before reading above ``limits.MAX_XML_BYTES``."""
    return limits.bounded_read(path, limits.MAX_XML_BYTES, "XML document", limit_name="MAX_XML_BYTES")


def package_uri(path) -> Optional[str]:
    """``package://<name>/<relative path>`` of a file inside a ROS package (the nearest folder above it
    with a ``package.xml``), or None."""
    path = Path(path).resolve()
    for ancestor in path.parents:
        xml = ancestor / "package.xml"
        if xml.is_file():
            try:
                name = xmlsafe.parse_bytes(_package_xml(xml), file=str(xml)).getroot().findtext("name")
            except DescriptionError:
                return None
            name = (name or "").strip()
            return f"package://{name}/{path.relative_to(ancestor).as_posix()}" if name else None
    return None


def _geometry(ctx: _Ctx, el, robot: Robot, materials: dict[str, Material]) -> Optional[Geometry]:
    kids = _first_children(el)
    g = kids.get("geometry")
    s = next((c for c in g if isinstance(c.tag, str)), None) if g is not None else None   # the first shape
    if s is None:
        raise ctx.error(SchemaError, "expected a <geometry> with one of box, cylinder, sphere, mesh", el)
    kind = s.tag.rpartition("}")[2]                      # xmlsafe.local_name (s.tag is a str)
    if kind == "box":
        shape = Box(ctx.floats(s, "size", 3) / 2.0)
    elif kind == "cylinder":
        shape = Cylinder(ctx.number(s, "radius"), ctx.number(s, "length"))
    elif kind == "sphere":
        shape = Sphere(ctx.number(s, "radius"))
    elif kind == "mesh":
        uri = s.get("filename")
        if not uri:
            raise ctx.error(SchemaError, "mesh without a filename", s)
        if uri in ctx.mesh_paths:
            path = ctx.mesh_paths[uri]
        else:
            try:                # the element's path is only written into an error: found only for one
                path = ctx.mesh_paths[uri] = resolve_uri(uri, ctx.dir, ctx.search_path, ctx.roots, ctx.file,
                                                         s.sourceline, None, ctx.packages)
            except UnsafeInputError as exc:
                if not ctx.leave_outside:
                    exc.with_location(element=xmlsafe.element_path(s))
                    raise
                path = ctx.mesh_paths[uri] = _OUTSIDE
                robot.warn(f"mesh {_clip_uri(uri)!r} left out: outside the trusted roots")
            except DescriptionError as exc:
                exc.with_location(element=xmlsafe.element_path(s))
                raise
        if path is _OUTSIDE:
            return None
        if path is None:
            robot.warn(f"mesh {uri!r} not found")
            if uri not in robot.missing_meshes:
                robot.missing_meshes.append(uri)
        scale = s.get("scale")
        shape = Mesh(uri, path, ctx.floats(s, "scale", 3) if scale is not None else _ONES3.copy())
    else:
        robot.warn(f"geometry <{kind}> is not supported (line {s.sourceline}); skipped")
        return None
    origin = _origin(ctx, el, kids)
    m = kids.get("material")
    if m is not None:
        return Geometry(shape, origin, _material(ctx, m, materials, robot), name=el.get("name"))
    return Geometry(shape, origin, name=el.get("name"))


def _material(ctx: _Ctx, m, materials: dict[str, Material], robot: Robot) -> Material:
    name = m.get("name")
    kids = _first_children(m)
    color = kids.get("color")
    if color is not None:
        rgba = ctx.values(color, "rgba", 4)
        mat = Material(diffuse=rgba[:3], transparency=1.0 - rgba[3], name=name)
        if name and name not in materials:
            materials[name] = mat
        return mat
    if kids.get("texture") is not None and name not in materials:
        robot.warn(f"material textures are not kept (material {name!r})")
    if name in materials:
        return materials[name]
    return Material(name=name)


def _link(ctx: _Ctx, el, robot: Robot, materials: dict[str, Material]) -> Link:
    link = Link(ctx.name(el, "link"))
    visuals, collisions, i = [], [], None
    for c in el:                                 # the children in one pass (any or no namespace)
        tag = c.tag
        if isinstance(tag, str):
            tag = tag.rpartition("}")[2]
            if tag == "visual":
                visuals.append(c)
            elif tag == "collision":
                collisions.append(c)
            elif tag == "inertial" and i is None:
                i = c
    for v in visuals:
        g = _geometry(ctx, v, robot, materials)
        if g is not None:
            link.visuals.append(g)
    for c in collisions:
        g = _geometry(ctx, c, robot, materials)
        if g is not None:
            link.collisions.append(g)
    if i is not None:
        kids = _first_children(i)
        mass = kids.get("mass")
        inertia = kids.get("inertia")
        m = ctx.number(mass, "value") if mass is not None else 0.0
        if inertia is not None:
            number = ctx.number
            ixx, ixy, ixz, iyy, iyz, izz = (number(inertia, "ixx", 0.0), number(inertia, "ixy", 0.0),
                                            number(inertia, "ixz", 0.0), number(inertia, "iyy", 0.0),
                                            number(inertia, "iyz", 0.0), number(inertia, "izz", 0.0))
            t = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        else:
            t = np.zeros((3, 3))
        link.inertial = Inertial(m, _origin(ctx, i, kids), t)
    return link


def _joint(ctx: _Ctx, el, robot: Robot) -> Joint:
    name = ctx.name(el, "joint")
    jtype = el.get("type")
    if jtype not in _JOINT_TYPES:
        expected = ", ".join(sorted(_JOINT_TYPES))
        raise ctx.error(SchemaError, f"joint type {jtype!r}: expected one of {expected}", el)
    kids = _first_children(el)
    e = kids.get("parent")
    parent = e.get("link") if e is not None else None
    if not parent:
        raise ctx.error(SchemaError, "joint without <parent link=...>", el)
    e = kids.get("child")
    child = e.get("link") if e is not None else None
    if not child:
        raise ctx.error(SchemaError, "joint without <child link=...>", el)
    if parent == child:
        raise ctx.error(KinematicsError, f"joint is its own parent (link {parent!r})", el)
    if jtype in ("floating", "planar"):
        robot.warn(f"{jtype} joint {name!r} cannot be expressed in the model; kept fixed at its origin")
        jtype = "fixed"
    axis_el = kids.get("axis")
    key = axis_el.get("xyz") if axis_el is not None else None
    unit = ctx.axes.get(key, False)
    if unit is False:                            # each distinct axis text checked and normalised once
        axis = ctx.floats(axis_el, "xyz", 3, [1, 0, 0]) if axis_el is not None else np.array([1.0, 0.0, 0.0])
        norm = np.linalg.norm(axis)
        unit = ctx.axes[key] = axis / norm if norm != 0.0 else None
    if jtype != "fixed" and unit is None:
        raise ctx.error(SchemaError, "zero-length joint axis", axis_el)
    origin = _origin(ctx, el, kids)
    limits = {}
    limit = kids.get("limit")
    if limit is not None and jtype != "fixed":
        if jtype != "continuous":                # urdfdom ignores bounds on continuous joints
            limits["lower"] = np.array([ctx.number(limit, "lower", 0.0)])
            limits["upper"] = np.array([ctx.number(limit, "upper", 0.0)])
        limits["velocity"] = np.array([ctx.number(limit, "velocity", 0.0)])
        limits["effort"] = np.array([ctx.number(limit, "effort", 0.0)])
    elif jtype in ("revolute", "prismatic"):
        raise ctx.error(SchemaError, f"{jtype} joint without <limit>", el)
    joint = Joint(name, jtype, parent, child, origin=origin,
                  axes=[unit.copy()] if jtype != "fixed" else [], **limits)
    safety = kids.get("safety_controller")
    if safety is not None and jtype != "fixed":
        joint.soft_lower = np.array([ctx.number(safety, "soft_lower_limit", float(joint.lower[0]))])
        joint.soft_upper = np.array([ctx.number(safety, "soft_upper_limit", float(joint.upper[0]))])
        joint.extras["k_velocity"] = ctx.number(safety, "k_velocity", 0.0)
        if safety.get("k_position") is not None:
            joint.extras["k_position"] = ctx.number(safety, "k_position")
    dyn = kids.get("dynamics")
    if dyn is not None:
        joint.extras["dynamics"] = {k: ctx.number(dyn, k) for k in ("damping", "friction") if dyn.get(k)}
    cal = kids.get("calibration")
    if cal is not None:
        joint.extras["calibration"] = dict(cal.attrib)
    mimic = kids.get("mimic")
    if mimic is not None:
        target = mimic.get("joint")
        if not target:
            raise ctx.error(SchemaError, "mimic without a joint attribute", mimic)
        mult, off = ctx.number(mimic, "multiplier", 1.0), ctx.number(mimic, "offset", 0.0)
        if jtype == "fixed":
            robot.warn(f"mimic on fixed joint {name!r} ignored")
        elif not _IDENTIFIER.match(target):
            robot.warn(f"mimic of joint {target!r} (not usable in a formula) ignored")
        else:
            formula = f"{mult!r}*{target} + {off!r}" if off >= 0 else f"{mult!r}*{target} - {-off!r}"
            joint.mimic = [Mimic(formula, velocity={target: repr(mult)})]
            joint.extras["urdf_mimic"] = (target, mult, off)
    if jtype == "continuous":
        joint.circular = [True]
    return joint


def read_string(text: str | bytes, file: Optional[str] = None, search_path=None,
                mesh_roots: Optional[Iterable[str | os.PathLike] | AllowedRoots] = None,
                base_dir: Optional[str | os.PathLike] = None) -> Robot:
    """The robot of URDF text.  ``mesh_roots`` (a peer's description): mesh files are looked up only under
    these folders; a mesh naming a file elsewhere is left out unprobed, with one warning naming its URI
    (never the path it resolves to, nor an OS error).  ``base_dir``: the folder relative URIs and the
    text's own ``package://`` package are looked up from (default: ``file``'s folder, else the current
    one)."""
    from . import normalize_search_path

    data = text.encode() if isinstance(text, str) else text
    tree, notes = parse_tolerant(data, file)
    roots = mesh_roots if isinstance(mesh_roots, AllowedRoots) or mesh_roots is None else \
        AllowedRoots(mesh_roots)
    return _read_tree(tree, file, normalize_search_path(search_path), notes, roots,
                      leave_outside=roots is not None, base_dir=base_dir)


def read_published(path, search_path=None) -> Robot:
    """The robot of a robot_description as a node published it: a URDF file, or what
    ``ros2 topic echo --once /robot_description > FILE`` saved (YAML ``data: '<robot ...'``).
    Mesh URIs are looked up as written, like a viewer on this host would (no allowed-roots limit)."""
    import yaml

    p = Path(path)
    data = read_bytes(p)
    if not data.lstrip().startswith(b"<"):
        try:
            docs = [d for d in yaml.safe_load_all(data) if isinstance(d, dict) and "data" in d]
        except yaml.YAMLError as exc:
            raise SchemaError(f"neither URDF nor saved std_msgs/String YAML: {exc}", file=str(p)) from None
        if not docs or not isinstance(docs[0]["data"], str):
            raise SchemaError("expected URDF or a saved std_msgs/String ('data: <robot ...>')", file=str(p))
        data = docs[0]["data"].encode()
    robot = read_string(data, file=str(p), search_path=search_path)
    from .validate import validate

    return validate(robot)


def read(path, search_path=None, **options) -> Robot:
    from . import normalize_search_path

    p = Path(path)
    data = read_bytes(p)
    tree, notes = parse_tolerant(data, str(p))
    search = normalize_search_path(search_path)
    return _read_tree(tree, str(p), search, notes, roots_for(p, search, options.get("allowed_roots")))


def _read_tree(tree, file: Optional[str], search_path: list[Path], notes: list[str],
               roots: Optional[AllowedRoots] = None, leave_outside: bool = False,
               base_dir: Optional[str | os.PathLike] = None) -> Robot:
    ctx = _Ctx(file, search_path, roots)
    ctx.leave_outside = leave_outside
    if base_dir is not None:
        ctx.dir = Path(os.path.realpath(base_dir))
    root = tree.getroot()
    if xmlsafe.local_name(root) != "robot":
        raise ctx.error(SchemaError, f"root element <{xmlsafe.local_name(root)}>: expected <robot>", root)
    if not _children(root, "link") and any(_children(root, t) for t in _SRDF_TAGS):
        raise UnsupportedFormatError("this file holds SRDF (semantic) content, not URDF; load the URDF and "
                                     "attach it with formats.srdf.read_srdf", file=file, line=root.sourceline)
    robot = Robot(root.get("name") or "", source=file)
    for n in notes:
        robot.warn(n)
    materials: dict[str, Material] = {}
    for m in _children(root, "material"):
        _material(ctx, m, materials, robot)
    kept = []
    for el in root:
        tag = el.tag
        tag = tag.rpartition("}")[2] if isinstance(tag, str) else ""      # xmlsafe.local_name, inlined
        if tag == "link":
            link = _link(ctx, el, robot, materials)
            if link.name in robot.links:
                raise ctx.error(KinematicsError, f"duplicate link {link.name!r}", el)
            robot.links[link.name] = link
        elif tag in ("joint", "material", ""):
            continue
        elif tag in _KEPT_ELEMENTS:
            # UTF-8 then decoded: the same text as encoding="unicode", a fifth faster
            kept.append(etree.tostring(el, encoding="utf-8", with_tail=False).decode())
        else:
            robot.warn(f"URDF element <{tag}> not supported; skipped")
    joint_els = _children(root, "joint")
    for el in joint_els:
        joint = _joint(ctx, el, robot)
        if joint.name in robot.joints:
            raise ctx.error(KinematicsError, f"duplicate joint {joint.name!r}", el)
        robot.joints[joint.name] = joint
    for el, joint in zip(joint_els, robot.joints.values()):
        for end in (joint.parent, joint.child):
            if end not in robot.links:
                raise ctx.error(UnknownReferenceError, f"joint refers to undefined link {end!r}", el)
    if kept:
        robot.extras["urdf_elements"] = kept
    for j in robot.joints.values():
        target = j.extras.get("urdf_mimic", (None,))[0]
        if target is not None and target not in robot.joints:
            raise UnknownReferenceError(f"joint {j.name!r} mimics undefined joint {target!r}", file=file)
    _check_tree(ctx, robot)
    return robot


def _check_tree(ctx: _Ctx, robot: Robot) -> None:
    from ..kinematics.fk import topological_joints

    if not robot.links:
        raise SchemaError("robot has no links", file=ctx.file)   # as urdfdom; SRDF content is caught earlier
    try:
        topological_joints(robot)
    except KinematicsError as exc:
        raise exc.with_location(file=ctx.file) from None
    roots = robot.root_links()
    if len(roots) != 1:
        raise KinematicsError(f"expected one root link, found {len(roots)}: {', '.join(roots)}",
                              file=ctx.file)


# ---------------------------------------------------------------------------------------------- writing
@dataclass
class ConversionReport:
    """What a conversion did and what it could not express."""

    links: int = 0
    joints: int = 0
    meshes_converted: list[str] = field(default_factory=list)     # mesh files written by this conversion
    meshes_cached: list[str] = field(default_factory=list)        # converted earlier, found in the cache
    mesh_files: list[str] = field(default_factory=list)           # every local mesh file the URDF names
    not_expressible: list[str] = field(default_factory=list)      # dropped or changed: one entry each
    unresolved: list[str] = field(default_factory=list)           # kept as written, not found on this host
    notes: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """Everything a user should be told (once per load): dropped and unresolved geometry."""
        return self.not_expressible + self.unresolved

    def summary(self) -> str:
        lines = [f"{self.links} links, {self.joints} joints, {len(self.meshes_converted)} meshes converted, "
                 f"{len(self.meshes_cached)} from the mesh cache"]
        lines += [f"not expressible: {m}" for m in self.not_expressible]
        lines += [f"unresolved: {m}" for m in self.unresolved]
        lines += [f"note: {m}" for m in self.notes]
        return "\n".join(lines)


def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in np.atleast_1d(values))


def _origin_el(parent, t: np.ndarray) -> None:
    if np.allclose(t, np.eye(4), rtol=0.0, atol=0.0):
        return
    etree.SubElement(parent, "origin", xyz=_fmt(t[:3, 3]), rpy=_fmt(tf.to_rpy(t[:3, :3])))


VIEWER_SCHEMES = ("package", "file", "http", "https")   # URI schemes rviz's resource_retriever loads


def file_uri(path: Path) -> str:
    return Path(path).resolve().as_uri()


@dataclass
class MeshTarget:
    """Where meshes that need conversion go and how the URDF names mesh files.

    ``mesh_dir``: converted meshes as named files there (an override); else ``cache``
    (content-addressed, see :mod:`.mesh_cache`); with neither, such meshes are dropped (reported).
    ``locate`` turns a local file into the URI written (None: not expressible that way, written as
    ``file://`` with a warning).  ``keep_written_uris``: a ``package://``, ``file://`` or ``http(s)://``
    mesh that needs no conversion is published as written, as robot_state_publisher does.
    """

    mesh_dir: Optional[Path] = None
    cache: Optional[object] = None                     # mesh_cache.MeshCache
    locate: Callable[[Path], Optional[str]] = file_uri
    keep_written_uris: bool = True


class _MeshWriter:
    """Turns model meshes into URDF file references, converting what rviz/pinocchio cannot load."""

    DIRECT = (".stl", ".dae", ".obj")

    def __init__(self, target: MeshTarget, report: ConversionReport):
        self.target = target
        self.mesh_dir = Path(target.mesh_dir).resolve() if target.mesh_dir is not None else None
        self.report = report
        self.done: dict[tuple, Optional[str]] = {}
        self.used: set[str] = set()
        self.colours: dict[str, tuple[float, float, float]] = {}    # URI -> the converted file's colour
        self._part_files: dict[str, list[Path]] = {}    # URI -> its colour parts' files (two or more)
        self._parts: dict[str, list[tuple[str, Optional[tuple[float, float, float]]]]] = {}

    def uri(self, mesh: Mesh, label: str) -> Optional[str]:
        key = (mesh.uri, mesh.path, id(mesh.vertices) if mesh.vertices is not None else None)
        if key not in self.done:
            self.done[key] = self._uri(mesh, label)
        return self.done[key]

    def _uri(self, mesh: Mesh, label: str) -> Optional[str]:
        written = mesh.uri or ""
        scheme = written.partition("://")[0].lower() if "://" in written else ""
        viewer_uri = scheme in VIEWER_SCHEMES
        if mesh.vertices is None and mesh.path is None:
            if viewer_uri:
                if scheme in ("package", "file"):
                    self.report.unresolved.append(
                        f"mesh {written!r} of {label}: not found on this host; published as written "
                        "(a viewer that has the file loads it)")
                return written
            self.report.not_expressible.append(f"mesh {written!r} of {label}: file not found; dropped")
            return None
        if mesh.vertices is None and Path(mesh.path).suffix.lower() in self.DIRECT:
            if viewer_uri and self.target.keep_written_uris:
                return written
            try:
                return self._locate(Path(mesh.path), label)
            except DescriptionError as exc:      # e.g. too large or not a regular file to serve
                self.report.not_expressible.append(f"mesh {mesh.uri!r} of {label}: {exc}; dropped")
                return None
        converted = self._convert(mesh, label)
        if converted is None:
            return None
        out, parts = converted
        uri = self._locate(out, label)
        colour = stl_colour(out)
        if colour is not None:
            self.colours[uri] = colour
        if parts:
            self._part_files[uri] = parts
        return uri

    def visual_parts(self, uri: str, label: str) -> list[tuple[str, Optional[tuple[float, float, float]]]]:
        """(URI, colour) of each colour part of a converted mesh with several colours (largest surface
        first; colour None for faces without one), else [(uri, its colour)]: a visual per colour draws an
        Inventor/VRML file in its own colours (a URDF visual has one material)."""
        if uri not in self._part_files:
            return [(uri, self.colours.get(uri))]
        if uri not in self._parts:
            self._parts[uri] = [(self._locate(p, label), stl_colour(p)) for p in self._part_files[uri]]
        return self._parts[uri]

    def _locate(self, path: Path, label: str) -> str:
        self.report.mesh_files.append(str(path))
        uri = self.target.locate(path)
        if uri is None:
            uri = file_uri(path)
            self.report.unresolved.append(f"mesh {str(path)!r} of {label}: not inside a ROS package; "
                                          f"published as {uri} (only this host can load it)")
        return uri

    def _convert(self, mesh: Mesh, label: str) -> Optional[tuple[Path, list[Path]]]:
        """The converted STL and, for a mesh of several colours, one STL per colour (else [])."""
        from . import mesh_cache

        cache = self.target.cache
        if self.mesh_dir is None and cache is None:
            self.report.not_expressible.append(
                f"mesh {mesh.uri!r} of {label}: needs conversion but no mesh directory was given; dropped")
            return None
        try:
            if self.mesh_dir is None:
                key = (mesh_cache.array_key(mesh.vertices, mesh.triangles) if mesh.vertices is not None
                       else mesh_cache.file_key(mesh.path))
                found = cache.get(key)
                count = stl_part_count(found) if found is not None else 0
                parts = [cache.get(mesh_cache.part_key(key, i)) for i in range(count)]
                if found is not None and all(parts):
                    self.report.meshes_cached.append(str(found))
                    return found, parts
                whole, part_bytes = self._stl(mesh)
                out = cache.put(key, whole)
                parts = [cache.put(mesh_cache.part_key(key, i), b) for i, b in enumerate(part_bytes)]
            else:
                out = self._named_file(mesh, label)
                whole, part_bytes = self._stl(mesh)
                out.write_bytes(whole)
                parts = [self._free_file(f"{out.stem}_part{i}") for i in range(len(part_bytes))]
                for path, b in zip(parts, part_bytes):
                    path.write_bytes(b)
        except DescriptionError as exc:
            self.report.not_expressible.append(f"mesh {mesh.uri!r} of {label}: {exc}; dropped")
            return None
        except OSError as exc:
            self.report.not_expressible.append(f"mesh {mesh.uri!r} of {label}: cannot write the converted "
                                               f"mesh ({exc}); dropped")
            return None
        self.report.meshes_converted.append(str(out))
        return out, parts

    @staticmethod
    def _stl(mesh: Mesh) -> tuple[bytes, list[bytes]]:
        """Binary STL of a mesh and, for an Inventor/VRML file of several colours, one per colour.  The
        whole mesh's header names the main diffuse colour and how many parts there are; each part's, its
        colour."""
        from . import meshes

        if mesh.vertices is not None:
            return meshes.stl_bytes(mesh.vertices, mesh.triangles), []
        if not meshes.is_inventor(mesh.path):
            return meshes.stl_bytes(*meshes.load_triangles(mesh.path)), []
        vertices, triangles, colours = meshes.read_inventor_coloured(mesh.path)
        groups = meshes.colour_parts(vertices, triangles, colours)
        if len(groups) < 2:
            return _with_header(meshes.stl_bytes(vertices, triangles), groups[0][0] if groups else None), []
        parts = [_with_header(meshes.stl_bytes(*meshes.submesh(vertices, triangles, rows)), rgb)
                 for rgb, rows in groups]
        main = next(rgb for rgb, _ in groups if rgb is not None)      # dominant_colour, from the groups
        return _with_header(meshes.stl_bytes(vertices, triangles), main, len(parts)), parts

    def _named_file(self, mesh: Mesh, label: str) -> Path:
        self.mesh_dir.mkdir(parents=True, exist_ok=True)
        source, _, fragment = (mesh.uri or "").partition("#")     # inline meshes: file.zae#geometry_id
        stem = Path(mesh.path or source or label).stem + (f"_{fragment}" if fragment else "")
        return self._free_file(re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "mesh")

    def _free_file(self, stem: str) -> Path:
        """``<stem>.stl`` in the mesh directory, or ``<stem>_<i>.stl`` if a mesh of this run took it."""
        name, i = f"{stem}.stl", 1
        while name in self.used:
            name, i = f"{stem}_{i}.stl", i + 1
        self.used.add(name)
        return self.mesh_dir / name


# The Materialise/VisCAM binary STL convention: "COLOR=" and RGBA bytes in the 80-byte header; after them
# " parts=N" when the mesh was also written as N files of one colour each (mesh_cache.part_key)
_STL_COLOUR = b"COLOR="
_STL_PARTS = re.compile(rb" parts=(\d+)")


def _rgba_bytes(rgb) -> bytes:
    return bytes(int(round(min(max(float(c), 0.0), 1.0) * 255)) for c in rgb) + b"\xff"


def _with_header(stl: bytes, colour, parts: int = 0) -> bytes:
    if colour is None and not parts:
        return stl
    head = (_STL_COLOUR + _rgba_bytes(colour) if colour is not None else b"") + \
        (b" parts=%d" % parts if parts else b"")
    return head.ljust(80, b"\0") + stl[80:]


def _stl_header(path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(80)
    except OSError:
        return b""


def stl_colour(path) -> Optional[tuple[float, float, float]]:
    """The colour a binary STL's header names (``COLOR=`` + RGBA bytes), or None."""
    head = _stl_header(path)
    if not head.startswith(_STL_COLOUR) or len(head) < 10:
        return None
    return tuple(b / 255.0 for b in head[6:9])


def stl_part_count(path) -> int:
    """How many colour parts a converted STL's header announces (0: none)."""
    found = _STL_PARTS.search(_stl_header(path))
    return int(found.group(1)) if found else 0


def _comment_text(text: str) -> str:
    return " " + text.replace("--", "- -") + " "


def to_urdf(robot: Robot, mesh_dir=None, target: Optional[MeshTarget] = None,
            tool_frames: bool = False) -> tuple[str, ConversionReport]:
    """The URDF text of ``robot`` and a report of what could not be expressed.

    Meshes that need conversion go to ``mesh_dir`` or as ``target`` says (see :class:`MeshTarget`);
    with neither they are dropped and reported.  ``tool_frames``: each manipulator's tool frame as a link
    ``<manipulator>_tool`` on a fixed joint from its effector link (what /tf_static publishes), so an SRDF
    chain can end at the tool (``convert`` and ``moveit-config``; the description node publishes these
    frames itself)."""
    from ..kinematics.urdf_tree import urdf_tree

    report = ConversionReport()
    links, joints = urdf_tree(robot)
    if target is None:
        target = MeshTarget(mesh_dir=Path(mesh_dir) if mesh_dir is not None else None)
    elif mesh_dir is not None:
        target = dataclasses.replace(target, mesh_dir=Path(mesh_dir))
    meshes = _MeshWriter(target, report)
    root = etree.Element("robot", name=robot.name or "robot")
    materials: dict[str, tuple] = {}
    for tl in links:
        el = etree.SubElement(root, "link", name=tl.name)
        link = robot.links.get(tl.source) if tl.source else None
        if link is None:
            continue
        if link.inertial is not None and link.inertial.mass > 0:
            _inertial_el(el, link.inertial)
        for tag, geoms in (("visual", link.visuals), ("collision", link.collisions)):
            for i, g in enumerate(geoms):
                _geometry_el(el, tag, g, f"{tag} {i} of link {link.name!r}", meshes, materials, report)
    for j in joints:
        _joint_el(root, j, robot, report)
    tools = _tool_links(root, robot, report) if tool_frames else 0
    for text in robot.extras.get("urdf_elements", []):
        root.append(xmlsafe.parse_bytes(text.encode()).getroot())
    if robot.sensors:
        report.notes.append(f"{len(robot.sensors)} attached sensor frames are not URDF links "
                            "(the description node publishes them)")
    report.links, report.joints = len(links) + tools, len(joints) + tools
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="unicode", xml_declaration=False) + "\n", report


def tool_link_names(robot: Robot) -> dict[str, tuple[str, str]]:
    """manipulator -> (its tool link, the URDF link it hangs from) as ``to_urdf(tool_frames=True)`` writes."""
    from ..kinematics.frames import tool_frame
    from ..kinematics.urdf_tree import urdf_tree

    links, _ = urdf_tree(robot)
    urdf_name = {}
    for tl in links:
        if tl.source is not None:
            urdf_name.setdefault(tl.source, tl.name)
    taken = {tl.name for tl in links}
    out = {}
    for m in robot.manipulators.values():
        name = tool_frame(m)
        if name not in taken and m.effector in urdf_name:
            out[m.name] = (name, urdf_name[m.effector])
            taken.add(name)
    return out


def _tool_links(root, robot: Robot, report: ConversionReport) -> int:
    tools = tool_link_names(robot)
    for m in robot.manipulators.values():
        if m.name not in tools:
            report.notes.append(f"manipulator {m.name!r}: no tool link written (name taken or effector "
                                f"{m.effector!r} not a link)")
            continue
        name, parent = tools[m.name]
        etree.SubElement(root, "link", name=name)
        el = etree.SubElement(root, "joint", name=f"{name}_joint", type="fixed")
        _origin_el(el, m.tool)
        etree.SubElement(el, "parent", link=parent)
        etree.SubElement(el, "child", link=name)
    return len(tools)


def _inertial_el(parent, inertial: Inertial) -> None:
    el = etree.SubElement(parent, "inertial")
    _origin_el(el, inertial.origin)
    etree.SubElement(el, "mass", value=repr(float(inertial.mass)))
    i = inertial.inertia
    keys = {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2), "izz": (2, 2)}
    etree.SubElement(el, "inertia", **{k: repr(float(i[rc])) for k, rc in keys.items()})


def _geometry_el(parent, tag: str, g: Geometry, label: str, meshes: _MeshWriter, materials: dict,
                 report: ConversionReport) -> None:
    s = g.shape
    m = g.material
    uri = None
    if isinstance(s, Mesh):
        uri = meshes.uri(s, label)
        if uri is None:
            return
        if tag == "visual" and m.diffuse is None:           # the mesh file's own colours
            parts = meshes.visual_parts(uri, label)
            for i, (part_uri, colour) in enumerate(parts):
                name = g.name and (g.name if len(parts) == 1 else f"{g.name}_{i}")
                _shape_el(parent, tag, name, g.origin, s, part_uri,
                          m if colour is None else dataclasses.replace(m, diffuse=colour), materials)
            return
    _shape_el(parent, tag, g.name, g.origin, s, uri, m, materials)


def _shape_el(parent, tag: str, name: Optional[str], origin: np.ndarray, s, uri: Optional[str], m: Material,
              materials: dict) -> None:
    el = etree.SubElement(parent, tag, **({"name": name} if name else {}))
    _origin_el(el, origin)
    geom = etree.SubElement(el, "geometry")
    if isinstance(s, Box):
        etree.SubElement(geom, "box", size=_fmt(s.size))
    elif isinstance(s, Cylinder):
        etree.SubElement(geom, "cylinder", radius=repr(float(s.radius)), length=repr(float(s.length)))
    elif isinstance(s, Sphere):
        etree.SubElement(geom, "sphere", radius=repr(float(s.radius)))
    else:
        attrs = {"filename": uri}
        if not np.allclose(s.scale, 1.0, rtol=0.0, atol=0.0):
            attrs["scale"] = _fmt(s.scale)
        etree.SubElement(geom, "mesh", **attrs)
    if tag == "visual" and (m.diffuse is not None or m.transparency):
        rgba = tuple(round(float(v), 9) for v in m.rgba)
        name = m.name or "color_" + "_".join(f"{v:g}" for v in rgba)
        base, n = name, 1
        while materials.setdefault(name, rgba) != rgba:
            name, n = f"{base}_{n}", n + 1
        mat = etree.SubElement(el, "material", name=name)
        etree.SubElement(mat, "color", rgba=_fmt(rgba))


def _joint_el(root, j, robot: Robot, report: ConversionReport) -> None:
    source = robot.joints.get(j.source) if j.source else None
    if j.nonlinear_mimic:
        formula = source.mimic[j.dof].position
        text = (f"joint {j.name} follows the nonlinear mimic formula {formula!r}: not expressible as URDF "
                "<mimic>; robot_bridge's description node computes it")
        root.append(etree.Comment(_comment_text(text)))
        report.not_expressible.append(text)
    elif source is not None and j.type == "fixed" and source.dof > 0:
        report.notes.append(f"passive joint {source.name} written as fixed at its initial value "
                            f"{_fmt(source.initial)}")
    el = etree.SubElement(root, "joint", name=j.name, type=j.type)
    _origin_el(el, j.origin)
    etree.SubElement(el, "parent", link=j.parent)
    etree.SubElement(el, "child", link=j.child)
    if j.type == "fixed":
        return
    etree.SubElement(el, "axis", xyz=_fmt(j.axis))
    limit = {"effort": repr(j.effort), "velocity": repr(j.velocity)}
    if j.type != "continuous":
        limit = {"lower": repr(j.lower), "upper": repr(j.upper), **limit}
    etree.SubElement(el, "limit", **limit)
    extras = source.extras if source is not None and source.dof == 1 else {}
    if extras.get("calibration"):
        etree.SubElement(el, "calibration", **extras["calibration"])
    if extras.get("dynamics"):
        etree.SubElement(el, "dynamics", **{k: repr(v) for k, v in extras["dynamics"].items()})
    if source is not None and source.soft_lower is not None and source.soft_upper is not None:
        attrs = {"soft_lower_limit": repr(float(source.soft_lower[j.dof])),
                 "soft_upper_limit": repr(float(source.soft_upper[j.dof])),
                 "k_velocity": repr(float(extras.get("k_velocity", 0.0)))}
        if "k_position" in extras:
            attrs["k_position"] = repr(float(extras["k_position"]))
        etree.SubElement(el, "safety_controller", **attrs)
    if j.mimic is not None:
        target, mult, off = j.mimic
        etree.SubElement(el, "mimic", joint=target, multiplier=repr(mult), offset=repr(off))


def write_urdf(robot: Robot, path, mesh_dir=None, tool_frames: bool = False) -> ConversionReport:
    """Write ``robot`` as URDF to ``path``; meshes needing conversion go to ``mesh_dir``
    (default: ``<path stem>_meshes`` beside the file)."""
    path = Path(path)
    if mesh_dir is None:
        mesh_dir = path.parent / f"{path.stem}_meshes"
    text, report = to_urdf(robot, mesh_dir=mesh_dir, tool_frames=tool_frames)
    path.write_text('<?xml version="1.0"?>\n' + text)
    return report


__all__ = ["ConversionReport", "MeshTarget", "VIEWER_SCHEMES", "file_uri", "package_uri", "read",
           "read_published", "read_string", "resolve_uri", "to_urdf", "write_urdf", "SUFFIXES", "ROOT_TAGS"]
