"""The controllers of a robot, derived from its description: which driven joints each FollowJointTrajectory
controller moves and which fingers each GripperCommand server drives (:func:`wiring`).

From the SRDF: one trajectory controller per group MoveIt would plan for (a chain group, or a group of its
own joints/links; a group made of subgroups is driven through theirs), its driven joints only; one gripper
per end effector, driving the fingers below the end effector's parent link (the driven joints of its group
in the subtree of the rigid body that link belongs to) -- never a joint of the chain above that link: an end
effector whose group holds such joints is refused as a gripper, with the reason.  Without SRDF groups: the
chains and grippers the model declares (OpenRAVE manipulators), else one controller of every driven joint
but the grippers'.  Shared by controller_node (what it serves), planner_node (which controller runs a
planned trajectory) and ``robot-bridge moveit-config`` (moveit_controllers.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..model import Robot
from ..model.groups import group_joints
from ..model.semantics import EndEffector

GENERATED_ALL = "all"            # srdf.semantics_from_model's group of every moving joint: never a controller


def gripper_joints(robot: Robot) -> list[str]:
    return [j for m in robot.manipulators.values() for j in m.gripper_joints]


def controller_groups(robot: Robot, driven: Sequence[str],
                      names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(name, driven joints) of each trajectory controller: the SRDF groups or manipulators ``names``; none
    named: the default :func:`wiring`'s controllers.  A joint in two controllers, or a controller without
    a driven joint, is refused."""
    driven = list(driven)
    if not names:
        return [(w.name, w.joints) for w in wiring(robot, driven).controllers]
    out = []
    for name in names:
        joints = group_joints(robot, name)
        chosen = [j for j in driven if j in joints]
        if not chosen:
            more = f" and {len(driven) - 10} more" if len(driven) > 10 else ""
            raise ValueError(f"controller {name!r}: no driven joint in group/manipulator {name!r} "
                             f"(driven: {', '.join(driven[:10])}{more})")
        out.append((name, chosen))
    seen: dict[str, str] = {}
    for name, joints in out:
        for j in joints:
            if j in seen:
                raise ValueError(f"joint {j!r} is in controllers {seen[j]!r} and {name!r}; each joint "
                                 "belongs to one controller")
            seen[j] = name
    return out


@dataclass
class GripperSpec:
    """One GripperCommand server: the joint it drives and where it was told."""

    name: str                   # manipulator, or SRDF end effector group / gripper group
    joint: str                  # the driven joint commanded (the first driven one of the gripper)
    joints: list[str]           # every driven joint of the gripper
    closing: float = -1.0       # sign of the closing direction of ``joint``
    source: str = "manipulator"
    group: str = ""             # its SRDF group: ``<manipulator>_gripper`` (as generated) or the SRDF's
    link: str = ""              # on the hand: the end effector's parent link, the manipulator's effector


@dataclass
class TrajectoryWire:
    """One FollowJointTrajectory controller: ``~/<prefix>follow_joint_trajectory``."""

    name: str                   # SRDF group or manipulator; "" : the driven joints of a robot without groups
    joints: list[str]
    prefix: str = ""            # "" (the only controller, at the default action names) or "<name>/"


@dataclass
class Wiring:
    controllers: list[TrajectoryWire] = field(default_factory=list)
    grippers: list[GripperSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)        # what was refused or left out, with the reason

    def controller_for(self, joints: Iterable[str]) -> Optional[TrajectoryWire]:
        """The controller whose joints cover ``joints`` (the smallest), as MoveIt's controller manager
        chooses among moveit_controllers.yaml; None when no single controller does."""
        wanted = set(joints)
        covering = [c for c in self.controllers if wanted <= set(c.joints)]
        return min(covering, key=lambda c: len(c.joints)) if covering else None

    def gripper_for(self, link: str, robot: Robot) -> Optional[GripperSpec]:
        """The gripper whose end effector's parent link is on the rigid body of ``link`` (an hpp gripper
        frame's link), None when none."""
        body = rigid_body_root(robot, link) if link in robot.links else link
        for spec in self.grippers:
            if spec.link and spec.link in robot.links and rigid_body_root(robot, spec.link) == body:
                return spec
        return None


def action_name(base: str, wire: TrajectoryWire, action: str = "follow_joint_trajectory") -> str:
    """The action of ``wire`` given the default one, ``base`` (``controller_node/follow_joint_trajectory``):
    ``base`` itself for the controller at the default names, else ``<base's namespace>/<prefix><action>``."""
    if not wire.prefix:
        return base
    namespace = base.rsplit("/", 1)[0] if "/" in base else ""
    return f"{namespace}/{wire.prefix}{action}" if namespace else f"{wire.prefix}{action}"


