"""The master's planner: the robot the bridge publishes, its joint state and the world's bodies, kept current;
joint, named, pose and grasp goals; trajectories under the joint limits; typed failures.

    planner = Planner(robot)                       # robot: a Robot with its SRDF semantics attached
    planner.set_joint_state({"j1": 0.1, ...})
    planner.set_objects({"ball_0": (ball_body, pose)})   # detections, as world_node holds them
    plan = planner.plan(JointGoal({"j1": 1.0}), group="arm")
    plan.trajectory.times / positions / velocities / accelerations

Collision model: the robot's collision geometry from its URDF (``to_urdf``, what the description node
publishes, meshes included), SRDF ``disable_collisions`` and the model's OpenRAVE adjacent / ignored pairs,
link pairs in collision in nearly every state (see ``backend.ALWAYS_FRACTION``), and every world body.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from ..model import Gripper, Handle, Robot
from . import backend as _backend
from . import inputs
from .cancel import PLAN_SLICE, CancelToken
from .errors import (GoalInCollision, GoalStateInvalid, InvalidGoal, InvalidGroup, InvalidLinkName,
                     InvalidMotionPlan, InvalidObject, InvalidRobotState, NoIKSolution, NoPathFound,
                     PlanningCanceled, PlanningTimedOut, StartInCollision, StartStateInvalid)
from .goals import (GraspGoal, GraspPlan, JointGoal, MotionPlan, NamedGoal, PathCheck, PlaceGoal, PlacePlan,
                    PoseGoal, Trajectory)
from .grasp import grasp_pose, masked_error, pregrasp_pose

UNIVERSE = "universe"
LIMIT_TOLERANCE = 1e-6        # rad / m a joint state may lie outside its limits (and is clamped)
START_LIMIT_TOLERANCE = 1e-3  # a measured start state this far out is clamped, further is refused
RATE_MARGIN = 1e-3            # trajectories keep this relative margin below the rate limits
PLACE_PENETRATION = 1e-3      # m a placed body may sink into its support (5x the IK's position tolerance)
HELD_AWAY = (0.0, 0.0, 1.0e4)  # m: where a carried body's geometry waits while the robot alone is checked
WORLD_BOX = 1000.0            # m: half extent of the cube about the world origin bodies may be in (default)
# rad / m per joint the driven state may add to the checking step (see Planner.corridor; docs/planning.md)
CORRIDOR_MARGIN = 0.005


def _package_roots(robot: Robot) -> list[str]:
    """Directories resolving the model's ``package://`` mesh URIs (from where its reader found them)."""
    from ..model import Mesh

    roots = []
    for link in robot.links.values():
        for geom in link.collisions + link.visuals:
            shape = geom.shape
            if isinstance(shape, Mesh) and shape.path and shape.uri.startswith("package://"):
                rest = shape.uri[len("package://"):]
                path = str(shape.path)
                if path.endswith(rest.split("/", 1)[-1]):
                    root = path[: len(path) - len(rest)].rstrip("/")
                    if root and root not in roots:
                        roots.append(root)
    return roots


# robot_bridge.world.occupancy.BODY_NAME: the sensors' map, one mesh of boxes; pick and place's contact depths
# would take its convex hull: left out there (the motion's collision checks keep it)
OCCUPANCY = "occupancy"


@dataclass
class _Body:
    robot: Robot
    pose: np.ndarray                                 # world pose of the body's root link
    geometries: list[tuple[str, str, np.ndarray, object]] = field(default_factory=list)
    # (geometry name, body link, body root -> geometry, shape)
    attached: Optional[str] = None                    # robot link carrying it
    grip: Optional[np.ndarray] = None                 # robot link -> body root while attached
    touch: list[str] = field(default_factory=list)    # robot links it may touch while attached
    resting: list[str] = field(default_factory=list)  # world bodies it touched when picked up, until it left
    picked_from: list[str] = field(default_factory=list)  # ... kept while held: a place's default supports


PEAK_SAMPLES = 32            # instants per interval where within_limits evaluates the controller's quintics
PEAK_MARGIN = 0.01           # relative: what the samples may miss of a peak between them (far less, in fact)


def within_limits(times: np.ndarray, positions: np.ndarray, velocities: np.ndarray, accelerations: np.ndarray,
                  velocity_limits: np.ndarray, acceleration_limits: np.ndarray):
    """(times, velocities, accelerations) stretched uniformly in time until the interpolation the controller
    runs between the samples (:class:`robot_bridge.hardware.trajectory.Trajectory`: the quintic through
    position, velocity and acceleration at both ends of each interval) keeps every joint within
    ``velocity_limits`` and ``acceleration_limits``.  The derivatives of every interval's polynomial (in
    Bernstein form) are evaluated at ``PEAK_SAMPLES`` instants in one array operation, their peaks taken
    ``PEAK_MARGIN`` larger.  A uniform stretch by k divides velocities by k and accelerations by k^2, of the
    samples and of the polynomials between them alike: one pass."""
    from math import comb

    from ..hardware.trajectory import _hermite_bernstein

    times = np.asarray(times, dtype=float)
    h = np.diff(times)[:, None]
    c = _hermite_bernstein(times, [positions, velocities, accelerations])      # (6, intervals, joints)
    s = (np.arange(PEAK_SAMPLES + 1) / PEAK_SAMPLES)[:, None]

    def basis(n: int) -> np.ndarray:              # (samples, n + 1) Bernstein polynomials of degree n
        i = np.arange(n + 1)[None, :]
        return np.array([comb(n, k) for k in range(n + 1)])[None, :] * s ** i * (1 - s) ** (n - i)

    dv = 5.0 * np.diff(c, axis=0) / h                         # velocity: degree 4
    da = 20.0 * np.diff(c, n=2, axis=0) / (h * h)             # acceleration: degree 3
    joints = c.shape[2]
    peak_v = np.abs(basis(4) @ dv.reshape(5, -1)).max(axis=0).reshape(-1, joints).max(axis=0)
    peak_a = np.abs(basis(3) @ da.reshape(4, -1)).max(axis=0).reshape(-1, joints).max(axis=0)
    peak_v, peak_a = peak_v * (1 + PEAK_MARGIN), peak_a * (1 + PEAK_MARGIN)
    k = max(1.0, float(np.max(peak_v / np.asarray(velocity_limits, dtype=float))),
            math.sqrt(float(np.max(peak_a / np.asarray(acceleration_limits, dtype=float)))))
    if k > 1.0:
        times, velocities, accelerations = times * k, velocities / k, accelerations / (k * k)
    return times, velocities, accelerations


