"""Turn a parsed OpenRAVE body into a model Robot: one link tree rooted at the first link.

Tree rules (as OpenRAVE's ``KinBody::_ComputeInternalInformation``):
- the root is the first declared link; a breadth-first walk over the joints in
  declaration order decides each joint's parent (the body closer to the root).
  A joint whose bodies are listed child-first is flipped: parent/child swap,
  the relative pose is inverted and the axes negated, so q keeps its meaning.
- ``robot.joints`` keeps declaration order (OpenRAVE's DOF order).
- links reached by no joint are rigidly attached to the root by a generated
  fixed joint named ``<link>__fixed`` (``extras["generated"] = True``; a ``_``
  is appended while the name collides).
- a joint whose two bodies are already in the tree closes a loop: it is left
  out of ``robot.joints``, kept in ``robot.extras["closed_loop_joints"]``
  (name -> Joint) and reported with ``robot.warn``.

Joint conventions: the joint frame sits on the axis at the point closest to the
child link origin, with the child link's orientation, so ``child_offset`` is a
pure translation (identity when the child origin lies on the axis).  Types:
hinge -> revolute (``continuous`` when circular and no limits were given),
slider -> prismatic, universal/hinge2/spherical as is; a passive (``enable=
"false"``), non-mimic joint whose limits are all 0 is a rigid "dummy" joint
upstream and becomes ``fixed`` (``extras["openrave_type"]`` keeps the type).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import DescriptionError, SchemaError, UnknownReferenceError
from ...kinematics.fk import KinematicModel, joint_motion
from ...kinematics.mimic import drop_uncompilable_formulas
from ...model import Joint, Link, Robot
from ...model import transform as tf
from .common import Notes
from .state import (DEFAULT_MAXACCEL, DEFAULT_MAXTORQUE, DEFAULT_MAXVEL, DEFAULT_RESOLUTION, BodyState,
                    JointState)

MODEL_TYPE = {"hinge": "revolute", "slider": "prismatic", "universal": "universal", "hinge2": "hinge2",
              "spherical": "spherical"}


def _point(t: np.ndarray, p: np.ndarray) -> np.ndarray:
    return t[:3, :3] @ p + t[:3, 3]


def _model_type(js: JointState) -> str:
    is_mimic = any(m is not None for m in js.mimic)
    if js.passive and not is_mimic and js.explicit_limits and not np.any(js.lower) and not np.any(js.upper):
        return "fixed"
    if js.type == "hinge" and js.circular and not js.explicit_limits:
        return "continuous"
    return MODEL_TYPE[js.type]


def make_joint(js: JointState, parent: str, child: str, flipped: bool, notes: Notes) -> Joint:
    """Model joint from a frozen OpenRAVE joint (see module docstring)."""
    inv0 = tf.inverse(js.T0)
    t01 = inv0 @ js.T1
    anchor = _point(inv0, js.anchor)
    axes = [js.T0[:3, :3].T @ a for a in js.axes]
    if flipped:
        t10 = tf.inverse(t01)
        t_pc, anchor, axes = t10, _point(t10, anchor), [-(t10[:3, :3] @ a) for a in axes]
        if js.dof > 1:
            notes.warn(f"joint {js.name!r}: {js.type} joint listed child-first; its axis order is kept, "
                       "which only approximates the reversed motion")
    else:
        t_pc = t01
    jtype = _model_type(js)
    dof = {"fixed": 0}.get(jtype, js.dof)
    rot_c, c = t_pc[:3, :3], t_pc[:3, 3]

    def per_dof(value: Optional[np.ndarray], default: float) -> np.ndarray:
        return np.full(dof, default) if value is None else np.asarray(value, dtype=float)[:dof]

    extras = dict(js.extras)
    extras["openrave_type"] = js.type
    if flipped:
        extras["flipped"] = True
    if jtype == "fixed":
        return Joint(name=js.name, type="fixed", parent=parent, child=child, origin=t_pc, passive=js.passive,
                     extras=extras)
    if jtype in ("revolute", "continuous"):
        u = axes[0]
        p = anchor + np.dot(c - anchor, u) * u
    elif jtype == "prismatic":
        p = c
    else:
        p = anchor
    joint = Joint(
        name=js.name, type=jtype, parent=parent, child=child, origin=tf.make(rot_c, p),
        axes=[rot_c.T @ a for a in axes], child_offset=tf.translation(rot_c.T @ (c - p)),
        lower=per_dof(js.lower, 0.0), upper=per_dof(js.upper, 0.0),
        velocity=per_dof(js.velocity, DEFAULT_MAXVEL),
        acceleration=per_dof(js.acceleration, DEFAULT_MAXACCEL),
        effort=per_dof(js.effort, DEFAULT_MAXTORQUE), weight=per_dof(js.weight, 1.0),
        resolution=per_dof(js.resolution, DEFAULT_RESOLUTION), initial=per_dof(js.initial, 0.0),
        offset=per_dof(js.offset, 0.0), circular=[js.circular or jtype == "continuous"] * dof,
        passive=js.passive, mimic=list(js.mimic), extras=extras)
    if js.pose_at_initial and np.any(joint.initial):   # the file draws q = initial: move q = 0 back
        joint.origin = joint.origin @ tf.inverse(joint_motion(joint, joint.initial))
    return joint


def _unique(name: str, taken) -> str:
    while name in taken:
        name += "_"
    return name


def _repeated(names) -> list:
    """The names that occur more than once, sorted (one pass: a ``list.count`` per name was quadratic)."""
    seen: set = set()
    repeated = set()
    for n in names:
        if n in seen:
            repeated.add(n)
        seen.add(n)
    return sorted(repeated)


def build_robot(body: BodyState, notes: Notes, source: Path) -> Robot:
    if not body.links:
        raise SchemaError(f"{'robot' if body.is_robot else 'kinbody'} {body.name or ''!s} has no links",
                          file=str(source))
    dupes = _repeated(link.name for link in body.links)
    if dupes:
        raise SchemaError(f"duplicate link names: {', '.join(dupes)}", file=str(source))
    dupes = _repeated(j.name for j in body.joints)
    if dupes:
        raise SchemaError(f"duplicate joint names: {', '.join(dupes)}", file=str(source))
    robot = Robot(name=body.name or source.name.split(".")[0], is_robot=body.is_robot, source=str(source))
    root = body.links[0]
    robot.placement = root.T.copy()
    for link in body.links:
        robot.links[link.name] = Link(name=link.name, visuals=link.visuals, collisions=link.collisions,
                                      inertial=link.inertial, static=link.static, extras=link.extras)
    touching: dict[int, list[JointState]] = {}
    for js in body.joints:
        touching.setdefault(id(js.body0), []).append(js)
        touching.setdefault(id(js.body1), []).append(js)
    visited = {id(root)}
    handled: set[int] = set()
    loops: dict[str, Joint] = {}
    queue = deque([root])
    pending = list(body.links[1:])
    while True:
        while queue:
            link = queue.popleft()
            for js in touching.get(id(link), ()):
                if id(js) in handled:
                    continue
                handled.add(id(js))
                flipped = js.body1 is link
                other = js.body0 if flipped else js.body1
                joint = make_joint(js, link.name, other.name, flipped, notes)
                if id(other) in visited:
                    loops[js.name] = joint
                    continue
                visited.add(id(other))
                robot.joints[js.name] = joint
                queue.append(other)
        rest = [link for link in pending if id(link) not in visited]
        if not rest:
            break
        link = rest[0]
        name = _unique(f"{link.name}__fixed", set(robot.joints) | {j.name for j in body.joints})
        robot.joints[name] = Joint(name=name, type="fixed", parent=root.name, child=link.name,
                                   origin=tf.inverse(root.T) @ link.T, extras={"generated": True})
        visited.add(id(link))
        queue.append(link)
    order = {js.name: i for i, js in enumerate(body.joints)}     # declaration order, generated ones last
    robot.joints = dict(sorted(robot.joints.items(), key=lambda item: order.get(item[0], len(order))))
    if loops:
        robot.extras["closed_loop_joints"] = loops
        robot.warn(f"joints close kinematic loops and are kept out of the tree: {', '.join(loops)}")
    _set_jointvalues(body, robot, notes)
    _manipulators_and_sensors(body, robot, notes, source)
    for a, b in body.adjacent:
        if a in robot.links and b in robot.links:
            robot.collision_ignore.append((a, b))
        else:
            notes.warn(f"<adjacent> {a} {b}: unknown link; pair ignored")
    robot.extras.update(body.extras)
    for w in notes.warnings:
        robot.warn(w)
    try:
        drop_uncompilable_formulas(robot)            # a formula beyond the engine: joint independent
        robot.__dict__["_kinematic_model"] = KinematicModel(robot)   # validates mimic formulas now
    except DescriptionError as exc:
        raise exc.with_location(file=str(source)) from None
    return robot


def _set_jointvalues(body: BodyState, robot: Robot, notes: Notes) -> None:
    """``<jointvalues>``: DOF values of the active joints in declaration order -> ``initial``."""
    if body.jointvalues is None:
        return
    values = list(body.jointvalues)
    loops = robot.extras.get("closed_loop_joints", {})
    active = [j for j in body.joints if not j.passive]
    need = sum(j.dof for j in active)
    if len(values) != need:
        notes.warn(f"<jointvalues> has {len(values)} values for {need} DOFs; extra/missing ones ignored")
    for js in active:
        joint = robot.joints.get(js.name) or loops.get(js.name)
        take, values = values[:js.dof], values[js.dof:]
        if joint is not None and joint.dof and len(take) == joint.dof:
            joint.initial = np.array(take, dtype=float)


def _manipulators_and_sensors(body: BodyState, robot: Robot, notes: Notes, source: Path) -> None:
    for m in body.manipulators:
        for what, link in (("base", m.base), ("effector", m.effector)):
            if link not in robot.links:
                raise UnknownReferenceError(f"manipulator {m.name!r}: unknown {what} link {link!r}",
                                            file=str(source), element=f"manipulator[@name='{m.name}']")
        missing = [g for g in m.gripper_joints if g not in robot.joints]
        if missing:
            notes.warn(f"manipulator {m.name!r}: unknown gripper joints {', '.join(missing)}")
        if m.name in robot.manipulators:
            notes.warn(f"manipulator {m.name!r} declared twice; the first one is kept")
            continue
        robot.manipulators[m.name] = m
    root = body.links[0].name
    for s in body.sensors:
        state = body.sensor_links.get(id(s))
        if state is not None:
            s.link = state.name
        elif not s.link:
            s.link = root
        if s.link not in robot.links:
            raise UnknownReferenceError(f"attached sensor {s.name!r}: unknown link {s.link!r}",
                                        file=str(source),
                                        element=f"attachedsensor[@name='{s.name}']")
        if s.type == "other" and s.interface is None:
            notes.warn(f"attached sensor {s.name!r} has no <sensor> definition")
        robot.sensors[s.name] = s
