"""OpenRAVE ``<extra>`` techniques of the COLLADA Robot Specification 0.2:
interface_type, manipulator, collision, library_sensors + attach_sensor,
library_actuators + attach_actuator."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ...errors import SchemaError
from ...model import Actuator, AttachedSensor, Manipulator, Robot
from .document import Document, floats


def techniques(el, extra_type: str):
    """(extra element, its OpenRAVE technique) for every ``<extra type=...>`` child of ``el``."""
    for extra in el.findall("extra"):
        if extra.get("type") != extra_type:
            continue
        tech = extra.find("technique[@profile='OpenRAVE']")
        if tech is None:
            tech = extra.find("technique")
        if tech is not None:
            yield extra, tech


def interface_type(el) -> Optional[dict]:
    for _extra, tech in techniques(el, "interface_type"):
        iface = tech.find("interface")
        out = {"interface": (iface.text or "").strip() if iface is not None else "",
               "type": iface.get("type") if iface is not None else None}
        plugin = tech.find("plugin")
        if plugin is not None:
            out["plugin"] = (plugin.text or "").strip()
        return out
    return None


# -- sensors -------------------------------------------------------------------
_SENSOR_KIND = {"base_laser2d": "laser", "base_laser3d": "laser", "base_flash_laser": "flash_lidar",
                "baselaser2d": "laser", "basespinninglaser": "laser", "baseflashlidar3d": "flash_lidar",
                "base_pinhole_camera": "camera", "base_stereo_camera": "camera", "basecamera": "camera",
                "base_imu": "imu", "base_force6d": "force6d", "baseforce6d": "force6d",
                "base_odometry": "odometry", "base_encoder": "other", "base_tactile": "tactile"}
_FORMATS = {("uint8", 1): "mono8", ("uint8", 3): "rgb8", ("uint8", 4): "rgba8", ("uint16", 1): "mono16",
            ("uint16", 3): "rgb16", ("float32", 1): "32FC1", ("float64", 1): "64FC1", ("int16", 1): "16SC1"}


def _raw(el) -> dict:
    """Every child element's text (numbers as floats / lists), attributes under '@'."""
    out: dict = {f"@{k}": v for k, v in el.attrib.items() if k not in ("id", "sid")}
    for child in el:
        if not isinstance(child.tag, str) or child.tag == "interface_type":
            continue
        text = (child.text or "").strip()
        try:
            values = floats(text)
            value = values.tolist() if values.size != 1 else float(values[0])
        except ValueError:
            value = text
        if len(child):
            value = _raw(child)
        out[child.tag] = value
    return out


def _first(raw: dict, *keys):
    for k in keys:
        if k in raw:
            return raw[k]
    return None


def sensor_params(kind: str, raw: dict) -> dict:
    """Canonical params (model.robot.AttachedSensor) from a sensor's raw fields.
    Angles in the spec are degrees; output is SI / radians."""
    p: dict = {}
    period = _first(raw, "measurement_time", "scantime", "scan_time")
    if kind == "laser":
        ang = _first(raw, "angle_range")
        lo, hi = (ang[0], ang[1]) if isinstance(ang, list) else (_first(raw, "angle_min", "minangle"),
                                                                  _first(raw, "angle_max", "maxangle"))
        if lo is not None and hi is not None:
            p["angle_min"], p["angle_max"] = float(np.radians(lo)), float(np.radians(hi))
        inc = _first(raw, "angle_increment", "resolution")
        if inc is not None:
            p["angle_increment"] = float(np.radians(inc))
        dist = _first(raw, "distance_range")
        if isinstance(dist, list):
            p["range_min"], p["range_max"] = float(dist[0]), float(dist[1])
        else:
            rmin, rmax = _first(raw, "range_min", "minrange"), _first(raw, "range_max", "maxrange")
            if rmin is not None:
                p["range_min"] = float(rmin)
            if rmax is not None:
                p["range_max"] = float(rmax)
        if period is not None:
            p["scan_time"] = float(period)
        if _first(raw, "time_increment") is not None:
            p["time_increment"] = float(raw["time_increment"])
    elif kind == "flash_lidar":    # the spec leaves base_flash_laser empty: OpenRAVE's XML fields
        dist = _first(raw, "distance_range")
        rmin, rmax = (dist[0], dist[1]) if isinstance(dist, list) else (_first(raw, "range_min", "minrange"),
                                                                        _first(raw, "range_max", "maxrange"))
        if rmin is not None:
            p["range_min"] = float(rmin)
        if rmax is not None:
            p["range_max"] = float(rmax)
        k = _first(raw, "KK", "kk")
        if isinstance(k, list) and len(k) == 4:
            p["fx"], p["fy"], p["cx"], p["cy"] = (float(v) for v in k)
        for key in ("width", "height"):
            if isinstance(raw.get(key), float):
                p[key] = int(raw[key])
        if period:
            p["scan_time"] = float(period)
    elif kind == "camera":
        dims = _first(raw, "image_dimensions")
        channels = 3
        if isinstance(dims, list) and len(dims) >= 2:
            p["width"], p["height"] = int(dims[0]), int(dims[1])
            channels = int(dims[2]) if len(dims) > 2 else 3
        k = _first(raw, "intrinsic")
        if isinstance(k, list) and len(k) >= 6:   # float2x3: fx skew cx / 0 fy cy
            p["fx"], p["cx"], p["fy"], p["cy"] = float(k[0]), float(k[2]), float(k[4]), float(k[5])
        fmt = _first(raw, "format")
        if isinstance(fmt, str) and fmt:
            p["format"] = _FORMATS.get((fmt, channels), fmt)
        elif channels in (1, 3):
            p["format"] = "rgb8" if channels == 3 else "mono8"
        dist = _first(raw, "distortion_model")
        if dist is not None:
            p["distortion"] = dist if isinstance(dist, list) else [dist] if isinstance(dist, float) else []
        if period:
            p["frame_rate"] = 1.0 / float(period)
    elif kind == "imu":
        for src, dst in (("rotation_covariance", "orientation_covariance"),
                         ("angular_velocity_covariance", "angular_velocity_covariance"),
                         ("linear_acceleration_covariance", "linear_acceleration_covariance")):
            if isinstance(raw.get(src), list):
                p[dst] = [float(v) for v in raw[src]]
        if period:
            p["rate"] = 1.0 / float(period)
    else:
        if period:
            p["rate"] = 1.0 / float(period)
        if kind == "odometry" and raw.get("target") is not None:
            p["target"] = raw["target"]
    return p


