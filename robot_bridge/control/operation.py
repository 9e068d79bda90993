"""controller_node's rules of its modules without ROS: what keeps them from moving, where home is, which
hardware options its parameters give, whether the robot may be switched now."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ..hardware.base import ModuleState


def not_operational(states) -> str:
    """What keeps the modules from moving and what the operator must call, or '' when they can move."""
    def joints(state):
        return ", ".join(s.joint for s in states if s.state is state)
    faulted = [s for s in states if s.state is ModuleState.FAULT]
    if faulted:
        return (f"modules faulted ({'; '.join(f'{s.joint}: {s.message}' for s in faulted)}): call ~/recover")
    if any(s.state is ModuleState.OFFLINE for s in states):
        return f"modules not open ({joints(ModuleState.OFFLINE)}): call ~/init"
    if any(s.state is ModuleState.DISABLED for s in states):
        return f"modules disabled, brakes engaged ({joints(ModuleState.DISABLED)}): call ~/enable true"
    return ""


def home_position(robot, joints: Sequence[str], limits) -> np.ndarray:
    """SRDF group state 'home' where it names a joint, else the description's initial value, within the
    limits."""
    values = {}
    for state in (robot.semantics.group_states if robot and robot.semantics else []):
        if state.name == "home":
            values.update(state.values)
    return np.array([float(np.clip(values[j][0] if j in values else robot.joints[j].initial[0],
                                   lim.lower, lim.upper)) for j, lim in zip(joints, limits)])


def hardware_options(kind: str, param: Callable[[str], object], joints: Sequence[str]) -> dict:
    """The options of ``hardware.create(kind, ...)`` from the node's parameters (``param(name)``);
    ValueError for an unknown kind."""
    from .. import hardware as hw

    if kind == "sim":
        return {"seed": param("sim.seed"), "fault_rate": param("sim.fault_rate"), "noise": param("sim.noise")}
    if kind == "canopen":
        node_ids = list(param("canopen.node_ids")) or list(range(1, len(joints) + 1))
        options = {"node_ids": node_ids, "interface": param("canopen.interface"),
                   "channel": param("canopen.channel"), "bitrate": param("canopen.bitrate"),
                   "counts_per_radian": param("canopen.counts_per_radian"),
                   "heartbeat_ms": param("canopen.heartbeat_ms"),
                   "heartbeat_timeout": param("canopen.heartbeat_timeout")}
        if param("canopen.eds"):
            options["eds"] = param("canopen.eds")
        return options
    raise ValueError(f"parameter hardware={kind!r}: expected one of {', '.join(hw.KINDS)}")


def unsafe_to_switch(goals: int, control, hardware_kind: str) -> Optional[str]:
    """Why the driven robot cannot be switched now (None: it can): goals active, a trajectory running,
    joints moving, or hardware other than the simulation (wired for its robot)."""
    if goals:
        return f"{goals} goal(s) active"
    if control is not None and control.motions:
        return "a trajectory is running"
    if control is not None and control.sample is not None and \
            np.any(np.abs(np.asarray(control.sample.velocity)) > 1e-6):
        return "joints are moving"
    if hardware_kind != "sim":
        return f"{hardware_kind} hardware is wired for its robot"
    return None
