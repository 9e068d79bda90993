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
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import Point
from moveit_msgs.action import MoveGroup, Pickup, Place
from moveit_msgs.msg import (AttachedCollisionObject, CollisionObject, DisplayTrajectory, MoveItErrorCodes,
                             RobotTrajectory)
from moveit_msgs.srv import GetMotionPlan
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..kinematics import frames
from ..ros import params, qos
from ..ros.actions import cancel_goal, destroy_actions, get_result, send_goal
from ..ros.guard import ContainedNode
from ..ros.params import Param
from ..planning.cancel import CancelToken
from ..planning.errors import PlanningError
from ..planning.pick_place import ExecutionFailed
from ..world.planning_scene import attach_topic

E = MoveItErrorCodes
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
FEEDBACK_PLANNING, FEEDBACK_MONITOR, FEEDBACK_IDLE = "PLANNING", "MONITOR", "IDLE"
MAX_CONSTRAINTS = 1000               # joint / position / orientation constraints of one goal
MAX_JOINT_STATE_NAMES = 10000
LOADING = "loading the planning libraries (pinocchio, coal, roboplan) on the worker thread"
WORKER_JOIN = 5.0                    # s destroy_node waits for the worker to end its goal
BUILD_JOIN = 0.2                     # s ... for a worker still building the planning model (executable)
# Workers building a model now.  A thread left inside the libraries' C++ import when the interpreter finalizes
# aborts the process ("FATAL: exception not rethrown"): the planner_node executable (main) ends with os._exit
# instead of waiting for such a build; a node in another process (robot-bridge run) waits for it.
_BUILDING: set = set()
_EXIT_AT_ONCE = threading.Event()
ACTION_REQUESTS = 1000              # goal / cancel / result requests queued per action service
JOINT_STATE_SETTLE = 2               # fresh /joint_states awaited after the arm stopped, before replanning


def attached_qos() -> QoSProfile:
    """world_node's ~/attach (as MoveIt's /attached_collision_object): reliable, volatile, depth 100."""
    return QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


def action_request_qos() -> QoSProfile:
    """The actions' goal, cancel and result services: reliable, depth ACTION_REQUESTS (the default 10 drops
    the requests of a burst unanswered)."""
    return QoSProfile(depth=ACTION_REQUESTS, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


class GoalFailed(ExecutionFailed):
    """A goal's end with its MoveIt error code (``code``) and reason (``message``)."""


@dataclass
class Job:
    kind: str                        # "move", "pickup", "place"
    handle: object
    future: Future
    stop: threading.Event = field(default_factory=threading.Event)
    stop_code: int = E.PREEMPTED
    stop_reason: str = ""
    cancel: CancelToken = field(default_factory=CancelToken)     # the core checks it while planning

    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop.set()
        self.cancel.cancel(reason)

    def check(self) -> None:
        if self.stop.is_set():
            raise GoalFailed(self.stop_code, self.stop_reason or "preempted")


def _matrix(position, orientation, what: str) -> np.ndarray:
    """4x4 of a message's position and quaternion, checked by the core (InvalidGoal -16)."""
    from ..planning import inputs

    return inputs.pose((position.x, position.y, position.z),
                       (orientation.x, orientation.y, orientation.z, orientation.w), what)


def _duration(t: float) -> Duration:
    sec = int(math.floor(t))
    return Duration(sec=sec, nanosec=min(999_999_999, int(round((t - sec) * 1e9))))


def trajectory_msg(trajectory) -> JointTrajectory:
    msg = JointTrajectory(joint_names=list(trajectory.joint_names))
    for i, t in enumerate(trajectory.times):
        msg.points.append(JointTrajectoryPoint(
            positions=[float(v) for v in trajectory.positions[i]],
            velocities=[float(v) for v in trajectory.velocities[i]],
            accelerations=[float(v) for v in trajectory.accelerations[i]],
            time_from_start=_duration(float(t))))
    return msg


def trajectory_goal(trajectory, tolerance: float) -> FollowJointTrajectory.Goal:
    """The FollowJointTrajectory goal of a planned trajectory: path and goal tolerance ``tolerance`` (the
    planner's corridor, ``Planner.corridor()``) on every joint, so the controller aborts a motion that
    leaves what was checked (PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED)."""
    tolerances = [JointTolerance(name=name, position=float(tolerance)) for name in trajectory.joint_names]
    return FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory), path_tolerance=tolerances,
                                      goal_tolerance=list(tolerances))


