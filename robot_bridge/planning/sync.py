"""What a planner node receives, turned into planner input (no rclpy): the published robot_description and
robot_description_semantic strings, and world_node's ``~/objects`` document (OpenRAVE ``<Environment>`` XML
naming each body's file and pose)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..errors import SchemaError
from ..model import Robot

MAX_BODY_FILES = 256          # distinct body files kept read (a world of more classes is refused)
MAX_OBJECTS = 1000            # bodies in one objects document


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


class BodyFiles:
    """Body files named by world_node's documents, each read once (the same Robot object while the file is
    named, so a body that only moves is moved, not rebuilt); with the class's hpp SRDF when the document names
    one (its handles: the body is graspable by them)."""

    def __init__(self, search_path: Sequence[str] = (), max_files: int = MAX_BODY_FILES):
        self.search_path = list(search_path)
        self.max_files = max_files
        self._bodies: dict[tuple[str, str], Robot] = {}

    def get(self, path: str, srdf: str = "") -> Robot:
        from ..formats import load
        from ..world.mapping import with_handles

        key = (str(Path(path)), str(Path(srdf)) if srdf else "")
        if key not in self._bodies:
            if len(self._bodies) >= self.max_files:
                raise SchemaError(f"more than {self.max_files} distinct body files", file=key[0])
            body = load(key[0], search_path=self.search_path or None)
            if srdf:
                body = with_handles(body, key[1], f"body file {key[0]}", "<world_node/objects>")
            self._bodies[key] = body
        return self._bodies[key]


def objects_from_xml(text: str, files: BodyFiles) -> dict[str, tuple[Robot, np.ndarray]]:
    """name -> (body, pose) of world_node's ``~/objects`` document, for :meth:`Planner.set_objects`.
    Raises DescriptionError (SchemaError, MissingFileError, ...) naming the document or the body file."""
    from ..world.document import read_xml

    placed = read_xml(text, source="<world_node/objects>")
    if len(placed) > MAX_OBJECTS:
        raise SchemaError(f"{len(placed)} bodies, at most {MAX_OBJECTS}", file="<world_node/objects>")
    return {p.name: (files.get(p.file, p.srdf), p.pose) for p in placed}
