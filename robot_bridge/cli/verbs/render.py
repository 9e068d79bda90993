"""``robot-bridge render FILE -o robot.png [--joints name=value ...]``: a picture of a robot and its world.

``--urdf FILE`` draws a robot_description as the description node published it (a URDF, or the output
of ``ros2 topic echo --once /robot_description``): mesh URIs as written, i.e. what rviz on this host shows."""

from __future__ import annotations

import argparse
import sys

HELP = "Draw a robot (and its environment) at given joint values into a PNG with matplotlib."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", help="robot or environment file (.robot.xml, .env.xml, .dae, "
                        ".zae, .urdf)")
    source.add_argument("--urdf", metavar="FILE", help="a published robot_description: URDF, or saved with "
                        "'ros2 topic echo --once /robot_description > FILE'")
    parser.add_argument("-o", "--output", default="robot.png", help="PNG to write (default: robot.png)")
    parser.add_argument("--joints", nargs="+", default=[], metavar="NAME=VALUE",
                        help="joint values (multi-DOF: NAME=V1,V2,...); other joints keep their initial "
                             "values")
    parser.add_argument("--search-path", action="append", default=[], metavar="DIR",
                        help="directory searched for included files and meshes (repeatable)")
    parser.add_argument("--view", nargs=2, type=float, metavar=("ELEVATION", "AZIMUTH"),
                        help="view direction in degrees (default: the environment's <camtrans>, else 25 -50)")
    parser.add_argument("--top", action="store_true", help="add a view from above")


def main(args: argparse.Namespace) -> int:
    from ...formats import load
    from ...render import NothingToDraw, parse_joint_values, render
    from ...sim import Scene

    if args.urdf:
        from ...formats.urdf import read_published

        from ...render import visuals_only

        robot = visuals_only(read_published(args.urdf, search_path=args.search_path or None))
    else:
        robot = load(args.file, search_path=args.search_path or None)
    try:
        joints = parse_joint_values(args.joints, robot)
    except ValueError as err:
        print(f"robot-bridge render: error: {err}", file=sys.stderr)
        return 2
    scene = Scene(robot, backend="numpy")
    for warning in robot.warnings + scene.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    try:
        path = render(robot, args.output, joints, view=tuple(args.view) if args.view else None,
                      top_view=args.top, scene=scene)
    except NothingToDraw as err:
        print(f"robot-bridge render: error: {err}", file=sys.stderr)
        return 2
    print(f"{path}: {robot.name}, {len(robot.links)} links, {len(robot.environment)} environment bodies")
    return 0
