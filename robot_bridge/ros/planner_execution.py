"""planner_node's execution through the controller's actions: a plan through the FollowJointTrajectory action
of the controller whose joints cover it (control.groups.wiring, as MoveIt's controller manager picks), checked
against every world update while it runs; the gripper through its GripperCommand action.  A mixin of
:class:`robot_bridge.nodes.planner.PlannerNode`, and the executor planning.pick_place's sequences run on."""

from __future__ import annotations

import threading
import time
from typing import Optional

import numpy as np
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory, GripperCommand
from rclpy.action import ActionClient

from .actions import cancel_goal, get_result, send_goal
from .goal_queue import E, FEEDBACK_MONITOR, GoalFailed, Job
from .moveit_goals import trajectory_goal


class ControllerExecution:
    # -- execution ---------------------------------------------------------------------------------
    def _wait(self, future, timeout: float, job: Optional[Job] = None) -> bool:
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        deadline = time.monotonic() + timeout
        while not done.wait(0.02):
            if time.monotonic() > deadline:
                return False
            if job is not None and job.stop.is_set():
                return done.is_set()
        return True

    def _send(self, client, goal, what: str, job: Job):
        timeout = float(self.params.get("server_timeout"))
        if not client.wait_for_server(timeout_sec=timeout):
            raise GoalFailed(E.CONTROL_FAILED, f"no {what} action server at {client._action_name!r}")
        sent = send_goal(self, client, goal)
        if not self._wait(sent, timeout):
            raise GoalFailed(E.CONTROL_FAILED, f"{what} server at {client._action_name!r} did not answer")
        handle = sent.result()
        if not handle.accepted:
            raise GoalFailed(E.CONTROL_FAILED, f"{what} goal rejected by {client._action_name!r}")
        return handle

    def _stop(self, handle, result_future) -> None:
        """Cancel a controller goal and wait until it ended (the arm at rest, within the controller's
        stop rules)."""
        cancel_goal(self, handle)
        self._wait(result_future, float(self.params.get("server_timeout")) + 5.0)

    def _follow(self, job: Job, plan, monitor: bool = True) -> None:
        """Run ``plan`` through FollowJointTrajectory, checking the rest of the path on every world update
        (``monitor``)."""
        traj = plan.trajectory
        self._feedback(job, FEEDBACK_MONITOR)
        goal = trajectory_goal(traj, self.model.planner.corridor())
        handle = self._send(self._trajectory_client(traj.joint_names), goal, "FollowJointTrajectory", job)
        started = time.monotonic()
        result_future = get_result(self, handle)
        limit = traj.duration * float(self.params.get("execution_duration_scaling")) + \
            float(self.params.get("execution_goal_margin"))
        with self._input_lock:
            seen = self.objects_version
        while not self._wait(result_future, 0.05):
            if job.stop.is_set():
                self._stop(handle, result_future)
                job.check()
            if time.monotonic() - started > limit:
                self._stop(handle, result_future)
                raise GoalFailed(E.TIMED_OUT, f"the trajectory did not end within {limit:.3g} s")
            with self._input_lock:
                changed = self.objects_version != seen
                seen = self.objects_version
            if not changed or not monitor:
                continue
            with self.model_lock:
                self.sync()
                check = self.model.planner.path_valid(traj, max(0.0, time.monotonic() - started - 0.05))
            self.get_logger().debug(f"world update while executing: {check}")
            if not check.valid:
                self._stop(handle, result_future)
                bodies = ", ".join(check.bodies) or "a world body"
                raise GoalFailed(E.MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE,
                                 f"{bodies} on the remaining path (at t={check.collision_time:.3g} s of "
                                 f"{traj.duration:.3g} s): trajectory stopped")
        response = result_future.result()
        result = response.result
        if result.error_code != FollowJointTrajectory.Result.SUCCESSFUL or \
                response.status != GoalStatus.STATUS_SUCCEEDED:
            raise GoalFailed(E.CONTROL_FAILED, f"FollowJointTrajectory ended with error_code "
                                               f"{result.error_code} (status {response.status}): "
                                               f"{result.error_string}")

    def _wiring(self):
        """The controllers controller_node derives for the planner's robot (control.groups.wiring)."""
        from ..control.groups import wiring
        from ..model.groups import driven_joints

        with self.model_lock:
            planner = self.model.planner
            if self._wired[0] is not planner:
                self._wired = (planner, wiring(planner.robot, driven_joints(planner.robot)))
            return self._wired[1]

    def _client(self, kind, name: str):
        with self._input_lock:
            if name not in self._controller_clients:
                self._controller_clients[name] = ActionClient(self, kind, name)
            return self._controller_clients[name]

    def _trajectory_client(self, joints):
        """The FollowJointTrajectory client of the controller whose joints cover ``joints``, as MoveIt's
        controller manager chooses: ``trajectory_action`` for the controller at the default names, else
        ``<its namespace>/<group>/follow_joint_trajectory``."""
        from ..control.groups import action_name

        base, wired = self.params.get("trajectory_action"), self._wiring()
        wire = wired.controller_for(joints)
        if wire is None and len(wired.controllers) > 1:
            known = "; ".join(f"{c.name}: {', '.join(c.joints)}" for c in wired.controllers)
            raise GoalFailed(E.CONTROL_FAILED, f"no controller drives all of {', '.join(joints)} ({known})")
        return self._client(FollowJointTrajectory, base if wire is None else action_name(base, wire))

    def _gripper_client(self, joint: str):
        from ..control.groups import gripper_action

        return self._client(GripperCommand, gripper_action(self.params.get("gripper_action"),
                                                           self._wiring().grippers, joint))

    def _grip(self, job: Job, position: float, max_effort: float = 0.0, joint: str = ""):
        goal = GripperCommand.Goal()
        goal.command.position, goal.command.max_effort = float(position), float(max_effort)
        handle = self._send(self._gripper_client(joint), goal, "GripperCommand", job)
        result_future = get_result(self, handle)
        if not self._wait(result_future, float(self.params.get("server_timeout")) + 30.0):
            self._stop(handle, result_future)
            raise GoalFailed(E.TIMED_OUT, "the gripper did not finish")
        response = result_future.result()
        if response.status != GoalStatus.STATUS_SUCCEEDED:
            raise GoalFailed(E.CONTROL_FAILED, f"GripperCommand ended with status {response.status} at "
                                               f"position {response.result.position:.4g}")
        return response.result