class SensorLibrary:
    def __init__(self, doc: Document):
        self.doc = doc
        self.sensors = {}
        for _extra, tech in techniques_anywhere(doc, "library_sensors"):
            for s in tech.findall("sensor"):
                if s.get("id"):
                    self.sensors[s.get("id")] = s

    def build(self, name: str, link: str, origin: np.ndarray, sensor_el) -> AttachedSensor:
        stype = sensor_el.get("type", "")
        kind = _SENSOR_KIND.get(stype.lower(), "other")
        raw = _raw(sensor_el)
        iface = sensor_el.find("interface_type/technique/interface")
        interface = (iface.text or "").strip() if iface is not None else stype
        try:
            params = sensor_params(kind, raw)
        except (TypeError, ValueError, IndexError, ZeroDivisionError) as exc:   # values of the wrong shape
            raise self.doc.error(SchemaError, f"sensor {name!r}: malformed {kind} parameters ({exc})",
                                 sensor_el) from None
        dist = sensor_el.find("distortion_model")
        if dist is not None:
            params["distortion_model"] = dist.get("type", "")
        if stype == "base_stereo_camera":
            cams = []
            for inst in sensor_el.findall("instance_sensor"):
                cam = self.doc.url(inst.get("url"))
                rect = inst.find("rectification")
                cams.append({"sensor": (inst.get("url") or "").lstrip("#"),
                             "rectification": floats(rect.text).tolist() if rect is not None else None})
                if cam is not None and len(cams) == 1:
                    params.update(sensor_params("camera", _raw(cam)))
            params["stereo_cameras"] = cams
        raw["sensor_id"] = sensor_el.get("id")
        return AttachedSensor(name=name, link=link, origin=origin, type=kind, interface=interface,
                              params=params, raw=raw)


def techniques_anywhere(doc: Document, extra_type: str):
    for extra in doc.root.iter("extra"):
        if extra.get("type") == extra_type:
            tech = extra.find("technique")
            if tech is not None:
                yield extra, tech


def actuator_library(doc: Document) -> dict:
    out = {}
    for _extra, tech in techniques_anywhere(doc, "library_actuators"):
        for a in tech.findall("actuator"):
            if a.get("id"):
                out[a.get("id")] = a
    return out


def read_actuator(doc: Document, name: str, tech, library: dict, joint_name: Callable) -> Actuator:
    inst = tech.find("instance_actuator")
    act_el = doc.url(inst.get("url")) if inst is not None else None
    bind = tech.find("bind_actuator")
    joint = joint_name(bind.get("joint"), bind) if bind is not None else None
    params = {}
    atype = "electric_motor"
    if act_el is not None:
        atype = act_el.get("type", atype)
        params = {k: v for k, v in _raw(act_el).items() if not k.startswith("@")}
        params["actuator_id"] = act_el.get("id")
    return Actuator(name=name, type=atype, joint=joint, params=params)


