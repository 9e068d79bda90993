"""Format-independent checks on a freshly read model, run by :func:`robot_bridge.formats.load`.

Whatever the reader, a model that reaches a node has finite numbers, rigid joint transforms,
non-zero joint axes and mimic formulas that name existing joints without cycles.  A formula the
expression engine cannot compile (a function beyond it, a syntax error) makes its joint independent
with a warning instead: one unreadable formula never loses the robot.  Each failure
is a typed DescriptionError naming the file and the element (``joint[@name='j2']/origin``).
"""

from __future__ import annotations

import numpy as np

from ..errors import DescriptionError, SchemaError
from ..model import Robot
from ..model.transform import is_rigid

RIGID_TOL = 1e-3      # rounded rotation matrices in real files are off by ~1e-4 at most


def _finite(value) -> bool:
    try:
        return bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):
        return False


def _fail(robot: Robot, element: str, message: str) -> SchemaError:
    return SchemaError(message, file=robot.source, element=element)


def validate(robot: Robot) -> Robot:
    """Raise a DescriptionError subclass for the first invalid value; return ``robot``."""
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
    _check_mimic(robot)
    for body in robot.environment.values():
        if body is not robot:
            validate(body)
    return robot


def _check_mimic(robot: Robot) -> None:
    if not any(j.is_mimic for j in robot.joints.values()) and not robot.extras.get("closed_loop_joints"):
        return
    from ..kinematics.mimic import MimicEvaluator, drop_uncompilable_formulas

    try:
        drop_uncompilable_formulas(robot)
        MimicEvaluator(robot)
    except DescriptionError as exc:
        raise exc.with_location(file=robot.source) from None