class Planner:
    def __init__(self, robot: Robot, urdf: Optional[str] = None, *, package_paths: Sequence[str] = (),
                 environment: bool = True, seed: int = 0, dt: float = 0.02, check_step: float = 0.01,
                 plan_step: float = 0.05, default_velocity: float = 1.0, default_acceleration: float = 2.0,
                 acceleration_limits: Optional[Mapping[str, float]] = None, world_box: float = WORLD_BOX):
        """``urdf``: the published description (default: ``to_urdf(robot)`` with converted meshes cached as
        the description node does).  Velocity and acceleration limits are the controller's
        (``hardware.base.limits_from_robot``); a URDF carries no acceleration limit, so a robot read back
        from one needs ``acceleration_limits`` (joint -> rad/s^2 or m/s^2), else ``default_acceleration``.
        ``world_box``: bodies whose origin lies outside the cube of this half extent (m) are refused."""
        _backend.require()
        from ..formats import srdf as srdf_format

        self.robot = robot
        self.notes: list[str] = []
        if urdf is None:
            from ..formats.mesh_cache import MeshCache
            from ..formats.urdf import MeshTarget, to_urdf

            # the mesh files the reader found, by path: a package:// URI resolves only where the folder
            # is named as the package (moveit_resources' panda_description holds
            # moveit_resources_panda_description)
            urdf, _report = to_urdf(robot, target=MeshTarget(cache=MeshCache(), keep_written_uris=False))
        self.urdf = urdf
        package_paths = list(package_paths) + _package_roots(robot)
        self.semantics = robot.semantics if robot.semantics is not None else \
            srdf_format.semantics_from_model(robot)
        disabled = {tuple(sorted((p.link1, p.link2))) for p in self.semantics.collision_pairs
                    if not p.enabled}
        disabled |= {tuple(sorted(p)) for p in robot.collision_ignore}
        srdf_text = srdf_format.to_srdf(self.semantics, robot.name)
        limits = self._limits_yaml(default_velocity, default_acceleration, acceleration_limits or {})
        self._backend_args = (urdf, srdf_text, package_paths, sorted(disabled), limits, seed)
        self._backend = _backend.Backend(*self._backend_args)
        self.world_box = float(world_box)
        b = self._backend
        new_pairs = [p for p in b.always_pairs if p not in disabled]
        if new_pairs:
            self.notes.append("link pairs in collision in nearly every state, not checked: "
                              + ", ".join(f"{a}/{c}" for a, c in new_pairs))
        self.joint_names = b.joint_names
        self._index = {n: i for i, n in enumerate(self.joint_names)}
        self.dt, self.check_step, self.plan_step = dt, check_step, plan_step
        self._rng = np.random.default_rng(seed)
        self._cancel: Optional[CancelToken] = None      # the attempt under way's, checked between slices
        self.state = self._initial_state()
        self.bodies: dict[str, _Body] = {}
        self._placement_inv = np.linalg.inv(robot.placement)
        if environment:
            for name, body in robot.environment.items():
                self.add_body(name, body)

    # -- model -------------------------------------------------------------------------------------
    def _limits_yaml(self, default_velocity: float, default_acceleration: float,
                     acceleration: Mapping[str, float]) -> str:
        from ..hardware.base import limits_from_robot

        names = [j.name for j in self.robot.active_joints if j.dof == 1]
        lines = ["joint_limits:"]
        for name, lim in zip(names, limits_from_robot(self.robot, names, default_velocity,
                                                      default_acceleration)):
            given = acceleration.get(name)
            ok = given is not None and math.isfinite(given) and given > 0
            acc = float(given) if ok else lim.acceleration
            lines += [f"  {name}:", f"    max_velocity: [{float(lim.velocity)!r}]",
                      f"    max_acceleration: [{float(acc)!r}]"]
        return "\n".join(lines) + "\n"

    def _initial_state(self) -> np.ndarray:
        q = np.zeros(len(self.joint_names))
        for name, i in self._index.items():
            joint = self.robot.joints.get(name)
            if joint is not None and joint.dof == 1:
                q[i] = float(joint.initial[0])
        return np.clip(q, self._backend.lower, self._backend.upper)

    @property
    def lower(self) -> np.ndarray:
        return self._backend.lower

    @property
    def upper(self) -> np.ndarray:
        return self._backend.upper

    @property
    def velocity_limits(self) -> np.ndarray:
        return self._backend.velocity

    @property
    def acceleration_limits(self) -> np.ndarray:
        return self._backend.acceleration

    @property
    def collision_checks(self) -> int:
        return self._backend.collision_checks

    def vector(self, positions: Mapping[str, float], base: Optional[np.ndarray] = None) -> np.ndarray:
        """A full joint vector: ``base`` (default: the current state) with ``positions`` set."""
        q = np.array(self.state if base is None else base, dtype=float)
        for name, value in positions.items():
            q[self._index[name]] = float(value)
        return q

    def positions(self, q: np.ndarray) -> dict[str, float]:
        return {n: float(q[i]) for n, i in self._index.items()}

    def set_joint_state(self, positions: Mapping[str, float]) -> None:
        """Joint positions from /joint_states: names this robot plans for are taken, others ignored."""
        for name, value in positions.items():
            i = self._index.get(name)
            if i is not None and math.isfinite(value):
                self.state[i] = float(value)

    def reseed(self, seed: int) -> None:
        """Restart the random sampling (IK restarts, RRT-Connect) from ``seed``: the same query from the
        same world then gives the same plan (benches, reproducible runs)."""
        self._rng = np.random.default_rng(seed)
        self._backend.reseed(seed)

    # -- groups ----------------------------------------------------------------------------------
    def group_names(self) -> list[str]:
        return sorted(set(self.semantics.groups) | set(self.robot.manipulators))

    def group(self, name: Optional[str]) -> str:
        """A planning group by SRDF group or manipulator name (InvalidGroup otherwise)."""
        from ..model.groups import group_joints

        if name is None:
            raise InvalidGroup(f"no group given (groups: {self.group_names()})")
        b = self._backend
        if name in b.groups or (name in self.semantics.groups and b.has_group(name)):
            return name
        try:
            joints = group_joints(self.robot, name)
        except ValueError as exc:
            raise InvalidGroup(str(exc)) from None
        joints = [j for j in self.joint_names if j in joints]
        if not joints:
            raise InvalidGroup(f"group {name!r} moves no joint the planner drives")
        b.define_group(name, joints)
        return name

    def group_joints(self, group: str) -> list[str]:
        return self._backend.group_joints(self.group(group))

    def _group_for_link(self, link: str) -> str:
        """The largest group all of whose joints lie on the chain from the root to ``link``."""
        from ..model.groups import chain_joints

        try:
            chain = set(chain_joints(self.robot, self.robot.root, link))
        except ValueError:
            raise InvalidLinkName(f"link {link!r} is not a link of robot {self.robot.name!r}") from None
        best, size = None, 0
        for name in self.group_names():
            try:
                joints = set(self.group_joints(name))
            except InvalidGroup:
                continue
            if joints <= chain and len(joints) > size:
                best, size = name, len(joints)
        if best is None:
            raise InvalidGroup(f"no group moves link {link!r} (groups: {self.group_names()})")
        return best

    def _tip(self, group: str) -> str:
        g = self.semantics.groups.get(group)
        if g is not None and g.chains:
            tip = g.chains[-1][1]
            return self.robot.manipulators[tip[:-5]].effector if tip.endswith("_tool") and \
                tip[:-5] in self.robot.manipulators else tip
        if group in self.robot.manipulators:
            return self.robot.manipulators[group].effector
        joints = self.group_joints(group)
        return self.robot.joints[joints[-1]].child

    # -- world bodies ----------------------------------------------------------------------------
    def add_body(self, name: str, body: Robot, pose: Optional[np.ndarray] = None) -> None:
        """A world body at ``pose`` (the pose of its file's frame; default: identity, i.e. where its own
        placement puts it).  A name in use is replaced."""
        from ..kinematics.fk import KinematicModel

        root = self._checked_root(name, body, np.eye(4) if pose is None else pose)
        if name in self.bodies:
            self.remove_body(name)
        entry = _Body(body, root)
        links = KinematicModel(body, compiled=False).link_poses()
        for link in body.links.values():
            for i, geom in enumerate(link.collisions or link.visuals):
                local = links.get(link.name, np.eye(4)) @ geom.origin
                gname = f"{name}::{link.name}::{i}"
                try:
                    added = self._backend.add_geometry(gname, UNIVERSE, geom.shape,
                                                       self._placement_inv @ root @ local)
                except Exception as exc:           # an unreadable mesh: reported, other shapes kept
                    self._note(f"body {name!r}: {link.name} geometry {i} not added ({exc})")
                    continue
                if added:
                    entry.geometries.append((gname, link.name, local, geom.shape))
                else:
                    self._note(f"body {name!r}: {type(geom.shape).__name__} geometry of {link.name} "
                               "is not supported")
        self.bodies[name] = entry
        self._world_pairs([g for g, *_ in entry.geometries], allow=True)

    def _world_geometries(self) -> list[str]:
        return [g for e in self.bodies.values() if e.attached is None for g, *_ in e.geometries]

    def _world_pairs(self, geometries: list[str], allow: bool) -> None:
        """Allow (or check again) contacts between ``geometries`` and every world body's geometry: bodies
        resting on each other are no collision of the robot's."""
        others = set(self._world_geometries()) | set(geometries)
        pairs = [(a, c) for a in geometries for c in others if a != c]
        if pairs:
            self._backend.set_pairs(pairs, allow)

    def _checked_root(self, name: str, body: Robot, pose) -> np.ndarray:
        """World pose of a body's root link placed at ``pose`` (its file's frame); InvalidObject when either
        is not a finite rigid transform or lies outside ``world_box``: coal's broad phase cannot take a body
        at 1e308 m (its bounding volume overflows and every later check fails)."""
        m = np.asarray(pose, dtype=float)
        problem = inputs.body_problem(m, self.world_box)
        root = m @ body.placement if problem is None else None
        problem = problem or inputs.body_problem(root, self.world_box)
        if problem is not None:
            raise InvalidObject(f"body {name!r} refused: {problem}")
        return root

    def move_body(self, name: str, pose: np.ndarray) -> None:
        entry = self._body(name)
        if entry.attached is not None:
            raise InvalidObject(f"body {name!r} is attached to {entry.attached!r}; detach it first")
        entry.pose = self._checked_root(name, entry.robot, pose)
        for gname, _link, local, _shape in entry.geometries:
            self._backend.move_geometry(gname, self._placement_inv @ entry.pose @ local, UNIVERSE)

    def remove_body(self, name: str) -> None:
        entry = self._body(name)
        for gname, *_ in entry.geometries:
            self._backend.remove_geometry(gname)
        del self.bodies[name]

    def set_objects(self, objects: Mapping[str, tuple[Robot, np.ndarray]],
                    keep: Sequence[str] = ()) -> list[str]:
        """Make the detected bodies exactly ``objects`` (name -> (body, pose)); bodies of the environment
        file (``keep``: their names) and attached ones stay.  Returns the problems: bodies refused (a pose
        that is not a finite rigid transform, or outside ``world_box``: left out), or an update the
        collision scene could not take (then rebuilt from the bodies before it: never left failing)."""
        problems = []
        accepted = {}
        for name, (body, pose) in objects.items():
            try:
                self._checked_root(name, body, pose)
            except InvalidObject as exc:
                problems.append(str(exc))
                continue
            accepted[name] = (body, pose)
        before = self._snapshot()
        stay = set(keep) | set(self.robot.environment)
        try:
            for name in [n for n, b in self.bodies.items() if n not in accepted and n not in stay
                         and b.attached is None]:
                self.remove_body(name)
            for name, (body, pose) in accepted.items():
                current = self.bodies.get(name)
                if current is not None and current.attached is not None:
                    continue                # carried: the planner's attachment says where it is
                if current is None or current.robot is not body:
                    self.add_body(name, body, pose)
                else:
                    self.move_body(name, pose)
            self._backend.in_collision(self.state)     # coal updates its broad phase here: fails now or never
        except Exception as exc:  # the library's own refusal: the scene is rebuilt, the update dropped
            self.rebuild(before)
            problems.append(f"world update not applied ({type(exc).__name__}: {' '.join(str(exc).split())}); "
                            "collision scene "
                            "rebuilt from the bodies before it")
        return problems

    def _snapshot(self) -> dict[str, _Body]:
        return {name: _Body(e.robot, e.pose.copy(), [], e.attached, None if e.grip is None else e.grip.copy(),
                            list(e.touch), list(e.resting), list(e.picked_from))
                for name, e in self.bodies.items()}

    def rebuild(self, bodies: Optional[Mapping[str, _Body]] = None) -> None:
        """A new collision scene with the planner's groups and ``bodies`` (a :meth:`_snapshot`; default: the
        current ones) as they were, attached ones on their links: after the library failed an update, the
        scene it left is not trusted again."""
        bodies = self._snapshot() if bodies is None else bodies
        old = self._backend
        new = _backend.Backend(*self._backend_args)
        for group, joints in old.groups.items():
            new.define_group(group, joints)
        new._seed, new.collision_checks = old._seed, old.collision_checks
        self._backend, self.bodies = new, {}
        for name, e in bodies.items():
            self.add_body(name, e.robot, e.pose @ np.linalg.inv(e.robot.placement))
        for name, e in bodies.items():
            if e.attached is None:
                continue
            entry = self.bodies[name]
            mine = [g for g, *_ in entry.geometries]
            for gname, _l, local, _s in entry.geometries:
                new.move_geometry(gname, e.grip @ local, e.attached)
                new.allow_collisions(gname, e.touch, True)
            entry.attached, entry.grip, entry.touch = e.attached, e.grip, e.touch
            self._world_pairs(mine, allow=False)
            entry.resting = [o for o in e.resting if o in self.bodies]
            entry.picked_from = list(e.picked_from)
            for other in entry.resting:
                new.set_pairs([(a, c) for a in mine for c, *_ in self.bodies[other].geometries], True)

    def _body(self, name: str) -> _Body:
        if name not in self.bodies:
            raise InvalidObject(f"no body {name!r} in the world (bodies: {sorted(self.bodies)})")
        return self.bodies[name]

    def body_pose(self, name: str, q: Optional[np.ndarray] = None) -> np.ndarray:
        """World pose of a body's root link (an attached body: where the robot at ``q`` carries it)."""
        entry = self._body(name)
        if entry.attached is None:
            return entry.pose.copy()
        q = self.state if q is None else q
        return self.robot.placement @ self._backend.frame_pose(q, entry.attached) @ entry.grip

    def link_pose(self, link: str, q: Optional[np.ndarray] = None) -> np.ndarray:
        """World pose of a robot link at ``q`` (default: the current state)."""
        if not self._backend.has_frame(link):
            raise InvalidLinkName(f"no frame {link!r} in robot {self.robot.name!r}")
        return self.robot.placement @ self._backend.frame_pose(self.state if q is None else q, link)

    def _link_subtree(self, link: str) -> list[str]:
        out, todo = [], [link]
        while todo:
            current = todo.pop()
            out.append(current)
            todo += [j.child for j in self.robot.child_joints(current)]
        return [n for n in out if n in self._backend.link_names]

    def attach(self, name: str, link: str, touch_links: Optional[Sequence[str]] = None) -> None:
        """Carry body ``name`` with ``link`` from the current state on: its geometry moves with the link,
        and it may touch ``touch_links`` (default: ``link`` and every link below it, e.g. the fingers)."""
        entry = self._body(name)
        if entry.attached is not None:
            raise InvalidObject(f"body {name!r} is already attached to {entry.attached!r}")
        if not self._backend.has_frame(link):
            raise InvalidObject(f"no link {link!r} to attach {name!r} to")
        link_pose = self._backend.frame_pose(self.state, link)
        entry.grip = np.linalg.inv(link_pose) @ self._placement_inv @ entry.pose
        entry.attached = link
        touch = list(touch_links) if touch_links is not None else self._link_subtree(link)
        mine = [g for g, *_ in entry.geometries]
        for gname, _l, local, _s in entry.geometries:
            self._backend.move_geometry(gname, entry.grip @ local, link)
            self._backend.allow_collisions(gname, touch, True)
        entry.touch = touch
        # a carried body hits the world like a link, except what it rests on when picked up (until a
        # plan starts where it no longer touches it: _settle)
        self._world_pairs(mine, allow=False)
        entry.resting = []
        if self._backend.in_collision(self.state):
            for other in self._colliding_bodies(self.state):
                entry.resting.append(other)
                geoms = [g for g, *_ in self.bodies[other].geometries]
                self._backend.set_pairs([(a, c) for a in mine for c in geoms], True)
        entry.picked_from = list(entry.resting)

    def detach(self, name: str) -> np.ndarray:
        """Leave an attached body where the current state holds it; returns its new world pose."""
        entry = self._body(name)
        if entry.attached is None:
            raise InvalidObject(f"body {name!r} is not attached")
        entry.pose = self.body_pose(name)
        for gname, _l, local, _s in entry.geometries:
            self._backend.move_geometry(gname, self._placement_inv @ entry.pose @ local, UNIVERSE)
            self._backend.allow_collisions(gname, entry.touch, False)
        entry.attached, entry.grip = None, None
        entry.resting, entry.picked_from = [], []
        self._world_pairs([g for g, *_ in entry.geometries], allow=True)
        return entry.pose @ np.linalg.inv(entry.robot.placement)

    # -- checks ----------------------------------------------------------------------------------
    def in_collision(self, q: np.ndarray) -> bool:
        return self._backend.in_collision(q)

    def segment_free(self, qa: np.ndarray, qb: np.ndarray, step: Optional[float] = None) -> bool:
        return self._backend.segment_free(qa, qb, step or self.check_step)

    def _start(self, start: Optional[Mapping[str, float]]) -> np.ndarray:
        if start is not None:
            unknown = sorted(set(start) - set(self._index))
            if unknown:
                raise InvalidRobotState(f"start state names unknown joints {unknown}")
            start = inputs.start_state(list(start), [start[n] for n in start])
        q = self.vector(start or {})
        b = self._backend
        out = (q < b.lower - START_LIMIT_TOLERANCE) | (q > b.upper + START_LIMIT_TOLERANCE)
        if out.any():
            bad = [f"{self.joint_names[i]}={q[i]:.4g} not in [{b.lower[i]:.4g}, {b.upper[i]:.4g}]"
                   for i in np.flatnonzero(out)]
            raise StartStateInvalid("start state outside the joint limits: " + ", ".join(bad))
        q = np.clip(q, b.lower, b.upper)
        self._settle(q)
        if b.in_collision(q):
            raise StartInCollision(f"the start state is in collision: {self._colliding(q)}")
        return q

    def _colliding(self, q: np.ndarray) -> str:
        """What collides at ``q``, for a message: robot links overlapping world bodies (link / body, how
        deep), else the robot's own links (roboplan names no pair)."""
        found = set()
        for name, entry in self.bodies.items():
            if entry.attached is not None:
                continue
            for shape, pose in self._body_geometries(name):
                for link, depth in self._backend.link_overlaps(q, entry.touch, shape,
                                                               self._placement_inv @ pose).items():
                    found.add(f"{link} / {name} ({depth * 1e3:.3g} mm)")
        return ", ".join(sorted(found)) if found else "the robot's own links (no world body)"

    def _settle(self, q: np.ndarray) -> None:
        """A carried body checked again against what it rested on, once it no longer touches it at ``q``."""
        b = self._backend
        for entry in self.bodies.values():
            for other in list(entry.resting):
                if other not in self.bodies:
                    entry.resting.remove(other)
                    continue
                pairs = [(a, c) for a, *_ in entry.geometries for c, *_ in self.bodies[other].geometries]
                b.set_pairs(pairs, False)
                if b.in_collision(q):
                    b.set_pairs(pairs, True)
                else:
                    entry.resting.remove(other)

    def _check_goal(self, q: np.ndarray, group: str, what: str) -> None:
        b = self._backend
        idx = b.group_indices(group)
        out = [i for i in idx if q[i] < b.lower[i] - LIMIT_TOLERANCE or q[i] > b.upper[i] + LIMIT_TOLERANCE]
        if out:
            raise GoalStateInvalid(f"{what} outside the joint limits: " + ", ".join(
                f"{self.joint_names[i]}={q[i]:.4g} not in [{b.lower[i]:.4g}, {b.upper[i]:.4g}]" for i in out))
        if b.in_collision(q):
            raise GoalInCollision(f"{what} is in collision: {self._colliding(q)}")

    # -- goals -> joint vectors ----------------------------------------------------------------------
    def goal_vector(self, goal, group: Optional[str], start: np.ndarray,
                    timeout: float = 0.5) -> tuple[np.ndarray, str]:
        if isinstance(goal, JointGoal):
            unknown = sorted(set(goal.positions) - set(self._index))
            if unknown:
                raise InvalidGoal(f"goal names joints the robot has not (or does not drive): {unknown}")
            group = self.group(goal.group or group) if (goal.group or group) else \
                self._joint_group(list(goal.positions))
            outside = sorted(set(goal.positions) - set(self.group_joints(group)))
            if outside:
                raise InvalidGoal(f"goal joints {outside} are not in group {group!r}")
            q = self.vector(inputs.joint_values(goal.positions), start)
            self._check_goal(q, group, "the joint goal")
            return q, group
        if isinstance(goal, NamedGoal):
            states = [s for s in self.semantics.group_states if s.name == goal.name
                      and (goal.group in (None, s.group))]
            if not states:                  # the states are per group: say of which (not a bare name list)
                known = sorted({f"{s.name} ({s.group})" for s in self.semantics.group_states})
                of = f" of group {goal.group!r}" if goal.group else ""
                raise InvalidGoal(f"no group_state {goal.name!r}{of} (states (group): {', '.join(known)})")
            state = states[0]
            group = self.group(goal.group or state.group)
            values = {j: v[0] for j, v in state.values.items() if j in self._index}
            q = self.vector(values, start)
            self._check_goal(q, group, f"group_state {goal.name!r}")
            return q, group
        if isinstance(goal, PoseGoal):
            group = self.group(goal.group)
            frame = goal.frame or self._tip(group)
            inputs.check_pose(goal.pose, "the pose goal")
            inputs.check_pose(goal.offset, "the pose goal's offset")
            q = self.solve_ik(group, frame, goal.pose, goal.offset, goal.mask, start, timeout)
            return q, group
        raise InvalidGoal(f"unknown goal type {type(goal).__name__}")

    def _joint_group(self, joints: list[str]) -> str:
        """The smallest group holding every named joint, else a group of exactly these joints."""
        best = None
        for name in self.group_names():
            try:
                members = self.group_joints(name)
            except InvalidGroup:
                continue
            if set(joints) <= set(members) and (best is None or len(members) < len(best[1])):
                best = (name, members)
        if best is not None:
            return best[0]
        name = "joints:" + ",".join(sorted(joints))
        self._backend.define_group(name, [j for j in self.joint_names if j in joints])
        return name

    def solve_ik(self, group: str, frame: str, pose: np.ndarray, offset: np.ndarray = np.eye(4),
                 mask: Sequence[bool] = (True,) * 6, seed: Optional[np.ndarray] = None, timeout: float = 0.5,
                 allowed: Sequence[tuple[str, Sequence[str]]] = (), position_tolerance: float = 2e-4,
                 angle_tolerance: float = 2e-3) -> np.ndarray:
        """Joint vector (group joints changed) within limits and collision-free whose ``frame @ offset``
        reaches world ``pose`` on the ``mask`` axes.  Damped least squares from ``seed``, then random restarts
        until ``timeout``.  ``allowed``: (geometry names, links) pairs of contacts allowed here (a grasp)."""
        b = self._backend
        if not b.has_frame(frame):
            raise InvalidLinkName(f"no frame {frame!r} in robot {self.robot.name!r}")
        mask = np.asarray(list(mask), dtype=bool)
        if mask.shape != (6,) or not mask.any():
            raise InvalidGoal("mask needs 6 booleans, at least one true")
        target = self._placement_inv @ np.asarray(pose, dtype=float)
        offset = np.asarray(offset, dtype=float)
        idx = b.group_indices(group)
        base = np.array(self.state if seed is None else seed, dtype=float)
        deadline = _backend.monotonic() + timeout
        tries = 0
        reached_in_collision = False
        while tries == 0 or _backend.monotonic() < deadline:
            self._check_cancel()
            q = base.copy() if tries == 0 else b.random_configuration(self._rng, group, base)
            tries += 1
            q = self._descend(q, idx, frame, offset, target, mask, position_tolerance, angle_tolerance)
            if q is None:
                continue
            for geoms, links in allowed:
                for g in geoms:
                    b.allow_collisions(g, links, True)
            try:
                free = not b.in_collision(q)
            finally:
                for geoms, links in allowed:
                    for g in geoms:
                        b.allow_collisions(g, links, False)
            if free:
                return q
            reached_in_collision = True
        if reached_in_collision:
            raise NoIKSolution(f"every IK solution found for {frame!r} in {timeout:.3g} s is in collision")
        raise NoIKSolution(f"no IK solution for {frame!r} within the joint limits in {timeout:.3g} s")

    def _descend(self, q, idx, frame, offset, target, mask, ptol, atol, iterations: int = 200):
        b = self._backend
        lo, hi = b.lower[idx], b.upper[idx]
        rows = np.flatnonzero(mask)
        tol = np.where(rows < 3, ptol, atol)
        for _ in range(iterations):
            current = b.frame_pose(q, frame) @ offset
            err = masked_error(current, target, mask)[rows]
            if np.all(np.abs(err) < tol):
                return q
            jl = b.frame_jacobian(q, frame)[:, idx]        # link frame, linear then angular
            # the offset frame's twist in its own axes, then in the target's axes
            r, p = offset[:3, :3], offset[:3, 3]
            skew = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
            jg = np.vstack([r.T @ (jl[:3] - skew @ jl[3:]), r.T @ jl[3:]])
            rel = target[:3, :3].T @ current[:3, :3]
            jt = np.vstack([rel @ jg[:3], rel @ jg[3:]])[rows]
            damping = 1e-4
            dq = -jt.T @ np.linalg.solve(jt @ jt.T + damping * np.eye(len(rows)), err)
            step = np.max(np.abs(dq))
            if step > 0.2:
                dq *= 0.2 / step
            q = q.copy()
            q[idx] = np.clip(q[idx] + dq, lo, hi)
        return None

    # -- planning --------------------------------------------------------------------------------
    @contextmanager
    def _cancellable(self, cancel: Optional[CancelToken]):
        """The attempt inside checks ``cancel`` (between search slices and IK restarts): PlanningCanceled."""
        self._cancel = cancel
        try:
            yield
        except PlanningCanceled:
            if cancel is not None:
                cancel.stopped()
            raise
        finally:
            self._cancel = None

    def _check_cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.check()

    def plan(self, goal, group: Optional[str] = None, start: Optional[Mapping[str, float]] = None,
             timeout: float = 1.0, cancel: Optional[CancelToken] = None) -> MotionPlan:
        """Plan from ``start`` (default: the current state) to ``goal``; raises a PlanningError subclass
        (PlanningCanceled, PREEMPTED, within a search slice of ``cancel`` being canceled)."""
        with self._cancellable(cancel):
            return self._plan(goal, group, start, timeout)

    def _plan(self, goal, group: Optional[str], start: Optional[Mapping[str, float]],
              timeout: float) -> MotionPlan:
        t0 = _backend.monotonic()
        q0 = self._start(start)
        # a pose goal's IK may use half the request's planning time (0.5 s of it left a reachable UR5 pose
        # unsolved on CI's loaded cores); the path gets what the IK left
        q1, group = self.goal_vector(goal, group, q0, timeout=timeout / 2)
        left = timeout - (_backend.monotonic() - t0)
        return self._plan_vectors(q0, q1, group, max(left, 1e-3), t0)

    def _plan_vectors(self, q0: np.ndarray, q1: np.ndarray, group: str, timeout: float,
                      t0: Optional[float] = None) -> MotionPlan:
        b = self._backend
        t0 = _backend.monotonic() if t0 is None else t0
        deadline = t0 + timeout
        step = self.plan_step
        self._check_cancel()
        waypoints = [q0, q1] if b.segment_free(q0, q1, self.check_step) else []
        while not waypoints:
            self._check_cancel()
            left = deadline - _backend.monotonic()
            if left <= 0:
                raise PlanningTimedOut(f"no path found for group {group!r} in {timeout:.3g} s")
            # cancellable: the search in slices (each a fresh RRT-Connect, the token checked between them)
            budget = min(left, PLAN_SLICE) if self._cancel is not None else left
            began = _backend.monotonic()
            path = b.plan(q0, q1, group, budget, step, self.check_step)
            if path is None:
                now = _backend.monotonic()
                if now >= deadline - 1e-3:
                    raise PlanningTimedOut(f"no path found for group {group!r} in {timeout:.3g} s")
                if budget < left and now - began >= budget - 1e-3:
                    continue                # the slice's time is over, not the search: the next slice
                raise NoPathFound(f"the planner found no path for group {group!r}")
            waypoints = path
            if not path:                # a contact between the planner's checks: plan again, finer
                step = max(self.check_step, step / 2)
        return self._timed(waypoints, group, _backend.monotonic() - t0)

    def _timed(self, waypoints: list[np.ndarray], group: str, planning_time: float) -> MotionPlan:
        """TOPP-RA through the waypoints, then time stretched until the controller's own interpolation
        between the samples (``hardware.trajectory.Trajectory``: quintic Hermite through positions,
        velocities, accelerations) stays within the velocity and acceleration limits: the spline TOPP-RA
        fits and the controller's polynomials between its samples differ, and either may overshoot."""
        b = self._backend
        idx = b.group_indices(group)
        names = b.group_joints(group)
        times, pos, vel, acc = b.parameterize(waypoints, group, self.dt)
        if len(times) < 2:
            raise InvalidMotionPlan("time parameterization returned no trajectory")
        pos[0], pos[-1] = waypoints[0][idx], waypoints[-1][idx]
        vel[0] = vel[-1] = 0.0                     # at rest at both ends (the controller's goal)
        acc[0] = acc[-1] = 0.0
        times, vel, acc = within_limits(times, pos, vel, acc, b.velocity[idx] * (1 - RATE_MARGIN),
                                        b.acceleration[idx] * (1 - RATE_MARGIN))
        trajectory = Trajectory(list(names), times, pos, vel, acc)
        return MotionPlan(group, np.array([w[idx] for w in waypoints]), trajectory, planning_time)

    def corridor(self) -> float:
        """Half-width (rad or m, every joint) of the corridor a planned trajectory is to be driven in: the
        checking step (no joint moves more between two collision checks of the path) plus CORRIDOR_MARGIN
        (room for a healthy controller's tracking error).  The planner node sends it as the goal's path and
        goal tolerance of every joint: the controller stops an arm that leaves it."""
        return float(self.check_step) + CORRIDOR_MARGIN

    def full_vector(self, group: str, values: np.ndarray, base: Optional[np.ndarray] = None) -> np.ndarray:
        q = np.array(self.state if base is None else base, dtype=float)
        q[self._backend.group_indices(group)] = values
        return q

    # -- grasps ----------------------------------------------------------------------------------
    def gripper(self, name: str) -> Gripper:
        if name not in self.semantics.grippers:
            raise InvalidObject(f"no gripper {name!r} (grippers: {sorted(self.semantics.grippers)})")
        return self.semantics.grippers[name]

    def handle(self, body: str, handle: str | Handle) -> Handle:
        entry = self._body(body)
        if isinstance(handle, Handle):
            h = handle
        else:
            handles = entry.robot.semantics.handles if entry.robot.semantics is not None else {}
            if handle not in handles:
                raise InvalidObject(f"body {body!r} has no handle {handle!r} (handles: {sorted(handles)})")
            h = handles[handle]
        if h.link not in entry.robot.links:
            raise InvalidObject(f"handle {h.name!r}: body {body!r} has no link {h.link!r}")
        inputs.check_pose(h.pose, f"handle {h.name!r}: its pose")
        direction = np.asarray(h.approaching_direction, dtype=float)
        norm = float(np.linalg.norm(direction)) if direction.shape == (3,) else math.nan
        if not (math.isfinite(norm) and norm > 1e-9 and math.isfinite(float(h.clearance))
                and float(h.clearance) >= 0):
            raise InvalidGoal(f"handle {h.name!r}: the approach needs a finite nonzero direction and a "
                              "clearance >= 0")
        return h

    def handle_link_pose(self, body: str, link: str) -> np.ndarray:
        from ..kinematics.fk import KinematicModel

        entry = self._body(body)
        links = KinematicModel(entry.robot, compiled=False).link_poses()
        return self.body_pose(body) @ links.get(link, np.eye(4))

    def plan_grasp(self, goal: GraspGoal, start: Optional[Mapping[str, float]] = None,
                   timeout: float = 2.0, cancel: Optional[CancelToken] = None) -> GraspPlan:
        """Reach the pre-grasp pose, then approach the handle: the gripper frame on the handle frame on the
        handle's masked axes.  The body and the gripper's links may touch during the approach.  IK solutions
        whose pre-grasp or grasp is in collision or out of reach, or whose approach is blocked, give way to
        others (:meth:`_grasp_configurations`, half the time allowed); the reach is planned in the rest."""
        with self._cancellable(cancel):
            return self._plan_grasp(goal, start, timeout)

    def _plan_grasp(self, goal: GraspGoal, start: Optional[Mapping[str, float]], timeout: float) -> GraspPlan:
        t0 = _backend.monotonic()
        gripper = self.gripper(goal.gripper)
        handle = self.handle(goal.body, goal.handle)
        if self.bodies[goal.body].attached is not None:
            raise InvalidObject(f"body {goal.body!r} is already held")
        group = self.group(goal.group) if goal.group else self._group_for_link(gripper.link)
        q0 = self._start(start)
        link_pose = self.handle_link_pose(goal.body, handle.link)
        grasp = grasp_pose(handle, link_pose)
        pre = pregrasp_pose(handle, gripper, link_pose)
        mask = list(handle.mask)
        touch = self._link_subtree(gripper.link)
        geoms = [g for g, *_ in self.bodies[goal.body].geometries]
        q_pre, q_grasp = self._grasp_configurations(group, gripper, pre, grasp, mask, q0, geoms, touch,
                                                    t0 + timeout / 2)
        left = max(1e-3, timeout - (_backend.monotonic() - t0))
        reach = self._plan_vectors(q0, q_pre, group, left)
        approach = self._timed([q_pre, q_grasp], group, 0.0)
        return GraspPlan(reach, approach, pre, grasp, gripper.link, np.array(gripper.pose), goal.body, handle,
                         mask)

    def _grasp_configurations(self, group: str, gripper: Gripper, pre: np.ndarray, grasp: np.ndarray,
                              mask: list, q0: np.ndarray, geoms: list, touch: list,
                              deadline: float) -> tuple[np.ndarray, np.ndarray]:
        """(pre-grasp, grasp) joint vectors: an IK solution of the pre-grasp pose, the grasp pose solved from
        it (the approach: a short straight joint segment, free except the body touching the gripper).  When
        one of them is out of reach or in collision, or the approach is blocked, other IK solutions are
        tried (descents from random seeds; the first from the start state) until ``deadline``."""
        allowed = [(geoms, touch)]
        failures = {"pre-grasp": 0, "grasp": 0, "approach": 0}
        tries = 0
        while tries == 0 or _backend.monotonic() < deadline:
            self._check_cancel()
            seed = q0 if tries == 0 else self._backend.random_configuration(self._rng, group, q0)
            tries += 1
            try:
                q_pre = self.solve_ik(group, gripper.link, pre, gripper.pose, mask, seed, timeout=0.0)
            except NoIKSolution:
                failures["pre-grasp"] += 1
                continue
            try:
                q_grasp = self.solve_ik(group, gripper.link, grasp, gripper.pose, mask, q_pre, timeout=0.0,
                                        allowed=allowed, position_tolerance=1e-4, angle_tolerance=1e-3)
            except NoIKSolution:
                failures["grasp"] += 1
                continue
            for g in geoms:
                self._backend.allow_collisions(g, touch, True)
            try:
                free = self._backend.segment_free(q_pre, q_grasp, self.check_step)
            finally:
                for g in geoms:
                    self._backend.allow_collisions(g, touch, False)
            if free:
                return q_pre, q_grasp
            failures["approach"] += 1
        tried = f"{tries} IK seeds: " + ", ".join(f"{n} {k} failed" for k, n in failures.items() if n)
        if failures["approach"]:
            raise NoPathFound(f"the straight approach from pre-grasp to grasp is blocked ({tried})")
        raise NoIKSolution(f"no collision-free IK solution of the pre-grasp and grasp poses of "
                           f"{gripper.link!r} ({tried})")

    # -- places ----------------------------------------------------------------------------------
    def plan_place(self, goal: PlaceGoal, start: Optional[Mapping[str, float]] = None,
                   timeout: float = 2.0, cancel: Optional[CancelToken] = None) -> PlacePlan:
        """Put a held body down at ``goal.pose`` (MoveIt's Place): reach the pre-place pose (``distance``
        back along the approach ``direction``), then approach the place pose along a straight joint segment.
        On that approach and at the place pose the body may touch its supports (``goal.support``, else the
        bodies it rested on when picked up) and sink into them by at most :data:`PLACE_PENETRATION`; the
        robot's links stay checked against them unless ``allow_gripper_support_collision`` (then the links
        the body may touch are allowed on the supports); everything else stays a collision.  A place pose
        that puts the body into another body, or deeper into a support, is refused (GoalInCollision -12,
        naming the body) before any IK; IK solutions as for a grasp (:meth:`_place_configurations`, half
        the time allowed); the reach is planned in the rest."""
        with self._cancellable(cancel):
            return self._plan_place(goal, start, timeout)

    def _plan_place(self, goal: PlaceGoal, start: Optional[Mapping[str, float]], timeout: float) -> PlacePlan:
        t0 = _backend.monotonic()
        entry = self._body(goal.body)
        if entry.attached is None:
            raise InvalidObject(f"body {goal.body!r} is not held: nothing to place")
        pose = np.asarray(goal.pose, dtype=float)
        direction = np.asarray(goal.direction, dtype=float)
        distance = float(goal.distance)
        inputs.check_pose(pose, "the place pose")
        norm = float(np.linalg.norm(direction)) if direction.shape == (3,) else math.nan
        if not (math.isfinite(norm) and norm > 1e-9 and math.isfinite(distance) and distance >= 0):
            raise InvalidGoal("the place approach needs a finite nonzero direction and a distance >= 0")
        supports = self._supports(goal.body, goal.support)
        self._check_placed(goal.body, pose, supports)
        group = self.group(goal.group) if goal.group else self._group_for_link(entry.attached)
        q0 = self._start(start)
        link_target = pose @ entry.robot.placement @ np.linalg.inv(entry.grip)
        pre = link_target.copy()
        pre[:3, 3] -= distance * direction / norm
        q_pre, q_place, depth = self._place_configurations(group, goal, pre, link_target, q0, supports,
                                                           t0 + timeout / 2)
        left = max(1e-3, timeout - (_backend.monotonic() - t0))
        reach = self._plan_vectors(q0, q_pre, group, left)
        approach = self._timed([q_pre, q_place], group, 0.0)
        return PlacePlan(reach, approach, pre, link_target, entry.attached, goal.body, pose, supports, depth)

    def _supports(self, body: str, support: str) -> list[str]:
        """The bodies a placed body may rest on: ``support`` (moveit_msgs/Place's support_surface_name),
        else those it rested on when picked up."""
        if not support:
            return [n for n in self.bodies[body].picked_from if n in self.bodies]
        if support == body or support not in self.bodies or self.bodies[support].attached is not None:
            raise InvalidObject(f"support surface {support!r} is not a world body (bodies: "
                                f"{sorted(n for n, e in self.bodies.items() if e.attached is None)})")
        return [support]

    def _body_geometries(self, name: str, root: Optional[np.ndarray] = None,
                         q: Optional[np.ndarray] = None) -> list[tuple[object, np.ndarray]]:
        """(shape, world pose) of a body's geometries, its root link at ``root`` (default: where it is, or
        where the robot at ``q`` carries it)."""
        root = self.body_pose(name, q) if root is None else root
        return [(shape, root @ local) for _g, _l, local, shape in self.bodies[name].geometries]

    def _depth(self, held: list, other: str) -> float:
        """How deep (m) shapes ``held`` overlap body ``other`` (<= 0: apart by that much or touching)."""
        d = math.inf
        for shape_a, pose_a in held:
            for shape_b, pose_b in self._body_geometries(other):
                d = min(d, self._backend.signed_distance(shape_a, pose_a, shape_b, pose_b))
        return -d

    def _check_placed(self, body: str, pose: np.ndarray, supports: list[str]) -> None:
        """The body at the place pose: at most PLACE_PENETRATION into its supports, into no other body."""
        held = self._body_geometries(body, pose @ self.bodies[body].robot.placement)
        for other, entry in self.bodies.items():
            if other in (body, OCCUPANCY) or entry.attached is not None:    # the map: as its hull here
                continue
            depth = self._depth(held, other)
            if other in supports and depth > PLACE_PENETRATION:
                raise GoalInCollision(f"the place pose sinks {body!r} {depth * 1e3:.3g} mm into its support "
                                      f"{other!r} (at most {PLACE_PENETRATION * 1e3:.3g} mm)")
            if other not in supports and depth > 0:
                raise GoalInCollision(f"the place pose puts {body!r} {depth * 1e3:.3g} mm into {other!r} "
                                      f"(supports it may touch: {supports})")

    def _held_contacts(self, body: str, q: np.ndarray, supports: list[str]) -> tuple[float, list[str]]:
        """The carried body at ``q``: how deep (m) it sinks into its supports at most (0 when apart), and the
        other world bodies it overlaps."""
        held = self._body_geometries(body, q=q)
        sink, hit = 0.0, []
        for other, entry in self.bodies.items():
            if other in (body, OCCUPANCY) or entry.attached is not None:    # the map: as its hull here
                continue
            depth = self._depth(held, other)
            if other in supports:
                sink = max(sink, depth)
            elif depth > 0:
                hit.append(other)
        return sink, hit

    def _support_contacts(self, body: str, q: np.ndarray, supports: list[str]) -> list[str]:
        """Robot links, but those the carried body may touch (the gripper's), overlapping its supports."""
        skip = self.bodies[body].touch
        out = []
        for other in supports:
            for shape, pose in self._body_geometries(other):
                out += [f"{link} / {other}" for link in
                        self._backend.link_overlaps(q, skip, shape, self._placement_inv @ pose)]
        return out

    def _set_supports_away(self, supports: list[str], away: bool) -> None:
        """Move the supports' geometry far from everything (``away``) or back (as :meth:`_set_held_away`)."""
        far = np.eye(4)
        far[:3, 3] = HELD_AWAY
        for other in supports:
            entry = self.bodies[other]
            for gname, _l, local, _s in entry.geometries:
                pose = self._placement_inv @ entry.pose @ local
                self._backend.move_geometry(gname, far @ pose if away else pose)

    def _set_held_away(self, body: str, away: bool) -> None:
        """Move the carried body's geometry far from everything (``away``) or back under its link: while
        away, the collision scene checks the robot alone and the body is checked here (coal).  Moving
        geometry keeps the scene and its pairs (a removal would have it built again: backend.Backend)."""
        entry = self.bodies[body]
        far = np.eye(4)
        far[:3, 3] = HELD_AWAY
        for gname, _l, local, _s in entry.geometries:
            self._backend.move_geometry(gname, (far if away else np.eye(4)) @ entry.grip @ local)

    def _place_configurations(self, group: str, goal: PlaceGoal, pre: np.ndarray, target: np.ndarray,
                              q0: np.ndarray, supports: list[str],
                              deadline: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(pre-place, place, deepest sinking on the approach): an IK solution of the pre-place pose (the
        body checked as always), the place pose solved from it and the approach segment between them: the
        robot collision-free (the scene, the body moved away), the body (coal, at every ``check_step``)
        sinking at most PLACE_PENETRATION into its supports and overlapping no other body.  Other IK
        solutions are tried until ``deadline`` (as :meth:`_grasp_configurations`)."""
        link = self.bodies[goal.body].attached
        gripper = bool(goal.allow_gripper_support_collision) and bool(supports)
        failures = {"pre-place": 0, "place": 0, "approach": 0, "sinking": 0}
        blockers: set = set()
        deepest = 0.0
        tries = 0
        while tries == 0 or _backend.monotonic() < deadline:
            self._check_cancel()
            seed = q0 if tries == 0 else self._backend.random_configuration(self._rng, group, q0)
            tries += 1
            try:
                q_pre = self.solve_ik(group, link, pre, seed=seed, timeout=0.0)
            except NoIKSolution:
                failures["pre-place"] += 1
                continue
            self._set_held_away(goal.body, True)
            if gripper:
                self._set_supports_away(supports, True)
            try:
                try:
                    q_place = self.solve_ik(group, link, target, seed=q_pre, timeout=0.0,
                                            position_tolerance=1e-4, angle_tolerance=1e-3)
                except NoIKSolution:
                    failures["place"] += 1
                    continue
                free = self._backend.segment_free(q_pre, q_place, self.check_step)
            finally:
                self._set_held_away(goal.body, False)
                if gripper:
                    self._set_supports_away(supports, False)
            if not free:
                failures["approach"] += 1
                continue
            largest = float(np.max(np.abs(q_place - q_pre)))
            steps = max(1, int(np.ceil(largest / self.check_step)))
            depth, hit = 0.0, []
            for s in np.linspace(0.0, 1.0, steps + 1):
                q = q_pre + s * (q_place - q_pre)
                sink, hit = self._held_contacts(goal.body, q, supports)
                if gripper and not hit:
                    hit = self._support_contacts(goal.body, q, supports)
                depth = max(depth, sink)
                if hit or depth > PLACE_PENETRATION:
                    break
            if hit:
                failures["approach"] += 1
                blockers.update(hit)
                continue
            if depth > PLACE_PENETRATION:
                failures["sinking"] += 1
                deepest = max(deepest, depth)
                continue
            return q_pre, q_place, depth
        tried = f"{tries} IK seeds: " + ", ".join(f"{n} {k} failed" for k, n in failures.items() if n)
        if blockers:
            tried += f"; in the way: {sorted(blockers)}"
        if failures["sinking"]:
            tried += (f"; the approach sank {goal.body!r} up to {deepest * 1e3:.3g} mm into "
                      f"{supports} (at most {PLACE_PENETRATION * 1e3:.3g} mm)")
        if failures["approach"] or failures["sinking"]:
            raise NoPathFound(f"the straight approach from pre-place to place is blocked ({tried})")
        raise NoIKSolution(f"no collision-free IK solution of the pre-place and place poses of {link!r} "
                           f"({tried})")

    # -- execution feedback ------------------------------------------------------------------------
    def path_valid(self, trajectory: Trajectory, from_time: float = 0.0,
                   base: Optional[np.ndarray] = None) -> PathCheck:
        """Whether the trajectory from ``from_time`` on stays collision-free in the current world (checked
        between samples every ``check_step``); joints it does not name stay as in ``base`` (default: the
        current state)."""
        unknown = sorted(set(trajectory.joint_names) - set(self._index))
        if unknown:
            raise InvalidRobotState(f"trajectory names joints the planner does not drive: {unknown}")
        idx = np.array([self._index[n] for n in trajectory.joint_names], dtype=int)
        q_base = np.array(self.state if base is None else base, dtype=float)
        i0 = trajectory.index_at(from_time)
        previous = None
        for i in range(i0, len(trajectory.times)):
            q = q_base.copy()
            q[idx] = trajectory.positions[i]
            if previous is None:
                if self._backend.in_collision(q):
                    return PathCheck(False, float(trajectory.times[i]), self._colliding_bodies(q))
            elif not self._backend.segment_free(previous, q, self.check_step):
                return PathCheck(False, float(trajectory.times[i]), self._colliding_bodies(q))
            previous = q
        return PathCheck(True)

    def _colliding_bodies(self, q: np.ndarray) -> list[str]:
        """World bodies whose removal clears a collision at ``q`` (a few checks per body)."""
        b = self._backend
        out = []
        for name, entry in self.bodies.items():
            if entry.attached is not None:
                continue
            for gname, *_ in entry.geometries:
                b.allow_collisions(gname, b.link_names, True)
            hit = not b.in_collision(q)
            for gname, *_ in entry.geometries:
                b.allow_collisions(gname, b.link_names, False)
            if hit:
                out.append(name)
        return out

    def _note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)
