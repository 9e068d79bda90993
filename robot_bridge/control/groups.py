"""The trajectory controllers of a robot: which driven joints each one moves."""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Robot
from ..model.groups import group_joints


def gripper_joints(robot: Robot) -> list[str]:
    return [j for m in robot.manipulators.values() for j in m.gripper_joints]


def controller_groups(robot: Robot, driven: Sequence[str],
                      names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(name, driven joints) of each trajectory controller: the SRDF groups or manipulators ``names``; none
    named: one controller ("") of every driven joint but the manipulators' gripper joints (all of them when
    that leaves none).  A joint in two controllers, or a controller without a driven joint, is refused."""
    driven = list(driven)
    if not names:
        grippers = set(gripper_joints(robot))
        return [("", [j for j in driven if j not in grippers] or driven)]
    out = []
    for name in names:
        joints = group_joints(robot, name)
        chosen = [j for j in driven if j in joints]
        if not chosen:
            raise ValueError(f"controller {name!r}: no driven joint in group/manipulator {name!r} "
                             f"(driven: {driven})")
        out.append((name, chosen))
    seen: dict[str, str] = {}
    for name, joints in out:
        for j in joints:
            if j in seen:
                raise ValueError(f"joint {j!r} is in controllers {seen[j]!r} and {name!r}; each joint "
                                 "belongs to one controller")
            seen[j] = name
    return out
