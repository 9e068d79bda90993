"""The planner node's state without rclpy: what it receives, kept as one current :class:`Planner`.

``robot_description`` and ``robot_description_semantic`` (in any order) build the planner; joint states and
world_node's ``~/objects`` documents keep it current and are applied again to a planner built anew.  Bad
input gets its reason back (and is kept in ``problems``) while the last good planner keeps serving.  ``plan``
answers with a :class:`PlanResult` (MoveIt error code, message, the plan) and never raises for a bad goal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from ..errors import DescriptionError
from .errors import FAILURE, SUCCESS, PlanningError
from .goals import GraspGoal, PlaceGoal

MAX_PLANNING_TIME = 60.0        # s: a goal asking for more is planned for this long (default of the cap)
MAX_PROBLEMS = 100              # problem messages kept (oldest dropped)
DESCRIPTION_REFUSED = "robot description not used"


@dataclass
class PlanResult:
    code: int                   # SUCCESS (1) or a MoveItErrorCodes value
    message: str
    plan: object = None         # MotionPlan, GraspPlan or PlacePlan


class MasterModel:
    def __init__(self, search_path: Sequence[str] = (),
                 acceleration_limits: Optional[Mapping[str, float]] = None,
                 environment: Optional[Mapping[str, object]] = None, placement=None,
                 trusted: Optional[Sequence[str]] = None, resolver=None, **planner_options):
        """``environment``: name -> body (a Robot placed by its own placement) of the robot file's world,
        which a URDF does not carry; these bodies stay whatever world_node's documents say.  ``placement``:
        4x4 world -> the robot's root (:func:`robot_bridge.model.placement.robot_placement`; default the
        identity), which a URDF does not carry either: the robot stands there among the world's bodies and
        pose goals in the world frame are reached there.  ``resolver``: the node's
        :class:`~robot_bridge.formats.resources.ResourceResolver`, the folders a received description's meshes
        (its ``mesh_roots``: the launch-time roots, installed packages' shares, the mesh cache) and world
        documents' body files may lie in; default: one of ``search_path``, or of exactly the folders
        ``trusted``.  A mesh elsewhere is left out unread, with one generic problem line."""
        import numpy as np

        from .backend import require

        require()
        self.search_path = list(search_path)
        self.acceleration_limits = dict(acceleration_limits or {})
        self.environment = dict(environment or {})
        self.placement = np.eye(4) if placement is None else np.array(placement, dtype=float)
        self.planner_options = planner_options
        self.planner = None
        self.max_planning_time = MAX_PLANNING_TIME      # s: the cap of every request's planning time
        self.problems: list[str] = []
        self._urdf: Optional[str] = None
        self._srdf: Optional[str] = None
        self._joint_state: dict[str, float] = {}
        self._objects: dict = {}
        self._occupancy = None                          # the sensors' map as a world body (or None)
        from ..formats.resources import ResourceResolver
        from ..world.reader import WorldReader

        if resolver is None:
            resolver = ResourceResolver(search_path=self.search_path, trusted=trusted)
        self.resolver = resolver
        self.reader = WorldReader(list(resolver.body_roots), self.search_path)

    def readiness(self) -> Optional[str]:
        """None once a planner is built (goals are served), else why not: no robot_description received yet,
        or why the last one was not used."""
        if self.planner is not None:
            return None
        refused = [p for p in self.problems if p.startswith(DESCRIPTION_REFUSED)]
        return refused[-1] if refused else "no robot_description yet"

    def _problem(self, text: str) -> str:
        if text not in self.problems:
            self.problems.append(text)
            del self.problems[:-MAX_PROBLEMS]
        return text

    # -- inputs --------------------------------------------------------------------------------------
    def set_description(self, urdf: Optional[str] = None, srdf: Optional[str] = None) -> Optional[str]:
        """A new robot_description and/or semantic description (None: keep the one received); the planner is
        built anew.  Returns the reason when it cannot be (the previous planner stays)."""
        urdf_text = self._urdf if urdf is None else urdf
        srdf_text = self._srdf if srdf is None else srdf
        if not urdf_text:
            self._srdf = srdf_text
            return None
        from .planner import Planner
        from .sync import confined_urdf, robot_from_description

        try:
            robot = robot_from_description(urdf_text, srdf_text or None, self.search_path,
                                           self.resolver.mesh_roots, self.resolver.base_dir)
            robot.placement = self.placement.copy()
            planner = Planner(robot, confined_urdf(urdf_text, robot), environment=False,
                              acceleration_limits=self.acceleration_limits, **self.planner_options)
        except (DescriptionError, PlanningError, ValueError, RuntimeError) as exc:
            return self._problem(f"{DESCRIPTION_REFUSED}: {type(exc).__name__}: {exc}")
        self._urdf, self._srdf = urdf_text, srdf_text
        planner.set_joint_state(self._joint_state)
        for name, body in self.environment.items():
            planner.add_body(name, body)
        if self._objects or self._occupancy is not None:
            for problem in planner.set_objects(self._world(), keep=list(self.environment)):
                self._problem(f"world objects: {problem}")
        self.planner = planner
        for note in robot.warnings:
            if "outside the trusted roots" in note:
                self._problem(f"robot description: {note}")
        for note in planner.notes:
            self._problem(note)
        return None

    def set_joint_state(self, names: Sequence[str], positions: Sequence[float]) -> None:
        state = dict(zip(names, (float(p) for p in positions)))
        self._joint_state.update(state)
        if self.planner is not None:
            self.planner.set_joint_state(state)

    def set_objects_xml(self, text: str) -> Optional[str]:
        """world_node's ``~/objects`` document, read by :attr:`reader` (body files under the search path and
        this package's data; see :mod:`robot_bridge.world.reader`); returns the reason when it cannot be
        used (the bodies known before stay).  Bodies the reader refuses are left out, their reasons kept in
        ``problems``."""
        from .sync import objects_from_xml

        try:
            objects, problems = objects_from_xml(text, self.reader)
        except DescriptionError as exc:
            return self._problem(f"world objects not used: {exc}")
        if problems:
            self._problem(f"world objects document: {problems}")
        return self.set_objects(objects)

    def set_objects(self, objects: Mapping[str, tuple]) -> Optional[str]:
        """name -> (body, pose) of world_node's bodies, as :func:`.sync.objects_from_xml` reads them (the
        node reads them off its service threads); returns the reason when they cannot be used."""
        objects = dict(objects)
        clash = sorted(set(objects) & set(self.environment))
        if clash:
            return self._problem(f"world objects not used: names of environment bodies: {clash}")
        self._objects = objects
        if self.planner is not None:
            for problem in self.planner.set_objects(self._world(), keep=list(self.environment)):
                self._problem(f"world objects: {problem}")
        return None

    def set_occupancy(self, body) -> Optional[str]:
        """The sensors' occupancy map as one world body (:func:`robot_bridge.world.occupancy.occupancy_body`,
        boxes in the world frame; None: no map): planned around like world_node's bodies."""
        from ..world.occupancy import BODY_NAME

        if BODY_NAME in self.environment:
            return self._problem(f"occupancy map not used: an environment body is named {BODY_NAME!r}")
        self._occupancy = body
        return self.set_objects(self._objects)

    def _world(self) -> dict:
        """world_node's bodies and the occupancy body (at the identity: its boxes are in the world frame)."""
        import numpy as np

        from ..world.occupancy import BODY_NAME

        if self._occupancy is None:
            return dict(self._objects)
        return {**self._objects, BODY_NAME: (self._occupancy, np.eye(4))}

    # -- requests ------------------------------------------------------------------------------------
    def plan(self, goal, group: Optional[str] = None, start: Optional[Mapping[str, float]] = None,
             timeout: float = 1.0, cancel=None) -> PlanResult:
        """``timeout`` capped at ``max_planning_time``; ``cancel`` (a :class:`~.cancel.CancelToken`) ends the
        attempt within a search slice of its cancel with PREEMPTED (-7)."""
        if self.planner is None:
            return PlanResult(FAILURE, "no robot_description received yet")
        cap = float(self.max_planning_time)
        timeout = min(max(float(timeout), 1e-3), cap) if math.isfinite(timeout) else 1.0
        try:
            if isinstance(goal, GraspGoal):
                plan = self.planner.plan_grasp(goal, start=start, timeout=timeout, cancel=cancel)
            elif isinstance(goal, PlaceGoal):
                plan = self.planner.plan_place(goal, start=start, timeout=timeout, cancel=cancel)
            else:
                plan = self.planner.plan(goal, group=group, start=start, timeout=timeout, cancel=cancel)
        except PlanningError as exc:
            return PlanResult(exc.code, str(exc))
        except Exception:  # a defect: the caller reports it (FAILURE); the scene it may have left is not kept
            try:
                self.planner.rebuild()
            except Exception as exc:  # noqa: BLE001 - the defect raised below is the one to report
                self._problem(f"collision scene not rebuilt after a failed plan: {type(exc).__name__}: {exc}")
            raise
        return PlanResult(SUCCESS, "planned", plan)


