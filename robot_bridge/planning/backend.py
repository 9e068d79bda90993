"""The one module that imports the planning libraries (roboplan on pinocchio + coal).

Everything else in :mod:`robot_bridge.planning` talks to :class:`Backend`: a collision scene built from a URDF
string (what the description node publishes), joint groups, geometry of world bodies added, moved and removed
by name, collision checks, RRT-Connect, path shortcutting, TOPP-RA, forward kinematics and frame Jacobians.
Another library would replace this file only.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from .errors import INSTALL_HINT, InvalidGroup, PlanningError, PlanningUnavailable

try:                                    # noqa: SIM105  (one clear error below, not at every use)
    import coal
    import pinocchio as pin
    import roboplan.core as rc
    import roboplan.rrt as rrt
    import roboplan.toppra as rtoppra
    _IMPORT_ERROR: Optional[BaseException] = None
except ImportError as exc:              # pragma: no cover - exercised by the skip path of the tests
    _IMPORT_ERROR = exc


def require() -> None:
    """Raise :class:`PlanningUnavailable` (one line naming what to install) without the libraries."""
    if _IMPORT_ERROR is not None:
        raise PlanningUnavailable(f"{INSTALL_HINT}; import failed: {_IMPORT_ERROR}") from _IMPORT_ERROR


ALWAYS_SAMPLES = 200          # random configurations to find link pairs in collision everywhere
ALWAYS_FRACTION = 0.95        # ... in at least this share of them (MoveIt Setup Assistant's "Always")
_ACTUATED = "robot_bridge:actuated"    # roboplan group of every actuated joint, in scene order
_MESH_DIR = Path(tempfile.gettempdir()) / f"robot_bridge_planning_meshes_{os.getuid()}"


TRANSIENT = "robot_bridge:transient:"   # a mesh URI so marked: its STL is removed once the scene read it


def _stl_file(vertices: np.ndarray, triangles: np.ndarray, transient: bool = False) -> str:
    """A binary STL of these triangles in a per-user cache, named by content (written once); ``transient``:
    a file of this process's own, for the caller to remove after use (maps that change every second would
    fill the cache)."""
    from ..formats.meshes import stl_bytes

    data = stl_bytes(vertices, triangles)
    _MESH_DIR.mkdir(mode=0o700, exist_ok=True)
    own = f".{os.getpid()}.transient" if transient else ""
    path = _MESH_DIR / (hashlib.sha256(data).hexdigest()[:24] + own + ".stl")
    if not path.is_file():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return str(path)


def octree(centres: np.ndarray, resolution: float):
    """A coal ``OcTree`` of cells of ``resolution`` at these centres (an occupancy map's occupied cells)."""
    require()
    return coal.makeOctree(np.ascontiguousarray(centres, dtype=float).reshape(-1, 3), float(resolution))


class Backend:
    """A roboplan Scene over one URDF; ``q`` vectors are the scene's (active, non-mimic joints, in
    :attr:`joint_names` order)."""

    def __init__(self, urdf: str, srdf: str = "", package_paths: Sequence[str] = (),
                 disabled_pairs: Iterable[tuple[str, str]] = (), limits_yaml: Optional[str] = None,
                 seed: int = 0):
        require()
        self.urdf = urdf
        self.package_paths = [str(p) for p in package_paths]
        self._srdf = srdf
        self._limits = None
        if limits_yaml:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(limits_yaml)
            try:
                self._limits = rc.loadJointLimitsConfig(f.name)
            finally:
                os.unlink(f.name)
        self._scene = self._robot_scene()
        self.joint_names: list[str] = list(self._scene.getJointNames())
        continuous = [n for n in self.joint_names
                      if self._scene.getJointInfo(n).type == rc.JointType.CONTINUOUS]
        if continuous:      # the scene's configuration is not one value per joint as the planner's vectors
            raise PlanningError(f"continuous joints {continuous}: roboplan holds (cos, sin) for each, the "
                                "planner one value per joint; not supported yet")
        # roboplan 0.7's velocity / acceleration / jerk limit getters size their vectors by the group's
        # non-mimic DOFs but write one entry per joint name, mimic joints included: a group naming mimic
        # joints (the default group of any robot with <mimic>) writes past two heap blocks (issue 43).
        # Every roboplan group used here names actuated joints only (see _roboplan_group).
        self.mimic_joints = {n for n in self._scene.getJointNamesWithMimics()
                             if self._scene.getJointInfo(n).mimic_info is not None}
        self._stale = False           # the scene must be built again from the records before its next use
        self._aliases: dict[str, list[str]] = {_ACTUATED: list(self.joint_names)}   # roboplan-only groups
        self._scene.addGroup(_ACTUATED, self.joint_names)
        self._roboplan_groups: dict[str, str] = {}    # group -> the mimic-free roboplan group used for it
        actuated = self._roboplan_group(_ACTUATED)
        self.lower, self.upper = (np.asarray(v, dtype=float) for v in self._scene.getPositionLimitVectors())
        self.velocity = np.asarray(self._scene.getVelocityLimitVectors(actuated)[1], dtype=float)
        self.acceleration = np.asarray(self._scene.getAccelerationLimitVectors(actuated)[1], dtype=float)
        self.link_names = self._link_names()
        links = set(self.link_names)
        self._disabled = [tuple(p) for p in disabled_pairs if p[0] in links and p[1] in links]
        if self._disabled:
            self._scene.setCollisions(self._disabled, False)
        self.always_pairs = self._always_colliding(seed, {tuple(sorted(p)) for p in self._disabled})
        if self.always_pairs:
            self._scene.setCollisions(self.always_pairs, False)
        self.groups: dict[str, list[str]] = {}
        # added geometry -> (parent frame, shape, pose in the parent's joint frame), in the order added
        self._geometry: dict[str, tuple[str, object, np.ndarray]] = {}
        self._pairs: dict[tuple[str, str], bool] = {}           # pair with an added geometry -> allowed
        self.rebuilds = 0
        self._coal_shapes: dict[int, tuple[object, object]] = {}  # id(shape) -> (shape, coal shape)
        self.collision_checks = 0
        self._seed = seed

    # -- the roboplan scene ------------------------------------------------------------------------
    # roboplan's removeGeometry leaves its collision pair bookkeeping inconsistent once pairs of the scene
    # were allowed or checked again ("pair_id < geom_model.collisionPairs.size()" or "internal error within
    # coal" on a later check, every check after it failing).  So no geometry is ever removed from a scene:
    # a removal, or a geometry moving to another frame (attach, detach), marks the scene stale and the next
    # use builds a new one (a few ms) from the records: the robot, its disabled pairs, the groups, the added
    # geometry and the pairs allowed or checked again since.
    def _robot_scene(self):
        scene = rc.Scene("robot_bridge", rc.loadUrdfSceneDescriptionFromXml(self.urdf, self.package_paths))
        if self._srdf:
            scene.importSrdf(self._srdf)
        if self._limits is not None:
            scene.importJointLimitsFromConfig(self._limits)
        return scene

    @property
    def scene(self):
        """The roboplan Scene, built again from the records first when a removal made it stale."""
        if self._stale:
            self._build()
        return self._scene

    def _build(self) -> None:
        scene = self._robot_scene()
        if self._disabled:
            scene.setCollisions(self._disabled, False)
        if self.always_pairs:
            scene.setCollisions(self.always_pairs, False)
        for name, joints in [*self.groups.items(), *self._aliases.items()]:
            scene.addGroup(name, list(joints))
        for name, (parent, shape, pose) in self._geometry.items():
            self._add_to(scene, name, parent, shape, pose)
        for allow in (True, False):
            pairs = [p for p, a in self._pairs.items() if a == allow]
            if pairs:
                scene.setCollisions(pairs, not allow)
        self._scene, self._stale = scene, False
        self.rebuilds += 1

    def rebuild(self) -> None:
        """Build the scene again from the records now (after the library failed a query)."""
        self._stale = True
        self._build()

    # -- model -----------------------------------------------------------------------------------
    def _link_names(self) -> list[str]:
        model = pin.buildModelFromXML(self.urdf)
        # roboplan places a shape added on a link relative to that link's joint frame
        self._in_joint = {f.name: np.array(f.placement.homogeneous) for f in model.frames}
        self._link_geometries = {}
        geom = pin.buildGeomFromUrdfString(model, self.urdf, pin.GeometryType.COLLISION,
                                           package_dirs=self.package_paths)
        self._link_shapes = []          # (frame, frame -> geometry, coal geometry) of the robot's links
        for o in geom.geometryObjects:
            frame = model.frames[o.parentFrame]
            self._link_geometries.setdefault(frame.name, []).append(o.name)
            self._link_shapes.append((frame.name, np.linalg.inv(np.array(frame.placement.homogeneous))
                                      @ np.array(o.placement.homogeneous), o.geometry))
        return [f.name for f in model.frames if f.type == pin.FrameType.BODY]

    def _always_colliding(self, seed: int, disabled: set) -> list[tuple[str, str]]:
        """Link pairs (not disabled yet) in collision in nearly every configuration, e.g. the cylinders of
        two modules meeting in the ball of the joint between them: such pairs would forbid every state."""
        model = pin.buildModelFromXML(self.urdf)
        geom = pin.buildGeomFromUrdfString(model, self.urdf, pin.GeometryType.COLLISION,
                                           package_dirs=self.package_paths)
        if geom.ngeoms < 2:
            return []
        frames = [model.frames[o.parentFrame].name for o in geom.geometryObjects]
        for i in range(geom.ngeoms):
            for k in range(i + 1, geom.ngeoms):
                if frames[i] != frames[k] and tuple(sorted((frames[i], frames[k]))) not in disabled:
                    geom.addCollisionPair(pin.CollisionPair(i, k))
        if not len(geom.collisionPairs):
            return []
        data, gdata = model.createData(), pin.GeometryData(geom)
        rng = np.random.default_rng(seed)
        lo = np.where(np.isfinite(model.lowerPositionLimit), model.lowerPositionLimit, -np.pi)
        hi = np.where(np.isfinite(model.upperPositionLimit), model.upperPositionLimit, np.pi)
        counts = np.zeros(len(geom.collisionPairs))
        for _ in range(ALWAYS_SAMPLES):
            pin.computeCollisions(model, data, geom, gdata, rng.uniform(lo, hi), False)
            counts += [r.isCollision() for r in gdata.collisionResults]
        candidates = set()
        for k, pair in enumerate(geom.collisionPairs):
            if counts[k] >= ALWAYS_FRACTION * ALWAYS_SAMPLES:
                a, b = frames[pair.first], frames[pair.second]
                if a != b:
                    candidates.add(tuple(sorted((a, b))))
        return sorted(candidates)

    def define_group(self, name: str, joints: Sequence[str]) -> None:
        """A group of these joints (mimic joints left out: they follow their leaders)."""
        if name not in self.groups:
            joints = [j for j in joints if j not in self.mimic_joints]
            if not self._stale:
                self._scene.addGroup(name, joints)
            self.groups[name] = joints

    def has_group(self, name: str) -> bool:
        try:
            self.scene.getJointGroupInfo(name)
        except Exception:               # roboplan raises a plain RuntimeError for an unknown group
            return False
        return True

    def _roboplan_group(self, name: str) -> str:
        """The roboplan group to hand roboplan for group ``name``: itself when it names no mimic joint,
        else a group of its actuated joints (an SRDF group may list mimic joints).  Its joint names, position
        and velocity indices are checked to agree one to one before any of them reaches roboplan."""
        used = self._roboplan_groups.get(name)
        if used is None:
            scene = self.scene
            joints = list(scene.getJointGroupInfo(name).joint_names)
            actuated = [j for j in joints if j not in self.mimic_joints]
            used = name
            if len(actuated) != len(joints):
                used = f"{_ACTUATED}:{name}"
                scene.addGroup(used, actuated)
                self._aliases[used] = actuated          # a scene built again adds it too
            info = scene.getJointGroupInfo(used)
            n, nq, nv = len(info.joint_names), len(info.q_indices), len(info.v_indices)
            if not n == nq == nv or any(not 0 <= i < len(self.joint_names) for i in info.q_indices):
                raise InvalidGroup(f"group {name!r}: roboplan reports {n} joints, {nq} position and {nv} "
                                   f"velocity indices (of {len(self.joint_names)}); not used")
            self._roboplan_groups[name] = used
        return used

    def group_joints(self, name: str) -> list[str]:
        return list(self.scene.getJointGroupInfo(self._roboplan_group(name)).joint_names)

    def group_indices(self, name: str) -> np.ndarray:
        return np.asarray(self.scene.getJointGroupInfo(self._roboplan_group(name)).q_indices, dtype=int)

    # -- world geometry --------------------------------------------------------------------------
    def add_geometry(self, name: str, parent: str, shape, pose: np.ndarray) -> bool:
        """Add one collision shape (robot_bridge Box / Sphere / Cylinder / Mesh) at ``pose`` in ``parent``
        ("universe" for the world); False when its kind is not supported or its mesh cannot be read.  A name
        in use is replaced (its pairs as for a new geometry)."""
        from ..model import Box, Cylinder, Mesh, Sphere

        if not isinstance(shape, (Box, Sphere, Cylinder, Mesh)):
            return False
        if isinstance(shape, Mesh):
            from ..formats.meshes import mesh_arrays

            vertices, triangles = mesh_arrays(shape)     # DescriptionError when unreadable (reported)
            if not len(triangles):
                return False
        if name in self._geometry:
            self.remove_geometry(name)
        if parent != "universe":
            pose = self._in_joint[parent] @ pose
        pose = np.asfortranarray(pose, dtype=float)
        if not self._stale:
            self._add_to(self._scene, name, parent, shape, pose)
        self._geometry[name] = (parent, shape, pose)
        return True

    def _add_to(self, scene, name: str, parent: str, shape, pose: np.ndarray) -> None:
        from ..model import Box, Cylinder, Sphere

        colour = np.array([0.5, 0.5, 0.5, 1.0])
        if isinstance(shape, Box):
            size = 2.0 * np.asarray(shape.half_extents, dtype=float)
            scene.addBoxGeometry(name, parent, rc.Box(*map(float, size)), pose, colour)
        elif isinstance(shape, Sphere):
            scene.addSphereGeometry(name, parent, rc.Sphere(float(shape.radius)), pose, colour)
        elif isinstance(shape, Cylinder):
            scene.addCylinderGeometry(name, parent, rc.Cylinder(float(shape.radius), float(shape.length)),
                                      pose, colour)
        else:
            from ..formats.meshes import mesh_arrays

            vertices, triangles = mesh_arrays(shape)
            transient = shape.uri.startswith(TRANSIENT)
            path = _stl_file(vertices, triangles, transient)
            try:
                scene.addMeshGeometry(name, parent, rc.Mesh(path, np.ones(3)), pose, colour)
            finally:
                if transient:                       # read: a rebuild writes it again from the record
                    Path(path).unlink(missing_ok=True)

    def move_geometry(self, name: str, pose: np.ndarray, parent: Optional[str] = None) -> None:
        """Place a geometry at ``pose`` in ``parent`` (default: its parent); a new parent makes it a new
        geometry of that frame (its pairs as for a shape added there)."""
        old, shape, _pose = self._geometry[name]
        if parent is not None and parent != old:
            self.add_geometry(name, parent, shape, pose)
            return
        if old != "universe":
            pose = self._in_joint[old] @ pose
        pose = np.asfortranarray(pose, dtype=float)
        self._geometry[name] = (old, shape, pose)
        if not self._stale:
            self._scene.updateGeometryPlacement(name, old, pose)

    def remove_geometry(self, name: str) -> None:
        if self._geometry.pop(name, None) is not None:
            self._pairs = {p: a for p, a in self._pairs.items() if name not in p}
            self._stale = True

    def geometry_parent(self, name: str) -> str:
        return self._geometry[name][0]

    def allow_collisions(self, geometry: str, links: Iterable[str], allow: bool = True) -> None:
        """Contacts of a geometry with these links (not its own parent's: never checked)."""
        parent = self._geometry[geometry][0]
        self.set_pairs([(geometry, link) for link in links if link != parent], allow)

    def set_pairs(self, pairs: Sequence[tuple[str, str]], allow: bool) -> None:
        """Allow (True) or check again (False) contacts between these geometry / link pairs."""
        if pairs:
            for a, b in pairs:
                self._pairs[(a, b) if a <= b else (b, a)] = bool(allow)
            if not self._stale:
                self._scene.setCollisions(list(pairs), not allow)

    # -- queries ---------------------------------------------------------------------------------
    def signed_distance(self, shape_a, pose_a: np.ndarray, shape_b, pose_b: np.ndarray) -> float:
        """Distance between two robot_bridge shapes at these poses (same frame); negative: how deep they
        overlap (coal's GJK / EPA on convex shapes; a mesh counts as its convex hull)."""
        def transform(pose):
            pose = np.asarray(pose, dtype=float)
            return coal.Transform3s(pose[:3, :3].copy(), pose[:3, 3].copy())

        result = coal.DistanceResult()
        coal.distance(self._coal_shape(shape_a), transform(pose_a), self._coal_shape(shape_b),
                      transform(pose_b), coal.DistanceRequest(), result)
        return float(result.min_distance)

    def link_overlaps(self, q: np.ndarray, skip: Iterable[str], shape, pose: np.ndarray) -> dict[str, float]:
        """Links (but ``skip``) whose collision geometry at ``q`` overlaps ``shape`` at ``pose`` (the scene's
        frame): link -> how deep (m)."""
        skip = set(skip)
        other = self._coal_shape(shape)
        pose = np.asarray(pose, dtype=float)
        there = coal.Transform3s(pose[:3, :3].copy(), pose[:3, 3].copy())
        out: dict[str, float] = {}
        frames: dict[str, np.ndarray] = {}
        for frame, local, geometry in self._link_shapes:
            if frame in skip:
                continue
            if frame not in frames:
                frames[frame] = self.frame_pose(q, frame)
            at = frames[frame] @ local
            result = coal.DistanceResult()
            coal.distance(geometry, coal.Transform3s(at[:3, :3].copy(), at[:3, 3].copy()), other, there,
                          coal.DistanceRequest(), result)
            if result.min_distance < 0:
                out[frame] = max(out.get(frame, 0.0), -float(result.min_distance))
        return out

    def _coal_shape(self, shape):
        from ..model import Box, Cylinder, Mesh, Sphere

        cache = self._coal_shapes
        key = id(shape)
        if key in cache and cache[key][0] is shape:      # the shape itself kept: its id is not reused
            return cache[key][1]
        if isinstance(shape, Box):
            out = coal.Box(*map(float, 2.0 * np.asarray(shape.half_extents, dtype=float)))
        elif isinstance(shape, Sphere):
            out = coal.Sphere(float(shape.radius))
        elif isinstance(shape, Cylinder):
            out = coal.Cylinder(float(shape.radius), float(shape.length))
        elif isinstance(shape, Mesh):
            from ..formats.meshes import mesh_arrays

            vertices, triangles = mesh_arrays(shape)
            model = coal.BVHModelOBBRSS()
            model.beginModel(len(triangles), len(vertices))
            model.addVertices(np.asarray(vertices, dtype=float))
            model.addTriangles(np.asarray(triangles, dtype=int))
            model.endModel()
            model.buildConvexHull(True, "Qt")
            out = model.convex
        else:
            raise TypeError(f"no distance for a {type(shape).__name__}")
        cache[key] = (shape, out)
        return out

    def _q(self, q) -> np.ndarray:
        """``q`` as roboplan reads it (contiguous float64, one value per position index), checked first:
        Eigen in roboplan / pinocchio reads a shorter vector past its end."""
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.shape != self.lower.shape:
            raise ValueError(f"joint vector of shape {q.shape}, the scene has {self.lower.size} positions")
        if not np.all(np.isfinite(q)):
            raise ValueError("joint vector with a non-finite value")
        return q

    def in_collision(self, q: np.ndarray) -> bool:
        self.collision_checks += 1
        return bool(self.scene.hasCollisions(self._q(q)))

    def within_limits(self, q: np.ndarray, tol: float = 1e-9) -> bool:
        q = np.asarray(q, dtype=float)
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))

    def segment_free(self, qa: np.ndarray, qb: np.ndarray, step: float) -> bool:
        """No collision on the straight segment, checked (by bisection) so that no joint moves more than
        ``step`` between two checks."""
        qa, qb = self._q(qa), self._q(qb)
        d = qb - qa
        largest = float(np.max(np.abs(d))) if d.size else 0.0
        if largest == 0.0:
            return not self.in_collision(qa)
        norm_step = float(step) * float(np.linalg.norm(d)) / largest      # roboplan steps in the norm
        self.collision_checks += int(np.ceil(largest / step)) + 1
        return not rc.hasCollisionsAlongPath(self.scene, qa, qb, norm_step, True, True)

    def frame_pose(self, q: np.ndarray, frame: str) -> np.ndarray:
        return np.array(self.scene.forwardKinematics(self._q(q), frame))

    def frame_jacobian(self, q: np.ndarray, frame: str) -> np.ndarray:
        """6 x nq Jacobian of ``frame`` in its own (local) frame: rows linear then angular."""
        return np.array(self.scene.computeFrameJacobian(self._q(q), frame, True))

    def has_frame(self, frame: str) -> bool:
        try:
            self.scene.getFrameId(frame)
        except Exception:
            return False
        return True

    # -- planning --------------------------------------------------------------------------------
    def plan(self, q_start: np.ndarray, q_goal: np.ndarray, group: str, timeout: float,
             step: float = 0.05, check_step: float = 0.01) -> Optional[list[np.ndarray]]:
        """RRT-Connect from ``q_start`` to ``q_goal`` (full vectors; joints outside ``group`` stay as in
        ``q_start``; edges checked every ``step``), then pruned and verified every ``check_step`` (no joint
        moves more between checks): full-vector waypoints; None when no path was found in ``timeout`` s;
        [] when the path found collides between the planner's checks (plan again with a smaller step)."""
        idx = self.group_indices(group)
        names = self.group_joints(group)
        q_start, q_goal = self._q(q_start), self._q(q_goal)
        self.scene.setJointPositions(q_start)
        options = rrt.RRTOptions(group_name=self._roboplan_group(group), max_nodes=100000,
                                 collision_check_step_size=step, collision_check_use_bisection=True,
                                 max_planning_time=float(timeout), rrt_connect=True)
        planner = rrt.RRT(self.scene, options)
        self._seed += 1
        planner.setRngSeed(self._seed)
        start = rc.JointConfiguration(names, q_start[idx])
        goal = rc.JointConfiguration(names, q_goal[idx])
        try:
            path = planner.plan(start, goal)
        except RuntimeError:
            return None
        if path is None or not path.positions:
            return None
        waypoints = []
        for p in path.positions:
            q = np.array(q_start, dtype=float)
            q[idx] = p
            waypoints.append(q)
        return self.prune(waypoints, check_step)

    def prune(self, waypoints: list[np.ndarray], check_step: float) -> list[np.ndarray]:
        """Greedy shortcut that is also the fine check: from each kept waypoint, the farthest later one
        reachable by a free straight segment (checked every ``check_step``).  [] when some edge of the
        input itself collides."""
        out = [waypoints[0]]
        i, n = 0, len(waypoints)
        while i < n - 1:
            for j in range(n - 1, i, -1):
                if self.segment_free(waypoints[i], waypoints[j], check_step):
                    break
            else:
                return []
            out.append(waypoints[j])
            i = j
        return out

    def parameterize(self, waypoints: Sequence[np.ndarray], group: str, dt: float,
                     velocity_scale: float = 1.0, acceleration_scale: float = 1.0):
        """TOPP-RA through the waypoints (straight segments, at rest at each corner: the path checked is
        the path driven): (times, positions, velocities, accelerations) of the group's joints."""
        idx = self.group_indices(group)
        path = rc.JointPath()
        path.joint_names = self.group_joints(group)
        path.positions = [self._q(w)[idx] for w in waypoints]
        options = rtoppra.TOPPRAOptions(dt=float(dt), mode=rtoppra.SplineFittingMode.Hermite,
                                        velocity_scale=float(velocity_scale),
                                        acceleration_scale=float(acceleration_scale))
        parameterizer = rtoppra.PathParameterizerTOPPRA(self.scene, self._roboplan_group(group))
        traj = parameterizer.generate(path, options)
        return (np.asarray(traj.times, dtype=float), np.asarray(traj.positions, dtype=float),
                np.asarray(traj.velocities, dtype=float), np.asarray(traj.accelerations, dtype=float))

    def reseed(self, seed: int) -> None:
        """The next :meth:`plan` searches with RNG seed ``seed`` (each plan after it: the next integer)."""
        self._seed = int(seed) - 1

    def random_configuration(self, rng: np.random.Generator, group: str, base: np.ndarray) -> np.ndarray:
        idx = self.group_indices(group)
        q = np.array(base, dtype=float)
        lo, hi = self.lower[idx], self.upper[idx]
        lo = np.where(np.isfinite(lo), lo, -np.pi)
        hi = np.where(np.isfinite(hi), hi, np.pi)
        q[idx] = rng.uniform(lo, hi)
        return q


def monotonic() -> float:
    return time.perf_counter()
