"""COLLADA 1.5 kinematics (``.dae`` / ``.zae``) with the OpenRAVE robot extensions.

Conventions (see ``model/robot.py``):

- Link frames are the COLLADA ``<link>`` frames.  For each ``attachment_full``:
  ``joint.origin`` = the attachment's transform in the parent link frame,
  ``axes`` = the joint's axes (unit, joint frame), ``child_offset`` = the child
  ``<link>``'s own translate/rotate (identity in most files) -- exactly
  OpenRAVE's ``T_child = T_parent * T_attachment * R(axis, q) * T_link``.
- Units: ``asset/unit@meter`` scales translations, prismatic limits/speeds and
  geometry.  Revolute limits, speeds and accelerations are degrees -> radians;
  formulas and ``discretization_resolution`` are already radians.
- Limits: ``<joint>`` ``<limits>`` are the hard limits -> ``lower/upper``;
  ``axis_info`` limits are the soft limits -> ``soft_lower/soft_upper`` (and
  ``lower/upper`` when the joint has no hard limits).  ``locked`` axes get
  lower = upper = their value; no limits at all -> revolute circular +-pi,
  prismatic +-1e6 m (as OpenRAVE).  ``active=false`` -> ``passive``.
- Multi-axis joints: 2 revolute axes -> ``universal``, 3 -> ``spherical``;
  any other mix becomes a chain of 1-DOF joints ``<name>_axis<i>`` through
  massless links ``<child>_<name>_axis<i>``.
- Several bodies in the kinematics scene: the first is the robot, the others go
  to ``robot.environment``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import (ExpressionError, SchemaError, UnknownReferenceError, UnknownVariableError,
                       UnsupportedFormatError)
from ...kinematics.mimic import not_compiled
from ...model import AttachedSensor, Geometry, Inertial, Joint, Link, Mesh, Mimic, Robot
from ...model import transform as tf
from .. import zae
from ..xmlsafe import read_file
from . import extras as ex
from .document import Document, parse
from ...errors import WorkBudgetError
from .geometry import VNode, bound_materials, material_of, read_geometry, visual_tree, walk
from .mathml import MathMLConverter

SUFFIXES = (".dae", ".zae")
ROOT_TAGS = ("collada",)

_KNOWN_ROOT = {"asset", "library_visual_scenes", "library_geometries", "library_effects", "library_materials",
               "library_nodes", "library_kinematics_models", "library_articulated_systems", "library_joints",
               "library_kinematics_scenes", "library_physics_scenes", "library_physics_models", "scene",
               "extra", "library_images", "library_formulas"}
_KNOWN_EXTRAS = {"interface_type", "manipulator", "collision", "library_sensors", "library_actuators",
                 "attach_sensor", "attach_actuator", "geometry_info"}
_AXIS_KINDS = ("revolute", "prismatic")
MAX_INSTANCED_TRIANGLES = 8_000_000     # triangles of all geometry instances (a geometry at each use)


def read(path, search_path=None, **options) -> Robot:
    """Read a .dae or .zae robot/kinbody.  Options: ``meshes=False`` skips mesh data."""
    p = Path(path)
    file = str(p.resolve()) if p.exists() else str(p)
    return _Reader(open_document(p), file, bool(options.get("meshes", True))).read()


def open_document(path) -> Document:
    """The parsed document of a .dae file, or of a .zae's root document."""
    p = Path(path)
    file = str(p.resolve()) if p.exists() else str(p)
    if zae.is_zip(p):
        data, member = zae.read_root_document(p)
        tree, namespaces = parse(data, f"{file}!{member}")
        return Document(tree, f"{file}!{member}", namespaces)
    tree, namespaces = parse(read_file(p), p)
    return Document(tree, file, namespaces)


class _Body:
    """One kinematic body: kinematics models + the articulated systems around them."""

    def __init__(self, name, kmodels, systems, instances):
        self.name = name
        self.kmodels = kmodels          # kinematics_model elements
        self.systems = systems          # articulated_system elements, innermost first
        self.instances = instances      # instance_articulated_system elements (scene level)


def _unit_scale(scale: np.ndarray) -> bool:
    """``np.allclose(scale, 1.0)`` without its per-call overhead (asked once per geometry instance)."""
    return bool((np.abs(scale - 1.0) <= 1e-8 + 1e-5).all())


