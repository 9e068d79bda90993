"""Controller rules without ROS: joint_trajectory_controller's goal validation, tolerances and goal state
machine, gripper_action_controller's reached / stalled rules (:mod:`.goals`), and the control loop that runs
trajectories and goals on a Hardware (:mod:`.joint_control`)."""

from .goals import (MAX_POINTS, PREEMPTED, ErrorCode, GoalRejected, GoalState, GoalTracker, GripperTracker,
                    JointTolerance, Outcome, PreparedTrajectory, Tolerances, TrajectoryCommand,
                    TrajectoryPoint, build_trajectory, check_point_count, check_start, move_trajectory,
                    prepare_trajectory, rate_excess, resolve_tolerances, stop_trajectory)
from .joint_control import JointControl, Motion

__all__ = ["MAX_POINTS", "PREEMPTED", "ErrorCode", "GoalRejected", "GoalState", "GoalTracker",
           "GripperTracker", "JointControl", "JointTolerance", "Motion", "Outcome", "PreparedTrajectory",
           "Tolerances", "TrajectoryCommand", "TrajectoryPoint", "build_trajectory", "check_point_count",
           "check_start", "move_trajectory", "prepare_trajectory", "rate_excess", "resolve_tolerances",
           "stop_trajectory"]
