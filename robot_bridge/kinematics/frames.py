"""TF frame names derived from the model, shared by every node.

One place decides what each frame is called so the description node, the
sensor bridge and the controller always agree.
"""

from __future__ import annotations

import numpy as np

from ..model import AttachedSensor, Manipulator


def link_frame(link: str, prefix: str = "") -> str:
    return f"{prefix}{link}"


def sensor_frame(sensor: AttachedSensor | str, prefix: str = "") -> str:
    """The sensor's own frame (child of its link)."""
    name = sensor if isinstance(sensor, str) else sensor.name
    return f"{prefix}{name}"


def optical_frame(sensor: AttachedSensor | str, prefix: str = "") -> str:
    """REP-103 optical frame of a camera (z forward, x right, y down)."""
    return f"{sensor_frame(sensor, prefix)}_optical_frame"


def data_frame(sensor: AttachedSensor, prefix: str = "") -> str:
    """frame_id to stamp on the sensor's messages (cameras: the optical frame)."""
    return optical_frame(sensor, prefix) if sensor.type == "camera" else sensor_frame(sensor, prefix)


def optical_offset(sensor: AttachedSensor) -> np.ndarray:
    """4x4 pose of the optical frame in the sensor frame (cameras).

    The model keeps OpenRAVE's camera convention (COLLADA ``base_pinhole_camera``
    alike): the sensor frame already looks along +z with x right and y down
    (upstream BaseCamera projects pixel (u, v) to ((u-cx)/fx, (v-cy)/fy, 1)), so
    the REP-103 optical frame coincides with it.
    """
    return np.eye(4)


def tool_frame(manip: Manipulator | str, prefix: str = "") -> str:
    name = manip if isinstance(manip, str) else manip.name
    return f"{prefix}{name}_tool"


def handle_frame(name: str, prefix: str = "") -> str:
    """hpp handle frame: ``handle_<name>`` with ``/`` in hpp names (``box/handle``) made ``_``;
    the prefix is kept as given, like every other frame."""
    return f"{prefix}handle_{name.replace('/', '_')}"


def gripper_frame(name: str, prefix: str = "") -> str:
    return f"{prefix}gripper_{name.replace('/', '_')}"


WORLD_FRAME = "world"
