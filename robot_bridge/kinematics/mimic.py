"""Mimic joints: compile every DOF's formula once, evaluate in dependency order."""

from __future__ import annotations

from typing import MutableMapping, Optional

import numpy as np

from ..errors import ExpressionError, KinematicsError, UnknownVariableError
from ..model import Robot
from .expr import compile_expression


def all_joints(robot: Robot) -> list:
    """Tree joints plus the joints left out because they close a kinematic loop
    (``robot.extras["closed_loop_joints"]``): they still carry values mimic formulas use."""
    return list(robot.joints.values()) + list(robot.extras.get("closed_loop_joints", {}).values())


def dof_variable_names(robot: Robot) -> dict[str, tuple[str, int]]:
    """Variable name -> (joint, dof index).  A 1-DOF joint is its name; a multi-DOF
    joint's DOFs are ``name_0``, ``name_1``... (and ``name`` means DOF 0)."""
    names: dict[str, tuple[str, int]] = {}
    for j in all_joints(robot):
        if j.dof == 0:
            continue
        names[j.name] = (j.name, 0)
        if j.dof > 1:
            for i in range(j.dof):
                names[f"{j.name}_{i}"] = (j.name, i)
    return names


def not_compiled(robot: Robot, joint_name: str, error: ExpressionError, dof=None) -> None:
    """A formula beyond the expression engine: the joint becomes independent (its mimic ``dof``,
    or every one, is dropped; it is no longer passive) and one warning names the joint and the
    error (which names the function and where it is)."""
    joint = robot.joints.get(joint_name)
    if joint is None:
        return
    for i in range(len(joint.mimic)) if dof is None else (dof,):
        joint.mimic[i] = None
    joint.passive = False
    joint.extras["formula_not_compiled"] = str(error)
    robot.warn(f"joint {joint_name!r}: formula not compiled ({error}); the joint is independent")


def drop_uncompilable_formulas(robot: Robot) -> dict:
    """Make every joint whose mimic formula the engine cannot compile independent (see
    :func:`not_compiled`).  Formulas naming joints that do not exist stay errors (broken references).
    Returns the compiled formulas, ``{(id(joint), dof, formula): expression}``, for
    :class:`MimicEvaluator`, which then compiles none of them again."""
    variables = frozenset(dof_variable_names(robot))      # once: every formula is compiled against it
    compiled = {}
    for j in list(robot.joints.values()):
        for i, m in enumerate(j.mimic):
            if m is None:
                continue
            where = f"joint[@name='{j.name}']/mimic"
            try:
                compiled[id(j), i, m.position] = compile_expression(m.position, variables=variables)
            except UnknownVariableError as exc:
                raise exc.with_location(element=where) from None
            except ExpressionError as exc:
                not_compiled(robot, j.name, exc.with_location(element=where), i)
    return compiled


class MimicEvaluator:
    def __init__(self, robot: Robot, compiled: Optional[dict] = None):
        """``compiled``: formulas :func:`drop_uncompilable_formulas` compiled for this robot (as it is
        now: the same variables), used instead of compiling them again."""
        compiled = compiled or {}
        self.variables = dof_variable_names(robot)
        # loop-closing joints are not in the value maps FK passes: they start at their initial values
        self._loop_values = {j.name: np.array(j.initial, dtype=float)
                             for j in robot.extras.get("closed_loop_joints", {}).values() if j.dof}
        entries = []   # (joint, dof, compiled expression, depends-on set of joints)
        known = None   # the variable names, built at the first formula not compiled already
        for j in all_joints(robot):
            for i, m in enumerate(j.mimic):
                if m is None:
                    continue
                try:
                    expr = compiled.get((id(j), i, m.position))
                    if expr is None:
                        if known is None:
                            known = frozenset(self.variables)
                        expr = compile_expression(m.position, variables=known)
                except ExpressionError as exc:
                    raise exc.with_location(element=f"joint[@name='{j.name}']/mimic") from None
                deps = {self.variables[v][0] for v in expr.variables}
                if j.name in deps and j.dof == 1:
                    raise KinematicsError(f"mimic formula of joint {j.name!r} refers to itself",
                                          element=f"joint[@name='{j.name}']/mimic")
                limits = (float(j.lower[i]), float(j.upper[i]), bool(j.circular[i]))
                entries.append((j.name, i, expr, deps, limits))
        self.steps = self._order(entries)

    @staticmethod
    def _order(entries):
        mimic_joints = {e[0] for e in entries}
        done: set[str] = set()
        ordered = []
        pending = list(entries)
        while pending:
            ready = [e for e in pending
                     if all(d in done or d not in mimic_joints or d == e[0] for d in e[3])]
            if not ready:
                names = sorted({e[0] for e in pending})
                raise KinematicsError(f"mimic formulas depend on each other in a cycle: {', '.join(names)}")
            for e in ready:
                ordered.append(e)
                pending.remove(e)
            done |= {e[0] for e in ready} - {e[0] for e in pending}
        return [(joint, dof, expr, limits) for joint, dof, expr, _, limits in ordered]

    def apply(self, values: MutableMapping[str, np.ndarray]) -> None:
        """Overwrite mimic DOFs in ``values`` (joint -> array) from their formulas."""
        if not self.steps:
            return
        env = {}
        for var, (joint, i) in self.variables.items():
            arr = values.get(joint)
            if arr is None:
                arr = self._loop_values.get(joint)
            if arr is not None:
                env[var] = float(arr[i])
        for joint, dof, expr, (lower, upper, circular) in self.steps:
            # a multi-valued formula (polyroots) picks its value by the joint limits, as OpenRAVE does
            v = expr.evaluate_within(env, lower, upper, circular) if expr.is_multi else expr.evaluate(env)
            if joint in values:
                values[joint][dof] = v
            for var, (jn, i) in self.variables.items():
                if jn == joint and i == dof:
                    env[var] = v
