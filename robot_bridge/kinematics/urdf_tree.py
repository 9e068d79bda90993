"""How a model maps to URDF links and joints -- the one definition shared by the
URDF writer and the description node (which publishes TF for these joints).

Rules:
- every model link is a URDF link with the same frame;
- a joint whose ``child_offset`` is not identity becomes the moving joint(s)
  into a massless ``<joint>_frame`` link plus a fixed ``<joint>_offset`` joint;
- multi-DOF joints (universal, hinge2, spherical) become a chain of revolute
  joints ``<joint>_axis0..2`` through massless ``<joint>_link0``, ``_link1``
  (the same product of rotations as ``model.robot`` defines);
- circular (unlimited) revolute DOFs become ``continuous``;
- passive joints not driven by a mimic formula become ``fixed``, frozen at
  their initial value (the description node must keep them there too);
- a linear mimic formula becomes a URDF ``<mimic>``; a nonlinear one has no
  mimic tag and ``nonlinear_mimic=True`` (the description node computes it);
- extra root links are attached to the first root by generated fixed joints
  (forward kinematics puts every root at the identity).

Generated names never collide with model link or joint names (a numeric
suffix is added when needed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Joint, Robot
from .fk import joint_motion, topological_joints
from .mimic import dof_variable_names


@dataclass
class TreeLink:
    name: str
    source: str | None          # model link name; None for generated massless links


@dataclass
class TreeJoint:
    name: str                      # URDF joint name
    type: str                      # revolute | continuous | prismatic | fixed
    parent: str                    # URDF link names
    child: str
    origin: np.ndarray             # 4x4, child frame in parent frame at q = 0
    axis: np.ndarray               # unit 3-vector (zeros for fixed)
    source: str | None          # model joint name (None for generated fixed joints)
    dof: int                       # DOF index in the source joint (-1 for fixed)
    lower: float = 0.0
    upper: float = 0.0
    velocity: float = 0.0
    effort: float = 0.0
    mimic: tuple[str, float, float] | None = None   # (URDF joint, multiplier, offset)
    nonlinear_mimic: bool = False


def tree_joint_transform(j: TreeJoint, q: float) -> np.ndarray:
    """Child link frame in the parent link frame at joint value ``q``."""
    if j.type == "fixed":
        return j.origin
    m = np.eye(4)
    if j.type == "prismatic":
        m[:3, 3] = j.axis * float(q)
    else:
        m = joint_motion(Joint("_", "revolute", "_", "_", axes=[j.axis]), [q])
    return j.origin @ m


def linear_mimic(formula: str, variables) -> tuple[str, float, float] | None:
    """(variable, multiplier, offset) when ``formula`` is ``multiplier*var + offset``, else None."""
    from .expr import compile_expression

    return compile_expression(formula, variables=variables).as_linear()


class _Names:
    """Hands out names unique among model names and earlier generated ones."""

    def __init__(self, taken):
        self.taken = set(taken)

    def new(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def _is_identity(t: np.ndarray) -> bool:
    return bool(np.allclose(t, np.eye(4), rtol=0.0, atol=1e-12))


def urdf_tree(robot: Robot) -> tuple[list[TreeLink], list[TreeJoint]]:
    """URDF links (the root first) and joints (parent before child) of ``robot``."""
    order = topological_joints(robot)
    names = _Names(list(robot.links) + list(robot.joints))
    roots = robot.root_links()
    links = [TreeLink(name, name) for name in roots + [n for n in robot.links if n not in roots]]
    known = set(robot.links)
    joints: list[TreeJoint] = []

    for j in order:
        if j.parent not in known:               # a joint naming a link the file never defined
            links.append(TreeLink(j.parent, None))
            known.add(j.parent)

    for extra in roots[1:]:
        joints.append(TreeJoint(names.new(f"{roots[0]}_to_{extra}"), "fixed", roots[0], extra, np.eye(4),
                                np.zeros(3), None, -1))

    variables = dof_variable_names(robot)
    urdf_dof_joint: dict[tuple[str, int], str] = {}   # (model joint, dof) -> URDF joint name
    pending_mimic: list[tuple[TreeJoint, str]] = []

    for j in order:
        frozen = j.dof > 0 and j.passive and not j.is_mimic
        if j.dof == 0 or frozen:
            origin = j.origin @ joint_motion(j, j.initial) @ j.child_offset if frozen \
                else j.origin @ j.child_offset
            joints.append(TreeJoint(j.name, "fixed", j.parent, j.child, origin, np.zeros(3), j.name, -1))
            continue
        has_offset = not _is_identity(j.child_offset)
        end = names.new(f"{j.name}_frame") if has_offset else j.child
        if has_offset:
            links.append(TreeLink(end, None))
        parent = j.parent
        for i in range(j.dof):
            last = i == j.dof - 1
            name = j.name if j.dof == 1 else names.new(f"{j.name}_axis{i}")
            child = end if last else names.new(f"{j.name}_link{i}")
            if not last:
                links.append(TreeLink(child, None))
            axis = np.asarray(j.axes[i], dtype=float)
            axis = axis / np.linalg.norm(axis)
            if j.type == "prismatic":
                jtype = "prismatic"
            else:
                jtype = "continuous" if (j.type == "continuous" or j.circular[i]) else "revolute"
            tj = TreeJoint(name, jtype, parent, child, j.origin if i == 0 else np.eye(4), axis, j.name, i,
                           float(j.lower[i]), float(j.upper[i]), float(j.velocity[i]), float(j.effort[i]))
            joints.append(tj)
            urdf_dof_joint[(j.name, i)] = name
            if j.mimic[i] is not None:
                pending_mimic.append((tj, j.mimic[i].position))
            parent = child
        if has_offset:
            joints.append(TreeJoint(names.new(f"{j.name}_offset"), "fixed", end, j.child, j.child_offset,
                                    np.zeros(3), None, -1))

    known = frozenset(variables)      # once for every formula (per formula it was O(joints) each)
    for tj, formula in pending_mimic:
        lin = linear_mimic(formula, known)
        target = urdf_dof_joint.get(variables[lin[0]]) if lin else None
        if target is None or target == tj.name:   # nonlinear, or driven by a frozen joint
            tj.nonlinear_mimic = True
        else:
            tj.mimic = (target, float(lin[1]), float(lin[2]))
    return links, joints
