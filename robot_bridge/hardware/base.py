"""The hardware interface the controller node drives, and the per-joint limits it enforces.

One :class:`Hardware` moves a list of joints (one Schunk-style module per joint).  Positions are
radians (metres for prismatic joints), in the order of ``joint_names``.  Implementations:
:mod:`.sim` (simulated modules) and :mod:`.canopen_driver` (CiA 402 drives over CANopen).
"""

from __future__ import annotations

import abc
import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..model import Robot


@dataclass(frozen=True)
class JointLimits:
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = 1.0
    acceleration: float = 2.0
    effort: float = math.inf

    def contains(self, position: float, tolerance: float = 0.0) -> bool:
        return self.lower - tolerance <= position <= self.upper + tolerance


def limits_from_robot(robot: Robot, joint_names: Sequence[str], default_velocity: float = 1.0,
                      default_acceleration: float = 2.0) -> list[JointLimits]:
    """Limits of single-DOF joints from the description.

    A circular (continuous) joint, or one whose upper limit is not above its lower limit, has no
    position limits; a zero velocity / acceleration / effort limit means "not given" and falls back
    to the defaults (velocity, acceleration) or to unlimited (effort), with a warning on the robot.
    """
    out = []
    for name in joint_names:
        joint = robot.joints.get(name)
        if joint is None:
            raise KeyError(f"joint {name!r} is not in robot {robot.name!r}")
        if joint.dof != 1:
            raise ValueError(f"joint {name!r} has {joint.dof} DOF; the controller drives 1-DOF joints")
        bounded = not joint.circular[0] and joint.upper[0] > joint.lower[0]
        velocity, acceleration = float(joint.velocity[0]), float(joint.acceleration[0])
        if velocity <= 0.0:
            robot.warn(f"joint {name!r}: no velocity limit, using {default_velocity}")
            velocity = default_velocity
        if acceleration <= 0.0:
            robot.warn(f"joint {name!r}: no acceleration limit, using {default_acceleration}")
            acceleration = default_acceleration
        out.append(JointLimits(
            lower=float(joint.lower[0]) if bounded else -math.inf,
            upper=float(joint.upper[0]) if bounded else math.inf,
            velocity=velocity, acceleration=acceleration,
            effort=float(joint.effort[0]) if joint.effort[0] > 0.0 else math.inf))
    return out


class ModuleState(enum.Enum):
    DISABLED = "disabled"          # brake engaged, no torque
    ENABLED = "enabled"            # holding / moving under control
    STOPPING = "stopping"          # halt / quick stop deceleration in progress
    FAULT = "fault"
    OFFLINE = "offline"            # not opened / not communicating


class FaultKind(enum.Enum):
    FOLLOWING_ERROR = "following_error"
    COMMUNICATION_TIMEOUT = "communication_timeout"
    EMERGENCY_STOP = "emergency_stop"
    POSITION_LIMIT = "position_limit"
    DRIVE = "drive"                # any other error a drive reports


@dataclass
class ModuleStatus:
    joint: str
    state: ModuleState
    hardware_id: str
    brake: bool                                   # True = brake engaged
    fault: FaultKind | None = None
    message: str = ""
    error_code: int = 0                           # CiA 301/402 error code (0x603F) when known
    details: dict[str, str] = field(default_factory=dict)


@dataclass
class JointSample:
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    acceleration: np.ndarray
    stamp: float | None = None        # when the values were measured (time.monotonic() seconds), if known


# hardware times -> (positions, velocities) at them, or None (see Hardware.follow)
Setpoints = Callable[[np.ndarray], "tuple[np.ndarray, np.ndarray] | None"]


class HardwareError(RuntimeError):
    """A command the hardware cannot carry out (not open, faulted, disabled, bad size)."""


class Hardware(abc.ABC):
    """Schunk-style modules: open/close, enable/disable (brakes), read, command, halt, recover."""

    def __init__(self, joint_names: Sequence[str], limits: Sequence[JointLimits]):
        if len(joint_names) != len(limits):
            raise ValueError("one JointLimits per joint expected")
        self.joint_names = list(joint_names)
        self.limits = list(limits)

    # -- lifecycle --------------------------------------------------------
    @abc.abstractmethod
    def open(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def enable(self, on: bool = True) -> None:
        """Enable (release brakes, hold position) or disable (engage brakes) every module."""

    # -- I/O --------------------------------------------------------------
    @abc.abstractmethod
    def read(self) -> JointSample: ...

    @abc.abstractmethod
    def command_position(self, positions: Sequence[float], velocities: Sequence[float] | None = None) -> None:
        """New position targets; each module moves there with its trapezoidal profile.

        ``velocities``: the set-points' own velocity when streaming a trajectory (feed-forward);
        hardware without feed-forward ignores it.
        """

    def follow(self, setpoints: Setpoints | None) -> bool:
        """Stream ``setpoints`` between commands: hardware that interpolates by itself (a drive's own
        interpolation buffer; the simulation) samples them at the instants it actually reaches, so a late
        control tick costs no tracking.  ``setpoints(times)``: (positions, velocities), each (len(times),
        joints), at ``times`` of this hardware's clock (the stamps of its samples), or None: keep the last
        targets.  None clears it; any other command does too.  False: not supported (the default: the
        position commands alone drive the modules)."""
        return False

    @abc.abstractmethod
    def command_velocity(self, velocities: Sequence[float]) -> None: ...

    @abc.abstractmethod
    def halt(self) -> None:
        """Decelerate every module to rest with its maximum deceleration and hold."""

    @abc.abstractmethod
    def recover(self) -> None:
        """Clear faults (fault reset) and re-enable; raises HardwareError if a fault persists."""

    @abc.abstractmethod
    def status(self) -> list[ModuleStatus]: ...

    # -- helpers for implementations -----------------------------------------
    @property
    def online(self) -> bool:
        """Open (modules reachable); implementations may answer without building every status."""
        return self.status()[0].state is not ModuleState.OFFLINE

    @property
    def faulted(self) -> bool:
        return any(s.state is ModuleState.FAULT for s in self.status())

    def _vector(self, values: Sequence[float], what: str) -> np.ndarray:
        v = np.asarray(values, dtype=float).reshape(-1)
        if v.size != len(self.joint_names):
            raise HardwareError(f"{what}: {v.size} values for {len(self.joint_names)} joints")
        if not np.all(np.isfinite(v)):
            raise HardwareError(f"{what}: non-finite value")
        return v

    def _require_operational(self, what: str) -> None:
        for s in self.status():
            if s.state is ModuleState.FAULT:
                raise HardwareError(f"{what} rejected: {s.joint} faulted ({s.message})")
            if s.state in (ModuleState.DISABLED, ModuleState.OFFLINE):
                raise HardwareError(f"{what} rejected: {s.joint} is {s.state.value}")
