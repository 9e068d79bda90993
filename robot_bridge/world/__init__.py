"""Detected objects as environment bodies (no rclpy): the mapping file, the tracked world, its documents.

- :mod:`.mapping`: class id -> body file and tracking parameters (YAML);
- :mod:`.objects`: :class:`WorldObjects`, detections -> named bodies with poses, lifetimes, jitter;
- :mod:`.document`: the world as OpenRAVE ``<Environment>`` XML (``formats.load`` reads it back) or YAML;
- :mod:`.reader`: the one reader of such documents from peers (bounded, body files only under the roots
  trusted at launch, off the nodes' control and goal threads).
"""

from .document import PlacedBody, read_xml, to_xml, to_yaml
from .mapping import ObjectClass, ObjectMapping, load_mapping, parse_mapping
from .objects import Changes, Detection, WorldObject, WorldObjects, pose_problem

__all__ = ["Changes", "Detection", "ObjectClass", "ObjectMapping", "PlacedBody", "WorldObject",
           "WorldObjects",
           "load_mapping", "parse_mapping", "pose_problem", "read_xml", "to_xml", "to_yaml"]
