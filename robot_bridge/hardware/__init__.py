"""Schunk-style arm modules behind one interface (:class:`base.Hardware`): simulated or CANopen."""

from __future__ import annotations

from collections.abc import Sequence

from .base import (FaultKind, Hardware, HardwareError, JointLimits, ModuleState, ModuleStatus,
                   limits_from_robot)

KINDS = ("sim", "canopen")


def create(kind: str, joint_names: Sequence[str], limits: Sequence[JointLimits],
           initial: Sequence[float] | None = None, **options) -> Hardware:
    """A :class:`Hardware` of ``kind`` ("sim" or "canopen"); ``options`` go to its constructor."""
    if kind == "sim":
        from .sim import SimHardware
        return SimHardware(joint_names, limits, initial, **options)
    if kind == "canopen":
        from .canopen_driver import CanopenHardware
        return CanopenHardware(joint_names, limits, **options)
    raise ValueError(f"unknown hardware {kind!r}; expected one of {', '.join(KINDS)}")


__all__ = ["KINDS", "FaultKind", "Hardware", "HardwareError", "JointLimits", "ModuleState", "ModuleStatus",
           "create", "limits_from_robot"]