def frame_pose(planner, frame: str, world_frame: str, prefix: str = ""):
    """World pose of a frame a goal names: the planner's world frame, a robot link (TF name: ``prefix`` +
    link), a world body; FrameTransformFailure (-21) for any other."""
    import numpy as np

    from .errors import FrameTransformFailure

    name = frame.lstrip("/")
    if name in ("", world_frame):
        return np.eye(4)
    if prefix and name.startswith(prefix):
        link = name[len(prefix):]
        if link in planner.robot.links:
            return planner.link_pose(link)
    elif not prefix and name in planner.robot.links:
        return planner.link_pose(name)
    if name in planner.bodies:
        return planner.body_pose(name)
    raise FrameTransformFailure(f"frame {frame!r} is not one the planner knows (world frame {world_frame!r}, "
                                "robot links, world bodies)")


def keep_margin(trajectory, margin: float, velocity: float = 1.0, acceleration: float = 1.0):
    """``trajectory`` timed ``margin`` (a fraction) below the limits, scaled by MoveIt's velocity and
    acceleration factors (each outside (0, 1] counts as 1)."""
    from .inputs import scaling_factor

    keep = 1.0 - float(margin)
    return scale_trajectory(trajectory, scaling_factor(velocity) * keep, scaling_factor(acceleration) * keep)


