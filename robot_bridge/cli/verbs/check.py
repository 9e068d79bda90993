"""``robot-bridge check FILE``: exit 0 when the file loads, 2 with a one-line reason when not; a mesh file
that cannot be read is a warning (the robot loads without it)."""

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
    problems = mesh_problems(robot)
    for line in problems:
        print(f"robot-bridge check: warning: {line}", file=sys.stderr)
    if not args.quiet:
        print(f"{args.file}: ok ({len(robot.links)} links, {len(robot.joints)} joints, {robot.dof} DOF, "
              f"{len(robot.warnings) + len(problems)} warnings)")
    return 0


def mesh_problems(robot) -> list[str]:
    """One line per mesh file that cannot be read (the robot loads without it: a warning, not a failure)."""
    from ...formats import meshes
    from ...model import Mesh

    seen, out = set(), []
    for name, link in robot.links.items():
        for g in link.visuals + link.collisions:
            s = g.shape
            if not isinstance(s, Mesh) or s.vertices is not None or s.path is None or s.path in seen:
                continue
            seen.add(s.path)
            try:
                meshes.load_triangles(s.path)
            except DescriptionError as err:
                out.append(f"mesh {s.uri!r} of link {name!r} cannot be read: {' '.join(str(err).split())}")
    return out
