"""The files a MoveIt user otherwise makes with the setup assistant, for a robot driven by controller_node.

:func:`write_moveit_config` writes into one folder:

- ``<robot>.urdf`` (each manipulator's tool frame a link, see ``urdf.to_urdf(tool_frames=True)``) and
  ``<robot>.srdf`` (``srdf.moveit_semantics``: groups, end effectors, states of driven joints, ``home``);
- ``moveit_controllers.yaml``: moveit_simple_controller_manager, exactly the controllers controller_node
  derives (:func:`control.groups.wiring`): one FollowJointTrajectory controller per planning group of the
  SRDF and one GripperCommand controller per gripper, named so that ``<name>/<action_ns>`` is the action
  controller_node serves with ``controller_node.yaml``;

Without an SRDF the groups are guessed (:func:`guess_semantics`: the OpenRAVE manipulators, else the
longest serial chain of driven joints) and the guesses are reported; a robot with nothing to plan for is a
:class:`NothingToPlanError`.
- ``joint_limits.yaml`` (the limits controller_node enforces) and ``kinematics.yaml`` (KDL per arm group);
- ``controller_node.yaml``: the controller_node parameters (description, SRDF, ``controllers``) that serve
  exactly those actions.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..control.groups import GripperSpec, gripper_prefix, wiring
from ..errors import NothingToPlanError
from ..hardware.base import limits_from_robot
from ..model import Robot
from ..model.groups import driven_joints, longest_chain
from ..model.semantics import Group, Semantics
from .srdf import driven_group_states, moveit_semantics, write_srdf
from .urdf import write_urdf

NODE = "controller_node"
KINEMATICS_SOLVER = "kdl_kinematics_plugin/KDLKinematicsPlugin"


@dataclass
class MoveitConfig:
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)
    controllers: dict[str, dict] = field(default_factory=dict)     # MoveIt controller name -> its entry
    groups: list[str] = field(default_factory=list)                 # planning groups with a controller
    guesses: list[str] = field(default_factory=list)                # what was guessed without an SRDF
    notes: list[str] = field(default_factory=list)


def planning_groups(robot: Robot, semantics: Semantics) -> list[str]:
    """The groups with a trajectory controller of their own: those of :func:`control.groups.wiring` on
    ``robot`` with ``semantics`` (chain groups, then groups of their own joints or links; no gripper's)."""
    return [w.name for w in wiring(_view(robot, semantics), driven_joints(robot)).controllers if w.name]


def _view(robot: Robot, semantics: Semantics) -> Robot:
    """``robot`` with ``semantics``, less the generated group ``all`` (every moving joint) unless the
    robot's own SRDF defines it: not a group a controller of its own drives."""
    view = copy.copy(robot)
    given = robot.semantics.groups if robot.semantics is not None else {}
    if "all" in semantics.groups and "all" not in given:
        semantics = copy.copy(semantics)
        semantics.groups = {n: g for n, g in semantics.groups.items() if n != "all"}
    view.semantics = semantics
    return view


def guess_semantics(robot: Robot) -> tuple[Semantics, list[str]]:
    """The SRDF of ``robot`` (:func:`srdf.moveit_semantics`) and what was guessed for it: without an SRDF,
    the groups of the OpenRAVE manipulators or, without those, a group ``arm`` of the longest serial chain
    of driven joints.  :class:`NothingToPlanError` when no group can be had."""
    semantics = moveit_semantics(robot)
    guesses = []
    given = robot.semantics is not None and bool(robot.semantics.groups)
    if not given:
        for m in robot.manipulators.values():
            guesses.append(f"group {m.name!r}: OpenRAVE manipulator {m.name!r}, chain {m.base} -> "
                           f"{m.effector}" + (f", end effector group {m.name}_gripper of "
                                              f"{', '.join(m.gripper_joints)}" if m.gripper_joints else ""))
    if not planning_groups(robot, semantics):
        add_longest_chain(semantics, robot, guesses)
    return semantics, guesses


def add_longest_chain(semantics: Semantics, robot: Robot, guesses: list[str]) -> None:
    """Add a group ``arm`` (``chain`` when taken) of the longest serial chain of driven joints outside the
    manipulators' grippers, saying so in ``guesses``; :class:`NothingToPlanError` when there is none."""
    given = robot.semantics is not None and bool(robot.semantics.groups)
    exclude = {j for m in robot.manipulators.values() for j in m.gripper_joints}
    chain = longest_chain(robot, exclude)
    if chain is None:
        raise NothingToPlanError(
            f"robot {robot.name!r} has nothing to plan for: no driven joint (active 1-DOF, not mimic or "
            "passive)" + (" outside its grippers" if exclude else "") +
            ("; its SRDF has no group with driven joints" if given else "; no SRDF given"),
            file=robot.source)
    base, tip, joints, fingers = chain
    name = "arm" if "arm" not in semantics.groups else "chain"
    semantics.groups[name] = Group(name, chains=[(base, tip)])
    guesses.append(f"group {name!r}: the longest serial chain of driven joints, {base} -> {tip} "
                   f"({len(joints)} joints: {', '.join(joints)})" + (
                       f"; it ends where the tree branches into {', '.join(fingers)}: fingers? give "
                       "an SRDF end effector group of them for a GripperCommand controller"
                       if fingers else ""))
    driven_group_states(semantics, robot)


@dataclass
class MoveitPlan:
    """What the configuration holds, before any file is written."""

    semantics: Semantics
    arms: list[tuple[str, list[str]]]               # (planning group, the driven joints its controller moves)
    grippers: list[GripperSpec]
    guesses: list[str]
    notes: list[str]

    def controllers(self, node: str = NODE) -> dict[str, dict]:
        """moveit_simple_controller_manager entries: ``<node>/<name>`` + ``action_ns`` is the action
        controller_node serves (FollowJointTrajectory per arm, GripperCommand per gripper)."""
        out = {}
        for group, joints in self.arms:
            out[f"{node}/{group}"] = {"type": "FollowJointTrajectory", "action_ns": "follow_joint_trajectory",
                                      "default": True, "joints": joints}
        for spec in self.grippers:
            out[f"{node}/{gripper_prefix(spec, self.grippers)}".rstrip("/")] = {
                "type": "GripperCommand", "action_ns": "gripper_cmd", "default": True, "joints": [spec.joint]}
        return out


def plan_moveit_config(robot: Robot) -> MoveitPlan:
    """Groups, controllers and grippers of ``robot`` (its semantics attached when an SRDF was given): the
    controller wiring controller_node derives (:func:`control.groups.wiring`), each trajectory controller
    named after its group; :class:`NothingToPlanError` when no planning group with a driven joint can be
    had."""
    semantics, guesses = guess_semantics(robot)
    driven = driven_joints(robot)
    wired = wiring(_view(robot, semantics), driven)
    arms = [(w.name, w.joints) for w in wired.controllers if w.name]
    if not arms and not any("longest serial chain" in g for g in guesses):
        add_longest_chain(semantics, robot, guesses)        # the groups had no driven joint of their own
        wired = wiring(_view(robot, semantics), driven)
        arms = [(w.name, w.joints) for w in wired.controllers if w.name]
    notes = list(wired.notes)
    if not arms:
        raise NothingToPlanError(f"robot {robot.name!r}: no planning group has a driven joint of its own "
                                 f"({'; '.join(notes) or 'no groups'})", file=robot.source)
    if not wired.grippers:
        notes.append("no gripper could be told (no OpenRAVE manipulator with gripper joints, no SRDF end "
                     "effector or gripper group with a driven joint): no GripperCommand controller")
    return MoveitPlan(semantics, arms, wired.grippers, guesses, notes)


def write_moveit_config(robot: Robot, folder, description_file: str, search_path=(), node: str = NODE,
                        default_velocity: float = 1.0, default_acceleration: float = 2.0) -> MoveitConfig:
    """Write the MoveIt configuration of ``robot`` (:func:`plan_moveit_config`) into ``folder``;
    ``description_file`` is what controller_node loads.  :class:`NothingToPlanError` (nothing written)
    when there is nothing to plan for."""
    plan = plan_moveit_config(robot)
    semantics, arms = plan.semantics, plan.arms
    driven = driven_joints(robot)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = MoveitConfig(folder, groups=[g for g, _ in arms], guesses=plan.guesses)
    name = robot.name or "robot"
    urdf_path, srdf_path = folder / f"{name}.urdf", folder / f"{name}.srdf"
    report = write_urdf(robot, urdf_path, mesh_dir=folder / "meshes", tool_frames=True)
    out.notes += report.not_expressible + report.notes + plan.notes
    write_srdf(semantics, srdf_path, robot_name=name)
    out.files.update(urdf=urdf_path, srdf=srdf_path)

    controllers = plan.controllers(node)
    out.controllers = controllers
    _yaml(folder / "moveit_controllers.yaml", {
        "moveit_controller_manager": "moveit_simple_controller_manager/MoveItSimpleControllerManager",
        "moveit_simple_controller_manager": {"controller_names": list(controllers), **controllers}})

    limits = limits_from_robot(robot, driven, default_velocity, default_acceleration)
    _yaml(folder / "joint_limits.yaml", {
        "default_velocity_scaling_factor": 0.1, "default_acceleration_scaling_factor": 0.1,
        "joint_limits": {j: {"has_velocity_limits": True, "max_velocity": float(lim.velocity),
                             "has_acceleration_limits": True, "max_acceleration": float(lim.acceleration)}
                         for j, lim in zip(driven, limits)}})
    _yaml(folder / "kinematics.yaml", {
        group: {"kinematics_solver": KINEMATICS_SOLVER, "kinematics_solver_search_resolution": 0.005,
                "kinematics_solver_timeout": 0.005} for group, _ in arms})
    parameters = {"description_file": str(Path(description_file).resolve()),
                  "srdf_file": str(srdf_path.resolve()), "controllers": [group for group, _ in arms],
                  "default_velocity": float(default_velocity),
                  "default_acceleration": float(default_acceleration)}
    if search_path:
        parameters["search_path"] = [str(Path(p).resolve()) for p in search_path]
    _yaml(folder / "controller_node.yaml", {node: {"ros__parameters": parameters}})
    for key in ("moveit_controllers", "joint_limits", "kinematics", "controller_node"):
        out.files[key] = folder / f"{key}.yaml"
    return out


def _yaml(path: Path, data: dict) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=None), encoding="utf-8")
