"""Typed planning failures, each with a MoveIt ``MoveItErrorCodes`` value (a node answers with ``code``)."""

from __future__ import annotations

SUCCESS = 1
FAILURE = 99999
PLANNING_FAILED = -1
INVALID_MOTION_PLAN = -2
TIMED_OUT = -6
START_STATE_IN_COLLISION = -10
INVALID_ROBOT_STATE = -11
GOAL_IN_COLLISION = -12
GOAL_VIOLATES_PATH_CONSTRAINTS = -13
INVALID_GROUP_NAME = -15
INVALID_GOAL_CONSTRAINTS = -17
INVALID_OBJECT_NAME = -23
NO_IK_SOLUTION = -31

CODE_NAMES = {v: k for k, v in dict(globals()).items() if k.isupper() and isinstance(v, int)}


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
    """Start state outside the limits or naming a joint the robot does not have."""

    code = INVALID_ROBOT_STATE


class GoalInCollision(PlanningError):
    code = GOAL_IN_COLLISION


class InvalidGroup(PlanningError):
    code = INVALID_GROUP_NAME


class InvalidGoal(PlanningError):
    """Goal outside the joint limits, naming an unknown joint / state / frame, or malformed."""

    code = INVALID_GOAL_CONSTRAINTS


class InvalidObject(PlanningError):
    """A body, handle or gripper that does not exist."""

    code = INVALID_OBJECT_NAME


class NoIKSolution(PlanningError):
    code = NO_IK_SOLUTION
