"""Format-independent checks on a freshly read model, run by :func:`robot_bridge.formats.load`.

Whatever the reader, a model that reaches a node has finite numbers, rigid joint transforms,
non-zero joint axes and mimic formulas that name existing joints without cycles.  Rotations within
RIGID_TOL of orthonormal are replaced by the nearest rotation (warned when off by more than 1e-6).
A formula the expression engine cannot compile (a function beyond it, a syntax error) makes its
joint independent with a warning instead: one unreadable formula never loses the robot.  Each failure
is a typed DescriptionError naming the file and the element (``joint[@name='j2']/origin``).
"""

from __future__ import annotations

import numpy as np

from ..errors import DescriptionError, SchemaError
from ..model import Robot
from ..model.transform import is_rigid, rigid_mask

RIGID_TOL = 1e-3      # rounded rotation matrices in real files are off by ~1e-4 at most
ORTHO_WARN_TOL = 1e-6  # rotations further than this from orthonormal are reported when repaired
_EYE3 = np.eye(3)
_LAST_ROW = np.array([0.0, 0.0, 0.0, 1.0])


def _finite(value) -> bool:
    try:
        return bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):
        return False


def _fail(robot: Robot, element: str, message: str) -> SchemaError:
    return SchemaError(message, file=robot.source, element=element)


def _labelled_transforms(robot: Robot) -> list:
    """(matrix, what, name) of every transform of the model :func:`_orthonormalize_all` repairs, in
    the order of :func:`_transforms` (the first label of a matrix listed twice is the one used)."""
    out = [(robot.placement, "robot {!r} placement", robot.name)]
    for j in robot.joints.values():
        out += [(j.origin, "joint {!r} origin", j.name), (j.child_offset, "joint {!r} child offset", j.name)]
    for link in robot.links.values():
        out += [(g.origin, "link {!r} visual origin", link.name) for g in link.visuals]
        out += [(g.origin, "link {!r} collision origin", link.name) for g in link.collisions]
        if link.inertial is not None:
            out.append((link.inertial.origin, "link {!r} inertial origin", link.name))
    out += [(s.origin, "sensor {!r} origin", s.name) for s in robot.sensors.values()]
    out += [(m.tool, "manipulator {!r} tool frame", m.name) for m in robot.manipulators.values()]
    return out


def _transforms(robot: Robot) -> list:
    """The matrices of :func:`_labelled_transforms` in the same order, without their labels (the common
    case needs none, and building ~400 labels cost a fifth of a PR2 validation); keep the two alike."""
    out = [robot.placement]
    add = out.append
    for j in robot.joints.values():
        add(j.origin)
        add(j.child_offset)
    for link in robot.links.values():
        for g in link.visuals:
            add(g.origin)
        for g in link.collisions:
            add(g.origin)
        if link.inertial is not None:
            add(link.inertial.origin)
    out += [s.origin for s in robot.sensors.values()]
    out += [m.tool for m in robot.manipulators.values()]
    return out


def _orthonormalize_all(robot: Robot) -> bool:
    """Replace the rotation of every nearly rigid transform of the model (within RIGID_TOL) in place by
    the nearest rotation (polar decomposition), so FK, TF and the exported URDF use the same exact
    rotation; warn when it was off by more than ORTHO_WARN_TOL (CATIA and hand-written matrices carry few
    digits).  One vectorised pass: the checks and the decompositions of all transforms at once.
    Returns True when every transform is a (4, 4) float array and a finite rigid transform (after the
    repair): then :func:`_all_valid` need not check them again."""
    mats = _transforms(robot)
    plain = (all(type(t) is np.ndarray and t.shape == (4, 4) and t.dtype.kind == "f" for t in mats)
             and len(set(map(id, mats))) == len(mats))
    if plain:
        chosen = mats               # the common case, checked by whole-list passes
    else:
        chosen, done = [], set()
        for t in mats:
            if isinstance(t, np.ndarray) and t.shape == (4, 4) and t.dtype.kind == "f" and id(t) not in done:
                done.add(id(t))     # a geometry is often both a visual and a collision: repaired once
                chosen.append(t)
    if not chosen:
        return plain
    stack = np.array(chosen)        # all (4, 4) floats: as np.stack, faster
    rot = stack[:, :3, :3]
    identity = (rot == _EYE3).all(axis=(1, 2))
    todo = np.flatnonzero(~identity)                  # identities need no repair
    rigid = rigid_mask(stack[todo], RIGID_TOL)
    todo = todo[rigid]
    # an identity rotation with finite numbers and the exact last row is rigid; a repaired rotation stays so
    fixed = stack[identity]
    all_rigid = (plain and bool(rigid.all()) and bool(np.isfinite(fixed).all())
                 and bool((fixed[:, 3] == _LAST_ROW).all()))
    if not todo.size:
        return all_rigid            # identities (the most common rotation) and non-rotations only
    u, _, vt = np.linalg.svd(rot[todo])
    nearest = u @ vt
    off = np.abs(rot[todo] - nearest).max(axis=(1, 2))
    changed = False
    labels = None
    for k, i in enumerate(todo.tolist()):
        if off[k] == 0.0:
            continue
        t = chosen[i]
        if off[k] > ORTHO_WARN_TOL:
            if labels is None:      # what each matrix is, named only for a warning
                labels = {}
                for m, what, name in _labelled_transforms(robot):
                    labels.setdefault(id(m), (what, name))
            what, name = labels[id(t)]
            robot.warn(f"{what.format(name)}: rotation is not orthonormal (off by {off[k]:.2g}); "
                       "orthonormalized")
        t[:3, :3] = nearest[k]
        changed = True
    if changed:
        robot.__dict__.pop("_kinematic_model", None)      # built from the matrices before the repair
    return all_rigid


