"""One format-independent robot model (no rclpy)."""

from .geometry import Box, Cylinder, Geometry, Material, Mesh, Sphere
from .robot import (JOINT_TYPES, SENSOR_TYPES, Actuator, AttachedSensor, Inertial, Joint, Link,
                    Manipulator, Mimic, Robot, joint_dof)
from .semantics import (CollisionPair, Contact, EndEffector, Gripper, Group, GroupState, Handle,
                        Semantics, VirtualJoint)

__all__ = [
    "Box", "Cylinder", "Geometry", "Material", "Mesh", "Sphere",
    "JOINT_TYPES", "SENSOR_TYPES", "Actuator", "AttachedSensor", "Inertial", "Joint", "Link",
    "Manipulator", "Mimic", "Robot", "joint_dof",
    "CollisionPair", "Contact", "EndEffector", "Gripper", "Group", "GroupState", "Handle",
    "Semantics", "VirtualJoint",
]
