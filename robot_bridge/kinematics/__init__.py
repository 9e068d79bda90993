"""Forward kinematics, TF frames and mimic evaluation (no rclpy)."""

from .fk import KinematicModel, forward_kinematics, joint_motion, topological_joints

__all__ = ["KinematicModel", "forward_kinematics", "joint_motion", "topological_joints"]
