"""Pick and place as sequences of typed steps, run by an executor (no rclpy).

A pick: open the gripper, reach the pre-grasp, approach the handle, close, attach the body, retreat.  A place:
reach the pre-place, approach, open, detach, retreat.  Each step ends with a :class:`StepOutcome` (which
step, a MoveIt error code, a message); the first failing step ends the sequence with its code and no later
step runs.  The executor (:class:`Executor`) does the moving: planner_node maps it onto its controller action
clients, the unit tests onto a fake.  A gripper without a driving joint (an hpp gripper that is a frame: a
suction cup, a drill tip) gets no gripper command, its grasp is planned and run all the same.

Also here, the rules planner_node applies to a Pickup or Place goal before planning: which gripper, which
handle (:func:`handle_of`), the gripper's open and closed positions (:func:`gripper_positions`), the
retreat (:func:`retreat_of`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, Sequence

import numpy as np

from .errors import FAILURE, SUCCESS, InvalidGroup, InvalidObject, PlanningError
from .goals import GraspPlan, MotionPlan, PlacePlan, PoseGoal

UP = (0.0, 0.0, 1.0)                    # the default retreat: +z of the world
DOWN = (0.0, 0.0, -1.0)                 # the default pre-place approach: straight down


class Step(enum.Enum):
    OPEN = "open"
    PRE_GRASP = "pre-grasp"
    APPROACH = "approach"
    CLOSE = "close"
    ATTACH = "attach"
    RETREAT = "retreat"
    PRE_PLACE = "pre-place"
    DETACH = "detach"


PICK_STEPS = (Step.OPEN, Step.PRE_GRASP, Step.APPROACH, Step.CLOSE, Step.ATTACH, Step.RETREAT)
PLACE_STEPS = (Step.PRE_PLACE, Step.APPROACH, Step.OPEN, Step.DETACH, Step.RETREAT)


class ExecutionFailed(Exception):
    """An executor's step that did not happen: its MoveIt error code and the reason."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = int(code), message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class StepOutcome:
    step: Step
    code: int                           # SUCCESS or a MoveItErrorCodes value
    message: str
    skipped: bool = False               # nothing to do (no gripper joint, no retreat distance)

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS


