"""``robot-bridge check FILE``: exit 0 when the file loads, 2 with a one-line reason when not."""

from __future__ import annotations

import argparse
import sys

from ...errors import DescriptionError
from ...formats import load

HELP = "Load a robot description; exit 0 if it loads, 2 with a one-line reason if not."
EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="robot description (OpenRAVE XML, COLLADA, URDF, SRDF)")
    parser.add_argument("--search-path", action="append", default=None, metavar="DIR",
                        help="data search folder for includes and meshes (repeatable; $OPENRAVE_DATA is "
                             "searched after these)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing when the file is fine")


def main(args) -> int:
    try:
        robot = load(args.file, search_path=args.search_path)
    except (DescriptionError, OSError) as err:
        reason = " ".join(str(err).split())
        reason = reason if str(args.file) in reason else f"{args.file}: {reason}"
        print(f"robot-bridge check: error: {reason}", file=sys.stderr)
        return EXIT_INVALID
    if not args.quiet:
        print(f"{args.file}: ok ({len(robot.links)} links, {len(robot.joints)} joints, {robot.dof} DOF, "
              f"{len(robot.warnings)} warnings)")
    return 0