class PickPlaceExecutor:
    """planning.pick_place's executor on planner_node: the controller's actions, the planning model, the
    world's attach topic."""

    def __init__(self, node, job: Job):
        self.node, self.job = node, job
        self.planner = node.model.planner            # the planner the goal was planned on

    def move(self, plan, monitor: bool = True) -> None:
        self.node._follow(self.job, plan, monitor=monitor)

    def grip(self, position: float, joint: str):
        return self.node._grip(self.job, position, joint=joint)

    def attach(self, body: str, link: str) -> None:
        with self.node.model_lock:
            self.node.sync()
            self.planner.attach(body, link)
            touch = list(self.planner.bodies[body].touch)
        self.node.publish_attached(body, link, touch, True)

    def detach(self, body: str, link: str) -> None:
        with self.node.model_lock:
            self.node.sync()
            self.planner.detach(body)
        self.node.publish_attached(body, link, [], False)

    def link_pose(self, link: str) -> np.ndarray:
        with self.node.model_lock:
            return self.node.model.planner.link_pose(link)

    def frame_pose(self, frame: str) -> np.ndarray:
        with self.node.model_lock:
            return self.node._frame_pose(frame)

    def plan_pose(self, goal):
        return self.node._plan(goal, None, None, float(self.node.params.get("default_planning_time")),
                               job=self.job)[0]