class _Reader:
    def __init__(self, doc: Document, file: str, meshes: bool):
        self.doc = doc
        self.file = file
        self.meshes = meshes
        self.geometry_cache: dict = {}
        self._instance_names: dict = {}   # <joint> definition -> its instance_joint's name/sid
        self._instance_sids: dict = {}    # <joint> definition -> its instance_joint's sid

    # -- entry ---------------------------------------------------------------
    def read(self) -> Robot:
        doc = self.doc
        if doc.root.tag.lower() != "collada":
            raise doc.error(UnsupportedFormatError, f"root element is <{doc.root.tag}>, not <COLLADA>",
                            doc.root)
        if not any(True for _ in doc.root.iter("kinematics_model")):
            raise UnsupportedFormatError(
                "mesh-only COLLADA document: no kinematics (no <kinematics_model>); it describes no robot or "
                "kinbody -- use it as a mesh (e.g. a URDF <mesh filename=...>)", file=self.file)
        bodies = self._bodies()
        robots = [self._read_body(b) for b in bodies]
        robot = robots[0]
        for other in robots[1:]:
            robot.environment[other.name] = other
        self._warn_unknown(robot)
        if doc.version and not doc.version.startswith("1.5"):
            robot.warn(f"COLLADA version {doc.version} declared; read with 1.5 kinematics semantics")
        return robot

    def _warn_unknown(self, robot: Robot) -> None:
        for child in self.doc.root:
            if isinstance(child.tag, str) and child.tag not in _KNOWN_ROOT:
                robot.warn(f"<{child.tag}> is not read")
        for extra in self.doc.root.iter("extra"):
            t = extra.get("type")
            if t and t not in _KNOWN_EXTRAS:
                robot.warn(f"<extra type={t!r}> is not modelled (kept in robot.extras['collada_extras'])")
                from lxml import etree
                text = etree.tostring(extra, encoding="unicode")
                if len(text) < 65536:
                    robot.extras.setdefault("collada_extras", {}).setdefault(t, []).append(text)

    # -- which bodies ----------------------------------------------------------
    def _system_chain(self, system) -> tuple[list, list]:
        """(articulated systems innermost first, kinematics_model elements)."""
        chain, kmodels, seen = [], [], set()
        todo = [system]
        while todo:
            s = todo.pop()
            if s is None or s in seen:
                continue
            seen.add(s)
            chain.insert(0, s)
            for ias in s.findall("motion/instance_articulated_system"):
                todo.append(self.doc.url(ias.get("url")))
            for ikm in s.findall("kinematics/instance_kinematics_model"):
                km = self.doc.url(ikm.get("url"))
                if km is None:
                    raise self.doc.error(UnknownReferenceError, f"kinematics model {ikm.get('url')!r} not "
                                         "found (external documents are not followed)", ikm)
                kmodels.append(km)
        return chain, kmodels

    def _bodies(self) -> list[_Body]:
        doc = self.doc
        bodies = []
        scenes = []
        for iks in doc.root.findall("scene/instance_kinematics_scene"):
            ks = doc.url(iks.get("url"))
            if ks is not None:
                scenes.append(ks)
        for ks in scenes:
            for child in ks:
                if child.tag == "instance_articulated_system":
                    system = doc.url(child.get("url"))
                    if system is None:
                        continue
                    chain, kmodels = self._system_chain(system)
                    if kmodels:
                        bodies.append(_Body(child.get("name") or system.get("name") or system.get("id"),
                                            kmodels, chain, [child]))
                elif child.tag == "instance_kinematics_model":
                    km = doc.url(child.get("url"))
                    if km is not None:
                        name = child.get("name") or km.get("name") or km.get("id")
                        bodies.append(_Body(name, [km], [], []))
        if bodies:
            return bodies
        systems = list(doc.root.iter("articulated_system"))
        used = {doc.url(i.get("url")) for s in systems
                for i in s.findall("motion/instance_articulated_system")}
        for s in systems:
            if s not in used:
                chain, kmodels = self._system_chain(s)
                if kmodels:
                    bodies.append(_Body(s.get("name") or s.get("id"), kmodels, chain, []))
        if bodies:
            return bodies
        for km in doc.root.iter("kinematics_model"):
            bodies.append(_Body(km.get("name") or km.get("id"), [km], [], []))
        return bodies

    # -- one body ------------------------------------------------------------
    def _read_body(self, body: _Body) -> Robot:
        doc = self.doc
        robot = Robot(name=body.name or "body", source=self.file)
        self.robot = robot
        self.link_by_el: dict = {}
        self.joint_by_el: dict = {}       # <joint> definition -> model joint name
        self.axis_owner: dict = {}        # axis element -> (joint name, dof index, kind)
        self.child_of_joint: dict = {}    # joint name -> child link (last of a split chain)
        self.pose: dict[str, np.ndarray] = {}   # link -> pose in the root link frame at q=0
        self.kinfo, self.minfo = self._axis_infos(body.systems)
        for km in body.kmodels:
            self._read_kmodel(km)
        if not robot.links:
            raise doc.error(SchemaError, "kinematics model has no <link>", body.kmodels[0])
        for km in body.kmodels:
            self._read_formulas(km)
        self._read_scene_bindings(body)
        self._read_extras(body)
        return robot

    # -- axis_info -------------------------------------------------------------
    def _axis_infos(self, systems):
        kinfo, minfo = {}, {}
        for s in systems:
            for ai in s.findall("kinematics/technique_common/axis_info"):
                axis = self.doc.resolve(ai.get("axis"), s)
                if axis is None:
                    raise self.doc.error(UnknownReferenceError,
                                         f"axis_info axis {ai.get('axis')!r} not found", ai)
                kinfo[axis] = ai
            for ai in s.findall("motion/technique_common/axis_info"):
                target = self.doc.resolve(ai.get("axis"), s)
                if target is not None and target.tag == "axis_info":
                    target = self.doc.resolve(target.get("axis"), target)
                if target is None:
                    raise self.doc.error(UnknownReferenceError, f"motion axis_info axis {ai.get('axis')!r} "
                                         "not found", ai)
                minfo[target] = ai
        return kinfo, minfo

    # -- kinematics model --------------------------------------------------------
    def _read_kmodel(self, km) -> None:
        tc = km.find("technique_common")
        if tc is None:
            raise self.doc.error(SchemaError, "kinematics_model has no <technique_common>", km)
        roots = tc.findall("link")
        if not roots:
            raise self.doc.error(SchemaError, "kinematics_model has no <link>", km)
        for i, link_el in enumerate(roots):
            name = self._add_link(link_el)
            self.pose[name] = np.eye(4) if i == 0 else self.doc.transform(link_el)
            if i > 0:
                self.robot.warn("kinematics model with several root links: extra roots are placed "
                                "relative to the first")
            self._attachments(link_el, name)
        for ext in ("attachment_start", "attachment_end"):
            if any(True for _ in km.iter(ext)):
                self.robot.warn(f"<{ext}> (closed loops) is not supported")

    def _unique(self, kind: str, name: str, sid: Optional[str], taken, el) -> str:
        """``name``, or for a repeated one a deterministic new name (``<name>_<sid>``, else
        ``<name>_<n>``), warned once.  COLLADA addresses links and joints by sid, so names may repeat
        (OpenRAVE's exporter names passive dummy joints alike; CATIA repeats joint names); every
        reference is resolved through elements and sids, so it keeps pointing at the renamed one."""
        if name not in taken:
            return name
        candidates = [f"{name}_{sid}"] if sid and sid != name else []
        candidates += (f"{name}_{n}" for n in range(2, len(taken) + 3))
        new = next(c for c in candidates if c not in taken and c not in self.robot.links
                   and c not in self.robot.joints)
        line = f" (line {el.sourceline})" if getattr(el, "sourceline", None) else ""
        self.robot.warn(f"duplicate {kind} name {name!r}{line}: renamed to {new!r}")
        return new

    def _add_link(self, link_el) -> str:
        name = link_el.get("name") or link_el.get("sid") or f"link{len(self.robot.links)}"
        name = self._unique("link", name, link_el.get("sid"), self.robot.links, link_el)
        self.robot.links[name] = Link(name=name)
        self.link_by_el[link_el] = name
        return name

    def _joint_definition(self, ref, context):
        el = self.doc.resolve(ref, context)
        if el is not None and el.tag == "instance_joint":
            inst = el
            el = self.doc.url(el.get("url"))
            if el is not None:
                self._instance_names[el] = inst.get("name") or inst.get("sid")
                self._instance_sids[el] = inst.get("sid")
        return el

    def _attachments(self, link_el, parent: str) -> None:
        for att in link_el.findall("attachment_full"):
            jdef = self._joint_definition(att.get("joint"), att)
            if jdef is None or jdef.tag != "joint":
                raise self.doc.error(UnknownReferenceError, f"attachment_full joint {att.get('joint')!r} "
                                     "does not name a <joint>", att)
            child_el = att.find("link")
            if child_el is None:
                raise self.doc.error(SchemaError, "attachment_full has no child <link>", att)
            child = self._add_link(child_el)
            origin = self.doc.transform(att)
            offset = self.doc.transform(child_el)
            self._make_joint(jdef, parent, child, origin, offset)
            self.pose[child] = self.pose[parent] @ origin @ offset
            self._attachments(child_el, child)

    def _axis_props(self, axis_el) -> dict:
        doc = self.doc
        kind = axis_el.tag
        unit = doc.unit_of(axis_el)
        mult = np.pi / 180.0 if kind == "revolute" else unit
        ki, mi = self.kinfo.get(axis_el), self.minfo.get(axis_el)
        vec_el = axis_el.find("axis")
        vec = doc.numbers(vec_el, 3) if vec_el is not None else np.array([0.0, 0.0, 1.0])
        n = np.linalg.norm(vec)
        if not (np.isfinite(n) and n > 0):
            raise doc.error(SchemaError, f"joint axis {vec.tolist()} is zero or not finite", vec_el)
        props = {"kind": kind, "axis": vec / n, "passive": False,
                 "velocity": 0.5 if kind == "revolute" else 0.01, "acceleration": 0.0, "weight": 1.0,
                 "resolution": 0.0, "circular": False, "soft": None, "locked": False, "extras": {}}

        def limits(el, ctx):
            if el is None:
                return None
            lo, hi = doc.value(el.find("min"), ctx), doc.value(el.find("max"), ctx)
            if lo is None or hi is None or isinstance(lo, bool) or not isinstance(lo, float):
                return None
            return (min(lo, hi) * mult, max(lo, hi) * mult)

        hard = limits(axis_el.find("limits"), axis_el)
        circular = None
        if ki is not None:
            props["soft"] = limits(ki.find("limits"), ki)
            if doc.value(ki.find("locked"), ki) is True:
                props["locked"] = True
            if doc.value(ki.find("active"), ki) is False:
                props["passive"] = True
            index = doc.value(ki.find("index"), ki)
            if isinstance(index, float):
                props["extras"]["dof_index"] = int(index)
            for np_el in ki.findall("newparam"):
                sid = np_el.get("sid")
                value = doc.value(np_el, ki)
                if sid == "circular" and value is not None:
                    circular = bool(value)
                elif sid == "planning_weight" and isinstance(value, float) and value > 0:
                    props["weight"] = value
                elif sid == "discretization_resolution" and isinstance(value, float) and value > 0:
                    props["resolution"] = value
        if mi is not None:
            speed, accel = doc.value(mi.find("speed"), mi), doc.value(mi.find("acceleration"), mi)
            if isinstance(speed, float):
                props["velocity"] = speed * mult
            if isinstance(accel, float):
                props["acceleration"] = accel * mult
        props["hard"] = hard
        if props["locked"]:
            props["lower"] = props["upper"] = 0.0
        elif hard is not None or props["soft"] is not None:
            props["lower"], props["upper"] = hard if hard is not None else props["soft"]
        elif kind == "revolute":
            props["lower"], props["upper"] = -np.pi, np.pi
            circular = True if circular is None else circular
        else:
            props["lower"], props["upper"] = -1e6, 1e6
        props["circular"] = bool(circular)
        props["offset"] = 0.0
        if kind == "revolute" and (props["lower"] < -np.pi or props["upper"] > np.pi):
            props["offset"] = 0.5 * (props["lower"] + props["upper"])   # OpenRAVE's internal offset
        return props

    def _make_joint(self, jdef, parent: str, child: str, origin, offset) -> None:
        name = jdef.get("name") or self._instance_names.get(jdef) or jdef.get("sid") or jdef.get("id")
        axes_el = [c for c in jdef if c.tag in _AXIS_KINDS]
        for c in jdef:
            if isinstance(c.tag, str) and c.tag not in _AXIS_KINDS + ("extra", "asset"):
                self.robot.warn(f"joint element <{c.tag}> is not read")
        sid = self._instance_sids.get(jdef) or jdef.get("sid") or jdef.get("id")
        name = self._unique("joint", name, sid, self.robot.joints, jdef)
        self.joint_by_el[jdef] = name
        props = [self._axis_props(a) for a in axes_el]
        if not props:
            self.robot.joints[name] = Joint(name=name, type="fixed", parent=parent, child=child,
                                            origin=origin, child_offset=offset)
            self.child_of_joint[name] = child
            return
        kinds = {p["kind"] for p in props}
        if len(props) == 1:
            jtype = "prismatic" if kinds == {"prismatic"} else (
                "continuous" if props[0]["circular"] else "revolute")
            groups = [(name, jtype, props, parent, child, origin, offset)]
        elif kinds == {"revolute"} and len(props) in (2, 3):
            groups = [(name, "universal" if len(props) == 2 else "spherical", props, parent, child, origin,
                       offset)]
        else:
            groups, prev = [], parent
            for i, p in enumerate(props):
                last = i == len(props) - 1
                link = child if last else f"{child}_{name}_axis{i}"
                if not last:
                    self.robot.links[link] = Link(name=link)
                groups.append((f"{name}_axis{i}", p["kind"], [p], prev, link, origin if i == 0 else np.eye(4),
                               offset if last else np.eye(4)))
                prev = link
        for gname, jtype, gprops, gparent, gchild, gorigin, goffset in groups:
            soft = [p["soft"] for p in gprops]
            joint = Joint(
                name=gname, type=jtype, parent=gparent, child=gchild, origin=gorigin, child_offset=goffset,
                axes=[p["axis"] for p in gprops],
                lower=[p["lower"] for p in gprops], upper=[p["upper"] for p in gprops],
                soft_lower=np.array([s[0] for s in soft]) if all(s is not None for s in soft) else None,
                soft_upper=np.array([s[1] for s in soft]) if all(s is not None for s in soft) else None,
                velocity=[p["velocity"] for p in gprops], acceleration=[p["acceleration"] for p in gprops],
                weight=[p["weight"] for p in gprops], resolution=[p["resolution"] for p in gprops],
                circular=[p["circular"] for p in gprops], offset=[p["offset"] for p in gprops],
                passive=any(p["passive"] for p in gprops))
            for p in gprops:
                joint.extras.update(p["extras"])
            if any(p["locked"] for p in gprops):
                joint.extras["locked"] = True
            if any(p["hard"] is not None for p in gprops) and all(s is not None for s in soft):
                joint.extras["hard_limits"] = [p["hard"] for p in gprops]
            self.robot.joints[gname] = joint
        for i, a in enumerate(axes_el):
            gname = groups[i][0] if len(groups) > 1 else name
            self.axis_owner[a] = (gname, 0 if len(groups) > 1 else i, a.tag)
        self.child_of_joint[name] = child

    # -- references ----------------------------------------------------------------
    def link_name(self, ref: Optional[str], context=None) -> Optional[str]:
        if not ref:
            return None
        el = self.doc.resolve(ref, context)
        if el is not None and el in self.link_by_el:
            return self.link_by_el[el]
        last = ref.rstrip("/").split("/")[-1]
        for lel, name in self.link_by_el.items():
            if lel.get("sid") == last:
                return name
        return last if last in self.robot.links else None

    def joint_name(self, ref: Optional[str], context=None) -> Optional[str]:
        var = self._joint_var(ref, context)
        return var[0] if var else None

    def _joint_var(self, ref, context):
        """(joint name, dof, kind) a joint or axis SIDREF names."""
        if not ref:
            return None
        el = self.doc.resolve(ref, context)
        if el is not None and el.tag == "instance_joint":
            el = self.doc.url(el.get("url"))
        if el is not None and el in self.axis_owner:
            return self.axis_owner[el]
        if el is not None and el in self.joint_by_el:
            axes = [a for a in el if a.tag in _AXIS_KINDS]
            if axes and axes[0] in self.axis_owner:
                return self.axis_owner[axes[0]]
            return (self.joint_by_el[el], 0, "fixed")
        last = ref.rstrip("/").split("/")[-1]
        # sids and ids first: they are unique where names may repeat
        matches = [(jel, name) for jel, name in self.joint_by_el.items()
                   if last in (jel.get("sid"), jel.get("id"), self._instance_sids.get(jel))]
        matches = matches or [(jel, name) for jel, name in self.joint_by_el.items() if name == last]
        for jel, name in matches[:1]:
            return self.axis_owner.get(next((a for a in jel if a.tag in _AXIS_KINDS), None),
                                       (name, 0, "fixed"))
        return None

    # -- formulas ------------------------------------------------------------------
    def _read_formulas(self, km) -> None:
        doc = self.doc
        unit = doc.unit_of(km)

        def symbol(text, el):
            var = self._joint_var(text, el)
            if var is None:
                raise doc.error(UnknownReferenceError, f"formula refers to unknown joint {text!r}", el)
            jname, dof, kind = var
            joint = self.robot.joints[jname]
            name = jname if joint.dof <= 1 else f"{jname}_{dof}"
            return f"({name} / {unit!r})" if kind == "prismatic" and unit != 1.0 else name

        conv = MathMLConverter(symbol, self.robot.warn, doc.file, definition=lambda url, el: doc.url(url))
        for formula in list(km.findall("technique_common/formula")) + list(km.findall("formula")):
            self._read_formula(formula, conv, unit)

    def _read_formula(self, formula, conv: MathMLConverter, unit: float) -> None:
        doc = self.doc
        target_el = formula.find("target/param")
        if target_el is None:
            target_el = formula.find("target")
        var = self._joint_var((target_el.text or "").strip() if target_el is not None else "", formula)
        if var is None:
            raise doc.error(UnknownReferenceError, "formula <target> does not name a joint", formula)
        jname, dof, kind = var
        try:
            scale = unit if kind == "prismatic" and unit != 1.0 else None
            mimic = None
            tech = formula.find("technique[@profile='OpenRAVE']")
            if tech is not None and tech.find("equation") is not None:
                position, vel, acc = None, {}, {}
                for eq in tech.findall("equation"):
                    math_el = eq.find("math")
                    if math_el is None:
                        continue
                    etype = eq.get("type")
                    try:
                        text = conv.convert(math_el)
                    except UnknownVariableError:
                        raise
                    except ExpressionError as exc:
                        if etype == "position":
                            raise
                        # a partial beyond the engine costs only that partial (they are kept, not evaluated)
                        self.robot.warn(f"joint {jname!r}: {etype} equation not compiled ({exc}); dropped")
                        continue
                    if etype == "position":
                        position = text
                    elif etype in ("first_partial", "second_partial"):
                        src = self._joint_var(eq.get("target"), eq)
                        if src is None:
                            raise doc.error(UnknownReferenceError, f"equation target {eq.get('target')!r} is "
                                            "not a joint", eq)
                        sj = self.robot.joints[src[0]]
                        vname = src[0] if sj.dof <= 1 else f"{src[0]}_{src[1]}"
                        (vel if etype == "first_partial" else acc)[vname] = text
                    else:
                        self.robot.warn(f"formula equation type {etype!r} is not read")
                if position is not None:
                    mimic = Mimic(position=position, velocity=vel, acceleration=acc)
            if mimic is None:
                math_el = next((m for m in formula.findall("technique_common/math") if len(m)), None)
                if math_el is None:
                    self.robot.warn(f"formula for joint {jname!r} has no equation; ignored")
                    return
                mimic = Mimic(position=conv.convert(math_el))
            if scale is not None:
                mimic.position = f"(({mimic.position}) * {scale!r})"
                mimic.velocity = {k: f"(({v}) * {scale!r})" for k, v in mimic.velocity.items()}
                mimic.acceleration = {k: f"(({v}) * {scale!r})" for k, v in mimic.acceleration.items()}
            if dof >= self.robot.joints[jname].dof:
                raise doc.error(SchemaError, f"formula targets DOF {dof} of joint {jname!r}, which has "
                                f"{self.robot.joints[jname].dof}", formula)
            self.robot.joints[jname].mimic[dof] = mimic
        except UnknownVariableError:
            raise
        except ExpressionError as exc:      # a function beyond the engine: the joint stays independent
            not_compiled(self.robot, jname, exc)

    # -- scene: visual nodes, initial values, geometry, physics ---------------------------
    def _read_scene_bindings(self, body: _Body) -> None:
        doc = self.doc
        link_of_node: dict = {}
        root_link = next(iter(self.link_by_el.values()))
        kmodel_roots = {km: self.link_by_el[km.find("technique_common/link")] for km in body.kmodels}
        for iks in doc.root.findall("scene/instance_kinematics_scene"):
            for bind in iks.findall("bind_kinematics_model"):
                target = doc.value(bind, iks) if bind.find("param") is not None else None
                if target is None and bind.find("SIDREF") is not None:
                    target = doc.resolve(bind.find("SIDREF").text, bind)
                if target is not None and target.tag == "instance_kinematics_model":
                    target = doc.url(target.get("url"))
                node = doc.resolve(bind.get("node"), bind)
                if node is not None and node.tag == "instance_node":
                    node = doc.url(node.get("url"))
                if target in kmodel_roots and node is not None:
                    link_of_node[node] = kmodel_roots[target]
            for bind in iks.findall("bind_joint_axis"):
                axis = doc.value(bind.find("axis"), iks)
                if axis is None or axis not in self.axis_owner:
                    continue
                jname, dof, kind = self.axis_owner[axis]
                joint = self.robot.joints[jname]
                value = doc.value(bind.find("value"), iks)
                if isinstance(value, float) and not joint.is_mimic:
                    joint.initial[dof] = value * (np.pi / 180.0 if kind == "revolute" else doc.unit_of(axis))
                trans = doc.resolve(bind.get("target"), bind)
                if trans is not None and trans.getparent() is not None:
                    link_of_node[trans.getparent()] = joint.child
        vscene = None
        ivs = doc.root.find("scene/instance_visual_scene")
        if ivs is not None:
            vscene = doc.url(ivs.get("url"))
        if vscene is None:
            vscene = next(doc.root.iter("visual_scene"), None)
        vroots = visual_tree(doc, vscene) if vscene is not None else []
        if not link_of_node:   # no bindings: match node names to link names (OpenRAVE's fallback)
            for vn in walk(vroots):
                name = vn.el.get("name")
                if (name in self.robot.links and vn.el not in link_of_node
                        and name not in link_of_node.values()):
                    link_of_node[vn.el] = name
        node_of_link: dict[str, VNode] = {}
        for vn in walk(vroots):
            link = link_of_node.get(vn.el)
            if link is not None and link not in node_of_link:
                node_of_link[link] = vn
        if root_link in node_of_link:
            self.robot.placement = node_of_link[root_link].world.copy()
            scale = np.linalg.norm(self.robot.placement[:3, :3], axis=0)
            self.robot.placement[:3, :3] /= np.where(scale > 0, scale, 1.0)
        unbound = self._attach_geometry(vroots, link_of_node)
        if unbound:
            self.robot.warn(f"{unbound} visual-scene geometries are not under any link's node; not read")
        if len(node_of_link) < len(self.robot.links) and vroots:
            missing = [n for n in self.robot.links if n not in node_of_link]
            self.robot.warn(f"links without a visual node: {', '.join(missing[:10])}")
        self._read_physics(node_of_link, vroots)

    def _attach_geometry(self, vroots, link_of_node) -> int:
        unbound = 0
        instanced = 0                    # triangles of every instance: each is a mesh of its own downstream
        seen_links: dict[str, VNode] = {}

        def visit(vn: VNode, owner: Optional[str], owner_node: Optional[VNode]):
            nonlocal unbound, instanced
            link = link_of_node.get(vn.el)
            if link is not None and link not in seen_links:
                seen_links[link] = vn
                owner, owner_node = link, vn
            for ig in vn.el.findall("instance_geometry"):
                if owner is None:
                    unbound += 1
                    continue
                geom_el = self.doc.url(ig.get("url"))
                if geom_el is None:
                    self.robot.warn(f"instance_geometry {ig.get('url')!r} not found (external documents are "
                                    "not followed)")
                    continue
                rel = tf.inverse(owner_node.world) @ vn.world if owner_node is not vn else np.eye(4)
                scale = np.linalg.norm(rel[:3, :3], axis=0)
                if not _unit_scale(scale):
                    rel[:3, :3] /= np.where(scale > 0, scale, 1.0)
                for g in self._instantiate(geom_el, ig, rel, scale):
                    triangles = getattr(g.shape, "triangles", None)
                    n = 0 if triangles is None else len(triangles)
                    if instanced + n > MAX_INSTANCED_TRIANGLES:     # checked before it is placed
                        err = self.doc.error(WorkBudgetError, f"geometry instances hold more than "
                                             f"{MAX_INSTANCED_TRIANGLES} triangles together "
                                             "(MAX_INSTANCED_TRIANGLES: a geometry counts at each instance)",
                                             ig)
                        err.budget, err.work = "MAX_INSTANCED_TRIANGLES", instanced
                        raise err
                    instanced += n
                    self.robot.links[owner].visuals.append(g)
                    self.robot.links[owner].collisions.append(g)
            for child in vn.children:
                visit(child, owner, owner_node)

        for root in vroots:
            visit(root, None, None)
        return unbound

    def _instantiate(self, geom_el, instance, rel, scale) -> list[Geometry]:
        bindings = tuple(sorted((im.get("symbol") or "", im.get("target") or "") for im in
                                instance.findall("bind_material/technique_common/instance_material")))
        key = (geom_el.get("id") or id(geom_el), bindings)
        if key not in self.geometry_cache:
            self.geometry_cache[key] = read_geometry(self.doc, geom_el, bound_materials(self.doc, instance),
                                                     self.file, self.robot.warn, self.meshes)
        out = []
        for g in self.geometry_cache[key]:
            shape = g.shape
            if not _unit_scale(scale):
                if isinstance(shape, Mesh):
                    shape = replace(shape, scale=np.asarray(shape.scale) * scale)
                else:
                    self.robot.warn("scaled primitive geometry: scale ignored")
            out.append(Geometry(shape=shape, origin=rel @ g.origin, material=g.material, name=g.name,
                                visible=g.visible))
        return out

    def _read_physics(self, node_of_link: dict, vroots) -> None:
        doc = self.doc
        link_of_node_el = {vn.el: link for link, vn in node_of_link.items()}
        node_world = {}
        for vn in walk(vroots):
            node_world.setdefault(vn.el, vn.world)
        root = next(iter(self.link_by_el.values()))
        done = set()
        for ips in doc.root.findall("scene/instance_physics_scene"):
            pscene = doc.url(ips.get("url"))
            if pscene is None:
                continue
            for ipm in pscene.findall("instance_physics_model"):
                pmodel = doc.url(ipm.get("url"))
                if pmodel is None:
                    continue
                parent_el = doc.url(ipm.get("parent"))
                parent_world = node_world.get(parent_el)
                for irb in ipm.findall("instance_rigid_body"):
                    node_el = doc.url(irb.get("target"))
                    link = link_of_node_el.get(node_el)
                    body = doc.find_sid(pmodel, irb.get("body") or "")
                    if link is None or body is None:
                        continue
                    if parent_world is None:
                        parent_world = node_of_link[root].world if root in node_of_link else np.eye(4)
                    link_world = node_of_link[link].world
                    self._rigid_body(body, link, tf.inverse(link_world) @ parent_world)
                    done.add(link)
        for body in doc.root.iter("rigid_body"):   # no physics scene: match rigid bodies by name
            name = body.get("name")
            if name in self.robot.links and name not in done and self.robot.links[name].inertial is None:
                self._rigid_body(body, name, tf.inverse(self.pose.get(name, np.eye(4))))

    def _rigid_body(self, body, link: str, parent_in_link: np.ndarray) -> None:
        doc = self.doc
        tc = body.find("technique_common")
        if tc is None:
            return
        mass_el, frame_el, inertia_el = tc.find("mass"), tc.find("mass_frame"), tc.find("inertia")
        unit = doc.unit_of(body)
        inertial = Inertial(mass=doc.number(mass_el) if mass_el is not None else 0.0)
        frame = doc.transform(frame_el) if frame_el is not None else np.eye(4)
        inertial.origin = parent_in_link @ frame
        if inertia_el is not None:
            inertial.inertia = np.diag(doc.numbers(inertia_el, 3) * unit * unit)
        dyn = tc.find("dynamic")
        if dyn is not None and (dyn.text or "").strip().lower() in ("false", "0"):
            self.robot.links[link].static = True
        self.robot.links[link].inertial = inertial

    # -- OpenRAVE extras -----------------------------------------------------------
    def _read_extras(self, body: _Body) -> None:
        doc, robot = self.doc, self.robot
        holders = list(body.kmodels) + list(body.systems) + list(body.instances)
        iface = None
        for h in holders:
            iface = ex.interface_type(h) or iface
        if iface is not None:
            robot.extras["interface_type"] = iface
            robot.is_robot = (iface.get("type") or "").lower() != "kinbody" and (
                iface.get("type") is not None or bool(body.systems))
        else:
            robot.is_robot = bool(body.systems)
        sensors = ex.SensorLibrary(doc)
        actuators = ex.actuator_library(doc)
        manip_count = 0
        for h in holders:
            for extra, tech in ex.techniques(h, "collision"):
                ex.read_collision(tech, robot, self.link_name, robot.warn, self._bound_geometry)
            for extra, tech in ex.techniques(h, "manipulator"):
                manip_count += 1
                name = extra.get("name") or f"manipulator{manip_count}"
                m = ex.read_manipulator(doc, name, tech, self.link_name, self.joint_name, robot.warn)
                if m is not None:
                    robot.manipulators[name] = m
            for extra, tech in ex.techniques(h, "attach_sensor"):
                name = extra.get("name") or f"sensor{len(robot.sensors)}"
                origin_el = tech.find("frame_origin")
                inst = tech.find("instance_sensor")
                link = self.link_name(origin_el.get("link"), origin_el) if origin_el is not None else None
                url = (inst.get("url") or "").lstrip("#") if inst is not None else ""
                if link is None or (url and url not in sensors.sensors):
                    ref = origin_el.get("link") if origin_el is not None else None
                    robot.warn(f"attach_sensor {name!r}: link {ref!r} or sensor {url!r} not found; skipped")
                    continue
                origin = doc.transform(origin_el)
                if url:
                    robot.sensors[name] = sensors.build(name, link, origin, sensors.sensors[url])
                else:   # a bare sensor frame, as OpenRAVE keeps it
                    robot.sensors[name] = AttachedSensor(name=name, link=link, origin=origin)
            for extra, tech in ex.techniques(h, "attach_actuator"):
                name = extra.get("name") or f"actuator{len(robot.actuators)}"
                robot.actuators[name] = ex.read_actuator(doc, name, tech, actuators, self.joint_name)

    def _bound_geometry(self, bind) -> list[Geometry]:
        geom_el = self.doc.url(bind.get("url"))
        if geom_el is None:
            self.robot.warn(f"bind_instance_geometry url {bind.get('url')!r} not found")
            return []
        out = self._instantiate(geom_el, bind, np.eye(4), np.ones(3))
        mat = self.doc.url(bind.get("material"))
        if mat is not None:
            for g in out:
                g.material = material_of(self.doc, mat)
        return out


def claims(path: str | os.PathLike) -> bool:
    return True
