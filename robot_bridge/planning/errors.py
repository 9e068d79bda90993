"""Typed planning failures, each with a MoveIt ``MoveItErrorCodes`` value (a node answers with ``code``)."""

from __future__ import annotations

# moveit_msgs/msg/MoveItErrorCodes values (test_planner checks each against moveit_msgs when importable)
SUCCESS = 1
FAILURE = 99999
PLANNING_FAILED = -1
INVALID_MOTION_PLAN = -2
MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE = -3
CONTROL_FAILED = -4
TIMED_OUT = -6
PREEMPTED = -7
START_STATE_IN_COLLISION = -10
GOAL_IN_COLLISION = -12
GOAL_VIOLATES_PATH_CONSTRAINTS = -13
INVALID_GROUP_NAME = -15
INVALID_GOAL_CONSTRAINTS = -16
INVALID_ROBOT_STATE = -17
INVALID_LINK_NAME = -18
INVALID_OBJECT_NAME = -19
FRAME_TRANSFORM_FAILURE = -21
START_STATE_INVALID = -26
GOAL_STATE_INVALID = -27
NO_IK_SOLUTION = -31

CODE_NAMES = {v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)}


INSTALL_HINT = ("robot_bridge.planning needs the planning libraries: pip install 'robot_bridge[planning]' "
                "(the roboplan package, which brings pin and coal)")


class PlanningUnavailable(ImportError):
    """The planning libraries (the ``planning`` extra) are not installed."""


class PlanningError(Exception):
    """A goal that gets no motion; ``code`` is its MoveItErrorCodes value, ``str()`` the reason."""

    code = PLANNING_FAILED

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)

    @property
    def code_name(self) -> str:
        return CODE_NAMES.get(self.code, str(self.code))


class NoPathFound(PlanningError):
    code = PLANNING_FAILED


class InvalidMotionPlan(PlanningError):
    code = INVALID_MOTION_PLAN


class PlanningTimedOut(PlanningError):
    code = TIMED_OUT


class StartInCollision(PlanningError):
    code = START_STATE_IN_COLLISION


class InvalidRobotState(PlanningError):
    """A state naming a joint the robot does not have (or drive)."""

    code = INVALID_ROBOT_STATE


class StartStateInvalid(InvalidRobotState):
    """A start state outside the joint limits."""

    code = START_STATE_INVALID


class GoalInCollision(PlanningError):
    code = GOAL_IN_COLLISION


class InvalidGroup(PlanningError):
    code = INVALID_GROUP_NAME


class InvalidGoal(PlanningError):
    """Goal naming an unknown joint or state, or malformed."""

    code = INVALID_GOAL_CONSTRAINTS


class GoalStateInvalid(InvalidGoal):
    """A goal outside the joint limits."""

    code = GOAL_STATE_INVALID


class InvalidLinkName(InvalidGoal):
    """A goal naming a link or frame the robot does not have."""

    code = INVALID_LINK_NAME


class FrameTransformFailure(InvalidGoal):
    """A goal given in a frame the planner cannot place in its world."""

    code = FRAME_TRANSFORM_FAILURE


class InvalidObject(PlanningError):
    """A body, handle or gripper that does not exist."""

    code = INVALID_OBJECT_NAME


class NoIKSolution(PlanningError):
    code = NO_IK_SOLUTION


class PlanningCanceled(PlanningError):
    """The caller canceled the attempt (a cancel or a newer goal): MoveIt's PREEMPTED."""

    code = PREEMPTED