def gripper_action(base: str, specs: Sequence["GripperSpec"], joint: str) -> str:
    """The GripperCommand action of the gripper driving ``joint`` given the default one, ``base``
    (``controller_node/gripper_cmd``): ``base`` for a single gripper, else ``<namespace>/<group>/gripper_cmd``
    (:func:`gripper_prefix`)."""
    spec = next((s for s in specs if joint in s.joints), None)
    prefix = gripper_prefix(spec, specs) if spec is not None else ""
    if not prefix:
        return base
    namespace = base.rsplit("/", 1)[0] if "/" in base else ""
    return f"{namespace}/{prefix}gripper_cmd" if namespace else f"{prefix}gripper_cmd"


# ---------------------------------------------------------------------------------------------- tree
def rigid_body_root(robot: Robot, link: str) -> str:
    """The link heading the rigid body ``link`` belongs to: up through fixed joints (the hand of a tool
    frame ``panda_hand_tcp`` is ``panda_link7``'s body)."""
    seen = set()
    while link not in seen:
        seen.add(link)
        joint = robot.parent_joint(link)
        if joint is None or joint.dof > 0:
            return link
        link = joint.parent
    return link


def joints_above(robot: Robot, link: str) -> list[str]:
    """The joints from the root down to ``link`` (the chain carrying it)."""
    out, seen = [], set()
    joint = robot.parent_joint(link)
    while joint is not None and joint.name not in seen:
        seen.add(joint.name)
        out.append(joint.name)
        joint = robot.parent_joint(joint.parent)
    return out[::-1]


def joints_below(robot: Robot, link: str) -> set[str]:
    """Every joint in the subtree of ``link``."""
    out, stack = set(), [link]
    while stack:
        for joint in robot.child_joints(stack.pop()):
            if joint.name not in out:
                out.add(joint.name)
                stack.append(joint.child)
    return out


def end_effector_fingers(robot: Robot, ee: EndEffector, driven: Sequence[str]) -> tuple[list[str], str]:
    """(finger joints, reason) of an SRDF end effector: the driven joints of its group below its parent
    link's rigid body.  Refused (no fingers, the reason given) when the group holds a joint of the chain
    above the parent link (a GripperCommand would move the arm)."""
    what = f"end effector {ee.name!r} (group {ee.group!r}, parent link {ee.parent_link!r})"
    try:
        members = group_joints(robot, ee.group)
    except ValueError as exc:
        return [], f"{what}: {exc}; no GripperCommand"
    if ee.parent_link not in robot.links:
        return [], f"{what}: parent link not in the model; no GripperCommand"
    above = [j for j in joints_above(robot, ee.parent_link) if j in members and j in driven]
    if above:
        return [], (f"{what} refused as a gripper: its group holds {', '.join(above)} of the chain above "
                    f"{ee.parent_link!r} (a GripperCommand would move the arm); name the fingers' group "
                    "in the end effector")
    below = joints_below(robot, rigid_body_root(robot, ee.parent_link))
    fingers = [j for j in driven if j in members and j in below]
    if not fingers:
        return [], f"{what}: no driven finger joint below {ee.parent_link!r}; no GripperCommand"
    return fingers, ""


def _holds_arm_joints(robot: Robot, joints: Sequence[str], driven: Sequence[str]) -> list[str]:
    """Those of ``joints`` that carry a driven joint outside ``joints`` (arm joints, not fingers)."""
    own, out = set(joints), []
    for j in joints:
        child = robot.joints[j].child if j in robot.joints else None
        if child is not None and any(d not in own for d in joints_below(robot, child) & set(driven)):
            out.append(j)
    return out


def gripper_specs(robot: Robot, driven: Sequence[str]) -> tuple[list[GripperSpec], list[str]]:
    """The grippers of ``robot`` among the ``driven`` joints, and notes on grippers that cannot be served.

    A gripper is an OpenRAVE manipulator's gripper joints, an SRDF end effector's fingers
    (:func:`end_effector_fingers`), or an SRDF group named like a gripper (``gripper``/``hand``) that is no
    end effector's, neither a chain nor made of subgroups, whose joints carry no other driven joint (fingers,
    not an arm).  Its first driven joint is commanded (GripperCommand moves one joint, as
    gripper_action_controller)."""
    driven = list(driven)
    specs: list[GripperSpec] = []
    notes: list[str] = []
    taken: set[str] = set()
    for m in robot.manipulators.values():
        if not m.gripper_joints:
            continue
        joints = [j for j in m.gripper_joints if j in driven]
        if m.gripper_joints[0] not in driven:
            notes.append(f"manipulator {m.name!r}: gripper joint {m.gripper_joints[0]!r} is not driven; "
                         "no gripper_cmd")
            continue
        closing = float(np.sign(m.closing_directions[0])) if m.closing_directions else -1.0
        specs.append(GripperSpec(m.name, m.gripper_joints[0], joints, closing or -1.0,
                                 group=f"{m.name}_gripper", link=m.effector))
        taken |= set(m.gripper_joints)
    semantics = robot.semantics
    if semantics is None:
        return specs, notes
    for ee in semantics.end_effectors.values():
        fingers, reason = end_effector_fingers(robot, ee, driven)
        if reason:
            notes.append(reason)
        fingers = [j for j in fingers if j not in taken]
        if fingers:
            _add(specs, notes, GripperSpec(ee.group, fingers[0], fingers, -1.0, "srdf", ee.group,
                                           ee.parent_link))
            taken |= set(fingers)
    ee_groups = {ee.group for ee in semantics.end_effectors.values()}
    for name, g in semantics.groups.items():
        if name in ee_groups or g.chains or g.subgroups or \
                not any(w in name.lower() for w in ("gripper", "hand")):
            continue
        try:
            members = group_joints(robot, name)
        except ValueError as exc:
            notes.append(f"gripper group {name!r}: {exc}")
            continue
        joints = [j for j in driven if j in members and j not in taken]
        arm = _holds_arm_joints(robot, joints, driven)
        if arm:
            notes.append(f"group {name!r} refused as a gripper: {', '.join(arm)} carry other driven joints "
                         "(an arm, not fingers)")
            continue
        if not joints:
            if not members & taken:
                notes.append(f"gripper group {name!r} has no driven joint: no gripper_cmd")
            continue
        _add(specs, notes, GripperSpec(name, joints[0], joints, -1.0, "srdf", name,
                                       robot.joints[joints[0]].parent if joints[0] in robot.joints else ""))
        taken |= set(joints)
    return specs, notes


