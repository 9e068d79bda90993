"""What a planner node receives, turned into planner input (no rclpy): the published robot_description and
robot_description_semantic strings, and world_node's ``~/objects`` document (OpenRAVE ``<Environment>`` XML
naming each body's file and pose)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..model import Robot


def robot_from_description(urdf: str, srdf: Optional[str] = None, search_path: Sequence[str] = (),
                           mesh_roots=None, base_dir: Optional[str] = None) -> Robot:
    """The robot of a published URDF (and SRDF): what the planner models.  Raises DescriptionError.
    ``mesh_roots``: mesh files only under these folders (a list or an AllowedRoots; others left out with a
    warning in ``robot.warnings``); None: wherever the URIs point.  ``base_dir``: where relative URIs and
    the description's own ``package://`` package are looked up (the launch-time description_file's folder,
    as description_node looks them up; default the current folder)."""
    from ..formats import srdf as srdf_format
    from ..formats.urdf import read_string
    from ..formats.validate import validate

    robot = validate(read_string(urdf, file="<robot_description>", search_path=list(search_path) or None,
                                 mesh_roots=mesh_roots, base_dir=base_dir))
    if srdf:
        srdf_format.attach_semantics(robot, srdf_format.read_srdf_string(srdf, robot,
                                                                         file="<robot_description_semantic>"))
    return robot


def objects_from_xml(text: str, reader) -> tuple[dict[str, tuple[Robot, np.ndarray]], str]:
    """(name -> (body, pose), its problems as one line) of world_node's ``~/objects`` document, for
    :meth:`Planner.set_objects`, read by ``reader`` (a :class:`robot_bridge.world.reader.WorldReader`: the
    one bounded reader of peers' documents, body files only under the roots trusted at launch).  Raises
    DescriptionError when the document is refused; bodies it refuses are left out, named in the problems."""
    read = reader.objects(text)
    return read.objects, read.summary()


def confined_urdf(urdf: str, robot: Robot) -> str:
    """``urdf`` for the planning backends (which resolve mesh URIs themselves, wherever they point): each
    mesh URI replaced by the file :func:`robot_from_description` found for it under the trusted roots
    (``file://`` + that path), and each ``<collision>``/``<visual>`` whose mesh it left out or did not find
    removed."""
    from ..formats.urdf import parse_tolerant
    from ..model import Mesh

    found: dict[str, str] = {}
    for link in robot.links.values():
        for geom in (*link.collisions, *link.visuals):
            if isinstance(geom.shape, Mesh) and geom.shape.path:
                found[geom.shape.uri] = geom.shape.path
    tree, _notes = parse_tolerant(urdf.encode(), "<robot_description>")
    for mesh in list(tree.getroot().iter("mesh")):
        path = found.get(mesh.get("filename") or "")
        if path is not None:
            mesh.set("filename", "file://" + path)
            continue
        holder = mesh.getparent()
        while holder is not None and holder.tag not in ("collision", "visual"):
            holder = holder.getparent()
        target = holder if holder is not None and holder.getparent() is not None else mesh
        target.getparent().remove(target)
    from lxml import etree

    return etree.tostring(tree, encoding="unicode")
