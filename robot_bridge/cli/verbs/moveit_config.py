"""``robot-bridge moveit-config ROBOT [--srdf S] -o DIR [--search-path DIR]``."""

from __future__ import annotations

import argparse

HELP = ("Write a MoveIt configuration for the bridge (URDF, SRDF, moveit_controllers.yaml, "
        "joint_limits.yaml, kinematics.yaml, controller_node.yaml). Without an SRDF the planning groups are "
        "guessed (OpenRAVE manipulators, else the longest serial chain) and said; a robot with nothing to "
        "plan for is an error (exit 2).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("robot", help="robot description (OpenRAVE XML, COLLADA, URDF)")
    parser.add_argument("--srdf", metavar="S", help="SRDF of the robot (groups, states); default: generated "
                        "from the manipulators")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write")
    parser.add_argument("--search-path", action="append", default=None, metavar="DIR",
                        help="data search folder for includes and meshes (repeatable)")


def main(args) -> int:
    from ...formats import load
    from ...formats.moveit_config import write_moveit_config
    from ...formats.srdf import attach_semantics, read_srdf

    robot = load(args.robot, search_path=args.search_path)
    if args.srdf:
        attach_semantics(robot, read_srdf(args.srdf, robot))
    config = write_moveit_config(robot, args.output, args.robot, search_path=args.search_path or ())
    given = robot.semantics is not None and bool(robot.semantics.groups)
    for line in config.guesses:
        print(f"guessed ({'no SRDF group drives a joint of its own' if given else 'no SRDF groups'}): {line}")
    for key, path in config.files.items():
        print(f"wrote {path} ({key})")
    for name, entry in config.controllers.items():
        print(f"controller {name}: {entry['type']} on /{name}/{entry['action_ns']} for "
              f"{', '.join(entry['joints'])}")
    for line in config.notes:
        print(f"note: {line}")
    for line in robot.warnings:
        print(f"warning: {line}")
    print(f"run the bridge with: ros2 run robot_bridge controller_node --ros-args --params-file "
          f"{config.files['controller_node']}")
    return 0
