"""The format-independent robot model every reader fills and every node consumes.

Frames and kinematics
---------------------
Each link has a frame.  A joint connects ``parent`` -> ``child`` link and moves
the child by::

    T_child = T_parent @ joint.origin @ joint.motion(q) @ joint.child_offset

``origin`` is the joint frame in the parent link frame at q = 0; ``axes`` are
unit vectors in the joint frame; ``child_offset`` is the child link frame in
the joint frame (identity unless the file's link frame lies off the joint
axis, as OpenRAVE allows with ``<anchor>``).  ``motion(q)``:

- revolute / continuous / hinge: rotation about ``axes[0]`` by q
- prismatic: translation along ``axes[0]`` by q
- universal / hinge2: R(axes[0], q0) @ R(axes[1], q1)
- spherical: R(axes[0], q0) @ R(axes[1], q1) @ R(axes[2], q2) (x, y, z by
  default) -- the same chain the URDF writer emits
- fixed: identity

Per-DOF arrays (limits, velocities, ...) have length ``joint.dof``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .geometry import Geometry

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "universal", "hinge2", "spherical")
_DOF = {"revolute": 1, "continuous": 1, "prismatic": 1, "fixed": 0, "universal": 2, "hinge2": 2,
        "spherical": 3}


# the per-DOF arrays of a Joint and the value each DOF gets when the array is empty
_PER_DOF_FILL = (("lower", 0.0), ("upper", 0.0), ("velocity", 0.0), ("acceleration", 0.0), ("effort", 0.0),
                 ("weight", 1.0), ("resolution", 0.0), ("initial", 0.0), ("offset", 0.0))
_FLOAT = np.dtype(np.float64)
_EYE4 = np.eye(4)
_ONES = {n: np.ones(n) for n in set(_DOF.values())}     # copied: np.ones is several calls
_NO_VALUES = np.zeros(0)
_NO_VALUES.flags.writeable = False


def _no_values() -> np.ndarray:
    """The default of a per-DOF array: a shared empty array, replaced in Joint.__post_init__."""
    return _NO_VALUES


def joint_dof(joint_type: str) -> int:
    return _DOF[joint_type]


@dataclass
class Inertial:
    mass: float = 0.0
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))     # link frame -> inertia frame (com)
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))  # about com, in inertia frame


@dataclass
class Link:
    name: str
    visuals: list[Geometry] = field(default_factory=list)
    collisions: list[Geometry] = field(default_factory=list)
    inertial: Optional[Inertial] = None
    static: bool = False                      # OpenRAVE type="static"
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class Mimic:
    """Mimic formulas for one DOF (fparser syntax, joint names as variables).

    ``position`` gives this DOF's value from other joints; ``velocity`` and
    ``acceleration`` map a variable name to the partial derivative expression
    (OpenRAVE ``|J expr`` terms).
    """

    position: str
    velocity: dict[str, str] = field(default_factory=dict)
    acceleration: dict[str, str] = field(default_factory=dict)


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=_EYE4.copy)
    axes: list[np.ndarray] = field(default_factory=list)
    child_offset: np.ndarray = field(default_factory=_EYE4.copy)
    # an empty per-DOF array is replaced by a new one of ``dof`` values in __post_init__
    lower: np.ndarray = field(default_factory=_no_values)
    upper: np.ndarray = field(default_factory=_no_values)
    soft_lower: Optional[np.ndarray] = None
    soft_upper: Optional[np.ndarray] = None
    velocity: np.ndarray = field(default_factory=_no_values)
    acceleration: np.ndarray = field(default_factory=_no_values)
    effort: np.ndarray = field(default_factory=_no_values)
    weight: np.ndarray = field(default_factory=_no_values)
    resolution: np.ndarray = field(default_factory=_no_values)
    circular: list[bool] = field(default_factory=list)
    initial: np.ndarray = field(default_factory=_no_values)
    offset: np.ndarray = field(default_factory=_no_values)   # OpenRAVE internal joint offset
    passive: bool = False
    mimic: list[Optional[Mimic]] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.type not in _DOF:
            raise ValueError(f"joint {self.name!r}: unknown type {self.type!r}")
        n = _DOF[self.type]
        if not self.axes and n:
            default = [np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])]
            self.axes = default[:n] if self.type == "spherical" else [default[2]] * n
        fields = self.__dict__
        for name, fill in _PER_DOF_FILL:
            value = fields[name]
            if value is _NO_VALUES:                 # the default: most per-DOF arrays of most joints
                fields[name] = np.zeros(n) if fill == 0.0 else _ONES[n].copy()
                continue
            if type(value) is not np.ndarray or value.dtype != _FLOAT or value.ndim != 1:
                value = np.asarray(value, dtype=float).reshape(-1)
            size = value.shape[0]
            if size == 0:
                value = np.zeros(n) if fill == 0.0 else np.ones(n)
            elif size == 1 and n > 1:
                value = np.full(n, float(value[0]))
            fields[name] = value
        if not self.circular:
            self.circular = [self.type == "continuous"] * n
        if not self.mimic:
            self.mimic = [None] * n

    @property
    def dof(self) -> int:
        return _DOF[self.type]

    @property
    def is_mimic(self) -> bool:
        return any(m is not None for m in self.mimic)

    @property
    def is_active(self) -> bool:
        """A DOF a controller commands: movable, not passive, not mimic."""
        return self.dof > 0 and not self.passive and not self.is_mimic


@dataclass
class Manipulator:
    name: str
    base: str                                  # link
    effector: str                              # link
    tool: np.ndarray = field(default_factory=lambda: np.eye(4))       # effector frame -> tool frame
    gripper_joints: list[str] = field(default_factory=list)
    closing_directions: list[float] = field(default_factory=list)    # one per gripper joint
    chucking_directions: list[float] = field(default_factory=list)
    direction: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))  # approach, tool frame
    ik_solver: Optional[str] = None
    ik_solver_args: Optional[str] = None
    ik_free_joints: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)


SENSOR_TYPES = ("laser", "flash_lidar", "camera", "imu", "force6d", "odometry", "actuator", "tactile",
                "other")


@dataclass
class AttachedSensor:
    """A sensor fixed to a link.

    ``type`` is one of SENSOR_TYPES; ``params`` uses these keys where they apply
    (SI units, radians):
    - laser: angle_min, angle_max, angle_increment, range_min, range_max,
      scan_time, time_increment, (3d lasers) vertical_min/max/increment
    - flash_lidar (3D flash lidar, organized point cloud): width, height, fx, fy, cx, cy,
      range_min, range_max, scan_time
    - camera: width, height, fx, fy, cx, cy, distortion_model, distortion (list),
      frame_rate, format (e.g. "rgb8", "32FC1"), depth (bool)
    - imu: orientation_covariance, angular_velocity_covariance,
      linear_acceleration_covariance (9 floats each), rate
    - force6d / odometry: rate, covariance
    ``interface`` keeps the file's sensor type name (e.g. "BaseLaser2D",
    "base_pinhole_camera"); ``raw`` anything else the file said.
    """

    name: str
    link: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))    # link frame -> sensor frame
    type: str = "other"
    interface: Optional[str] = None
    params: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class Actuator:
    name: str
    type: str = "electric_motor"
    joint: Optional[str] = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Robot:
    name: str
    links: dict[str, Link] = field(default_factory=dict)
    joints: dict[str, Joint] = field(default_factory=dict)
    manipulators: dict[str, Manipulator] = field(default_factory=dict)
    sensors: dict[str, AttachedSensor] = field(default_factory=dict)
    actuators: dict[str, Actuator] = field(default_factory=dict)
    semantics: Optional["Semantics"] = None                  # from SRDF / generated
    collision_ignore: list[tuple[str, str]] = field(default_factory=list)  # adjacent / ignore_link_pair
    environment: dict[str, "Robot"] = field(default_factory=dict)          # other bodies of an env file
    placement: np.ndarray = field(default_factory=lambda: np.eye(4))       # world -> root link
    is_robot: bool = True                                    # False for a plain KinBody
    source: Optional[str] = None                              # file it was read from
    extras: dict[str, Any] = field(default_factory=dict)     # opaque plugin elements
    warnings: list[str] = field(default_factory=list)        # things read but not expressible / unknown
    missing_meshes: list[str] = field(default_factory=list)  # mesh URIs not found on this host (warned)

    # -- tree queries ------------------------------------------------------
    def root_links(self) -> list[str]:
        """The links no joint has as child, in link order (one pass: linear in the robot's size)."""
        children = {j.child for j in self.joints.values()}
        return [name for name in self.links if name not in children]

    @property
    def root(self) -> str:
        """The root link (the one no joint has as child)."""
        roots = self.root_links()
        if not roots:
            raise ValueError(f"robot {self.name!r} has no root link")
        return roots[0]

    def child_joints(self, link: str) -> list[Joint]:
        return [j for j in self.joints.values() if j.parent == link]

    def parent_joint(self, link: str) -> Optional[Joint]:
        for j in self.joints.values():
            if j.child == link:
                return j
        return None

    @property
    def active_joints(self) -> list[Joint]:
        return [j for j in self.joints.values() if j.is_active]

    @property
    def dof(self) -> int:
        return sum(j.dof for j in self.joints.values())

    def warn(self, message: str) -> None:
        """Record something read but not kept or not expressible (reported once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def mesh_warnings_left_out(self, told: str = "") -> list[str]:
        """The warnings without each missing mesh's "not found" line: all of them for a node that draws no
        meshes (``told`` empty), else those whose URI ``told`` (the conversion's report) names already."""
        said = {f"mesh {uri!r} not found" for uri in self.missing_meshes
                if not told or f"mesh {uri!r} " in told}
        return [w for w in self.warnings if w not in said]


from .semantics import Semantics  # noqa: E402  (forward reference above)
