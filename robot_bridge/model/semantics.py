"""Semantic description (SRDF: MoveIt elements and hpp-manipulation extensions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np


@dataclass
class Group:
    name: str
    links: list[str] = field(default_factory=list)
    joints: list[str] = field(default_factory=list)
    chains: list[tuple[str, str]] = field(default_factory=list)     # (base_link, tip_link)
    subgroups: list[str] = field(default_factory=list)


@dataclass
class GroupState:
    name: str
    group: str
    values: dict[str, list[float]] = field(default_factory=dict)     # joint -> values (multi-DOF)


@dataclass
class EndEffector:
    name: str
    group: str
    parent_link: str
    parent_group: Optional[str] = None


@dataclass
class VirtualJoint:
    name: str
    type: str
    parent_frame: str
    child_link: str


@dataclass
class CollisionPair:
    link1: str
    link2: str
    reason: Optional[str] = None
    enabled: bool = False          # True for <enable_collisions>


@dataclass
class Sphere:
    center: np.ndarray
    radius: float


@dataclass
class Handle:
    """hpp-manipulation handle: a graspable frame on ``link``.  ``approaching_direction`` (handle frame, unit,
    hpp's default x) is the way the gripper comes in: the pre-grasp is backed off against it by both
    clearances (planning.grasp)."""

    name: str
    link: str
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))     # link frame -> handle frame
    mask: list[bool] = field(default_factory=lambda: [True] * 6)
    clearance: float = 0.0
    approaching_direction: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))


@dataclass
class Gripper:
    """hpp-manipulation gripper: a frame (``pose`` in ``link``) that goes onto a handle.  hpp's files name no
    joints: ``joints`` empty is a frame only (its fingers, if any, are the SRDF end effector's on that
    link's body, see control.groups); robot_bridge's ``<joint>`` children name the fingers."""

    name: str
    link: str
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    joints: list[str] = field(default_factory=list)
    clearance: float = 0.0


@dataclass
class Contact:
    name: str
    link: str
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    shapes: list[list[int]] = field(default_factory=list)            # polygons as point indices
    index: Optional[int] = None      # points in the frame of the link's index-th collision body


@dataclass
class Semantics:
    robot_name: Optional[str] = None
    groups: dict[str, Group] = field(default_factory=dict)
    group_states: list[GroupState] = field(default_factory=list)
    end_effectors: dict[str, EndEffector] = field(default_factory=dict)
    virtual_joints: dict[str, VirtualJoint] = field(default_factory=dict)
    passive_joints: list[str] = field(default_factory=list)
    collision_pairs: list[CollisionPair] = field(default_factory=list)
    disable_default_collisions: list[str] = field(default_factory=list)  # links
    link_spheres: dict[str, list[Sphere]] = field(default_factory=dict)
    joint_properties: dict[str, dict[str, str]] = field(default_factory=dict)
    handles: dict[str, Handle] = field(default_factory=dict)
    grippers: dict[str, Gripper] = field(default_factory=dict)
    contacts: dict[str, Contact] = field(default_factory=dict)
    extras: dict[str, list[Any]] = field(default_factory=dict)          # custom tag name -> handler results
    source: Optional[str] = None
    warnings: list[str] = field(default_factory=list)

    def state(self, name: str) -> Optional[GroupState]:
        for s in self.group_states:
            if s.name == name:
                return s
        return None
