"""The files a MoveIt user otherwise makes with the setup assistant, for a robot driven by controller_node.

:func:`write_moveit_config` writes into one folder:

- ``<robot>.urdf`` (each manipulator's tool frame a link, see ``urdf.to_urdf(tool_frames=True)``) and
  ``<robot>.srdf`` (``srdf.moveit_semantics``: groups, end effectors, states of driven joints, ``home``);
- ``moveit_controllers.yaml``: moveit_simple_controller_manager, one FollowJointTrajectory controller per
  arm group and one GripperCommand controller per gripper, named so that ``<name>/<action_ns>`` is the
  action controller_node serves with ``controller_node.yaml``;
- ``joint_limits.yaml`` (the limits controller_node enforces) and ``kinematics.yaml`` (KDL per arm group);
- ``controller_node.yaml``: the controller_node parameters (description, SRDF, ``controllers``) that serve
  exactly those actions.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..control.groups import controller_groups
from ..hardware.base import limits_from_robot
from ..model import Robot
from ..model.groups import driven_joints
from .srdf import arm_groups, moveit_semantics, write_srdf
from .urdf import write_urdf

NODE = "controller_node"
KINEMATICS_SOLVER = "kdl_kinematics_plugin/KDLKinematicsPlugin"


@dataclass
class MoveitConfig:
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)
    controllers: dict[str, dict] = field(default_factory=dict)     # MoveIt controller name -> its entry
    notes: list[str] = field(default_factory=list)


def write_moveit_config(robot: Robot, folder, description_file: str, search_path=(), node: str = NODE,
                        default_velocity: float = 1.0, default_acceleration: float = 2.0) -> MoveitConfig:
    """Write the MoveIt configuration of ``robot`` (its semantics already attached when an SRDF was given)
    into ``folder``; ``description_file`` is what controller_node loads."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = MoveitConfig(folder)
    name = robot.name or "robot"
    urdf_path, srdf_path = folder / f"{name}.urdf", folder / f"{name}.srdf"
    report = write_urdf(robot, urdf_path, mesh_dir=folder / "meshes", tool_frames=True)
    out.notes += report.not_expressible + report.notes
    semantics = moveit_semantics(robot)
    write_srdf(semantics, srdf_path, robot_name=name)
    out.files.update(urdf=urdf_path, srdf=srdf_path)

    driven = driven_joints(robot)
    view = copy.copy(robot)
    view.semantics = semantics
    arms, used = [], set()
    for group in arm_groups(semantics):                 # each joint in one controller (MoveIt's default)
        try:
            [(_, joints)] = controller_groups(view, driven, [group])
        except ValueError as exc:
            out.notes.append(f"group {group!r}: no trajectory controller ({exc})")
            continue
        if used & set(joints):
            out.notes.append(f"group {group!r} shares joints with another arm group: no controller of its "
                             "own")
            continue
        used |= set(joints)
        arms.append((group, joints))
    grippers = [m for m in robot.manipulators.values() if m.gripper_joints and m.gripper_joints[0] in driven]
    controllers = {}
    for group, joints in arms:
        controllers[f"{node}/{group}"] = {"type": "FollowJointTrajectory",
                                          "action_ns": "follow_joint_trajectory", "default": True,
                                          "joints": joints}
    for m in grippers:
        key = node if len(grippers) == 1 else f"{node}/{m.name}"
        controllers[key] = {"type": "GripperCommand", "action_ns": "gripper_cmd", "default": True,
                            "joints": [m.gripper_joints[0]]}
    out.controllers = controllers
    _yaml(folder / "moveit_controllers.yaml", {
        "moveit_controller_manager": "moveit_simple_controller_manager/MoveItSimpleControllerManager",
        "moveit_simple_controller_manager": {"controller_names": list(controllers), **controllers}})

    limits = limits_from_robot(robot, driven, default_velocity, default_acceleration)
    _yaml(folder / "joint_limits.yaml", {
        "default_velocity_scaling_factor": 0.1, "default_acceleration_scaling_factor": 0.1,
        "joint_limits": {j: {"has_velocity_limits": True, "max_velocity": lim.velocity,
                             "has_acceleration_limits": True, "max_acceleration": lim.acceleration}
                         for j, lim in zip(driven, limits)}})
    _yaml(folder / "kinematics.yaml", {
        group: {"kinematics_solver": KINEMATICS_SOLVER, "kinematics_solver_search_resolution": 0.005,
                "kinematics_solver_timeout": 0.005} for group, _ in arms})
    parameters = {"description_file": str(Path(description_file).resolve()),
                  "srdf_file": str(srdf_path.resolve()), "controllers": [group for group, _ in arms],
                  "default_velocity": default_velocity, "default_acceleration": default_acceleration}
    if search_path:
        parameters["search_path"] = [str(Path(p).resolve()) for p in search_path]
    _yaml(folder / "controller_node.yaml", {node: {"ros__parameters": parameters}})
    for key in ("moveit_controllers", "joint_limits", "kinematics", "controller_node"):
        out.files[key] = folder / f"{key}.yaml"
    return out


def _yaml(path: Path, data: dict) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None), encoding="utf-8")
