"""The master's planning core (no rclpy): the robot, its joint state and the world's bodies as the bridge
publishes them; joint, named-state, pose and grasp goals; trajectories under the joint limits; typed failures.

The planning library (roboplan) is an extra: ``pip install 'robot_bridge[planning]'``.  Goals, results and
errors import without it; :class:`Planner` raises :class:`PlanningUnavailable` naming what to install.
Only :mod:`.backend` imports the library.
"""

from .errors import PlanningError, PlanningUnavailable
from .goals import (GraspGoal, GraspPlan, JointGoal, MotionPlan, NamedGoal, PathCheck, PlaceGoal, PlacePlan,
                    PoseGoal, Trajectory)

__all__ = ["GraspGoal", "GraspPlan", "JointGoal", "MotionPlan", "NamedGoal", "PathCheck", "PlaceGoal",
           "PlacePlan", "Planner", "PlanningError", "PlanningUnavailable", "PoseGoal", "Trajectory",
           "available", "installed"]


def installed() -> bool:
    """True when the planning libraries are installed: found, not imported (their imports take seconds)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("pinocchio", "roboplan"))


def available() -> bool:
    """True when the planning libraries import."""
    from . import backend

    return backend._IMPORT_ERROR is None


def __getattr__(name: str):
    if name == "Planner":
        from . import backend

        backend.require()
        from .planner import Planner

        return Planner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
