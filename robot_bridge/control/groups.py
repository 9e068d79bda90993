"""The trajectory controllers of a robot: which driven joints each one moves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import Robot
from ..model.groups import group_joints


def gripper_joints(robot: Robot) -> list[str]:
    return [j for m in robot.manipulators.values() for j in m.gripper_joints]


def controller_groups(robot: Robot, driven: Sequence[str],
                      names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(name, driven joints) of each trajectory controller: the SRDF groups or manipulators ``names``; none
    named: one controller ("") of every driven joint but the grippers' (manipulators' gripper joints and the
    SRDF grippers of :func:`gripper_specs`; all of them when that leaves none).  A joint in two controllers,
    or a controller without a driven joint, is refused."""
    driven = list(driven)
    if not names:
        grippers = set(gripper_joints(robot))
        grippers |= {j for spec in gripper_specs(robot, driven)[0] for j in spec.joints}
        return [("", [j for j in driven if j not in grippers] or driven)]
    out = []
    for name in names:
        joints = group_joints(robot, name)
        chosen = [j for j in driven if j in joints]
        if not chosen:
            more = f" and {len(driven) - 10} more" if len(driven) > 10 else ""
            raise ValueError(f"controller {name!r}: no driven joint in group/manipulator {name!r} "
                             f"(driven: {', '.join(driven[:10])}{more})")
        out.append((name, chosen))
    seen: dict[str, str] = {}
    for name, joints in out:
        for j in joints:
            if j in seen:
                raise ValueError(f"joint {j!r} is in controllers {seen[j]!r} and {name!r}; each joint "
                                 "belongs to one controller")
            seen[j] = name
    return out


@dataclass
class GripperSpec:
    """One GripperCommand server: the joint it drives and where it was told."""

    name: str                   # manipulator, or SRDF end effector group / gripper group
    joint: str                  # the driven joint commanded (the first driven one of the gripper)
    joints: list[str]           # every driven joint of the gripper
    closing: float = -1.0       # sign of the closing direction of ``joint``
    source: str = "manipulator"
    group: str = ""             # its SRDF group: ``<manipulator>_gripper`` (as generated) or the SRDF's


def gripper_specs(robot: Robot, driven: Sequence[str]) -> tuple[list[GripperSpec], list[str]]:
    """The grippers of ``robot`` among the ``driven`` joints, and notes on grippers that cannot be served.

    A gripper is an OpenRAVE manipulator's gripper joints, else an SRDF end effector's group or an SRDF
    group named like a gripper (``gripper``/``hand`` in its name) that is neither a chain nor made of
    subgroups; joints of chain groups (arms) are never a gripper's.  Its first driven joint is commanded
    (GripperCommand moves one joint, as gripper_action_controller)."""
    driven = list(driven)
    specs: list[GripperSpec] = []
    notes: list[str] = []
    taken: set[str] = set()
    for m in robot.manipulators.values():
        if not m.gripper_joints:
            continue
        joints = [j for j in m.gripper_joints if j in driven]
        if m.gripper_joints[0] not in driven:
            notes.append(f"manipulator {m.name!r}: gripper joint {m.gripper_joints[0]!r} is not driven; "
                         "no gripper_cmd")
            continue
        closing = float(np.sign(m.closing_directions[0])) if m.closing_directions else -1.0
        specs.append(GripperSpec(m.name, m.gripper_joints[0], joints, closing or -1.0,
                                 group=f"{m.name}_gripper"))
        taken |= set(m.gripper_joints)
    semantics = robot.semantics
    if semantics is not None:
        candidates = [ee.group for ee in semantics.end_effectors.values()]
        candidates += [name for name, g in semantics.groups.items() if not g.chains and not g.subgroups
                       and any(w in name.lower() for w in ("gripper", "hand"))]
        arms = set()
        for name, g in semantics.groups.items():
            if g.chains:
                try:
                    arms |= group_joints(robot, name)
                except ValueError:
                    pass
        for name in dict.fromkeys(candidates):
            try:
                members = group_joints(robot, name)
            except ValueError as exc:
                notes.append(f"end effector group {name!r}: {exc}")
                continue
            joints = [j for j in driven if j in members and j not in taken and j not in arms]
            if not joints:
                if not members & (taken | arms):
                    notes.append(f"gripper group {name!r} has no driven joint: no gripper_cmd")
                continue
            if len(joints) > 1:
                notes.append(f"gripper group {name!r} has {len(joints)} driven joints ({', '.join(joints)}): "
                             f"gripper_cmd commands {joints[0]!r} only (GripperCommand moves one joint)")
            specs.append(GripperSpec(name, joints[0], joints, -1.0, "srdf", name))
            taken |= set(joints)
    return specs, notes


def gripper_prefix(spec: GripperSpec, specs: Sequence[GripperSpec]) -> str:
    """The node-relative namespace of a gripper's ``gripper_cmd``: ``''`` for a single gripper, else its
    group (``controller_node/<group>/gripper_cmd``; the manipulator's own name is its arm controller's)."""
    return "" if len(specs) == 1 else f"{spec.group}/"
