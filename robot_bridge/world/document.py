"""The environment of detected objects as one text a master reads: OpenRAVE ``<Environment>`` XML or YAML.

XML (what world_node publishes on ``~/objects``)::

    <Environment frame="world" stamp="12.5">
      <KinBody name="can_0" file="/abs/path/can.kinbody.xml" class="can" srdf="/abs/path/can.srdf">
        <translation>0.8 0.15 0.74</translation>
        <rotationmat>1 0 0 0 1 0 0 0 1</rotationmat>
      </KinBody>
    </Environment>

Each body includes its class's file and is placed at the object's pose (the pose of the file's frame in
the world frame; ``repr`` floats round-trip exactly).  ``robot_bridge.formats.load`` reads it back when
the body files are OpenRAVE XML or COLLADA and lie inside the allowed roots (pass ``allowed_roots`` or
``search_path``); the environment is empty when no object is seen (formats.load refuses an environment
without bodies: check :func:`read_xml` or the YAML first).  ``class`` and ``srdf`` (the class's hpp SRDF,
its handles; only when the mapping gives one) are ignored by OpenRAVE readers.

YAML (``~/objects_yaml``): ``{frame, stamp, objects: [{name, class, file, srdf, static, last_seen,
detections, translation, quaternion_xyzw, pose: 4x4 rows}]}`` (times: seconds of the node's clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import SchemaError
from ..model.transform import to_quat_xyzw


@dataclass(frozen=True)
class PlacedBody:
    name: str
    class_id: str
    file: str
    pose: np.ndarray
    srdf: str = ""                      # the class's hpp SRDF ("" when none)


def _num(value: float) -> str:
    return repr(float(value))


def to_xml(objects: Iterable, frame: str = "world", stamp: float | None = None) -> str:
    """``objects``: items with name, class_id, file, pose (WorldObject, PlacedBody)."""
    from lxml import etree

    root = etree.Element("Environment", frame=frame)
    if stamp is not None:
        root.set("stamp", _num(stamp))
    for obj in objects:
        body = etree.SubElement(root, "KinBody", name=obj.name, file=obj.file)
        body.set("class", obj.class_id)
        if getattr(obj, "srdf", ""):
            body.set("srdf", obj.srdf)
        pose = np.asarray(obj.pose, dtype=float)
        etree.SubElement(body, "translation").text = " ".join(_num(v) for v in pose[:3, 3])
        etree.SubElement(body, "rotationmat").text = " ".join(_num(v) for v in pose[:3, :3].reshape(-1))
    return etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="utf-8").decode()


def read_xml(text: str, source: str = "<objects>") -> list[PlacedBody]:
    """The bodies of a document written by :func:`to_xml` (hardened parser; typed errors)."""
    from ..formats.xmlsafe import parse_bytes

    root = parse_bytes(text.encode("utf-8"), file=source).getroot()
    if root.tag != "Environment":
        raise SchemaError(f"root element <{root.tag}>, expected <Environment>", file=source)
    out = []
    for el in root.iterfind("KinBody"):
        name, file = el.get("name"), el.get("file")
        if not name or not file:
            raise SchemaError("<KinBody> needs name= and file=", file=source, line=el.sourceline)
        try:
            t = [float(v) for v in (el.findtext("translation") or "0 0 0").split()]
            r = [float(v) for v in (el.findtext("rotationmat") or "1 0 0 0 1 0 0 0 1").split()]
        except ValueError as exc:
            raise SchemaError(f"body {name!r}: {exc}", file=source, line=el.sourceline) from exc
        if len(t) != 3 or len(r) != 9:
            raise SchemaError(f"body {name!r}: expected 3 translation and 9 rotationmat values", file=source,
                              line=el.sourceline)
        pose = np.eye(4)
        pose[:3, :3] = np.reshape(r, (3, 3))
        pose[:3, 3] = t
        if not np.isfinite(pose).all():
            raise SchemaError(f"body {name!r}: non-finite pose", file=source, line=el.sourceline)
        out.append(PlacedBody(name, el.get("class", ""), file, pose, el.get("srdf", "")))
    return out


def to_yaml(objects: Iterable, frame: str = "world", stamp: float | None = None) -> str:
    import yaml

    items = []
    for obj in objects:
        pose = np.asarray(obj.pose, dtype=float)
        items.append({"name": obj.name, "class": obj.class_id, "file": obj.file,
                      "srdf": str(getattr(obj, "srdf", "")),
                      "static": bool(getattr(obj, "static", False)),
                      "last_seen": float(getattr(obj, "last_seen", 0.0)),
                      "detections": int(getattr(obj, "detections", 0)),
                      "translation": [float(v) for v in pose[:3, 3]],
                      "quaternion_xyzw": [float(v) for v in to_quat_xyzw(pose)],
                      "pose": [[float(v) for v in row] for row in pose]})
    return yaml.safe_dump({"frame": frame, "stamp": stamp, "objects": items}, sort_keys=False)
