"""``robot-bridge convert IN -o OUT.urdf [--srdf OUT.srdf] [--mesh-dir DIR] [--search-path DIR]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_USAGE = 2
HELP = "Convert a robot description (OpenRAVE XML, COLLADA, URDF) to URDF and, optionally, SRDF."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="robot description to convert")
    parser.add_argument("-o", "--output", required=True, help="URDF file to write")
    parser.add_argument("--srdf", metavar="OUT.srdf", help="also write the semantics (groups, end effectors, "
                        "disabled collisions, initial state, hpp handles/grippers) as SRDF")
    parser.add_argument("--mesh-dir", metavar="DIR", help="folder for meshes converted to STL "
                        "(default: <output stem>_meshes beside the URDF)")
    parser.add_argument("--search-path", action="append", default=None, metavar="DIR",
                        help="data search folder for includes and meshes (repeatable; $OPENRAVE_DATA is "
                             "searched after these)")


def main(args) -> int:
    from ...formats import load
    from ...formats.srdf import moveit_semantics, write_srdf
    from ...formats.urdf import write_urdf

    output = Path(args.output)
    if output.suffix.lower() != ".urdf":
        print(f"robot-bridge convert: error: -o {args.output}: the output is URDF, name it *.urdf (use "
              "--srdf for the semantics)", file=sys.stderr)
        return EXIT_USAGE
    robot = load(args.input, search_path=args.search_path)
    output.parent.mkdir(parents=True, exist_ok=True)
    report = write_urdf(robot, output, mesh_dir=args.mesh_dir, tool_frames=True)
    print(f"wrote {output}: {report.links} links, {report.joints} joints, "
          f"{len(report.meshes_converted)} meshes converted")
    if args.srdf:
        Path(args.srdf).parent.mkdir(parents=True, exist_ok=True)
        s = moveit_semantics(robot)
        write_srdf(s, args.srdf, robot_name=robot.name)
        print(f"wrote {args.srdf}: {len(s.groups)} groups, {len(s.end_effectors)} end effectors, "
              f"{len(s.collision_pairs)} disabled collision pairs, {len(s.handles)} handles, "
              f"{len(s.grippers)} grippers")
    for line in report.not_expressible:
        print(f"not expressible: {line}")
    for line in report.unresolved:
        print(f"unresolved: {line}")
    for line in report.notes:
        print(f"note: {line}")
    for line in robot.warnings:
        print(f"warning: {line}")
    return 0
