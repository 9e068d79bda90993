"""planner_node: the master that plans around the world and executes, speaking move_group's interfaces.

A thin adapter over :class:`robot_bridge.planning.master.MasterModel` (the rclpy-free state): subscribes
``robot_description`` / ``robot_description_semantic`` (latched, as description_node publishes them),
``joint_states`` and world_node's ``~/objects`` document; serves

- action ``move_action`` (moveit_msgs/action/MoveGroup): a joint goal
  (``goal_constraints[0].joint_constraints``), a named state (a ``goal_constraints[0]`` whose ``name`` is an
  SRDF group_state and that holds no constraint), or a pose goal (position and/or orientation constraints on
  one link, in the planner's world frame or a robot link frame; any other frame: FRAME_TRANSFORM_FAILURE);
  ``plan_only`` plans without executing, ``replan`` plans again (up to ``replan_attempts``) when vision
  feedback stops the arm;
- action ``pickup`` (moveit_msgs/action/Pickup) and ``place`` (moveit_msgs/action/Place) on world bodies;
- service ``plan_kinematic_path`` (moveit_msgs/srv/GetMotionPlan): plan only.

Trajectories run through the controller's FollowJointTrajectory action, the gripper through its GripperCommand
action.  While a trajectory runs, every world update is checked against the rest of the path; a body on it
cancels the trajectory (the controller stops within its limits) and the goal ends with
MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE naming the body.  Goals run one at a time on a worker thread
(a new goal preempts the running one: PREEMPTED; a cancel ends the goal CANCELED with PREEMPTED -7; either
ends planning within one search slice, ``planning.cancel.PLAN_SLICE``); subscriptions only store the latest
input, the worker applies it.  The worker also builds the planning model (the imports of pinocchio, coal and
roboplan take seconds): the node serves at once (goals wait for the model, the plan service answers that it is
loading) and a SIGINT during the build ends the process without waiting for it.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
from typing import Optional

import numpy as np
from control_msgs.action import FollowJointTrajectory, GripperCommand
from moveit_msgs.action import MoveGroup, Pickup, Place
from moveit_msgs.msg import AttachedCollisionObject, CollisionObject, DisplayTrajectory, MoveItErrorCodes
from moveit_msgs.srv import GetMotionPlan
from rclpy.action import ActionClient, ActionServer
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ..formats.resources import ResourceResolver
from ..kinematics import frames
from ..planning.errors import PlanningError
from ..ros import params, qos
from ..ros.params import Param
from ..ros.actions import destroy_actions
from ..ros.goal_queue import (ACTION_REQUESTS, FEEDBACK_IDLE, FEEDBACK_MONITOR, FEEDBACK_PLANNING, E,
                              GoalFailed, GoalQueue, Job, action_request_qos)
from ..ros.guard import ContainedNode
from ..ros.moveit_goals import (MAX_JOINT_STATE_NAMES, goal_of, grasp_request, matrix, posture, retreat,
                                robot_trajectory, start_msg, start_of, trajectory_goal, trajectory_msg)
from ..ros.planner_execution import ControllerExecution, PickPlaceExecutor
from ..world.planning_scene import attach_topic

__all__ = ["ACTION_REQUESTS", "E", "FEEDBACK_IDLE", "FEEDBACK_MONITOR", "FEEDBACK_PLANNING", "PARAMETERS",
           "GoalFailed", "Job", "PlannerNode", "action_request_qos", "main", "trajectory_goal",
           "trajectory_msg"]
PARAMETERS = params.schema(
    Param("trajectory_action", "controller_node/follow_joint_trajectory",
          "FollowJointTrajectory action of the controller node's only controller; with several (one per "
          "SRDF group, control.groups.wiring) <its namespace>/<group>/follow_joint_trajectory of the group "
          "covering the planned joints",
          read_only=True, string="name"),
    Param("gripper_action", "controller_node/gripper_cmd", "GripperCommand action of the gripper (Pickup, "
                                                          "Place); with several, <its namespace>/<group>/"
                                                          "gripper_cmd", read_only=True, string="name"),
    Param("objects_topic", "world_node/objects", "world_node's latched <Environment> document of the "
                                                 "detected bodies (empty: no world bodies)",
          read_only=True, string="name"),
    Param("occupancy_topic", "/planning_scene", "PlanningScene diffs whose world.octomap (world_node's "
                                                "occupancy map) is planned around (empty: none)",
          read_only=True, string="name"),
    Param("joint_states_topic", "joint_states", "Joint states of the robot", read_only=True, string="name"),
    Param("description_file", "", "Robot file whose joint acceleration limits the controller uses and whose "
                                  "environment bodies are planned around (a URDF carries neither); empty: "
                                  "default_acceleration for every joint, world_node's bodies only",
          read_only=True, string="text"),
    Param("environment", True, "Plan around the environment bodies of description_file (as the description "
                               "node publishes them on /tf_static)", read_only=True),
    Param("search_path", params.STRING_ARRAY, "Directories searched for includes, meshes and body files",
          read_only=True, string="text"),
    Param("objects_roots", params.STRING_ARRAY, "Folders the body files of objects_topic's documents may lie "
                                                "in, besides those of description_file, search_path and this "
                                                "package's data (a body file elsewhere is refused unread)",
          read_only=True, string="text"),
    Param("default_acceleration", 2.0, "Acceleration limit of joints without one (the controller's default)",
          range=(1e-6, 1e6), read_only=True),
    Param("world_frame", "", "The planner's world frame (pose goals); empty: world", read_only=True,
          string="frame"),
    Param("frame_prefix", "", "Prefix of the robot's TF frames (as the description node's)", read_only=True,
          string="prefix"),
    Param("robot_pose", params.DOUBLE_ARRAY, "Where the robot stands in the world frame, [x, y, z, roll, "
                                             "pitch, yaw] (m, rad), as the description node's; empty: "
                                             "description_file's placement, else the origin",
          lengths=(0, 6), read_only=True),
    Param("limit_margin", 0.1, "Trajectories keep this fraction below the velocity and acceleration limits "
                               "(the controller's interpolation between samples overshoots them slightly)",
          range=(0.0, 0.9)),
    Param("default_planning_time", 5.0, "Seconds of planning when a request gives allowed_planning_time 0",
          range=(0.001, 30.0)),
    Param("max_planning_time", 60.0, "Seconds of planning at most: a request's allowed_planning_time above "
                                     "is planned for this long", range=(0.001, 3600.0)),
    Param("execution_duration_scaling", 1.2, "A trajectory not finished after this times its duration, plus "
                                             "execution_goal_margin, is canceled (TIMED_OUT)",
          range=(1.0, 100.0)),
    Param("execution_goal_margin", 2.0, "Seconds added to the scaled duration (controller goal time, stop)",
          range=(0.0, 600.0)),
    Param("server_timeout", 5.0, "Seconds to wait for the controller's action servers and their answers",
          range=(0.01, 600.0)),
    Param("current_state_wait", 5.0, "Seconds a goal that moves the robot waits for /joint_states measured "
                                     "after it arrived (move_group's wait for the current state); none: "
                                     "ROBOT_STATE_STALE", range=(0.01, 600.0)),
    Param("lift_distance", 0.05, "m the gripper frame moves up (+z of the world) after a grasp and back "
                                 "after a place when the goal gives no retreat", range=(0.0, 1.0)),
    Param("seed", 0, "Seed of the planner's random sampling", range=(0, 2**31 - 1), read_only=True),
    Param("max_pending_goals", 16, "Goals of all three actions accepted and not yet ended; a goal beyond is "
                                   "rejected (every accepted goal gets its result, under a storm too)",
          range=(1, 1000), read_only=True),
    Param("result_timeout", 900, "Seconds the result of an ended goal is kept for its client (rcl's and "
                                 "move_group's default; rclpy's 10 s lost the results of a burst)",
          range=(1, 86400), read_only=True),
)
LOADING = "loading the planning libraries (pinocchio, coal, roboplan) on the worker thread"
WORKER_JOIN = 5.0                    # s destroy_node waits for the worker to end its goal
BUILD_JOIN = 0.2                     # s ... for a worker still building the planning model (executable)
# Workers building a model now.  A thread left inside the libraries' C++ import when the interpreter finalizes
# aborts the process ("FATAL: exception not rethrown"): the planner_node executable (main) ends with os._exit
# instead of waiting for such a build; a node in another process (robot-bridge run) waits for it.
_BUILDING: set = set()
_EXIT_AT_ONCE = threading.Event()


def attached_qos() -> QoSProfile:
    """world_node's ~/attach (as MoveIt's /attached_collision_object): reliable, volatile, depth 100."""
    return QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


class PlannerNode(GoalQueue, ControllerExecution, ContainedNode):
    def __init__(self, **kwargs):
        super().__init__("planner_node", **kwargs)
        from ..planning import installed
        from ..planning.errors import INSTALL_HINT, PlanningUnavailable

        self.params = params.NodeParameters(self, PARAMETERS)
        if not installed():                           # found, not imported: the node does not start
            raise PlanningUnavailable(INSTALL_HINT)
        self.world_frame = str(self.params.get("world_frame")) or frames.WORLD_FRAME
        self.frame_prefix = str(self.params.get("frame_prefix"))
        self.model = None                             # MasterModel: built by the worker (_build_model)
        self.model_error: Optional[str] = None        # why it could not be built
        self.model_lock = threading.RLock()           # the model: the worker and the plan service
        self._input_lock = threading.Lock()
        self._pending_urdf: Optional[str] = None
        self._pending_srdf: Optional[str] = None
        self._pending_objects: Optional[dict] = None    # name -> (body, pose): read by objects_worker
        self._pending_occupancy: Optional[tuple] = None  # (occupancy body or None,): read by its worker
        self._joints: dict[str, float] = {}
        self._joints_dirty = False
        self.joint_state_count = 0
        self.joint_state_stamp_ns = 0                 # header stamp of the latest /joint_states
        self.objects_version = 0                      # world documents read
        self._logged_problems = 0
        self._jobs: "queue.Queue[Optional[Job]]" = queue.Queue()
        self._pending = 0                             # goals accepted and not ended (max_pending_goals)
        self._pending_lock = threading.Lock()
        self._worker_errors: list = []                # defects logged in full (the first; then throttled)
        self._current: Optional[Job] = None
        self._wake = threading.Event()

        latched = qos.description_qos()
        self.create_subscription(String, "robot_description", self._on_description, latched)
        self.create_subscription(String, "robot_description_semantic", self._on_semantic, latched)
        self.create_subscription(JointState, self.params.get("joint_states_topic"), self._on_joint_states, 10)
        self.objects_worker = None                    # reads world_node's documents: never the service's job
        # what description_node finds, this node finds: one resolver of the same parameters
        self.resolver = ResourceResolver.from_parameters(self.params.get)
        if self.params.get("objects_topic"):
            from ..world.reader import LatestWorker, WorldReader

            self.objects_reader = WorldReader(self.resolver.body_roots, self.resolver.search_path,
                                              source=self.params.get("objects_topic"))
            self.objects_worker = LatestWorker(self._read_objects, "planner_node.objects",
                                               lambda exc: self.on_callback_error("objects worker", exc))
            self.create_subscription(String, self.params.get("objects_topic"),
                                     lambda msg: self.objects_worker.submit(msg.data), latched)
        if self.params.get("occupancy_topic"):
            self._subscribe_occupancy()
        # world_node owns what the grippers hold: it tells MoveIt (/attached_collision_object), once per grasp
        self.attached_pub = self.create_publisher(
            AttachedCollisionObject, attach_topic(self.params.get("objects_topic") or "world_node/objects"),
            attached_qos())
        self.display_pub = self.create_publisher(DisplayTrajectory, "/display_planned_path",
                                                 qos.description_qos())
        self.trajectory_client = ActionClient(self, FollowJointTrajectory,
                                              self.params.get("trajectory_action"))
        self.gripper_client = ActionClient(self, GripperCommand, self.params.get("gripper_action"))
        # requests queue deep (a burst is answered: accepted, or rejected beyond max_pending_goals), bounded
        deep = {f"{s}_service_qos_profile": action_request_qos() for s in ("goal", "cancel", "result")}
        deep["result_timeout"] = int(self.params.get("result_timeout"))
        # action name -> client: the controller wiring's other controllers (control.groups), made when used
        self._controller_clients = {self.params.get("trajectory_action"): self.trajectory_client,
                         self.params.get("gripper_action"): self.gripper_client}
        self._wired = (None, None)                    # (planner, its control.groups.Wiring)
        self.move_server = ActionServer(self, MoveGroup, "move_action", execute_callback=self._execute_move,
                                        goal_callback=self._admit, cancel_callback=self._on_cancel, **deep)
        self.pickup_server = ActionServer(self, Pickup, "pickup", execute_callback=self._execute_pickup,
                                          goal_callback=self._admit, cancel_callback=self._on_cancel, **deep)
        self.place_server = ActionServer(self, Place, "place", execute_callback=self._execute_place,
                                         goal_callback=self._admit, cancel_callback=self._on_cancel, **deep)
        self.create_service(GetMotionPlan, "plan_kinematic_path", self._on_plan_service)
        self._running = True
        self._building = True
        self._worker = threading.Thread(target=self._work, name="planner_node.worker", daemon=True)
        self._worker.start()

    def _build_model(self) -> None:
        """The planning model, on the worker thread: the robot file, then the planning libraries' imports."""
        t0 = time.monotonic()
        self.get_logger().info(LOADING)
        try:
            from ..planning.master import MasterModel

            search = list(self.params.get("search_path") or [])
            accelerations, environment, placement = self._robot_file(search)
            model = MasterModel(search, accelerations, environment, placement, resolver=self.resolver,
                                seed=int(self.params.get("seed")),
                                default_acceleration=float(self.params.get("default_acceleration")))
            model.max_planning_time = float(self.params.get("max_planning_time"))
        except Exception as exc:  # e.g. a library that does not import: goals fail with the reason
            self.model_error = f"the planning model could not be built: {type(exc).__name__}: {exc}"
            self.get_logger().error(self.model_error)
            return
        if not self._running:
            return
        with self.model_lock:
            self.model = model
        self.get_logger().info(f"planning libraries loaded in {time.monotonic() - t0:.2f} s")

    def readiness(self):
        """robot-bridge run's ready line: ready once the planning model is built from a robot_description;
        a model that cannot be built is settled."""
        from ..ros.readiness import Readiness

        model = self.model
        if model is None:
            return Readiness(self.model_error, True) if self.model_error else \
                Readiness("loading the planning libraries")
        reason = model.readiness()
        return Readiness(reason) if reason else None

    def _ready_model(self):
        """The model with a planner (under model_lock, synced); GoalFailed while there is none."""
        model = self.model
        if model is None:
            raise GoalFailed(E.FAILURE, self.model_error or "planner_node is still loading the planning "
                                                           "libraries; try again in a few seconds")
        if model.planner is None:
            raise GoalFailed(E.FAILURE, "no robot_description received yet")
        return model

    def _robot_file(self, search: list) -> tuple[dict, dict, np.ndarray]:
        """description_file's acceleration limits, environment bodies and placement (master.robot_file)."""
        from ..planning.master import robot_file

        return robot_file(self.params.get("description_file"), self.params.get("robot_pose"), search,
                          bool(self.params.get("environment")),
                          lambda text: self.get_logger().error(text))

    # -- inputs (executor thread: stored, applied by the worker) --------------------------------------
    def _on_description(self, msg: String) -> None:
        with self._input_lock:
            self._pending_urdf = msg.data
        self._wake.set()

    def _on_semantic(self, msg: String) -> None:
        with self._input_lock:
            self._pending_srdf = msg.data
        self._wake.set()

    def _subscribe_occupancy(self) -> None:
        """world_node's occupancy map (a /planning_scene diff with world.octomap), decoded on a worker of its
        own (the newest wins) into one world body of boxes."""
        from moveit_msgs.msg import PlanningScene

        from ..ros.planning_scene import moveit_qos
        from ..world.reader import LatestWorker

        def on_scene(msg) -> None:
            octo = msg.world.octomap.octomap
            if msg.is_diff and octo.id:
                self.occupancy_worker.submit((bytes(octo.data), float(octo.resolution), octo.id,
                                              msg.world.octomap.header.frame_id))

        self.occupancy_worker = LatestWorker(self._read_occupancy, "planner_node.occupancy",
                                             lambda exc: self.on_callback_error("occupancy worker", exc))
        self.create_subscription(PlanningScene, self.params.get("occupancy_topic"), on_scene, moveit_qos())

    def _read_occupancy(self, item) -> None:
        from ..world.occupancy import body_from_octomap

        data, resolution, map_id, frame = item
        if frame.lstrip("/") != self.world_frame:
            self.get_logger().warning(f"occupancy map in frame {frame!r} not used (the planner's world frame "
                                      f"is {self.world_frame!r})", throttle_duration_sec=5.0)
            return
        try:
            body = body_from_octomap(data, resolution, map_id)
        except (ValueError, ImportError) as exc:    # OccupancyError, OccupancyUnavailable
            self.get_logger().warning(f"occupancy map not used: {exc}", throttle_duration_sec=5.0)
            return
        with self._input_lock:
            self._pending_occupancy = (body,)
            self.objects_version += 1      # a goal executing checks its remaining path against it (replan)

    def _read_objects(self, text: str) -> None:
        """world_node's document, its body files read here (objects_worker), then handed to the model."""
        from ..errors import DescriptionError

        try:
            read = self.objects_reader.objects(text)
        except DescriptionError as exc:
            self.get_logger().warning(f"world objects not used: {exc}", throttle_duration_sec=5.0)
            return
        if read.problems:
            self.get_logger().warning(f"world objects document: {read.summary()}", throttle_duration_sec=5.0)
        with self._input_lock:
            self._pending_objects = read.objects
            self.objects_version += 1
        self._wake.set()

    def _on_joint_states(self, msg: JointState) -> None:
        if len(msg.name) != len(msg.position) or len(msg.name) > MAX_JOINT_STATE_NAMES:
            return
        with self._input_lock:
            for name, value in zip(msg.name, msg.position):
                if math.isfinite(value):
                    self._joints[name] = float(value)
            self._joints_dirty = True
            self.joint_state_count += 1
            self.joint_state_stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    def sync(self) -> None:
        """Apply the inputs received since the last call (worker or service, under model_lock)."""
        if self.model is None:                        # not built yet: the inputs stay pending
            return
        with self._input_lock:
            urdf, srdf, objects = self._pending_urdf, self._pending_srdf, self._pending_objects
            occupancy, self._pending_occupancy = self._pending_occupancy, None
            self._pending_urdf = self._pending_srdf = self._pending_objects = None
            joints = dict(self._joints) if self._joints_dirty else None
            self._joints_dirty = False
        model = self.model
        if joints:
            model.set_joint_state(list(joints), list(joints.values()))
        if urdf is not None or srdf is not None:
            reason = model.set_description(urdf, srdf)
            if reason:
                self.get_logger().error(reason)
            elif urdf is not None and model.planner is not None:
                self.get_logger().info(f"planning for robot {model.planner.robot.name!r}, groups "
                                       f"{', '.join(model.planner.group_names())}")
        if objects is not None:
            reason = model.set_objects(objects)
            if reason:
                self.get_logger().warning(reason)
        if occupancy is not None:
            reason = model.set_occupancy(occupancy[0])
            if reason:
                self.get_logger().warning(reason)
        for problem in model.problems[self._logged_problems:]:
            self.get_logger().warning(problem)
        self._logged_problems = len(model.problems)

    # -- the worker ---------------------------------------------------------------------------------
    def _work(self) -> None:
        _BUILDING.add(threading.current_thread())
        try:
            self._build_model()
        finally:
            self._building = False
            _BUILDING.discard(threading.current_thread())
        while self._running:
            try:
                job = self._jobs.get(timeout=0.2)
            except queue.Empty:
                if self._wake.is_set():
                    self._wake.clear()
                    with self.model_lock:
                        self._guarded(self.sync)
                continue
            if job is None:
                return
            self._run_job(job)

    def _guarded(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # contained: reported, the worker goes on
            self.on_callback_error("planner worker", exc)

    # -- planning -----------------------------------------------------------------------------------
    def _planning_time(self, request) -> float:
        t = float(request.allowed_planning_time)
        t = t if math.isfinite(t) and t > 0 else float(self.params.get("default_planning_time"))
        return min(t, float(self.params.get("max_planning_time")))

    def _goal_of(self, request):
        """The core goal of a MotionPlanRequest (the core's typed error when malformed)."""
        return goal_of(request, self.model.planner.robot.links, self._frame_pose)

    def _frame_pose(self, frame: str) -> np.ndarray:
        """World pose of a frame the planner knows: its world frame, a robot link, a world body."""
        from ..planning.master import frame_pose

        return frame_pose(self.model.planner, frame, self.world_frame, self.frame_prefix)

    def _plan(self, goal, group, start, timeout: float, velocity: float = 1.0, acceleration: float = 1.0,
              job: Optional[Job] = None):
        """(MotionPlan, planning time); GoalFailed with the core's code (PREEMPTED when ``job`` is stopped
        while planning)."""
        from ..planning.master import keep_margin

        with self.model_lock:
            self.sync()
            self._ready_model()
            if start is not None:
                unknown = sorted(set(start) - set(self.model.planner.joint_names))
                if unknown:
                    raise GoalFailed(E.INVALID_ROBOT_STATE, f"start state names unknown joints {unknown}")
            t0 = time.monotonic()
            result = self.model.plan(goal, group=group, start=start, timeout=timeout,
                                     cancel=job.cancel if job is not None else None)
            elapsed = time.monotonic() - t0
        if result.code != E.SUCCESS:
            raise GoalFailed(result.code, result.message)
        plan = result.plan
        plan.trajectory = keep_margin(plan.trajectory, float(self.params.get("limit_margin")), velocity,
                                      acceleration)
        self.display(plan)
        return plan, elapsed

    def _keep_margin(self, *stages) -> None:
        """A grasp's or place's stages timed ``limit_margin`` below the limits, as every planned move is."""
        from ..planning.master import keep_margin

        for stage in stages:
            stage.trajectory = keep_margin(stage.trajectory, float(self.params.get("limit_margin")))

    def display(self, plan) -> None:
        """Every plan on /display_planned_path (latched, as move_group: rviz and the live view draw it)."""
        self.display_pub.publish(DisplayTrajectory(model_id=self.model.planner.robot.name,
                                                   trajectory=[robot_trajectory(plan)],
                                                   trajectory_start=start_msg(plan)))

    def _on_plan_service(self, request, response):
        req = request.motion_plan_request
        res = response.motion_plan_response
        res.group_name = req.group_name
        try:
            with self.model_lock:
                self.sync()
                self._ready_model()
                goal = self._goal_of(req)
            plan, elapsed = self._plan(goal, req.group_name or None, start_of(req),
                                       self._planning_time(req), req.max_velocity_scaling_factor,
                                       req.max_acceleration_scaling_factor)
        except (GoalFailed, PlanningError) as exc:
            res.error_code = MoveItErrorCodes(val=exc.code, message=str(exc), source="planner_node")
            return response
        res.trajectory_start = start_msg(plan)
        res.trajectory = robot_trajectory(plan)
        res.planning_time = elapsed
        res.error_code = MoveItErrorCodes(val=E.SUCCESS, message="planned", source="planner_node")
        return response

    # -- MoveGroup ---------------------------------------------------------------------------------
    def _move(self, job: Job) -> dict:
        goal = job.handle.request
        req, options = goal.request, goal.planning_options
        fields: dict = {}
        attempts = 1 + (max(0, int(options.replan_attempts)) if options.replan else 0)
        if options.replan and options.replan_attempts <= 0:
            attempts = 1 + 5                  # move_group's default replan_attempts
        with self.model_lock:
            self._ready_model()
            core_goal = self._goal_of(req)
        start = start_of(req) if options.plan_only else None
        if not options.plan_only:
            self._check_start(req)
        total_planning = 0.0
        for attempt in range(attempts):
            job.check()
            self._feedback(job, FEEDBACK_PLANNING)
            try:
                plan, elapsed = self._plan(core_goal, req.group_name or None, start,
                                           self._planning_time(req), req.max_velocity_scaling_factor,
                                           req.max_acceleration_scaling_factor, job=job)
            except GoalFailed as exc:
                exc.fields = fields
                raise
            total_planning += elapsed
            fields = {"trajectory_start": start_msg(plan),
                      "planned_trajectory": robot_trajectory(plan), "planning_time": total_planning}
            if options.plan_only:
                return fields
            try:
                self._follow(job, plan)
                fields["executed_trajectory"] = fields["planned_trajectory"]
                return fields
            except GoalFailed as exc:
                exc.fields = fields
                if exc.code != E.MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE or attempt + 1 >= attempts:
                    raise
                self.get_logger().info(f"{exc.message}; replanning from where the arm stopped "
                                       f"(attempt {attempt + 2} of {attempts})")
                with self._input_lock:
                    seen = self.joint_state_count
                self._await_current_state(job, self.get_clock().now().nanoseconds, seen)   # at rest now
        raise GoalFailed(E.FAILURE, "no attempt left")     # not reached

    def _check_start(self, req) -> None:
        """An executed goal starts where the robot is: a start state given must be the current one."""
        from ..planning import inputs

        start = start_of(req)
        if start is None:
            return
        with self._input_lock:
            current = dict(self._joints)
        inputs.start_at_current(start, current)

    # -- grasps: Pickup and Place mapped onto planning.pick_place ---------------------------------------
    def _gripper_positions(self, gripper) -> tuple[str, float, float]:
        """(joint, open, closed) of the gripper (planning.pick_place.gripper_positions)."""
        from ..planning.pick_place import gripper_positions

        fingers = gripper_positions(self.model.planner, gripper, self._wiring)
        return fingers.joint, fingers.open, fingers.closed

    def _retreat(self, translation):
        return retreat(translation, float(self.params.get("lift_distance")))

    def _stages(self, plan, what: str, elapsed: float) -> dict:
        self._keep_margin(plan.reach, plan.approach)
        return {"trajectory_start": start_msg(plan.reach),
                "trajectory_stages": [robot_trajectory(plan.reach),
                                      robot_trajectory(plan.approach)],
                "trajectory_descriptions": [f"reach {what}", "approach"], "planning_time": elapsed}

    def _plan_core(self, job: Job, core_goal, start=None):
        """(plan, planning time) of a grasp or place goal; GoalFailed with the core's code."""
        timeout = self._planning_time(job.handle.request)
        with self.model_lock:
            t0 = time.monotonic()
            result = self.model.plan(core_goal, start=start, timeout=timeout, cancel=job.cancel)
            elapsed = time.monotonic() - t0
        if result.code != E.SUCCESS:
            raise GoalFailed(result.code, result.message)
        return result.plan, elapsed

    def _pickup(self, job: Job) -> dict:
        from ..planning import pick_place
        from ..planning.goals import GraspGoal

        goal = job.handle.request
        grasp = goal.possible_grasps[0] if goal.possible_grasps else None
        with self.model_lock:
            self.sync()
            planner = self._ready_model().planner
            gripper = pick_place.gripper_of(planner.semantics, goal.end_effector)
            handle = pick_place.handle_of(planner, goal.target_name, gripper, grasp_request(grasp),
                                          self._frame_pose, self.frame_prefix + gripper.link)
            fingers = pick_place.gripper_positions(planner, gripper, self._wiring)
        self._feedback(job, FEEDBACK_PLANNING)
        opening = posture(grasp.pre_grasp_posture if grasp else None, fingers.joint, fingers.open)
        # planned with the gripper as it will be, opened first: open fingers must clear the table too
        plan, elapsed = self._plan_core(job, GraspGoal(gripper.name, goal.target_name, handle,
                                                       goal.group_name or None),
                                        start={fingers.joint: opening} if fingers.joint else None)
        fields = self._stages(plan, "pre-grasp", elapsed)
        if goal.planning_options.plan_only:
            return fields
        closing = posture(grasp.grasp_posture if grasp else None, fingers.joint, fingers.closed)
        result = pick_place.pick(PickPlaceExecutor(self, job), plan, fingers,
                                 self._retreat(grasp.post_grasp_retreat if grasp else None), opening, closing)
        if not result.ok:
            raise GoalFailed(result.code, result.message)
        return fields

    def _place(self, job: Job) -> dict:
        """moveit_msgs/Place mapped on :meth:`Planner.plan_place`: ``place_locations[0]`` (the body's pose,
        ``pre_place_approach``, ``post_place_posture``, ``post_place_retreat``), ``support_surface_name``
        (empty: what the body was picked up from) and ``allow_gripper_support_collision``."""
        from ..planning import pick_place
        from ..planning.goals import PlaceGoal

        goal = job.handle.request
        with self.model_lock:
            self.sync()
            planner = self._ready_model().planner
            body = pick_place.held_body(planner, goal.attached_object_name)
            if not goal.place_locations:
                raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "no place_locations")
            location = goal.place_locations[0]
            link = planner.bodies[body].attached
            local = matrix(location.place_pose.pose.position, location.place_pose.pose.orientation,
                            "place_pose")
            placed = self._frame_pose(location.place_pose.header.frame_id) @ local
            fingers = pick_place.gripper_positions(planner, pick_place.gripper_on(planner.semantics, link),
                                                   self._wiring)
            approach = self._retreat(location.pre_place_approach)
            direction = pick_place.DOWN if approach.direction is None else \
                (self._frame_pose(approach.frame)[:3, :3] @ approach.direction if approach.frame
                 else approach.direction)
            core_goal = PlaceGoal(body, placed, goal.support_surface_name, direction, approach.distance,
                                  bool(goal.allow_gripper_support_collision), goal.group_name or None)
        self._feedback(job, FEEDBACK_PLANNING)
        plan, elapsed = self._plan_core(job, core_goal)
        fields = self._stages(plan, "pre-place", elapsed)
        self.display(plan.reach)
        fields["place_location"] = location
        if goal.planning_options.plan_only:
            return fields
        result = pick_place.place(PickPlaceExecutor(self, job), plan, fingers,
                                  self._retreat(location.post_place_retreat),
                                  posture(location.post_place_posture, fingers.joint, fingers.open))
        if not result.ok:
            raise GoalFailed(result.code, result.message)
        return fields

    def publish_attached(self, body: str, link: str, touch: list, add: bool) -> None:
        msg = AttachedCollisionObject(link_name=self.frame_prefix + link,
                                      touch_links=[self.frame_prefix + t for t in touch])
        msg.object.id = body
        msg.object.header.frame_id = self.frame_prefix + link
        msg.object.header.stamp = self.get_clock().now().to_msg()
        msg.object.operation = CollisionObject.ADD if add else CollisionObject.REMOVE
        self.attached_pub.publish(msg)

    def destroy_node(self):
        self._running = False
        if getattr(self, "objects_worker", None) is not None:
            self.objects_worker.stop()
        job = self._current
        if job is not None:
            job.request_stop("planner_node shutting down")
        self._jobs.put(None)
        # a build in progress (imports, C++) cannot be interrupted: the daemon worker is left to the process
        # exit rather than waited for; a goal's worker ends within its stop request
        if not self._building:
            self._worker.join(timeout=WORKER_JOIN)
        else:
            self._worker.join(timeout=BUILD_JOIN if _EXIT_AT_ONCE.is_set() else None)
        destroy_actions(self)
        super().destroy_node()


def main(args=None) -> int:
    from ..ros.runner import spin_node

    _EXIT_AT_ONCE.set()
    code = spin_node(PlannerNode, args)
    if any(t.is_alive() for t in list(_BUILDING)):       # stopped during the build: do not wait for it
        import ctypes
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)                      # rcutils' console output
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
