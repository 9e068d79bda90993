"""The object mapping file: detection class ids -> body files and tracking parameters.

YAML::

    defaults:                 # optional; every key may also be given per class
      timeout: 2.0            # s without a detection before a body is removed (> 0)
      static: false           # true: once detected, the body stays (still moved by detections)
      jitter: 0.005           # m: a new pose closer than this and within jitter_angle does not count
      jitter_angle: 0.02      # rad
      match_distance: 0.15    # m: a detection without a known id continues the nearest body in reach
      max_instances: 0        # bodies of one class at most (0: none of its own; max_bodies bounds all)
    classes:
      can:
        file: objects/can.kinbody.xml      # any file robot_bridge.formats.load reads; relative to this file
        srdf: can.srdf                     # optional: hpp SRDF of the body (handles); relative to this file
      block: {file: objects/block.kinbody.xml, static: true}

Every body file is read when the mapping loads, so a mapping that names a broken file fails as a whole
(a :class:`~robot_bridge.errors.DescriptionError` naming the mapping, the class and the body file).
``srdf`` gives the class hpp-manipulation semantics (seed 003): its ``<handle>`` elements, on links of the
body, attached to the class's body (``body.semantics.handles``), so that a detection of the class is
graspable by them; an SRDF naming no handle, or a handle on a link the body has not, is refused the same
way.
Sizes are checked before reading (``formats/limits.py``): the mapping file ``MAX_OBJECTS_YAML_BYTES``, the
body files together ``MAX_OBJECT_BODIES_TOTAL_BYTES``, each body file its reader's limits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import DescriptionError, SchemaError
from ..model import Robot

# key -> (type, default, check, expected)
OPTIONS: dict[str, tuple[type, Any, Any, str]] = {
    "timeout": (float, 2.0, lambda v: v > 0 and math.isfinite(v), "a number > 0 (seconds)"),
    "static": (bool, False, lambda v: True, "true or false"),
    "jitter": (float, 0.005, lambda v: v >= 0 and math.isfinite(v), "a number >= 0 (metres)"),
    "jitter_angle": (float, 0.02, lambda v: v >= 0 and math.isfinite(v), "a number >= 0 (radians)"),
    "match_distance": (float, 0.15, lambda v: v >= 0 and math.isfinite(v), "a number >= 0 (metres)"),
    "max_instances": (int, 0, lambda v: v >= 0, "an integer >= 0 (0: no limit of the class's own)"),
}


@dataclass(frozen=True)
class ObjectClass:
    """One detectable class: its body (read from ``file``) and tracking parameters."""

    name: str
    file: str                                   # absolute path
    body: Robot = field(repr=False, compare=False)
    timeout: float = 2.0
    static: bool = False
    jitter: float = 0.005
    jitter_angle: float = 0.02
    match_distance: float = 0.15
    max_instances: int = 0
    srdf: str = ""                              # absolute path of its hpp SRDF ("" when none)


@dataclass(frozen=True)
class ObjectMapping:
    classes: dict[str, ObjectClass]
    source: Optional[str] = None

    def get(self, class_id: str) -> Optional[ObjectClass]:
        return self.classes.get(class_id)


def _typed(value, kind: type, where: str, expected: str, source: str):
    ok = (isinstance(value, bool) if kind is bool else
          isinstance(value, int) and not isinstance(value, bool) if kind is int else
          isinstance(value, (int, float)) and not isinstance(value, bool))
    if not ok:
        raise SchemaError(f"{where} is {value!r}; expected {expected}", file=source)
    return kind(value)


def _options(section: Mapping, where: str, base: dict, source: str, allow_file: bool) -> dict:
    out = dict(base)
    for key, value in section.items():
        if key in ("file", "srdf") and allow_file:
            continue
        if key not in OPTIONS:
            known = ", ".join((["file", "srdf"] if allow_file else []) + list(OPTIONS))
            raise SchemaError(f"{where}.{key}: unknown key (expected one of {known})", file=source)
        kind, _default, check, expected = OPTIONS[key]
        typed = _typed(value, kind, f"{where}.{key}", expected, source)
        if not check(typed):
            raise SchemaError(f"{where}.{key} is {value!r}; expected {expected}", file=source)
        out[key] = typed
    return out


def parse_mapping(document: Any, source: str, base_dir: Path, search_path=None,
                  load_body=None) -> ObjectMapping:
    """An :class:`ObjectMapping` from the parsed YAML ``document`` (``source`` names it in errors)."""
    from ..formats import limits, load

    load_body = load_body or (lambda path: load(path, search_path=search_path))
    if not isinstance(document, Mapping):
        raise SchemaError("expected a mapping with 'classes' (and optional 'defaults')", file=source)
    unknown = sorted(set(document) - {"defaults", "classes"})
    if unknown:
        raise SchemaError(f"unknown top-level keys {', '.join(map(str, unknown))} (expected defaults, "
                          "classes)", file=source)
    defaults_section = document.get("defaults") or {}
    if not isinstance(defaults_section, Mapping):
        raise SchemaError("defaults: expected a mapping", file=source)
    defaults = _options(defaults_section, "defaults", {k: v[1] for k, v in OPTIONS.items()}, source, False)
    classes_section = document.get("classes")
    if not isinstance(classes_section, Mapping) or not classes_section:
        raise SchemaError("classes: expected a non-empty mapping of class id -> {file: ...}", file=source)
    classes: dict[str, ObjectClass] = {}
    bodies: dict[str, Robot] = {}
    budget = limits.ReadBudget(limits.MAX_OBJECT_BODIES_TOTAL_BYTES, "the mapping's body files together",
                               "MAX_OBJECT_BODIES_TOTAL_BYTES")
    for class_id, entry in classes_section.items():
        where = f"classes.{class_id}"
        if isinstance(class_id, int) and not isinstance(class_id, bool):
            class_id = str(class_id)             # numeric ids (COCO-style detectors): as the message's string
        if not isinstance(class_id, str) or not class_id:
            raise SchemaError(f"{where}: class ids must be non-empty strings", file=source)
        if isinstance(entry, str):
            entry = {"file": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("file"), str) or not entry["file"]:
            raise SchemaError(f"{where}: expected a mapping with 'file' (a body file)", file=source)
        options = _options(entry, where, defaults, source, True)
        path = Path(os.path.expanduser(entry["file"]))
        path = (path if path.is_absolute() else base_dir / path).resolve()
        srdf = entry.get("srdf", "")
        if not isinstance(srdf, str):
            raise SchemaError(f"{where}.srdf is {srdf!r}; expected the path of an SRDF file", file=source)
        if srdf:
            srdf_path = Path(os.path.expanduser(srdf))
            srdf = str((srdf_path if srdf_path.is_absolute() else base_dir / srdf_path).resolve())
        key = (str(path), srdf)             # a body of its own per SRDF: the semantics are the body's
        if key not in bodies:
            try:
                budget.charge(limits.check_regular_file(path, None, "body file"), path)
                body = load_body(path)
            except DescriptionError as exc:
                raise SchemaError(f"{where}.file: cannot read the body: {exc}", file=source) from exc
            if srdf:
                body = with_handles(body, srdf, where, source)
            bodies[key] = body
        classes[class_id] = ObjectClass(name=class_id, file=str(path), body=bodies[key], srdf=srdf, **options)
    return ObjectMapping(classes, source)


def with_handles(body: Robot, srdf: str, where: str = "srdf", source: Optional[str] = None) -> Robot:
    """``body`` with the hpp semantics of ``srdf`` attached (its handles); SchemaError naming ``where`` when
    the SRDF cannot be read, names no handle, or puts one on a link the body has not."""
    from ..formats import limits
    from ..formats import srdf as srdf_format

    try:
        limits.check_regular_file(Path(srdf), None, "SRDF file")
        semantics = srdf_format.read_srdf(srdf)          # links checked below, against the body
    except DescriptionError as exc:
        raise SchemaError(f"{where}.srdf: cannot read {srdf}: {exc}", file=source) from exc
    if not semantics.handles:
        raise SchemaError(f"{where}.srdf: {srdf} names no <handle>", file=source)
    for handle in semantics.handles.values():
        if handle.link not in body.links:
            raise SchemaError(f"{where}.srdf: {srdf}: handle {handle.name!r} on link {handle.link!r}, which "
                              f"body {body.name!r} has not (links: {sorted(body.links)})", file=source)
    srdf_format.attach_semantics(body, semantics)
    return body


def load_mapping(path: str | os.PathLike, search_path=None) -> ObjectMapping:
    """Read a mapping file (see the module docstring); raises DescriptionError or OSError."""
    import yaml

    from ..formats import limits

    p = Path(path).expanduser()
    data = limits.bounded_read(p, limits.MAX_OBJECTS_YAML_BYTES, "object mapping file",
                               limit_name="MAX_OBJECTS_YAML_BYTES")
    try:
        document = yaml.safe_load(data.decode("utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SchemaError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", file=str(p),
                          line=mark.line + 1 if mark is not None else None) from exc
    except UnicodeDecodeError as exc:
        raise SchemaError(f"not UTF-8 text: {exc}", file=str(p)) from exc
    return parse_mapping(document, str(p), p.resolve().parent, search_path)


def with_options(mapping: ObjectMapping, class_id: str, **options) -> ObjectMapping:
    """A copy of ``mapping`` with some options of one class changed (tests, tools)."""
    classes = dict(mapping.classes)
    classes[class_id] = replace(classes[class_id], **options)
    return ObjectMapping(classes, mapping.source)
