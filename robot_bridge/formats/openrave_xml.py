"""OpenRAVE XML reader: environments, KinBodies, Robots and sensor files.

Semantics follow upstream ``xmlreaders-core.cpp`` (see ``formats/openrave/``):
case-insensitive tags and attribute names, additive translations and
left-multiplied rotations, re-opened bodies, offsetfrom, KinBody/Robot
transforms and prefixes applied at the element's end, ``file=`` includes
(absolute, including file's folder, then the data search path = the
``search_path`` argument + ``$OPENRAVE_DATA``), COLLADA includes handed to
``formats.collada``.

What ``read`` returns:
- a KinBody/Robot file: that body;
- an environment: the first ``<Robot>`` (else the first ``<KinBody>``); every
  other body is in ``robot.environment[name]`` with its ``placement``; GUI,
  physics, plugin, controller and module elements go to ``robot.extras``
  (opaque, one warning per element name) and environment-level sensors to
  ``robot.extras["environment_sensors"]``;
- a stand-alone ``<sensor>`` file (a sensor definition meant for
  ``<sensor file=...>``): a one-link body named after the sensor carrying it as
  an attached sensor at the link origin, with ``extras["sensor_definition"]``
  set, so ``check``/``inspect`` can show it.

Link frames are OpenRAVE's link frames at the zero configuration relative to
the root (first) link; ``robot.placement`` is the root link's pose in the file's
world frame.  Tree and joint conventions: ``formats/openrave/build.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DescriptionError, SchemaError, UnsupportedFormatError
from ..model import AttachedSensor, Robot
from . import normalize_search_path
from .openrave import sensors
from .openrave.build import build_robot
from .openrave.common import Context, Notes, apply_transform_tag, attrs, children, floats, tag
from .openrave.reader import keep_extra, opaque, parse_root, read_interface
from .openrave.state import BodyState, LinkState
from .paths import roots_for
from .xmlsafe import parse_file

SUFFIXES = (".env.xml", ".robot.xml", ".kinbody.xml", ".sensor.xml", ".xml")
ROOT_TAGS = ("environment", "kinbody")
_OPENRAVE_ROBOT_CHILDREN = {"kinbody", "robot", "manipulator", "attachedsensor", "jointvalues", "controller"}


def claims(path: str | os.PathLike) -> bool:
    """True for OpenRAVE XML: root <Environment>/<KinBody>/<sensor>, or a <Robot> that is not URDF."""
    try:
        root = parse_file(path).getroot()
    except DescriptionError:
        return False
    name = tag(root)
    if name in ("environment", "kinbody", "sensor"):
        return True
    if name != "robot":
        return False
    if root.tag == "Robot" or "file" in attrs(root):
        return True
    kids = {tag(c) for c in children(root)}
    return "link" not in kids and bool(kids & _OPENRAVE_ROBOT_CHILDREN)


def read(path: str | os.PathLike, search_path=None, **options) -> Robot:
    """Read an OpenRAVE XML file (see module docstring for what is returned)."""
    allowed_roots = options.pop("allowed_roots", None)
    if options:
        raise TypeError(f"unknown options: {', '.join(options)}")
    path = Path(path).resolve()
    search = normalize_search_path(search_path)
    ctx = Context(file=path, search_path=search, stack=(path,), roots=roots_for(path, search, allowed_roots))
    root = parse_file(path, budget=ctx.budget).getroot()
    kind = tag(root)
    notes = Notes()
    env_extras: dict = {}
    bodies: list[tuple[BodyState, Notes]] = []
    try:
        if kind == "environment":
            _read_environment(root, bodies, env_extras, ctx, notes)
        elif kind in ("kinbody", "robot"):
            body = BodyState(source=str(path))
            read_interface(root, body, ctx, notes, kind)
            bodies.append((body, notes))
        elif kind == "sensor":
            bodies.append((_sensor_definition(root, ctx, notes), notes))
        else:
            raise ctx.error(UnsupportedFormatError, f"root element <{root.tag}> is not OpenRAVE XML "
                            "(expected <Environment>, <KinBody>, <Robot> or <sensor>)", root)
    except DescriptionError as exc:
        raise exc.with_location(file=str(path)) from None
    if not bodies:
        raise ctx.error(SchemaError, "environment holds no <KinBody> or <Robot>", root)
    main_index = next((i for i, (b, _) in enumerate(bodies) if b.is_robot), 0)
    robots = [build_robot(b, n, path) for b, n in bodies]
    robot = robots[main_index]
    for i, other in enumerate(robots):
        if i == main_index:
            continue
        name = other.name
        while name in robot.environment or name == robot.name:
            name += "_"
        robot.environment[name] = other
    robot.extras.update(env_extras)
    for w in notes.warnings + ctx.repairs:
        robot.warn(w)
    return robot


# <Environment>'s viewer camera (OpenRAVE's qtcoin viewer): element -> key of extras["viewer_camera"]
VIEWER_CAMERA = {"camtrans": "translation", "camrotaxis": "rotationaxis", "camrotationaxis": "rotationaxis",
                 "camfocal": "focal_distance"}
VIEWER_CAMERA_SIZES = {"camtrans": 3, "camrotaxis": 4, "camrotationaxis": 4, "camfocal": 1}


def _read_environment(el, bodies, extras: dict, ctx: Context, notes: Notes) -> None:
    a = attrs(el)
    if "file" in a:
        from .openrave.common import require_file

        included = require_file(a["file"], ctx, el)
        root = parse_root(included, ctx, el)
        if tag(root) != "environment":
            raise ctx.error(SchemaError, f"included file {included.name} has root <{root.tag}>, expected "
                            "<Environment>", el)
        _read_environment(root, bodies, extras, ctx.child(included), notes)
    for c in children(el):
        name = tag(c)
        if name in ("kinbody", "robot"):
            body_notes = Notes()
            body = BodyState(source=str(ctx.file))
            read_interface(c, body, ctx, body_notes, name)
            bodies.append((body, body_notes))
        elif name == "sensor":
            count = len(extras.get("environment_sensors", {}))
            sensor = AttachedSensor(name=attrs(c).get("name", f"sensor{count}"), link="")
            for t in children(c):
                apply_transform_tag(sensor.origin, t, ctx)
            sensors.read_sensor(c, sensor, ctx, notes)
            extras.setdefault("environment_sensors", {})[sensor.name] = sensor
        elif name in VIEWER_CAMERA:          # the viewer's camera pose: read, no robot or world meaning
            extras.setdefault(name, []).append(opaque(c))          # as kept before (render reads it)
            camera = extras.setdefault("viewer_camera", {})
            camera[VIEWER_CAMERA[name]] = floats(c, ctx, VIEWER_CAMERA_SIZES[name])
        else:
            keep_extra(extras, c, "environment", ctx, notes)


def _sensor_definition(root, ctx: Context, notes: Notes) -> BodyState:
    """A stand-alone ``<sensor>`` file: one link carrying the sensor."""
    name = attrs(root).get("name") or ctx.file.name.split(".")[0]
    sensor = AttachedSensor(name=name, link=name)
    sensors.read_sensor(root, sensor, ctx, notes)
    body = BodyState(name=name, is_robot=True, source=str(ctx.file), links=[LinkState(name=name)],
                     sensors=[sensor])
    body.extras["sensor_definition"] = True
    return body