class PlannerNode(ContainedNode):
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
        self._joints: dict[str, float] = {}
        self._joints_dirty = False
        self.joint_state_count = 0
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
        if self.params.get("objects_topic"):
            from ..world.reader import LatestWorker, WorldReader, trusted_roots

            search = list(self.params.get("search_path") or [])
            self.objects_reader = WorldReader(
                trusted_roots([self.params.get("description_file")],
                              search + list(self.params.get("objects_roots") or [])),
                search, source=self.params.get("objects_topic"))
            self.objects_worker = LatestWorker(self._read_objects, "planner_node.objects",
                                               lambda exc: self.on_callback_error("objects worker", exc))
            self.create_subscription(String, self.params.get("objects_topic"),
                                     lambda msg: self.objects_worker.submit(msg.data), latched)
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
            from ..world.reader import trusted_roots

            model = MasterModel(search, accelerations, environment, placement,
                                trusted_roots([self.params.get("description_file")], search),
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
        """The robot file's joint acceleration limits and environment bodies (a URDF carries neither), and
        the robot's placement in the world (the file's, else robot_pose: robot_bridge.model.placement)."""
        from ..model.placement import robot_placement

        path = self.params.get("description_file")
        pose = list(self.params.get("robot_pose") or [])
        if not path:
            return {}, {}, robot_placement(None, pose).matrix
        try:
            from ..formats import load

            robot = load(path, search_path=search or None)
        except Exception as exc:  # bad file: the default acceleration serves, reported once
            self.get_logger().error(f"description_file {path!r} not read ({type(exc).__name__}: {exc}); "
                                    "default_acceleration for every joint, no environment bodies")
            return {}, {}, robot_placement(None, pose).matrix
        accelerations = {j.name: float(j.acceleration[0]) for j in robot.active_joints
                         if j.dof == 1 and float(j.acceleration[0]) > 0}
        environment = dict(robot.environment) if self.params.get("environment") else {}
        return accelerations, environment, robot_placement(robot, pose).matrix

    # -- inputs (executor thread: stored, applied by the worker) --------------------------------------
    def _on_description(self, msg: String) -> None:
        with self._input_lock:
            self._pending_urdf = msg.data
        self._wake.set()

    def _on_semantic(self, msg: String) -> None:
        with self._input_lock:
            self._pending_srdf = msg.data
        self._wake.set()

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

    def sync(self) -> None:
        """Apply the inputs received since the last call (worker or service, under model_lock)."""
        if self.model is None:                        # not built yet: the inputs stay pending
            return
        with self._input_lock:
            urdf, srdf, objects = self._pending_urdf, self._pending_srdf, self._pending_objects
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
        for problem in model.problems[self._logged_problems:]:
            self.get_logger().warning(problem)
        self._logged_problems = len(model.problems)

    # -- goals ------------------------------------------------------------------------------------
    def _on_cancel(self, handle):
        job = self._current
        if job is not None and job.handle is handle:
            job.request_stop("canceled by the client")
        return CancelResponse.ACCEPT

    def _admit(self, _request) -> GoalResponse:
        """Accept a goal while fewer than ``max_pending_goals`` are accepted and not ended, else reject it:
        every accepted goal gets its result, however many come."""
        with self._pending_lock:
            full = self._pending >= int(self.params.get("max_pending_goals"))
            if not full:
                self._pending += 1
        if full:
            self.get_logger().warning(f"goal rejected: {self._pending} goals pending (max_pending_goals)",
                                      throttle_duration_sec=5.0)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _run(self, kind: str, handle):
        try:
            job = Job(kind, handle, Future())
            current = self._current
            if current is not None:
                current.request_stop("preempted by a new goal")
            for old in list(self._jobs.queue):
                if old is not None:
                    old.request_stop("preempted by a new goal")
            if not self._running:
                job.future.set_result((E.ABORT, "planner_node shutting down", {}))
            else:
                self._jobs.put(job)
            code, message, fields = await job.future
        except Exception as exc:  # a defect here too ends the goal with its reason, never an empty result
            self._contain_error(f"{kind} goal", exc, self._worker_errors)
            code, message, fields = E.FAILURE, f"internal error: {type(exc).__name__}: {exc}", {}
        finally:
            with self._pending_lock:
                self._pending -= 1
        try:
            if code == E.SUCCESS:
                handle.succeed()
            elif handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
        except Exception as exc:  # the goal ended meanwhile (e.g. the server going down): its result stands
            self.get_logger().warning(f"{kind} goal: its end state not set ({type(exc).__name__}: {exc})")
        if code == E.SUCCESS:
            self.get_logger().info(f"{kind} goal: {message}")
        else:
            self.get_logger().warning(f"{kind} goal failed (code {code}): {message}")
        return code, message, fields

    async def _execute_move(self, handle):
        code, message, fields = await self._run("move", handle)
        return MoveGroup.Result(error_code=MoveItErrorCodes(val=code, message=message, source="planner_node"),
                                **fields)

    async def _execute_pickup(self, handle):
        code, message, fields = await self._run("pickup", handle)
        return Pickup.Result(error_code=MoveItErrorCodes(val=code, message=message, source="planner_node"),
                             **fields)

    async def _execute_place(self, handle):
        code, message, fields = await self._run("place", handle)
        return Place.Result(error_code=MoveItErrorCodes(val=code, message=message, source="planner_node"),
                            **fields)

    def _feedback(self, job: Job, state: str) -> None:
        try:
            if job.kind == "move":
                job.handle.publish_feedback(MoveGroup.Feedback(state=state))
            elif job.kind == "pickup":
                job.handle.publish_feedback(Pickup.Feedback(state=state))
            else:
                job.handle.publish_feedback(Place.Feedback(state=state))
        except Exception:  # the goal ended meanwhile
            pass

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
            self._current = job
            try:
                if job.stop.is_set():
                    raise GoalFailed(job.stop_code, job.stop_reason)
                with self.model_lock:
                    self.sync()
                fields = {"move": self._move, "pickup": self._pickup, "place": self._place}[job.kind](job)
                outcome = (E.SUCCESS, "succeeded", fields)
            except GoalFailed as exc:
                outcome = (exc.code, exc.message, getattr(exc, "fields", {}))
            except PlanningError as exc:          # a bad input the core refused: its code
                outcome = (exc.code, str(exc), getattr(exc, "fields", {}))
            except Exception as exc:  # a defect: logged with its traceback (once), FAILURE, serving on
                self._contain_error("planner worker", exc, self._worker_errors)
                outcome = (E.FAILURE, f"internal error: {type(exc).__name__}: {exc}", {})
            finally:
                self._current = None
            self._feedback(job, FEEDBACK_IDLE)
            job.future.set_result(outcome)

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
        """The core goal of a MotionPlanRequest (GoalFailed when malformed)."""
        from ..planning.goals import JointGoal, NamedGoal

        group = request.group_name or None
        if not request.goal_constraints:
            raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "no goal_constraints")
        c = request.goal_constraints[0]
        counts = (len(c.joint_constraints), len(c.position_constraints), len(c.orientation_constraints))
        if max(counts) > MAX_CONSTRAINTS:
            raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, f"more than {MAX_CONSTRAINTS} constraints")
        if c.joint_constraints:
            if counts[1] or counts[2]:
                raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "joint and pose constraints in one goal")
            return JointGoal({jc.joint_name: float(jc.position) for jc in c.joint_constraints}, group)
        if counts[1] or counts[2]:
            return self._pose_goal(c, group)
        if c.name:
            return NamedGoal(c.name, group)
        raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS,
                         "goal_constraints[0] holds no constraint and no state name")

    def _frame_pose(self, frame: str) -> np.ndarray:
        """World pose of a frame the planner knows: its world frame, a robot link, a world body."""
        planner = self.model.planner
        name = frame.lstrip("/")
        if name in ("", self.world_frame):
            return np.eye(4)
        if self.frame_prefix and name.startswith(self.frame_prefix):
            link = name[len(self.frame_prefix):]
            if link in planner.robot.links:
                return planner.link_pose(link)
        elif not self.frame_prefix and name in planner.robot.links:
            return planner.link_pose(name)
        if name in planner.bodies:
            return planner.body_pose(name)
        raise GoalFailed(E.FRAME_TRANSFORM_FAILURE, f"frame {frame!r} is not one the planner knows (world "
                                                    f"frame {self.world_frame!r}, robot links, world bodies)")

    def _pose_goal(self, c, group):
        from ..planning.goals import PoseGoal

        links = {pc.link_name for pc in c.position_constraints} | \
            {oc.link_name for oc in c.orientation_constraints}
        if len(links) != 1:
            raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS,
                             f"pose constraints on {len(links)} links, one expected")
        link = links.pop()
        if link not in self.model.planner.robot.links:
            raise GoalFailed(E.INVALID_LINK_NAME, f"no link {link!r} in the robot")
        pose = np.eye(4)
        offset = np.eye(4)
        mask = [False] * 6
        if c.position_constraints:
            pc = c.position_constraints[0]
            region = pc.constraint_region
            if not region.primitive_poses:
                raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "position constraint without a primitive pose")
            p = region.primitive_poses[0].position
            target = np.array([p.x, p.y, p.z, 1.0])
            o = pc.target_point_offset
            offset[:3, 3] = [o.x, o.y, o.z]
            if not np.isfinite(target).all() or not np.isfinite(offset).all():
                raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "position constraint not finite")
            pose[:3, 3] = (self._frame_pose(pc.header.frame_id) @ target)[:3]
            mask[:3] = [True] * 3
        if c.orientation_constraints:
            oc = c.orientation_constraints[0]
            local = _matrix(Point(), oc.orientation, "orientation constraint")
            rotation = (self._frame_pose(oc.header.frame_id) @ local)[:3, :3]
            pose[:3, :3] = rotation
            tolerances = (oc.absolute_x_axis_tolerance, oc.absolute_y_axis_tolerance,
                          oc.absolute_z_axis_tolerance)
            mask[3:] = [not (math.isfinite(t) and t >= math.pi) for t in tolerances]
        if not any(mask):
            raise GoalFailed(E.INVALID_GOAL_CONSTRAINTS, "the pose constraints constrain nothing")
        if group is None:
            raise GoalFailed(E.INVALID_GROUP_NAME, "a pose goal needs group_name")
        return PoseGoal(group, pose, frame=link, offset=offset, mask=mask)

    def _start_of(self, request) -> Optional[dict]:
        from ..planning import inputs

        js = request.start_state.joint_state
        if request.start_state.is_diff or not js.name:
            return None
        return inputs.start_state(js.name, js.position, MAX_JOINT_STATE_NAMES)

    def _plan(self, goal, group, start, timeout: float, velocity: float = 1.0, acceleration: float = 1.0,
              job: Optional[Job] = None):
        """(MotionPlan, planning time); GoalFailed with the core's code (PREEMPTED when ``job`` is stopped
        while planning)."""
        from ..planning.master import scale_trajectory

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
        from ..planning.inputs import scaling_factor

        keep = 1.0 - float(self.params.get("limit_margin"))
        velocity, acceleration = scaling_factor(velocity), scaling_factor(acceleration)
        plan.trajectory = scale_trajectory(plan.trajectory, velocity * keep, acceleration * keep)
        self.display(plan)
        return plan, elapsed

    def _keep_margin(self, *stages) -> None:
        """A grasp's or place's stages timed ``limit_margin`` below the limits, as every planned move is."""
        from ..planning.master import scale_trajectory

        keep = 1.0 - float(self.params.get("limit_margin"))
        for stage in stages:
            stage.trajectory = scale_trajectory(stage.trajectory, keep, keep)

    def display(self, plan) -> None:
        """Every plan on /display_planned_path (latched, as move_group: rviz and the live view draw it)."""
        self.display_pub.publish(DisplayTrajectory(model_id=self.model.planner.robot.name,
                                                   trajectory=[self._robot_trajectory(plan)],
                                                   trajectory_start=self._start_msg(plan)))

    def _robot_trajectory(self, plan) -> RobotTrajectory:
        return RobotTrajectory(joint_trajectory=trajectory_msg(plan.trajectory))

    def _start_msg(self, plan):
        from moveit_msgs.msg import RobotState

        traj = plan.trajectory
        return RobotState(joint_state=JointState(name=list(traj.joint_names),
                                                 position=[float(v) for v in traj.positions[0]]))

    def _on_plan_service(self, request, response):
        req = request.motion_plan_request
        res = response.motion_plan_response
        res.group_name = req.group_name
        try:
            with self.model_lock:
                self.sync()
                self._ready_model()
                goal = self._goal_of(req)
            plan, elapsed = self._plan(goal, req.group_name or None, self._start_of(req),
                                       self._planning_time(req), req.max_velocity_scaling_factor,
                                       req.max_acceleration_scaling_factor)
        except (GoalFailed, PlanningError) as exc:
            res.error_code = MoveItErrorCodes(val=exc.code, message=str(exc), source="planner_node")
            return response
        res.trajectory_start = self._start_msg(plan)
        res.trajectory = self._robot_trajectory(plan)
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
        start = self._start_of(req) if options.plan_only else None
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
            fields = {"trajectory_start": self._start_msg(plan),
                      "planned_trajectory": self._robot_trajectory(plan), "planning_time": total_planning}
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
                self._await_joint_states(job)
        raise GoalFailed(E.FAILURE, "no attempt left")     # not reached

    def _check_start(self, req) -> None:
        """An executed goal starts where the robot is: a start state given must be the current one."""
        from ..planning import inputs

        start = self._start_of(req)
        if start is None:
            return
        with self._input_lock:
            current = dict(self._joints)
        inputs.start_at_current(start, current)

    def _await_joint_states(self, job: Job) -> None:
        """Wait for fresh /joint_states (the arm at rest after a stop) before planning again."""
        with self._input_lock:
            seen = self.joint_state_count
        deadline = time.monotonic() + float(self.params.get("server_timeout"))
        while time.monotonic() < deadline:
            job.check()
            with self._input_lock:
                if self.joint_state_count >= seen + JOINT_STATE_SETTLE:
                    return
            time.sleep(0.01)
        raise GoalFailed(E.ROBOT_STATE_STALE, "no /joint_states after the arm stopped")

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

    # -- grasps: Pickup and Place mapped onto planning.pick_place ---------------------------------------
    def _gripper_positions(self, gripper) -> tuple[str, float, float]:
        """(joint, open, closed) of the gripper (planning.pick_place.gripper_positions)."""
        from ..planning.pick_place import gripper_positions

        fingers = gripper_positions(self.model.planner, gripper, self._wiring)
        return fingers.joint, fingers.open, fingers.closed

    def _posture(self, posture, joint: str, default: float) -> float:
        if posture is not None and joint in posture.joint_names and posture.points:
            value = posture.points[-1].positions[list(posture.joint_names).index(joint)]
            if math.isfinite(value):
                return float(value)
        return default

    def _grasp_request(self, grasp):
        """A moveit_msgs/Grasp as planning.pick_place.GraspRequest."""
        from ..planning.pick_place import GraspRequest

        if grasp is None:
            return None
        approach, pose = grasp.pre_grasp_approach, grasp.grasp_pose
        p, o, v = pose.pose.position, pose.pose.orientation, approach.direction.vector
        return GraspRequest(grasp.id, (p.x, p.y, p.z), (o.x, o.y, o.z, o.w), pose.header.frame_id,
                            (v.x, v.y, v.z), approach.direction.header.frame_id,
                            float(approach.desired_distance))

    def _retreat(self, translation):
        from ..planning.pick_place import retreat_of

        lift = float(self.params.get("lift_distance"))
        if translation is None:
            return retreat_of((0.0, 0.0, 0.0), 0.0, "", lift)
        v = translation.direction.vector
        return retreat_of((v.x, v.y, v.z), float(translation.desired_distance),
                          translation.direction.header.frame_id, lift)

    def _stages(self, plan, what: str, elapsed: float) -> dict:
        self._keep_margin(plan.reach, plan.approach)
        return {"trajectory_start": self._start_msg(plan.reach),
                "trajectory_stages": [self._robot_trajectory(plan.reach),
                                      self._robot_trajectory(plan.approach)],
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
            handle = pick_place.handle_of(planner, goal.target_name, gripper, self._grasp_request(grasp),
                                          self._frame_pose, self.frame_prefix + gripper.link)
            fingers = pick_place.gripper_positions(planner, gripper, self._wiring)
        self._feedback(job, FEEDBACK_PLANNING)
        opening = self._posture(grasp.pre_grasp_posture if grasp else None, fingers.joint, fingers.open)
        # planned with the gripper as it will be, opened first: open fingers must clear the table too
        plan, elapsed = self._plan_core(job, GraspGoal(gripper.name, goal.target_name, handle,
                                                       goal.group_name or None),
                                        start={fingers.joint: opening} if fingers.joint else None)
        fields = self._stages(plan, "pre-grasp", elapsed)
        if goal.planning_options.plan_only:
            return fields
        closing = self._posture(grasp.grasp_posture if grasp else None, fingers.joint, fingers.closed)
        result = pick_place.pick(_Executor(self, job), plan, fingers,
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
            local = _matrix(location.place_pose.pose.position, location.place_pose.pose.orientation,
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
        result = pick_place.place(_Executor(self, job), plan, fingers,
                                  self._retreat(location.post_place_retreat),
                                  self._posture(location.post_place_posture, fingers.joint, fingers.open))
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


class _Executor:
    """planning.pick_place's executor on planner_node: the controller's actions, the planning model, the
    world's attach topic."""

    def __init__(self, node: PlannerNode, job: Job):
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
