"""Planning scenes shared by the planning tests and bench/plan_bench.py: the embedded arm in its demo world,
and example-robot-data's Panda with a table and a box."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np

from robot_bridge.model import Box, Geometry, Link, Robot

PANDA_TABLE = ((0.55, 0.0, 0.2), (0.6, 1.0, 0.04))        # centre, full size (m)
PANDA_BOX = ((0.5, 0.0, 0.37), (0.12, 0.12, 0.3))          # on the table, between left and right


def embedded_robot() -> Robot:
    """The embedded LWA3 arm with its SRDF, in default.env.xml's world (table, crate, can, block, ball)."""
    from robot_bridge.bringup import DEFAULT_ROBOT, DEFAULT_SRDF
    from robot_bridge.formats import load, srdf

    robot = load(str(DEFAULT_ROBOT))
    srdf.attach_semantics(robot, srdf.read_srdf(str(DEFAULT_SRDF), robot))
    return robot


def erd_share() -> Path | None:
    """example-robot-data's share directory (None when the wheel is not installed)."""
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    share = Path(dist.locate_file("cmeel.prefix/share"))
    return share if (share / "example-robot-data").is_dir() else None


def box_body(name: str, centre, size) -> Robot:
    """A one-link static body holding one box (its frame at the world origin)."""
    pose = np.eye(4)
    pose[:3, 3] = centre
    link = Link(name, collisions=[Geometry(Box(np.asarray(size, dtype=float) / 2), origin=pose)], static=True)
    return Robot(name, links={name: link}, is_robot=False)


def panda_robot() -> Robot:
    """Panda (URDF + SRDF of example-robot-data) with a table and a box on it as environment bodies."""
    from robot_bridge.formats import load, srdf

    share = erd_share()
    if share is None:
        raise FileNotFoundError("example-robot-data is not installed (pip install example-robot-data)")
    d = share / "example-robot-data" / "robots" / "panda_description"
    robot = load(str(d / "urdf" / "panda.urdf"), search_path=[str(share)])
    srdf.attach_semantics(robot, srdf.read_srdf(str(d / "srdf" / "panda.srdf"), robot))
    robot.environment = {"table": box_body("table", *PANDA_TABLE), "box": box_body("box", *PANDA_BOX)}
    return robot


def world_shapes(robot: Robot):
    """(name, shape, world pose) of every environment body geometry (bodies of one static link set, as here
    and in default.env.xml; the planner handles jointed bodies through their kinematics)."""
    out = []
    for bname, body in robot.environment.items():
        for link in body.links.values():
            for i, geom in enumerate(link.collisions or link.visuals):
                out.append((f"{bname}/{link.name}/{i}", geom.shape, body.placement @ geom.origin))
    return out


def disabled_pairs(robot: Robot) -> set:
    pairs = {tuple(sorted((p.link1, p.link2))) for p in robot.semantics.collision_pairs if not p.enabled}
    return pairs | {tuple(sorted(p)) for p in robot.collision_ignore}
