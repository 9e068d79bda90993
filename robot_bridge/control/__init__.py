"""Controller rules without ROS: joint_trajectory_controller's goal validation, tolerances and goal state
machine (:mod:`.goals`), and the control loop that runs trajectories and goals on a Hardware
(:mod:`.joint_control`)."""

from .goals import (PREEMPTED, ErrorCode, GoalRejected, GoalState, GoalTracker, JointTolerance, Outcome,
                    Tolerances, TrajectoryCommand, TrajectoryPoint, build_trajectory, resolve_tolerances,
                    stop_trajectory)
from .joint_control import JointControl, Motion

__all__ = ["PREEMPTED", "ErrorCode", "GoalRejected", "GoalState", "GoalTracker", "JointControl",
           "JointTolerance", "Motion", "Outcome", "Tolerances", "TrajectoryCommand", "TrajectoryPoint",
           "build_trajectory", "resolve_tolerances", "stop_trajectory"]
