"""OpenRAVE ``<sensor>`` elements (inline or ``file=``) -> AttachedSensor type and canonical params."""

from __future__ import annotations

import math

from ...errors import SchemaError
from ...model import AttachedSensor
from .common import Context, Notes, attrs, children, floats, require_file, tag, text


def sensor_kind(interface: str) -> str:
    """Map an OpenRAVE sensor interface name onto model.SENSOR_TYPES."""
    low = interface.lower()
    # flash lidars first: a 3D grid of ranges, not a planar scan; "forcesensor" is OpenRAVE's
    # force/torque sensor plugin name
    for word, kind in (("flashlidar", "flash_lidar"), ("flash_laser", "flash_lidar"), ("laser", "laser"),
                       ("lidar", "laser"), ("camera", "camera"), ("imu", "imu"), ("odometry", "odometry"),
                       ("force6d", "force6d"), ("forcesensor", "force6d"), ("actuator", "actuator"),
                       ("tactile", "tactile")):
        if word in low:
            return kind
    return "other"


# elements read into params; any other is kept in ``raw`` and reported
_KNOWN = {"minangle", "maxangle", "resolution", "minrange", "maxrange", "scantime", "timescan",
          "timeincrement", "kk", "width", "height", "framerate", "distortioncoeffs", "distortionmodel",
          "rotationcovariance", "angularvelocitycovariance", "linearaccelerationcovariance",
          "measurementtime"}


def _key(name: str) -> str:
    return name.replace("_", "")


def _number(values: dict, ctx: Context, *names: str):
    for n in names:
        if n in values:
            return floats(values[n], ctx, 1)[0]
    return None


def read_sensor(el, sensor: AttachedSensor, ctx: Context, notes: Notes) -> None:
    """Fill ``sensor`` from a ``<sensor type=... [file=...]>`` element."""
    a = attrs(el)
    elements = children(el)
    if "file" in a:
        path = require_file(a["file"], ctx, el)
        from .reader import parse_root

        root = parse_root(path, ctx, el)
        if tag(root) != "sensor":
            raise ctx.error(SchemaError, f"sensor file {path.name} has root <{root.tag}>, expected <sensor>",
                            el)
        a = {**attrs(root), **{k: v for k, v in a.items() if k != "file"}}
        elements = children(root) + elements
        sensor.raw["file"] = str(path)
    interface = a.get("type")
    if not interface:
        raise ctx.error(SchemaError, "<sensor> needs a type= attribute (e.g. BaseLaser2D, BaseCamera)", el)
    sensor.interface = interface
    sensor.type = sensor_kind(interface)
    values = {_key(tag(c)): c for c in elements}
    sensor.raw.update({tag(c): text(c) for c in elements})
    p = sensor.params
    if sensor.type == "flash_lidar":
        for key, names in (("range_min", ("minrange",)), ("range_max", ("maxrange",)),
                           ("scan_time", ("scantime", "timescan"))):
            v = _number(values, ctx, *names)
            if v is not None:
                p[key] = v
    if sensor.type == "laser":
        for key, names, scale in (("angle_min", ("minangle",), math.pi / 180), ("angle_max", ("maxangle",),
                                  math.pi / 180), ("angle_increment", ("resolution",), math.pi / 180),
                                  ("range_min", ("minrange",), 1.0), ("range_max", ("maxrange",), 1.0),
                                  ("scan_time", ("scantime", "timescan"), 1.0),
                                  ("time_increment", ("timeincrement",), 1.0)):
            v = _number(values, ctx, *names)
            if v is not None:
                p[key] = v * scale
    if "kk" in values:
        fx, fy, cx, cy = floats(values["kk"], ctx, 4)
        p.update(fx=fx, fy=fy, cx=cx, cy=cy)
    for key, names in (("width", ("width",)), ("height", ("height",))):
        v = _number(values, ctx, *names)
        if v is not None:
            p[key] = int(v)
    v = _number(values, ctx, "framerate")
    if v is not None:
        p["frame_rate"] = v
    if "distortioncoeffs" in values:
        p["distortion"] = floats(values["distortioncoeffs"], ctx)
    if "distortionmodel" in values:
        p["distortion_model"] = text(values["distortionmodel"])
    # COLLADA base_imu parameter names, used by XML sensor plugins too
    for key, name in (("orientation_covariance", "rotationcovariance"),
                      ("angular_velocity_covariance", "angularvelocitycovariance"),
                      ("linear_acceleration_covariance", "linearaccelerationcovariance")):
        if name in values:
            p[key] = floats(values[name], ctx, 9)
    v = _number(values, ctx, "measurementtime")
    if v and sensor.type != "camera":
        p["rate"] = 1.0 / v
    for name in sorted(set(values) - _KNOWN):
        notes.warn(f"{ctx.file.name}: sensor {sensor.name!r} ({interface}): <{name}> is not used by "
                   "robot_bridge (kept in sensor.raw)")
    if sensor.type == "other":
        notes.warn(f"{ctx.file.name}:{el.sourceline}: sensor type {interface!r} not recognised; "
                   "kept as 'other'")
