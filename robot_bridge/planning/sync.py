"""What a planner node receives, turned into planner input (no rclpy): the published robot_description and
robot_description_semantic strings, and world_node's ``~/objects`` document (OpenRAVE ``<Environment>`` XML
naming each body's file and pose)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..model import Robot


def robot_from_description(urdf: str, srdf: Optional[str] = None, search_path: Sequence[str] = ()) -> Robot:
    """The robot of a published URDF (and SRDF): what the planner models.  Raises DescriptionError."""
    from ..formats import srdf as srdf_format
    from ..formats.urdf import read_string
    from ..formats.validate import validate

    robot = validate(read_string(urdf, file="<robot_description>", search_path=list(search_path) or None))
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
