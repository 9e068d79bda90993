"""What a master asks the planner for, and what it gets back (plain data, no library types)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from ..model import Handle


@dataclass
class JointGoal:
    """Joint values by name; joints of the group not named keep their start value."""

    positions: Mapping[str, float]
    group: Optional[str] = None


@dataclass
class NamedGoal:
    """An SRDF ``group_state`` by name (``group`` picks among states of the same name)."""

    name: str
    group: Optional[str] = None


@dataclass
class PoseGoal:
    """``frame`` (a link, default: the group's tip) times ``offset`` reaches ``pose`` (4x4, world frame) on
    the axes ``mask`` constrains (3 translations, 3 rotations, in the goal frame; hpp's convention)."""

    group: str
    pose: np.ndarray
    frame: Optional[str] = None
    offset: np.ndarray = field(default_factory=lambda: np.eye(4))
    mask: Sequence[bool] = (True,) * 6


@dataclass
class GraspGoal:
    """An hpp gripper of the robot on a handle of a world body (``handle``: its name among the body's
    handles, or a :class:`~robot_bridge.model.Handle` whose ``link`` is a link of the body)."""

    gripper: str
    body: str
    handle: str | Handle
    group: Optional[str] = None


@dataclass
class PlaceGoal:
    """Put the held ``body`` down with its file's frame at ``pose`` (4x4, world frame), as
    moveit_msgs/Place: the gripper comes from ``distance`` back along ``direction`` (world; default straight
    down) and may set the body on its support: ``support`` (``support_surface_name``; empty: the bodies it
    rested on when it was picked up), which it may touch or sink into by at most
    ``planner.PLACE_PENETRATION``.
    ``allow_gripper_support_collision``: the gripper's links (those the body may touch) may touch the
    support too."""

    body: str
    pose: np.ndarray
    support: str = ""
    direction: Sequence[float] = (0.0, 0.0, -1.0)
    distance: float = 0.05
    allow_gripper_support_collision: bool = False
    group: Optional[str] = None


@dataclass
class Trajectory:
    """A time-parameterized trajectory of ``joint_names``: (n,) times from start, (n, joints) arrays."""

    joint_names: list[str]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray

    @property
    def duration(self) -> float:
        return float(self.times[-1]) if len(self.times) else 0.0

    def index_at(self, t: float) -> int:
        """Index of the last sample at or before ``t`` (0 before the start)."""
        return max(0, int(np.searchsorted(self.times, t, side="right")) - 1)


@dataclass
class MotionPlan:
    """A planned motion: the collision-checked waypoints (full joint vectors are internal; these are the
    group's joints) and the trajectory through them."""

    group: str
    waypoints: np.ndarray                 # (m, joints) in trajectory.joint_names order
    trajectory: Trajectory
    planning_time: float = 0.0


@dataclass
class GraspPlan:
    """Reach the pre-grasp pose (``reach``), then approach the handle along a straight joint segment
    (``approach``); close the gripper, :meth:`Planner.attach` the body, lift."""

    reach: MotionPlan
    approach: MotionPlan
    pregrasp_pose: np.ndarray             # world pose of the gripper frame at pre-grasp
    grasp_pose: np.ndarray                # ... at the grasp (the handle's pose)
    gripper_link: str
    gripper_offset: np.ndarray            # gripper_link frame -> gripper frame
    body: str
    handle: Handle
    mask: list[bool]


@dataclass
class PlacePlan:
    """Reach the pre-place pose (``reach``), then approach the place pose along a straight joint segment
    (``approach``, the body allowed on ``supports``); open the gripper, :meth:`Planner.detach` the body."""

    reach: MotionPlan
    approach: MotionPlan
    preplace_pose: np.ndarray             # world pose of the carrying link at pre-place
    place_pose: np.ndarray                # ... at the place pose
    link: str                             # the link carrying the body
    body: str
    body_pose: np.ndarray                 # world pose of the body's file frame once placed (the goal's)
    supports: list[str]                   # bodies it may touch there
    depth: float = 0.0                    # m it sinks into them at most on the approach (0: no contact)


@dataclass
class PathCheck:
    """Whether the rest of a trajectory is collision-free against the current world."""

    valid: bool
    collision_time: Optional[float] = None      # first sample time found in collision
    bodies: list[str] = field(default_factory=list)