def _all_valid(robot: Robot, transforms_rigid: bool = False) -> bool:
    """True when every check of :func:`validate` on this robot's own values passes (vectorised); False
    when one may fail: then the element-by-element checks run and name the first failure.
    ``transforms_rigid``: :func:`_orthonormalize_all` found every transform rigid (and finite)."""
    try:
        joints = list(robot.joints.values())
        if not transforms_rigid:
            rigid = [robot.placement, *(s.origin for s in robot.sensors.values())]
            rigid += [t for j in joints for t in (j.origin, j.child_offset)]
            rigid = np.array(rigid, dtype=float)
            if rigid.shape[1:] != (4, 4) or not rigid_mask(rigid, RIGID_TOL).all():
                return False
        axes = [a for j in joints for a in j.axes[:j.dof]]
        if axes:
            axes = np.array(axes, dtype=float).reshape(len(axes), -1)
            if not (np.isfinite(axes).all() and (np.linalg.norm(axes, axis=1) >= 1e-12).all()):
                return False
        # one array per kind; anything of another shape or type raises here and the element checks decide
        limits = [getattr(j, a) for j in joints for a in ("lower", "upper", "velocity", "effort", "initial",
                                                         "offset")]
        if limits and np.isnan(np.concatenate(limits).astype(float, copy=False)).any():
            return False
        links = robot.links.values()
        inertials = [link.inertial for link in links if link.inertial is not None]
        checked = []
        if not transforms_rigid:
            origins = [g.origin for link in links for g in (*link.visuals, *link.collisions)]
            origins += [i.origin for i in inertials]
            checked = [np.array(origins, dtype=float).reshape(len(origins), 16)] if origins else []
        if inertials:
            checked += [np.array([i.mass for i in inertials], dtype=float).reshape(-1),
                        np.array([i.inertia for i in inertials], dtype=float).reshape(len(inertials), 9)]
        return all(bool(np.isfinite(a).all()) for a in checked)
    except (TypeError, ValueError):
        return False


def validate(robot: Robot) -> Robot:
    """Raise a DescriptionError subclass for the first invalid value; return ``robot``."""
    if not _all_valid(robot, _orthonormalize_all(robot)):
        _check_values(robot)
    _check_mimic(robot)
    for body in robot.environment.values():
        if body is not robot:
            validate(body)
    return robot


def _check_values(robot: Robot) -> None:
    """The checks of :func:`validate` element by element: raise for the first invalid value."""
    if not is_rigid(robot.placement, RIGID_TOL):
        raise _fail(robot, f"robot[@name='{robot.name}']", "placement is not a finite rigid transform")
    for j in robot.joints.values():
        where = f"joint[@name='{j.name}']"
        for attr in ("origin", "child_offset"):
            if not is_rigid(getattr(j, attr), RIGID_TOL):
                raise _fail(robot, f"{where}/{attr}", f"joint {j.name!r}: {attr} is not a finite rigid "
                            "transform (non-finite numbers or a non-orthonormal rotation)")
        for i, axis in enumerate(j.axes[:j.dof]):
            if not _finite(axis) or np.linalg.norm(axis) < 1e-12:
                raise _fail(robot, f"{where}/axis", f"joint {j.name!r}: axis {i} is zero or not finite")
        for attr in ("lower", "upper", "velocity", "effort", "initial", "offset"):
            if np.any(np.isnan(np.asarray(getattr(j, attr), dtype=float))):
                raise _fail(robot, f"{where}/{attr}", f"joint {j.name!r}: {attr} is NaN")
    for link in robot.links.values():
        for kind, geoms in (("visual", link.visuals), ("collision", link.collisions)):
            for g in geoms:
                if not _finite(g.origin):
                    raise _fail(robot, f"link[@name='{link.name}']/{kind}",
                                f"link {link.name!r}: {kind} origin has non-finite numbers")
        if link.inertial is not None and not (_finite(link.inertial.origin) and _finite(link.inertial.mass)
                                              and _finite(link.inertial.inertia)):
            raise _fail(robot, f"link[@name='{link.name}']/inertial",
                        f"link {link.name!r}: inertial has non-finite numbers")
    for s in robot.sensors.values():
        if not is_rigid(s.origin, RIGID_TOL):
            raise _fail(robot, f"sensor[@name='{s.name}']",
                        f"sensor {s.name!r}: origin is not a finite rigid transform")


def _check_mimic(robot: Robot) -> None:
    if not any(j.is_mimic for j in robot.joints.values()) and not robot.extras.get("closed_loop_joints"):
        return
    from ..kinematics.mimic import MimicEvaluator, drop_uncompilable_formulas

    try:
        MimicEvaluator(robot, drop_uncompilable_formulas(robot))   # each formula compiled once
    except DescriptionError as exc:
        raise exc.with_location(file=robot.source) from None
