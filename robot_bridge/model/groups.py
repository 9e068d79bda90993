"""Which joints a planning group, a manipulator or a chain holds (SRDF semantics on the model).

Shared by the controller (its trajectory controllers are groups) and the SRDF / MoveIt writers (group states
name only a group's driven joints).  A chain may end at a manipulator's tool link (``<name>_tool``, written
by ``urdf.to_urdf(tool_frames=True)``): it stands for the manipulator's effector link.
"""

from __future__ import annotations

from .robot import Robot


def chain_joints(robot: Robot, base: str, tip: str) -> list[str]:
    """Joints from ``base`` down to ``tip`` (root to tip order)."""
    tools = {f"{m.name}_tool": m.effector for m in robot.manipulators.values()}
    link = tip if tip in robot.links else tools.get(tip, tip)
    out = []
    while link != base:
        joint = robot.parent_joint(link)
        if joint is None:
            raise ValueError(f"link {tip!r} is not below {base!r} in robot {robot.name!r}")
        out.append(joint.name)
        link = joint.parent
    return out[::-1]


def group_joints(robot: Robot, name: str) -> set[str]:
    """Joints of an SRDF group (its joints, the parent joints of its links, its chains and subgroups) or,
    when no group has that name, of a manipulator's arm chain (base to effector, without its gripper
    joints).  ValueError when neither exists."""
    groups = robot.semantics.groups if robot.semantics else {}
    if name in groups:
        group = groups[name]
        joints = set(group.joints)
        for link in group.links:
            parent = robot.parent_joint(link)
            if parent is not None:
                joints.add(parent.name)
        for base, tip in group.chains:
            joints |= set(chain_joints(robot, base, tip))
        for sub in group.subgroups:
            if sub != name:
                joints |= group_joints(robot, sub)
        return joints
    if name in robot.manipulators:
        m = robot.manipulators[name]
        return set(chain_joints(robot, m.base, m.effector)) - set(m.gripper_joints)
    known = sorted(set(groups) | set(robot.manipulators))
    raise ValueError(f"{name!r} is neither an SRDF group nor a manipulator of robot {robot.name!r} "
                     f"(known: {known})")


def driven_joints(robot: Robot) -> list[str]:
    """The joints a controller commands: active (not mimic, not passive) 1-DOF joints, in model order."""
    return [j.name for j in robot.active_joints if j.dof == 1]


FINGER_JOINTS = 2        # a branch whose every moving subtree holds at most this many driven joints: fingers


def longest_chain(robot: Robot, exclude=()) -> tuple[str, str, list[str], list[str]] | None:
    """(base link, tip link, driven joints, finger joints) of the root-to-leaf path with the most driven
    joints (an ``exclude`` joint ends a path; a new one may start below it); the base is the parent link of
    its first driven joint.  A path ends where it branches into fingers (two or more moving joints, each
    subtree with at most FINGER_JOINTS driven joints, below at least one driven joint of the path): the tip
    is that link, the driven joints below it are returned as finger joints.  Ties: the first path in model
    order.  None when no path has a driven joint."""
    excluded = set(driven_joints(robot)) & set(exclude)
    driven = set(driven_joints(robot)) - excluded
    children = {}
    for j in robot.joints.values():
        children.setdefault(j.parent, []).append(j)
    below: dict[str, set[str]] = {}                # link -> driven joints in its subtree
    order, stack = [], [robot.root]
    while stack:                                    # iterative: deep trees do not recurse
        link = stack.pop()
        order.append(link)
        stack += [j.child for j in children.get(link, [])]
    for link in reversed(order):
        below[link] = set()
        for j in children.get(link, []):
            below[link] |= below.get(j.child, set()) | ({j.name} & driven)
    best = None

    def consider(link: str, path: list[str], fingers: list[str]) -> None:
        nonlocal best
        joints = [j for j in path if j in driven]
        if joints and (best is None or len(joints) > len(best[2])):
            best = (robot.joints[joints[0]].parent, link, joints, fingers)

    stack = [(robot.root, [])]
    while stack:
        link, path = stack.pop()
        moving = [j for j in children.get(link, []) if j.dof > 0]
        fingers = len(moving) >= 2 and any(j in driven for j in path) and all(
            len(below.get(j.child, set()) | ({j.name} & driven)) <= FINGER_JOINTS for j in moving)
        if fingers or not children.get(link):
            consider(link, path, sorted(below[link]) if fingers else [])
            continue
        for joint in reversed(children[link]):
            if joint.name in excluded:          # an excluded joint ends the chain; another may start below
                consider(link, path, [])
                stack.append((joint.child, []))
            else:
                stack.append((joint.child, path + [joint.name]))
    return best