@dataclass
class SequenceResult:
    outcomes: list[StepOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    @property
    def failed(self) -> Optional[StepOutcome]:
        return next((o for o in self.outcomes if not o.ok), None)

    @property
    def code(self) -> int:
        failed = self.failed
        return SUCCESS if failed is None else failed.code

    @property
    def message(self) -> str:
        failed = self.failed
        return "succeeded" if failed is None else failed.message

    def steps(self) -> list[Step]:
        """The steps that ran (skipped ones left out)."""
        return [o.step for o in self.outcomes if not o.skipped]


@dataclass
class GripResult:
    position: float
    stalled: bool                       # the fingers stopped on something before reaching the position


class Executor(Protocol):
    """What the sequences need of the world: each method raises :class:`ExecutionFailed` (or a
    :class:`~.errors.PlanningError`) when its step does not happen."""

    def move(self, plan: MotionPlan, monitor: bool = True) -> None:
        """Run ``plan``; ``monitor``: stop it when a world update puts a body on the rest of the path."""

    def grip(self, position: float, joint: str) -> Optional[GripResult]:
        """Drive the gripper of ``joint`` to ``position`` (a GripperCommand)."""

    def attach(self, body: str, link: str) -> None: ...

    def detach(self, body: str, link: str) -> None: ...

    def link_pose(self, link: str) -> np.ndarray:
        """World pose of a robot link now."""

    def frame_pose(self, frame: str) -> np.ndarray:
        """World pose of a frame a goal names (world frame, link, body) now."""

    def plan_pose(self, goal: PoseGoal) -> MotionPlan:
        """A timed motion of ``goal.frame`` to ``goal.pose`` from where the robot is."""


@dataclass
class Fingers:
    """The gripper's driving joint ("": a frame without fingers, no gripper command) and its positions."""

    joint: str
    open: float = math.nan
    closed: float = math.nan


@dataclass
class Retreat:
    """Move the gripper link ``distance`` along ``direction`` (in ``frame``, "" the world; None: +z of the
    world) after the grasp or the place; distance 0: stay."""

    direction: Optional[Sequence[float]] = None
    distance: float = 0.0
    frame: str = ""


def retreat_of(direction, distance: float, frame: str, default_distance: float) -> Retreat:
    """A GripperTranslation's retreat: a finite non-zero direction and a positive distance, else
    ``default_distance`` up (planner_node's lift_distance)."""
    d = np.asarray(direction, dtype=float)
    if not (np.isfinite(d).all() and np.linalg.norm(d) > 1e-9 and math.isfinite(distance) and distance > 0):
        return Retreat(None, float(default_distance), "")
    return Retreat(d, float(distance), frame)


def shifted(pose: np.ndarray, direction, distance: float,
            rotation: Optional[np.ndarray] = None) -> np.ndarray:
    """``pose`` moved by ``distance`` along ``direction`` (rotated by ``rotation`` into the world; None or
    a null direction: +z of the world)."""
    d = np.array(UP) if direction is None else np.asarray(direction, dtype=float)
    if rotation is not None:
        d = np.asarray(rotation, dtype=float) @ d
    norm = np.linalg.norm(d)
    if not np.isfinite(norm) or norm < 1e-9:
        d, norm = np.array(UP), 1.0
    out = np.array(pose, dtype=float)
    out[:3, 3] += distance * d / norm
    return out


# -- the sequences ------------------------------------------------------------------------------------
class _Run:
    def __init__(self):
        self.result = SequenceResult()

    def step(self, step: Step, action: Callable[[], Optional[str]], skip: str = "") -> bool:
        """Run ``action`` as ``step`` (``skip``: the reason it is not run); False when it failed."""
        if skip:
            self.result.outcomes.append(StepOutcome(step, SUCCESS, skip, skipped=True))
            return True
        try:
            message = action() or "done"
        except ExecutionFailed as exc:
            self.result.outcomes.append(StepOutcome(step, exc.code, exc.message))
            return False
        except PlanningError as exc:
            self.result.outcomes.append(StepOutcome(step, exc.code, str(exc)))
            return False
        self.result.outcomes.append(StepOutcome(step, SUCCESS, message))
        return True


def _retreat(executor: Executor, group: str, link: str, retreat: Retreat, what: str) -> str:
    rotation = executor.frame_pose(retreat.frame)[:3, :3] if retreat.frame else None
    target = shifted(executor.link_pose(link), retreat.direction, retreat.distance, rotation)
    plan = executor.plan_pose(PoseGoal(group, target, frame=link))
    try:
        executor.move(plan)
    except (ExecutionFailed, PlanningError) as exc:
        raise ExecutionFailed(exc.code, f"{what}: {exc.message}") from exc
    return f"{what} {retreat.distance:.4g} m"


NO_FINGERS = "no gripper command: the gripper is a frame without fingers"


def pick(executor: Executor, plan: GraspPlan, fingers: Fingers, retreat: Retreat,
         opening: Optional[float] = None, closing: Optional[float] = None) -> SequenceResult:
    """Run a planned grasp: open (to ``opening``, default ``fingers.open``), pre-grasp, approach (not
    monitored: the body is meant to be touched), close (to ``closing``, default ``fingers.closed``; the
    fingers must stall on the body), attach, retreat (the lift)."""
    run, joint = _Run(), fingers.joint
    opening = fingers.open if opening is None else opening
    closing = fingers.closed if closing is None else closing
    link = plan.gripper_link

    def close():
        gripped = executor.grip(closing, joint)
        if gripped is not None and not gripped.stalled:
            raise ExecutionFailed(FAILURE, f"the gripper closed to {gripped.position:.4g} without stopping "
                                           f"on {plan.body!r} (GripperCommand not stalled): nothing grasped")
        return f"closed at {gripped.position:.4g}" if gripped is not None else "closed"

    steps = ((Step.OPEN, lambda: executor.grip(opening, joint) and None, "" if joint else NO_FINGERS),
             (Step.PRE_GRASP, lambda: executor.move(plan.reach), ""),
             (Step.APPROACH, lambda: executor.move(plan.approach, monitor=False), ""),
             (Step.CLOSE, close, "" if joint else NO_FINGERS),
             (Step.ATTACH, lambda: executor.attach(plan.body, link), ""),
             (Step.RETREAT, lambda: _retreat(executor, plan.reach.group, link, retreat, "lift"),
              "" if retreat.distance > 0 else "no retreat"))
    for step, action, skip in steps:
        if not run.step(step, action, skip):
            break
    return run.result


def place(executor: Executor, plan: PlacePlan, fingers: Fingers, retreat: Retreat,
          opening: Optional[float] = None) -> SequenceResult:
    """Run a planned place: pre-place, approach (not monitored: the body is meant to touch its support),
    open (to ``opening``, default ``fingers.open``), detach, retreat."""
    run, joint = _Run(), fingers.joint
    opening = fingers.open if opening is None else opening
    steps = ((Step.PRE_PLACE, lambda: executor.move(plan.reach), ""),
             (Step.APPROACH, lambda: executor.move(plan.approach, monitor=False), ""),
             (Step.OPEN, lambda: executor.grip(opening, joint) and None, "" if joint else NO_FINGERS),
             (Step.DETACH, lambda: executor.detach(plan.body, plan.link), ""),
             (Step.RETREAT, lambda: _retreat(executor, plan.reach.group, plan.link, retreat, "retreat"),
              "" if retreat.distance > 0 else "no retreat"))
    for step, action, skip in steps:
        if not run.step(step, action, skip):
            break
    return run.result


# -- the rules of a goal -------------------------------------------------------------------------------
def gripper_of(semantics, name: str):
    """The hpp gripper ``name`` (empty: the robot's only one)."""
    grippers = semantics.grippers
    if not name:
        if len(grippers) != 1:
            raise InvalidGroup(f"end_effector empty and the robot has {len(grippers)} grippers: "
                               f"{sorted(grippers)}")
        return next(iter(grippers.values()))
    if name not in grippers:
        raise InvalidGroup(f"no gripper {name!r} (hpp grippers: {sorted(grippers)})")
    return grippers[name]


def gripper_on(semantics, link: str):
    """The hpp gripper on ``link`` (the one holding a body there)."""
    gripper = next((g for g in semantics.grippers.values() if g.link == link), None)
    if gripper is None:
        raise InvalidGroup(f"no gripper on link {link!r}")
    return gripper


def gripper_positions(planner, gripper, wiring: Callable[[], object]) -> Fingers:
    """The gripper's driving joint and its open / closed positions: SRDF group_states "open" / "closed"
    naming it, else its upper / lower limit.  An hpp gripper naming no joint is a frame: its fingers are the
    SRDF end effector's on its link's body (``wiring()``: :func:`robot_bridge.control.groups.wiring`), else
    none (joint "": no gripper command)."""
    joints = [j for j in gripper.joints if j in planner.joint_names]
    if not gripper.joints:
        spec = wiring().gripper_for(gripper.link, planner.robot)
        joints = [spec.joint] if spec is not None and spec.joint in planner.joint_names else []
        if not joints:
            return Fingers("")
    if not joints:
        raise InvalidGroup(f"gripper {gripper.name!r} drives no joint of the planner")
    joint = joints[0]
    i = planner.joint_names.index(joint)
    values = {"open": float(planner.upper[i]), "closed": float(planner.lower[i])}
    for state in planner.semantics.group_states:
        if state.name in values and joint in state.values:
            values[state.name] = float(state.values[joint][0])
    return Fingers(joint, values["open"], values["closed"])


@dataclass
class GraspRequest:
    """A MoveIt Grasp as plain data: ``id``; the pose of the gripper's link (``position`` and quaternion
    ``orientation`` (x, y, z, w) in ``pose_frame``, read only when the id names no hpp handle); the pre-grasp
    approach ``direction`` (in ``direction_frame``) and ``distance``."""

    id: str = ""
    position: Sequence[float] = (0.0, 0.0, 0.0)
    orientation: Sequence[float] = (0.0, 0.0, 0.0, 1.0)
    pose_frame: str = ""
    direction: Sequence[float] = (0.0, 0.0, 0.0)
    direction_frame: str = ""
    distance: float = 0.0


def handle_of(planner, body: str, gripper, grasp: Optional[GraspRequest],
              frame_pose: Callable[[str], np.ndarray], gripper_frame: str = ""):
    """The handle to grasp (a name among the body's handles, or a :class:`~robot_bridge.model.Handle`): a
    grasp whose ``id`` is ``<body>/<handle>`` (hpp's name of an object's handle) names a handle of the body's
    class (its poses are not used; an unknown handle is the planner's INVALID_OBJECT_NAME); any other grasp
    gives the handle by its poses (MoveIt's grasp_pose is the pose of the gripper's link; the approach
    direction in ``gripper_frame``, the gripper link's TF name, or "" is along the gripper frame); no grasp:
    the body's class handle (the first by name)."""
    from ..model import Handle

    if body not in planner.bodies:
        raise InvalidObject(f"no body {body!r} in the world (bodies: {sorted(planner.bodies)})")
    if grasp is None:
        semantics = planner.bodies[body].robot.semantics
        handles = semantics.handles if semantics is not None else {}
        if not handles:
            raise InvalidObject(f"body {body!r} has no hpp handle: give possible_grasps")
        return sorted(handles)[0]
    if grasp.id.startswith(body + "/"):
        return grasp.id[len(body) + 1:]                # checked by the planner
    from .inputs import pose

    local = pose(grasp.position, grasp.orientation, "grasp_pose")
    root_link = planner.bodies[body].robot.root
    gripper_world = frame_pose(grasp.pose_frame) @ local @ np.asarray(gripper.pose)
    handle_pose = np.linalg.inv(planner.handle_link_pose(body, root_link)) @ gripper_world
    d = np.asarray(grasp.direction, dtype=float)
    if np.isfinite(d).all() and np.linalg.norm(d) > 1e-9:
        if grasp.direction_frame.lstrip("/") in ("", gripper_frame or gripper.link):
            direction = np.asarray(gripper.pose)[:3, :3].T @ d        # gripper link -> gripper frame
        else:
            direction = gripper_world[:3, :3].T @ (frame_pose(grasp.direction_frame)[:3, :3] @ d)
    else:
        direction = np.array([0.0, 0.0, 1.0])
    distance = float(grasp.distance) if math.isfinite(grasp.distance) else 0.0
    clearance = max(0.0, distance - float(gripper.clearance))
    return Handle(grasp.id or "grasp", root_link, handle_pose, [True] * 6, clearance,
                  direction / np.linalg.norm(direction))


def held_body(planner, name: str) -> str:
    """The attached body a Place goal names (empty: the only one held)."""
    held = [n for n, b in planner.bodies.items() if b.attached is not None]
    body = name or (held[0] if len(held) == 1 else "")
    if body not in held:
        raise InvalidObject(f"no attached body {body!r} (attached: {held})")
    return body