def read_manipulator(doc: Document, name: str, tech, link_name: Callable, joint_name: Callable,
                     warn: Callable[[str], None]) -> Optional[Manipulator]:
    origin = tech.find("frame_origin")
    tip = tech.find("frame_tip")
    if origin is None or tip is None:
        warn(f"manipulator {name!r} lacks frame_origin or frame_tip; skipped")
        return None
    base = link_name(origin.get("link"), origin)
    effector = link_name(tip.get("link"), tip)
    if base is None or effector is None:
        warn(f"manipulator {name!r}: link {origin.get('link')!r} or {tip.get('link')!r} not found; skipped")
        return None
    m = Manipulator(name=name, base=base, effector=effector, tool=doc.transform(tip))
    direction = tip.find("direction")
    if direction is None:
        direction = tech.find("direction")
    if direction is not None:
        d = doc.numbers(direction, 3)
        n = np.linalg.norm(d)
        m.direction = d / n if n > 1e-7 else np.array([0.0, 0.0, 1.0])
    for gj in tech.findall("gripper_joint"):
        jname = joint_name(gj.get("joint"), gj)
        if jname is None:
            warn(f"manipulator {name!r}: gripper joint {gj.get('joint')!r} not found")
            continue
        closing = [doc.value(c, c) for c in gj.findall("closing_direction")]
        chucking = [doc.value(c, c) for c in gj.findall("chucking_direction")]
        m.gripper_joints.append(jname)
        c0 = float(closing[0]) if closing and closing[0] is not None else None
        k0 = float(chucking[0]) if chucking and chucking[0] is not None else None
        m.closing_directions.append(c0 if c0 is not None else (k0 if k0 is not None else 0.0))
        m.chucking_directions.append(k0 if k0 is not None else (c0 if c0 is not None else 0.0))
    solvers = []
    for ik in tech.findall("iksolver"):
        entry = {"type": ik.get("type"), "free_joints": [], "free_joint_stepsizes": []}
        for fj in ik.findall("free_joint"):
            jn = joint_name(fj.get("joint"), fj)
            if jn is not None:
                entry["free_joints"].append(jn)
                step = fj.get("stepsize")
                entry["free_joint_stepsizes"].append(float(step) if step else None)
        itype = ik.find("interface_type")
        if itype is not None:
            info = interface_type_from_technique(itype)
            entry.update({k: v for k, v in info.items() if v})
        solvers.append(entry)
    if solvers:
        first = solvers[0]
        m.ik_solver = first.get("interface") or first.get("type")
        m.ik_free_joints = list(first["free_joints"])
        if first.get("interface") and first.get("type"):
            m.ik_solver_args = first["type"]
        m.extras["iksolvers"] = solvers
    for tag in ("frame_endlink", "grippername", "tool_changer"):
        el = tech.find(tag)
        if el is not None:
            m.extras[tag] = (link_name(el.get("link"), el) if el.get("link") else (el.text or "").strip())
    return m


def interface_type_from_technique(el) -> dict:
    tech = el.find("technique")
    src = tech if tech is not None else el
    iface, plugin = src.find("interface"), src.find("plugin")
    return {"interface": (iface.text or "").strip() if iface is not None else None,
            "plugin": (plugin.text or "").strip() if plugin is not None else None}


def read_collision(tech, robot: Robot, link_name: Callable, warn: Callable[[str], None],
                   bound_geometry: Callable) -> None:
    for pair in tech.findall("ignore_link_pair"):
        a, b = link_name(pair.get("link0"), pair), link_name(pair.get("link1"), pair)
        if a is None or b is None:
            warn(f"ignore_link_pair {pair.get('link0')!r}/{pair.get('link1')!r}: link not found")
            continue
        if (a, b) not in robot.collision_ignore and (b, a) not in robot.collision_ignore:
            robot.collision_ignore.append((a, b))
    for state in tech.findall("link_collision_state"):
        name = link_name(state.get("link"), state)
        b = state.find("bool")
        text = (b.text if b is not None else state.text) or ""
        if name is not None:
            robot.links[name].extras["collision_enabled"] = text.strip().lower() in ("true", "1")
    for bind in tech.findall("bind_instance_geometry"):
        name = link_name(bind.get("link"), bind)
        if name is None:
            warn(f"bind_instance_geometry: link {bind.get('link')!r} not found")
            continue
        groups = robot.links[name].extras.setdefault("geometry_groups", {})
        groups.setdefault(bind.get("type", "self"), []).extend(bound_geometry(bind))
