"""``robot-bridge inspect FILE``: print the link tree, joints, limits, manipulators and sensors."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...model import Robot

HELP = "Print a robot description's link tree, joints (type, DOF, limits), manipulators and sensors."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="robot description (OpenRAVE XML, COLLADA, URDF, SRDF)")
    parser.add_argument("--search-path", action="append", default=None, metavar="DIR",
                        help="data search folder for includes and meshes (repeatable; $OPENRAVE_DATA is "
                             "searched after these)")
    parser.add_argument("--warnings", action="store_true", help="also list every warning")


def _num(v: float) -> str:
    return f"{v:.6g}"


def _limits(joint) -> str:
    if joint.dof == 0:
        return ""
    if joint.type == "continuous":
        return " continuous"
    unit = "m" if joint.type == "prismatic" else "rad"
    parts = [f"[{_num(lo)}, {_num(hi)}]" for lo, hi in zip(joint.lower, joint.upper)]
    text = f" limits {' '.join(parts)} {unit}"
    if unit == "rad":
        text += " (" + " ".join(f"[{_num(math.degrees(lo))}, {_num(math.degrees(hi))}]"
                                for lo, hi in zip(joint.lower, joint.upper)) + " deg)"
    return text + f" vel {' '.join(_num(v) for v in joint.velocity)}"


def _joint_line(joint) -> str:
    flags = [f for f, on in (("passive", joint.passive), ("mimic", joint.is_mimic),
                             ("circular", any(joint.circular) and joint.type != "continuous")) if on]
    text = f"{joint.name} [{joint.type}, {joint.dof} DOF{', ' + ', '.join(flags) if flags else ''}]"
    text += _limits(joint)
    if joint.is_mimic:
        text += " = " + "; ".join(m.position for m in joint.mimic if m is not None)
    return text


def format_robot(robot: Robot) -> list[str]:
    import numpy as np

    lines = [f"{'robot' if robot.is_robot else 'kinbody'} {robot.name}: {len(robot.links)} links, "
             f"{len(robot.joints)} joints, {robot.dof} DOF ({len(robot.active_joints)} active joints)",
             f"source: {robot.source}"]
    if not np.allclose(robot.placement, np.eye(4)):
        lines.append(f"placement: xyz {' '.join(_num(v) for v in robot.placement[:3, 3])}")

    def walk(link: str, depth: int) -> None:
        lines.append("  " * depth + f"- {link}")
        for joint in robot.child_joints(link):
            lines.append("  " * (depth + 1) + f"via {_joint_line(joint)}")
            walk(joint.child, depth + 1)

    lines.append("tree:")
    for root in robot.root_links():
        walk(root, 1)
    loops = robot.extras.get("closed_loop_joints", {})
    if loops:
        lines.append("loop-closing joints: " + ", ".join(_joint_line(j) for j in loops.values()))
    lines.append(f"manipulators ({len(robot.manipulators)}):")
    for m in robot.manipulators.values():
        lines.append(f"  {m.name}: base {m.base} -> effector {m.effector}, tool xyz "
                     f"{' '.join(_num(v) for v in m.tool[:3, 3])}, "
                     f"direction {' '.join(_num(v) for v in m.direction)}"
                     + (f", gripper {' '.join(m.gripper_joints)}" if m.gripper_joints else "")
                     + (f", iksolver {m.ik_solver}" if m.ik_solver else ""))
    lines.append(f"sensors ({len(robot.sensors)}):")
    for s in robot.sensors.values():
        params = ", ".join(f"{k}={_num(v) if isinstance(v, float) else v}" for k, v in s.params.items())
        lines.append(f"  {s.name}: {s.type} ({s.interface}) on {s.link}" + (f": {params}" if params else ""))
    if robot.environment:
        lines.append(f"environment bodies ({len(robot.environment)}): {', '.join(robot.environment)}")
    return lines


def main(args) -> int:
    from ...formats import load

    robot = load(args.file, search_path=args.search_path)
    lines = format_robot(robot)
    lines.append(f"warnings: {len(robot.warnings)}")
    if args.warnings:
        lines += [f"  {w}" for w in robot.warnings]
    print("\n".join(lines))
    return 0
