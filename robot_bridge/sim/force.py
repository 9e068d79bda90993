"""Simulated 6-axis force/torque sensor (OpenRAVE ``forcesensor``, COLLADA ``base_force6d``).

A static model: no contact forces (the simulation has no dynamics), only the weight of what hangs on
the sensor.  The reading is the wrench the links below the sensor's link (its subtree in the
kinematic tree, not the link itself) exert on the sensor through gravity (0, 0, -9.80665) m/s^2 in
the world, about the sensor frame's origin and expressed in the sensor frame.  Links without
inertial data weigh nothing; a sensor on a leaf link reads a zero wrench.
"""

from __future__ import annotations

import numpy as np

from ..model import AttachedSensor, Robot
from .imu import STANDARD_GRAVITY
from .scene import Scene


def links_below(robot: Robot, link: str) -> list[str]:
    children: dict[str, list[str]] = {}
    for j in robot.joints.values():
        children.setdefault(j.parent, []).append(j.child)
    out, todo = [], list(children.get(link, []))
    while todo:
        name = todo.pop()
        out.append(name)
        todo.extend(children.get(name, []))
    return out


class WrenchSimulator:
    def __init__(self, robot: Robot, sensor: AttachedSensor):
        self.sensor = sensor
        self.loads = [(name, robot.links[name].inertial) for name in links_below(robot, sensor.link)
                      if robot.links[name].inertial is not None and robot.links[name].inertial.mass > 0]

    def wrench(self, scene: Scene) -> tuple[np.ndarray, np.ndarray]:
        """(force, torque) in the sensor frame (N, N m)."""
        pose = scene.sensor_pose(self.sensor)
        g = np.array([0.0, 0.0, -STANDARD_GRAVITY])
        force, torque = np.zeros(3), np.zeros(3)
        for link, inertial in self.loads:
            com = (scene.link_pose(link) @ inertial.origin)[:3, 3]
            f = inertial.mass * g
            force += f
            torque += np.cross(com - pose[:3, 3], f)
        rot = pose[:3, :3]
        return rot.T @ force, rot.T @ torque
