"""Every value of a goal checked before the planner uses it (no rclpy): each bad input gets the
MoveItErrorCodes value move_group answers it with, never an internal error (docs/planning.md has the table).

- start states: one position per name, every one finite (else START_STATE_INVALID -26);
- quaternions: finite, of length within ``QUATERNION_TOLERANCE`` of 1 (normalized), else
  INVALID_GOAL_CONSTRAINTS -16 (a zero or vanishing quaternion has no orientation);
- poses: finite rigid 4x4 transforms (INVALID_GOAL_CONSTRAINTS);
- scaling factors: MoveIt's rule (MotionPlanRequest.msg: a factor outside (0, 1], 0 included, counts as
  1.0); a trajectory that the factors would stretch beyond ``MAX_TRAJECTORY_DURATION`` (or to no finite
  duration) is INVALID_MOTION_PLAN -2.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

from ..model.transform import is_rigid, make
from .errors import InvalidGoal, InvalidMotionPlan, StartStateInvalid

QUATERNION_TOLERANCE = 0.1      # |length - 1| of a quaternion accepted (then normalized)
MAX_TRAJECTORY_DURATION = 86400.0   # s: a scaled trajectory lasting longer is no motion plan
START_TOLERANCE = 0.01          # rad / m: an executed goal's start_state differs this much from the robot's


def start_state(names: Sequence[str], positions: Sequence[float], limit: int = 10000) -> dict[str, float]:
    """name -> position of a request's start state (StartStateInvalid -26: lengths differ, too many names,
    a value that is not a finite number)."""
    if len(names) != len(positions) or len(names) > limit:
        raise StartStateInvalid(f"start state: {len(names)} names and {len(positions)} positions (at most "
                                f"{limit})")
    out = {}
    for name, value in zip(names, positions):
        value = float(value)
        if not math.isfinite(value):
            raise StartStateInvalid(f"start state: joint {name!r} at {value!r}, not a finite position")
        out[str(name)] = value
    return out


def start_at_current(start: Mapping[str, float], current: Mapping[str, float],
                     tolerance: float = START_TOLERANCE) -> None:
    """An executed goal starts where the robot is: every joint of ``start`` finite, known in ``current``
    (the robot's joint states) and within ``tolerance`` of it; StartStateInvalid -26 otherwise."""
    bad = [n for n, v in start.items() if not math.isfinite(v)]
    if bad:
        raise StartStateInvalid(f"start state not finite for {sorted(bad)}")
    off = sorted(n for n, v in start.items() if n not in current or not abs(current[n] - v) <= tolerance)
    if off:
        raise StartStateInvalid("an executed goal starts at the current state; start_state differs from "
                                f"the joint states by more than {tolerance:g} for {off}")


def joint_values(values: Mapping[str, float], what: str = "joint goal") -> dict[str, float]:
    """Joint goal positions, each a finite number (InvalidGoal -16)."""
    out = {}
    for name, value in values.items():
        value = float(value)
        if not math.isfinite(value):
            raise InvalidGoal(f"{what}: joint {name!r} at {value!r}, not a finite position")
        out[name] = value
    return out


def quaternion(xyzw: Sequence[float], what: str = "orientation") -> np.ndarray:
    """3x3 rotation of an xyzw quaternion: finite, of length 1 within QUATERNION_TOLERANCE (normalized);
    InvalidGoal -16 otherwise."""
    from ..model.transform import from_quat_xyzw

    q = np.asarray([float(v) for v in xyzw], dtype=float)
    if q.shape != (4,) or not np.isfinite(q).all():
        raise InvalidGoal(f"{what}: quaternion {q.tolist()} not finite")
    norm = float(np.sqrt(np.sum(q * q)))
    if not abs(norm - 1.0) <= QUATERNION_TOLERANCE:
        raise InvalidGoal(f"{what}: quaternion {q.tolist()} of length {norm:.4g}, not a unit quaternion "
                          f"(within {QUATERNION_TOLERANCE:g})")
    return from_quat_xyzw(q / norm)


def pose(position: Sequence[float], xyzw: Sequence[float], what: str = "pose") -> np.ndarray:
    """4x4 of a position and an xyzw quaternion (InvalidGoal -16 when a value is not finite or the
    quaternion is not a unit one)."""
    p = np.asarray([float(v) for v in position], dtype=float)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise InvalidGoal(f"{what}: position {p.tolist()} not finite")
    return make(quaternion(xyzw, what), p)


def check_pose(matrix, what: str = "pose") -> np.ndarray:
    """A finite rigid 4x4 transform (InvalidGoal -16 otherwise)."""
    m = np.asarray(matrix, dtype=float)
    if m.shape != (4, 4) or not np.isfinite(m).all():
        raise InvalidGoal(f"{what} is not a finite 4x4 matrix")
    if not is_rigid(m, 1e-6):
        raise InvalidGoal(f"{what} is not a rigid transform")
    return m


def scaling_factor(value: float) -> float:
    """MoveIt's rule (MotionPlanRequest.msg): a factor outside (0, 1], 0 and NaN included, counts as 1."""
    value = float(value)
    return value if 0.0 < value <= 1.0 else 1.0


def scaled_duration(duration: float, velocity: float, acceleration: float) -> float:
    """Duration of a trajectory slowed to ``velocity`` and ``acceleration`` factors (already in (0, 1]);
    InvalidMotionPlan -2 when it is not finite or longer than MAX_TRAJECTORY_DURATION."""
    k = max(1.0 / velocity, math.sqrt(1.0 / acceleration))
    out = duration * k
    if not (math.isfinite(k) and math.isfinite(out) and out <= MAX_TRAJECTORY_DURATION):
        raise InvalidMotionPlan(f"scaling factors {velocity:g} (velocity) and {acceleration:g} "
                                f"(acceleration) stretch the {duration:.3g} s trajectory to {out:.3g} s "
                                f"(at most {MAX_TRAJECTORY_DURATION:g} s)")
    return out


def body_problem(pose_matrix, world_box: float) -> Optional[str]:
    """Why a body cannot be at ``pose_matrix`` (None: it can): not a finite rigid transform, or its origin
    outside the cube of half extent ``world_box`` (m) about the world origin."""
    m = np.asarray(pose_matrix, dtype=float)
    if m.shape != (4, 4) or not np.isfinite(m).all():
        return "pose is not a finite 4x4 matrix"
    if not is_rigid(m, 1e-6):
        return "pose is not a rigid transform"
    t = m[:3, 3]
    if not (np.abs(t) <= world_box).all():
        return (f"position ({t[0]:.4g}, {t[1]:.4g}, {t[2]:.4g}) outside world_box {world_box:g} m (the cube "
                "of that half extent about the world origin)")
    return None