def _add(specs: list[GripperSpec], notes: list[str], spec: GripperSpec) -> None:
    if len(spec.joints) > 1:
        notes.append(f"gripper group {spec.group!r} has {len(spec.joints)} driven joints "
                     f"({', '.join(spec.joints)}): gripper_cmd commands {spec.joint!r} only (GripperCommand "
                     "moves one joint)")
    specs.append(spec)


def gripper_prefix(spec: GripperSpec, specs: Sequence[GripperSpec]) -> str:
    """The node-relative namespace of a gripper's ``gripper_cmd``: ``''`` for a single gripper, else its
    group (``controller_node/<group>/gripper_cmd``; the manipulator's own name is its arm controller's)."""
    return "" if len(specs) == 1 else f"{spec.group}/"


# ---------------------------------------------------------------------------------------------- wiring
def planning_groups(robot: Robot) -> list[str]:
    """The SRDF groups MoveIt would plan for with a controller of their own: chain groups first, then
    groups of their own joints or links (a group of subgroups only is driven through its subgroups); not
    the generated ``all`` when other groups exist."""
    semantics = robot.semantics
    if semantics is None:
        return []
    groups = semantics.groups
    chains = [n for n, g in groups.items() if g.chains]
    rest = [n for n, g in groups.items() if not g.chains and (g.joints or g.links)]
    out = chains + rest
    if GENERATED_ALL in out and len(out) > 1:
        out.remove(GENERATED_ALL)
    return out


def wiring(robot: Robot, driven: Sequence[str], names: Sequence[str] = ()) -> Wiring:
    """The controllers of ``robot`` over its ``driven`` joints (see the module).  ``names``: the trajectory
    controllers asked for (controller_node's ``controllers``), each at ``~/<name>/``; none asked: derived
    from the description, a single one at the default names (``~/follow_joint_trajectory``), several each
    at ``~/<group>/``."""
    driven = list(driven)
    grippers, notes = gripper_specs(robot, driven)
    if names:
        controllers = [TrajectoryWire(n, j, f"{n}/") for n, j in controller_groups(robot, driven, names)]
        return Wiring(controllers, grippers, notes)
    fingers = {j for s in grippers for j in s.joints} | set(gripper_joints(robot))
    gripper_groups = {s.group for s in grippers}
    chosen: list[tuple[str, list[str]]] = []
    used: dict[str, str] = {}
    candidates = [(n, "group") for n in planning_groups(robot)]
    if not candidates:
        candidates = [(m, "manipulator") for m in robot.manipulators]
    for name, kind in candidates:
        if name in gripper_groups:
            continue
        try:
            members = group_joints(robot, name)
        except ValueError as exc:
            notes.append(f"{kind} {name!r}: {exc}; no trajectory controller")
            continue
        joints = [j for j in driven if j in members and j not in fingers]
        if not joints:
            if not members & fingers:
                notes.append(f"{kind} {name!r} has no driven joint: no trajectory controller")
            continue
        shared = sorted({used[j] for j in joints if j in used})
        if shared:
            notes.append(f"{kind} {name!r} shares joints with {', '.join(map(repr, shared))}: no trajectory "
                         "controller of its own (MoveIt drives it through theirs)")
            continue
        chosen.append((name, joints))
        used.update((j, name) for j in joints)
    if not chosen:
        rest = [j for j in driven if j not in fingers] or driven
        return Wiring([TrajectoryWire("", rest, "")], grippers, notes)
    left = [j for j in driven if j not in used and j not in fingers]
    if left:
        notes.append(f"driven joints in no controller's group (they hold their position): {', '.join(left)}")
    single = len(chosen) == 1
    return Wiring([TrajectoryWire(n, j, "" if single else f"{n}/") for n, j in chosen], grippers, notes)
