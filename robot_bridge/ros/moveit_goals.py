"""MoveIt messages to and from the planning core (planner_node's adapter): a MotionPlanRequest's goal and
start state as core goals, planned trajectories as trajectory_msgs / moveit_msgs, the FollowJointTrajectory
goal of a plan.  Malformed requests raise the core's typed errors (robot_bridge.planning.errors)."""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import Point
from moveit_msgs.msg import RobotState, RobotTrajectory
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..planning.errors import InvalidGoal, InvalidGroup, InvalidLinkName

MAX_CONSTRAINTS = 1000               # joint / position / orientation constraints of one goal
MAX_JOINT_STATE_NAMES = 10000


def matrix(position, orientation, what: str) -> np.ndarray:
    """4x4 of a message's position and quaternion, checked by the core (InvalidGoal -16)."""
    from ..planning import inputs

    return inputs.pose((position.x, position.y, position.z),
                       (orientation.x, orientation.y, orientation.z, orientation.w), what)


def duration(t: float) -> Duration:
    sec = int(math.floor(t))
    return Duration(sec=sec, nanosec=min(999_999_999, int(round((t - sec) * 1e9))))


def trajectory_msg(trajectory) -> JointTrajectory:
    msg = JointTrajectory(joint_names=list(trajectory.joint_names))
    for i, t in enumerate(trajectory.times):
        msg.points.append(JointTrajectoryPoint(
            positions=[float(v) for v in trajectory.positions[i]],
            velocities=[float(v) for v in trajectory.velocities[i]],
            accelerations=[float(v) for v in trajectory.accelerations[i]],
            time_from_start=duration(float(t))))
    return msg


def trajectory_goal(trajectory, tolerance: float) -> FollowJointTrajectory.Goal:
    """The FollowJointTrajectory goal of a planned trajectory: path and goal tolerance ``tolerance`` (the
    planner's corridor, ``Planner.corridor()``) on every joint, so the controller aborts a motion that
    leaves what was checked (PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED)."""
    tolerances = [JointTolerance(name=name, position=float(tolerance)) for name in trajectory.joint_names]
    return FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory), path_tolerance=tolerances,
                                      goal_tolerance=list(tolerances))


def robot_trajectory(plan) -> RobotTrajectory:
    return RobotTrajectory(joint_trajectory=trajectory_msg(plan.trajectory))


def start_msg(plan) -> RobotState:
    traj = plan.trajectory
    return RobotState(joint_state=JointState(name=list(traj.joint_names),
                                             position=[float(v) for v in traj.positions[0]]))


def start_of(request) -> Optional[dict]:
    """A MotionPlanRequest's start state (None: the current one)."""
    from ..planning import inputs

    js = request.start_state.joint_state
    if request.start_state.is_diff or not js.name:
        return None
    return inputs.start_state(js.name, js.position, MAX_JOINT_STATE_NAMES)


def goal_of(request, links, frame_pose: Callable[[str], np.ndarray]):
    """The core goal of a MotionPlanRequest: a joint goal, a pose goal (on one of ``links``; frames placed
    by ``frame_pose``) or a named state."""
    from ..planning.goals import JointGoal, NamedGoal

    group = request.group_name or None
    if not request.goal_constraints:
        raise InvalidGoal("no goal_constraints")
    c = request.goal_constraints[0]
    counts = (len(c.joint_constraints), len(c.position_constraints), len(c.orientation_constraints))
    if max(counts) > MAX_CONSTRAINTS:
        raise InvalidGoal(f"more than {MAX_CONSTRAINTS} constraints")
    if c.joint_constraints:
        if counts[1] or counts[2]:
            raise InvalidGoal("joint and pose constraints in one goal")
        return JointGoal({jc.joint_name: float(jc.position) for jc in c.joint_constraints}, group)
    if counts[1] or counts[2]:
        return pose_goal(c, group, links, frame_pose)
    if c.name:
        return NamedGoal(c.name, group)
    raise InvalidGoal("goal_constraints[0] holds no constraint and no state name")


def pose_goal(c, group, links, frame_pose: Callable[[str], np.ndarray]):
    """The PoseGoal of a Constraints' position and orientation constraints on one link: the axes they
    constrain (an orientation tolerance of pi or more frees its axis)."""
    from ..planning.goals import PoseGoal

    named = {pc.link_name for pc in c.position_constraints} | \
        {oc.link_name for oc in c.orientation_constraints}
    if len(named) != 1:
        raise InvalidGoal(f"pose constraints on {len(named)} links, one expected")
    link = named.pop()
    if link not in links:
        raise InvalidLinkName(f"no link {link!r} in the robot")
    pose = np.eye(4)
    offset = np.eye(4)
    mask = [False] * 6
    if c.position_constraints:
        pc = c.position_constraints[0]
        region = pc.constraint_region
        if not region.primitive_poses:
            raise InvalidGoal("position constraint without a primitive pose")
        p = region.primitive_poses[0].position
        target = np.array([p.x, p.y, p.z, 1.0])
        o = pc.target_point_offset
        offset[:3, 3] = [o.x, o.y, o.z]
        if not np.isfinite(target).all() or not np.isfinite(offset).all():
            raise InvalidGoal("position constraint not finite")
        pose[:3, 3] = (frame_pose(pc.header.frame_id) @ target)[:3]
        mask[:3] = [True] * 3
    if c.orientation_constraints:
        oc = c.orientation_constraints[0]
        local = matrix(Point(), oc.orientation, "orientation constraint")
        pose[:3, :3] = (frame_pose(oc.header.frame_id) @ local)[:3, :3]
        tolerances = (oc.absolute_x_axis_tolerance, oc.absolute_y_axis_tolerance,
                      oc.absolute_z_axis_tolerance)
        mask[3:] = [not (math.isfinite(t) and t >= math.pi) for t in tolerances]
    if not any(mask):
        raise InvalidGoal("the pose constraints constrain nothing")
    if group is None:
        raise InvalidGroup("a pose goal needs group_name")
    return PoseGoal(group, pose, frame=link, offset=offset, mask=mask)


# -- Pickup and Place (planning.pick_place) ----------------------------------------------------------------
def posture(msg, joint: str, default: float) -> float:
    """The last position a JointTrajectory posture gives ``joint`` (``default`` when none or not finite)."""
    if msg is not None and joint in msg.joint_names and msg.points:
        value = msg.points[-1].positions[list(msg.joint_names).index(joint)]
        if math.isfinite(value):
            return float(value)
    return default


def grasp_request(grasp):
    """A moveit_msgs/Grasp as planning.pick_place.GraspRequest (None: no grasp)."""
    from ..planning.pick_place import GraspRequest

    if grasp is None:
        return None
    approach, pose = grasp.pre_grasp_approach, grasp.grasp_pose
    p, o, v = pose.pose.position, pose.pose.orientation, approach.direction.vector
    return GraspRequest(grasp.id, (p.x, p.y, p.z), (o.x, o.y, o.z, o.w), pose.header.frame_id,
                        (v.x, v.y, v.z), approach.direction.header.frame_id, float(approach.desired_distance))


def retreat(translation, lift: float):
    """A GripperTranslation as planning.pick_place.Retreat (None or none given: ``lift`` up)."""
    from ..planning.pick_place import retreat_of

    if translation is None:
        return retreat_of((0.0, 0.0, 0.0), 0.0, "", lift)
    v = translation.direction.vector
    return retreat_of((v.x, v.y, v.z), float(translation.desired_distance),
                      translation.direction.header.frame_id, lift)