def robot_file(path: str, pose, search: Sequence[str], environment: bool = True, on_error=None):
    """(joint acceleration limits, environment bodies, placement 4x4) of planner_node's description_file (a
    URDF carries neither limits nor bodies) and where the robot stands (the file's placement, else ``pose``,
    [x, y, z, roll, pitch, yaw]: robot_bridge.model.placement).  A file that cannot be read: ``on_error(
    message)``, no limits, no bodies; a placement given twice raises ValueError."""
    from ..model.placement import robot_placement

    pose = list(pose or [])
    if not path:
        return {}, {}, robot_placement(None, pose).matrix
    try:
        from ..formats import load

        robot = load(path, search_path=list(search) or None)
    except Exception as exc:  # bad file: the default acceleration serves, reported once
        if on_error is not None:
            on_error(f"description_file {path!r} not read ({type(exc).__name__}: {exc}); "
                     "default_acceleration for every joint, no environment bodies")
        return {}, {}, robot_placement(None, pose).matrix
    accelerations = {j.name: float(j.acceleration[0]) for j in robot.active_joints
                     if j.dof == 1 and float(j.acceleration[0]) > 0}
    return accelerations, dict(robot.environment) if environment else {}, robot_placement(robot, pose).matrix


def scale_trajectory(trajectory, velocity_factor: float = 1.0, acceleration_factor: float = 1.0):
    """The same path slowed down uniformly so that its velocities stay within ``velocity_factor`` and its
    accelerations within ``acceleration_factor`` of what they were (MoveIt's scaling factors; a factor
    outside (0, 1] counts as 1).  InvalidMotionPlan (-2) when the factors stretch it beyond
    :data:`.inputs.MAX_TRAJECTORY_DURATION`."""
    from .goals import Trajectory
    from .inputs import scaled_duration, scaling_factor

    velocity, acceleration = scaling_factor(velocity_factor), scaling_factor(acceleration_factor)
    scaled_duration(trajectory.duration, velocity, acceleration)
    k = max(1.0 / velocity, math.sqrt(1.0 / acceleration))
    if k == 1.0:
        return trajectory
    return Trajectory(list(trajectory.joint_names), trajectory.times * k, trajectory.positions.copy(),
                      trajectory.velocities / k, trajectory.accelerations / (k * k))
