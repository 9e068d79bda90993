"""planner_node's goals (MoveGroup, Pickup, Place): one at a time on its worker thread, a new goal preempting
the running one, a cancel stopping it, at most ``max_pending_goals`` accepted and not ended -- every accepted
goal gets its result.  A mixin of :class:`robot_bridge.nodes.planner.PlannerNode` (its ``_move``,
``_pickup`` and ``_place`` run the goals)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from moveit_msgs.action import MoveGroup, Pickup, Place
from moveit_msgs.msg import MoveItErrorCodes
from rclpy.action import CancelResponse, GoalResponse
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from ..planning.cancel import CancelToken
from ..planning.errors import PlanningError
from ..planning.pick_place import ExecutionFailed

E = MoveItErrorCodes
FEEDBACK_PLANNING, FEEDBACK_MONITOR, FEEDBACK_IDLE = "PLANNING", "MONITOR", "IDLE"
ACTION_REQUESTS = 1000              # goal / cancel / result requests queued per action service


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
    received_ns: int = 0             # node-clock time the goal arrived
    states_seen: int = 0             # /joint_states received when it arrived

    def request_stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop.set()
        self.cancel.cancel(reason)

    def check(self) -> None:
        if self.stop.is_set():
            raise GoalFailed(self.stop_code, self.stop_reason or "preempted")


class GoalQueue:
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
            job = Job(kind, handle, Future(), received_ns=self.get_clock().now().nanoseconds)
            with self._input_lock:
                job.states_seen = self.joint_state_count
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

    def _await_current_state(self, job: Job, since_ns: int, seen: int) -> None:
        """Wait for /joint_states measured at or after ``since_ns`` (node clock), as move_group waits for the
        current state before it plans a goal it executes: a plan starts where the robot is, never from a
        state queued before.  A state stamped 0 counts when received after ``seen`` states.  None within
        ``current_state_wait``: ROBOT_STATE_STALE, nothing planned or moved."""
        wait = float(self.params.get("current_state_wait"))
        deadline = time.monotonic() + wait
        while True:
            with self._input_lock:
                stamp, count = self.joint_state_stamp_ns, self.joint_state_count
            if count > seen and (stamp >= since_ns or stamp == 0):
                return
            job.check()
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        age = (self.get_clock().now().nanoseconds - stamp) * 1e-9
        latest = "none received" if count == 0 else (f"the latest is stamped {age:.3f} s ago" if stamp
                                                     else "none since")
        raise GoalFailed(E.ROBOT_STATE_STALE,
                         f"no /joint_states measured after the goal arrived within {wait:g} s ({latest}; "
                         "clocks of the controller's and this host in sync?)")

    def _run_job(self, job: Job) -> None:
        """Run ``job`` (the worker thread) and set its outcome: (code, message, result fields)."""
        self._current = job
        try:
            if job.stop.is_set():
                raise GoalFailed(job.stop_code, job.stop_reason)
            if not job.handle.request.planning_options.plan_only:
                self._await_current_state(job, job.received_ns, job.states_seen)
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
