"""Sensor points -> an occupancy map on OctoMap (issue 44; no rclpy).

:class:`OccupancyMap` integrates depth images (32FC1 metres, 16UC1 millimetres, with the intrinsics K),
laser scans and point clouds, each with the sensor's pose in the world frame at its stamp, into an
``octomap.OcTree`` (the real OctoMap through ``octomap-python``; OctoMap's log-odds update, hit 0.7 / miss
0.4 by default, clamped).  Two ways of clearing (``OccupancyConfig.clearing``):

- ``"projective"`` (default; MoveIt's depth_image_octomap_updater): a depth image is sampled where a voxel
  covers several pixels (the stride per pixel from its depth: ``res * f / z``), the end points' distinct cells
  are marked occupied in one batch (``updateNodes``; a cell already at OctoMap's upper clamp is left out:
  the same tree), and the map's occupied cells inside the frustum are projected into the image: a cell whose
  pixel measured farther than the cell by more than one voxel is seen through and gets a miss.  Laser scans
  the same way (a cell within half a voxel of the scan plane against its nearest beam).  Free space is not
  stored: cells never occupied stay unknown (a collision checker only reads occupied cells).  Point clouds
  (no image to project into) are ray traced.
- ``"rays"``: every ray clears the cells it crosses in OctoMap (``insertPointCloud``, one ray per end cell),
  free space known; ~50x the CPU of the projective way on a VGA frame (docs/benchmarks.md).

A return beyond ``max_range`` only clears up to ``max_range``; no return (NaN, 0) does nothing.  The map keeps
a mirror of the log-odds OctoMap holds for every cell it marked (numpy, float32 as OctoMap adds them), to
find the occupied cells to project without walking the tree; a ray-traced insertion reads it back.

Memory is bounded by the workspace box: OctoMap's bounding-box limit keeps every update inside it (end
points outside are dropped and counted, their rays still clear the part inside).  End points within the
robot's own padded collision geometry (:class:`SelfFilter`, MoveIt's self filter) or inside given world
bodies are dropped (neither marked nor cleared along).  ``decay`` (s): a cell last marked longer ago than
that, by the stamps given, drops out of the map (unknown again).

:func:`to_message_fields` gives ``octomap_msgs/Octomap``'s fields as ``octomap_msgs::binaryMapToMsg`` fills
them (``data``: ``writeBinaryData``, the binary file without its header); :func:`decode_binary` reads them
back with OctoMap; :meth:`OccupancyMap.collision_object` is a coal ``OcTree`` of the occupied cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np

try:
    import octomap
    _IMPORT_ERROR: Optional[BaseException] = None
except ImportError as exc:              # pragma: no cover - the skip path of the tests
    octomap = None
    _IMPORT_ERROR = exc

INSTALL_HINT = "the occupancy map needs octomap-python: pip install octomap-python"
TREE_DEPTH = 16                         # OctoMap's: keys are floor(x / resolution) + 2**15
KEY_OFFSET = 1 << (TREE_DEPTH - 1)
MIN_RESOLUTION, MAX_RESOLUTION = 0.005, 1.0
MAX_WORKSPACE_CELLS = 1 << 33           # workspace volume / resolution**3 (a bound on the map's leaves)
MAX_IMAGE_SIDE = 4096                   # pixels per side of a depth image
MAX_POINTS = 2_000_000                  # points of one cloud
MAX_SCAN_RAYS = 100_000
MAX_RANGE = 100.0                       # m
MAX_CELLS = 4_000_000                   # occupied cells listed (the collision object, the checks)
BINARY_ID = "OcTree"
CLEARING = ("projective", "rays")
MAX_DEPTH_STRIDE = 8                    # pixels skipped at most where a voxel covers many


class OccupancyUnavailable(ImportError):
    """octomap-python is not installed."""


class OccupancyError(ValueError):
    """An input the map refuses: ``what`` names it (a size over a bound, a non-finite pose, an encoding)."""

    def __init__(self, what: str, message: str):
        self.what = what
        super().__init__(f"{what}: {message}")


def require() -> None:
    if _IMPORT_ERROR is not None:
        raise OccupancyUnavailable(f"{INSTALL_HINT}; import failed: {_IMPORT_ERROR}") from _IMPORT_ERROR


def _all_columns(mask: np.ndarray) -> np.ndarray:
    """``mask.all(axis=1)`` of an (N, 3) mask, column by column (numpy reduces a short row slowly)."""
    return mask[:, 0] & mask[:, 1] & mask[:, 2]


def _norms(v: np.ndarray) -> np.ndarray:
    """``np.linalg.norm(v, axis=1)`` of (N, 3) rows, the same sum in the same order (x^2 + y^2) + z^2,
    column by column (~5x faster)."""
    x, y, z = v[:, 0], v[:, 1], v[:, 2]
    return np.sqrt(x * x + y * y + z * z)


def _unique(packed: np.ndarray) -> np.ndarray:
    """``np.unique`` of 1-D int64 keys (sorted, distinct) by a sort and a neighbour test: numpy 2's
    np.unique hashes first, ~3x slower on the ~15,000 end cells of a VGA frame."""
    if not len(packed):
        return packed
    keys = np.sort(packed)
    first = np.empty(len(keys), bool)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]


def _pose(what: str, pose) -> np.ndarray:
    pose = np.asarray(pose, dtype=float)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise OccupancyError(what, "pose must be a finite 4x4 matrix")
    r = pose[:3, :3]
    if not np.allclose(r @ r.T, np.eye(3), atol=1e-6) or not np.allclose(pose[3], [0, 0, 0, 1]):
        raise OccupancyError(what, "pose is not a rigid transform")
    return pose


def _positive(what: str, value: float, upper: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and 0.0 < value <= upper):
        raise OccupancyError(what, f"must be in (0, {upper}], got {value}")
    return value


@dataclass(frozen=True)
class OccupancyConfig:
    resolution: float = 0.02                                     # m, the edge of a cell
    workspace_min: tuple[float, float, float] = (-2.0, -2.0, -0.5)
    workspace_max: tuple[float, float, float] = (2.0, 2.0, 2.5)
    max_range: float = 3.0                                       # m: longer returns only clear up to it
    decay: float = 0.0                                           # s; 0: cells never expire
    prob_hit: float = 0.7
    prob_miss: float = 0.4
    clearing: str = "projective"                                 # or "rays" (module docstring)

    def __post_init__(self):
        _positive("resolution", self.resolution, MAX_RESOLUTION)
        if self.resolution < MIN_RESOLUTION:
            raise OccupancyError("resolution", f"must be at least {MIN_RESOLUTION} m, got {self.resolution}")
        lo, hi = np.asarray(self.workspace_min, float), np.asarray(self.workspace_max, float)
        if lo.shape != (3,) or hi.shape != (3,) or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise OccupancyError("workspace", "needs finite [x, y, z] minimum and maximum")
        if not np.all(hi > lo) or np.any(np.abs(np.r_[lo, hi]) > 0.5 * KEY_OFFSET * self.resolution):
            raise OccupancyError("workspace", f"minimum {lo.tolist()} must lie below maximum {hi.tolist()}, "
                                              "both inside the tree")
        cells = float(np.prod((hi - lo) / self.resolution))
        if cells > MAX_WORKSPACE_CELLS:
            raise OccupancyError("workspace", f"{cells:.3g} cells at {self.resolution} m, over "
                                              f"{MAX_WORKSPACE_CELLS}")
        _positive("max_range", self.max_range, MAX_RANGE)
        if not (math.isfinite(float(self.decay)) and self.decay >= 0.0):
            raise OccupancyError("decay", f"must be >= 0 s, got {self.decay}")
        for name in ("prob_hit", "prob_miss"):
            p = float(getattr(self, name))
            if not 0.0 < p < 1.0:
                raise OccupancyError(name, f"must be in (0, 1), got {p}")
        if not self.prob_miss < 0.5 < self.prob_hit:
            raise OccupancyError("prob_hit", "need prob_miss < 0.5 < prob_hit")
        if self.clearing not in CLEARING:
            raise OccupancyError("clearing", f"{self.clearing!r}: one of {', '.join(CLEARING)}")


@dataclass
class InsertStats:
    """What one insertion did with its points (the map keeps running totals in ``OccupancyMap.totals``)."""

    returns: int = 0            # end points with a measurement
    inserted: int = 0           # marked occupied (or clearing only, beyond max_range)
    outside: int = 0            # end points outside the workspace (their rays still clear inside)
    self_filtered: int = 0      # on the robot's padded links
    body_filtered: int = 0      # inside a given world body
    no_return: int = 0          # NaN / inf / 0 pixels and beams


@dataclass
class FilterBody:
    """A shape at a world pose whose inside (grown by ``padding``) is left out of the map."""

    shape: object               # robot_bridge.model Box / Sphere / Cylinder / Mesh
    pose: np.ndarray            # world -> shape frame
    padding: float = 0.0


def _inside(shape, points: np.ndarray, padding: float) -> np.ndarray:
    """Mask of ``points`` (in the shape's frame) inside the shape grown by ``padding``; a mesh counts as
    its axis-aligned bounding box in its own frame (conservative)."""
    from ..model import Box, Cylinder, Mesh, Sphere

    if isinstance(shape, Box):
        return np.all(np.abs(points) <= np.asarray(shape.half_extents, float) + padding, axis=1)
    if isinstance(shape, Sphere):
        return np.einsum("ij,ij->i", points, points) <= (float(shape.radius) + padding) ** 2
    if isinstance(shape, Cylinder):
        radial = np.einsum("ij,ij->i", points[:, :2], points[:, :2])
        return (radial <= (float(shape.radius) + padding) ** 2) & \
            (np.abs(points[:, 2]) <= 0.5 * float(shape.length) + padding)
    if isinstance(shape, Mesh):
        from ..formats.meshes import mesh_arrays

        vertices, _ = mesh_arrays(shape)
        if not len(vertices):
            return np.zeros(len(points), bool)
        lo, hi = vertices.min(axis=0) - padding, vertices.max(axis=0) + padding
        return np.all((points >= lo) & (points <= hi), axis=1)
    raise OccupancyError("filter", f"no inside test for a {type(shape).__name__}")


def inside_any(bodies: Iterable[FilterBody], points: np.ndarray) -> np.ndarray:
    """Mask of world ``points`` inside any of ``bodies``."""
    out = np.zeros(len(points), bool)
    for body in bodies:
        pose = _pose("filter body", body.pose)
        local = (points - pose[:3, 3]) @ pose[:3, :3]
        out |= _inside(body.shape, local, float(body.padding))
    return out


class SelfFilter:
    """The robot's collision geometry, grown by ``padding`` (m) and scaled by ``scale`` about each shape's
    origin (MoveIt's ``padding_offset`` / ``padding_scale``): end points inside are the robot itself.  A mesh
    counts as its bounding box (read once); a mesh that cannot be read is left out (``skipped``)."""

    def __init__(self, robot, padding: float = 0.03, scale: float = 1.0):
        from ..model import Box, Mesh

        if not (math.isfinite(padding) and 0.0 <= padding <= 1.0):
            raise OccupancyError("self_filter padding", f"must be in [0, 1] m, got {padding}")
        if not (math.isfinite(scale) and 1.0 <= scale <= 2.0):
            raise OccupancyError("self_filter scale", f"must be in [1, 2], got {scale}")
        self.padding, self.scale = float(padding), float(scale)
        self.robot = robot
        self._model = None
        self.skipped: list[str] = []
        self.shapes: list[tuple[str, np.ndarray, object]] = []     # (link, link -> shape frame, shape)
        for name, link in robot.links.items():
            for g in link.collisions:
                shape, origin = g.shape, np.asarray(g.origin, float)
                if isinstance(shape, Mesh):
                    from ..formats.meshes import mesh_arrays

                    try:
                        vertices, _ = mesh_arrays(shape)
                    except Exception as exc:        # unreadable or missing: reported, not fatal
                        self.skipped.append(f"{name}: {exc}")
                        continue
                    if not len(vertices):
                        continue
                    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
                    centre = np.eye(4)
                    centre[:3, 3] = 0.5 * (lo + hi)
                    shape, origin = Box(0.5 * (hi - lo)), origin @ centre
                self.shapes.append((name, origin, _scaled(shape, self.scale)))

    @property
    def links(self) -> list[str]:
        return sorted({link for link, _, _ in self.shapes})

    def bodies(self, positions: Optional[Mapping[str, float]] = None, base: Optional[np.ndarray] = None,
               link_poses: Optional[Mapping[str, np.ndarray]] = None) -> list[FilterBody]:
        """The padded link shapes: at ``link_poses`` (link -> world pose, e.g. from TF at the stamp; links
        not in it are left out), else at joint ``positions`` with the root at ``base`` (world -> root)."""
        if link_poses is None:
            from ..kinematics.fk import KinematicModel

            if self._model is None:
                self._model = KinematicModel(self.robot)
            base = np.eye(4) if base is None else _pose("robot base", base)
            link_poses = {k: base @ v for k, v in self._model.link_poses(positions).items()}
        return [FilterBody(shape, np.asarray(link_poses[link]) @ origin, self.padding)
                for link, origin, shape in self.shapes if link in link_poses]

    def mask(self, points: np.ndarray, positions: Optional[Mapping[str, float]] = None,
             base: Optional[np.ndarray] = None, link_poses: Optional[Mapping[str, np.ndarray]] = None
             ) -> np.ndarray:
        """Mask of world ``points`` on the robot."""
        return inside_any(self.bodies(positions, base, link_poses), points)


class BodyFilter:
    """World bodies (robot_bridge.model Robot bodies at world poses) as :class:`FilterBody` shapes grown by
    ``padding``; each body's shapes (meshes as their boxes) made once per body object."""

    def __init__(self, padding: float = 0.03, max_bodies: int = 10000):
        self.padding, self.max_bodies = float(padding), int(max_bodies)
        self._made: dict[int, tuple[object, SelfFilter]] = {}

    def bodies(self, placed: Iterable[tuple[object, np.ndarray]]) -> list[FilterBody]:
        out, used = [], {}
        for body, pose in placed:
            key = id(body)
            made = self._made.get(key)
            if made is None or made[0] is not body:
                made = (body, SelfFilter(body, self.padding))
            used[key] = made
            if len(used) > self.max_bodies:
                break
            out += made[1].bodies(base=pose)
        self._made = used                 # bodies gone are forgotten
        return out


def _scaled(shape, scale: float):
    from dataclasses import replace

    from ..model import Box, Cylinder, Mesh, Sphere

    if scale == 1.0:
        return shape
    if isinstance(shape, Box):
        return Box(np.asarray(shape.half_extents, float) * scale)
    if isinstance(shape, Sphere):
        return Sphere(float(shape.radius) * scale)
    if isinstance(shape, Cylinder):
        return Cylinder(float(shape.radius) * scale, float(shape.length) * scale)
    if isinstance(shape, Mesh):
        return replace(shape, scale=np.asarray(shape.scale, float) * scale)
    return shape


def depth_metres(depth: np.ndarray, K: Sequence[float], encoding: str) -> tuple[np.ndarray, np.ndarray]:
    """(H, W) float32 metres of a depth image (NaN: no return) and its K (9 values, checked).
    ``encoding``: "32FC1" (metres) or "16UC1" (millimetres, 0 = no return)."""
    z, K, _ = _depth(depth, K, encoding)
    return z, K


def _depth(depth: np.ndarray, K: Sequence[float], encoding: str) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`depth_metres` and how many pixels hold no return."""
    depth = np.asarray(depth)
    if depth.ndim != 2 or not (0 < depth.shape[0] <= MAX_IMAGE_SIDE and 0 < depth.shape[1] <= MAX_IMAGE_SIDE):
        raise OccupancyError("depth image", f"shape {depth.shape}: need 2-D, sides 1..{MAX_IMAGE_SIDE}")
    if encoding == "32FC1":
        z = depth.astype(np.float32, copy=True)
    elif encoding == "16UC1":
        if depth.dtype != np.uint16:
            raise OccupancyError("depth image", f"16UC1 needs uint16 pixels, got {depth.dtype}")
        z = depth.astype(np.float32) * np.float32(0.001)
    else:
        raise OccupancyError("depth image", f"encoding {encoding!r}: 32FC1 or 16UC1 only")
    K = np.asarray(K, dtype=float).reshape(-1)
    if K.size != 9 or not np.all(np.isfinite(K)) or not (K[0] > 0 and K[4] > 0):
        raise OccupancyError("camera info", "K must be 9 finite values with fx, fy > 0")
    with np.errstate(invalid="ignore"):
        none = ~(z > 0)                 # NaN too
        none |= z == np.inf
    z[none] = np.nan
    return z, K, int(np.count_nonzero(none))


def _project(z: np.ndarray, K: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    fx, cx, fy, cy = K[0], K[2], K[4], K[5]
    zs = z[v, u].astype(float)
    points = np.empty((len(zs), 3))
    points[:, 0] = (u - cx) / fx * zs
    points[:, 1] = (v - cy) / fy * zs
    points[:, 2] = zs
    return points


def depth_points(depth: np.ndarray, K: Sequence[float], encoding: str, stride: int = 1
                 ) -> tuple[np.ndarray, int]:
    """Points (N, 3) in the optical frame (x right, y down, z forward) of a depth image, and how many
    pixels held no return.  ``encoding``: "32FC1" (metres) or "16UC1" (millimetres, 0 = no return);
    ``stride``: every stride-th pixel of every stride-th row only."""
    z, K = depth_metres(depth, K, encoding)
    if not 1 <= int(stride) <= 64:
        raise OccupancyError("depth stride", f"must be 1..64, got {stride}")
    stride = int(stride)
    zs = z[::stride, ::stride]
    v, u = np.nonzero(~np.isnan(zs))
    return _project(z, K, v * stride, u * stride), int(zs.size - len(v))


def sampled_pixels(z: np.ndarray, focal: float, resolution: float, max_stride: int = MAX_DEPTH_STRIDE
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the pixels of a depth image (metres, NaN: none) that represent it at
    ``resolution``: a pixel at depth z spans z / focal metres, so a voxel spans ``resolution * focal / z``
    pixels; where that is at least s (a power of two up to ``max_stride``), every s-th pixel of every s-th
    row is enough (neighbours at most one voxel apart on a surface facing the camera)."""
    rows, cols = [], []
    far = np.fmax.reduce(z, axis=None)                  # NaN only when every pixel is
    far = 0.0 if np.isnan(far) else far
    s = max_stride
    while s >= 1:
        if s < max_stride and far <= resolution * focal / (2 * s):
            break                                       # every pixel taken at a coarser stride
        zs = z[::s, ::s]
        limit = resolution * focal / s                  # the farthest depth that stride s still covers
        # a NaN compares False: a return nearer than limit (s > 1), farther than limit / 2 (nearer:
        # taken at the coarser stride; s < max_stride)
        if s == max_stride:
            pick = zs <= limit if s > 1 else ~np.isnan(zs)
        else:
            pick = zs > 0.5 * limit
            if s > 1:
                pick &= zs <= limit
        v, u = np.nonzero(pick)
        rows.append(v * s)
        cols.append(u * s)
        s //= 2
    return np.concatenate(rows), np.concatenate(cols)


def scan_points(ranges: Sequence[float], angle_min: float, angle_increment: float, range_min: float,
                range_max: float) -> tuple[np.ndarray, int]:
    """Points (N, 3) in the scan's frame of a sensor_msgs/LaserScan's beams within [range_min, range_max]
    (beyond range_max: returned at range_max + 1 m direction kept, so they only clear), and how many beams
    held no return."""
    r = np.asarray(ranges, dtype=float).reshape(-1)
    if r.size > MAX_SCAN_RAYS:
        raise OccupancyError("laser scan", f"{r.size} beams, over {MAX_SCAN_RAYS}")
    for name, value in (("angle_min", angle_min), ("angle_increment", angle_increment),
                        ("range_min", range_min), ("range_max", range_max)):
        if not math.isfinite(float(value)):
            raise OccupancyError("laser scan", f"{name} is not finite")
    if not 0.0 <= range_min < range_max:
        raise OccupancyError("laser scan", f"need 0 <= range_min < range_max, got {range_min}, {range_max}")
    angles = float(angle_min) + float(angle_increment) * np.arange(r.size)
    beyond = r == np.inf                          # REP-117: nothing within range_max
    valid = np.isfinite(r) & (r >= range_min) & (r <= range_max)
    use = valid | beyond
    dist = np.where(beyond, float(range_max) + 1.0, r)[use]
    points = np.stack([np.cos(angles[use]) * dist, np.sin(angles[use]) * dist, np.zeros(dist.size)], axis=1)
    return points, int(r.size - int(use.sum()))


class OccupancyMap:
    """An OctoMap of what the sensors saw, in the world frame."""

    def __init__(self, config: OccupancyConfig = OccupancyConfig(), self_filter: Optional[SelfFilter] = None):
        require()
        self.config = config
        self.self_filter = self_filter
        self.totals = InsertStats()
        self._tree = self._new_tree()
        self._hit = np.float32(self._tree.getProbHitLog())
        self._miss = np.float32(self._tree.getProbMissLog())
        self._lo = np.float32(self._tree.getClampingThresMinLog())
        self._hi = np.float32(self._tree.getClampingThresMaxLog())
        self._occupied_log = np.float32(self._tree.getOccupancyThresLog())
        self._mirror_clear()
        self.updates = 0                                 # insertions (a publisher compares it)
        # per axis, the centre of each cell of the workspace as a Python float, made once (_update)
        c = config
        self._first = np.floor(np.asarray(c.workspace_min) / c.resolution).astype(np.int64) + KEY_OFFSET
        last = np.floor(np.asarray(c.workspace_max) / c.resolution).astype(np.int64) + KEY_OFFSET
        self._axis_centres = [np.array(((np.arange(f, e + 1) - KEY_OFFSET + 0.5) * c.resolution).tolist(),
                                       dtype=object) for f, e in zip(self._first, last)]

    def _new_tree(self):
        c = self.config
        tree = octomap.OcTree(c.resolution)
        tree.setProbHit(c.prob_hit)
        tree.setProbMiss(c.prob_miss)
        # the bounding box a little inside the workspace so that no cell reaches past it
        tree.setBBXMin(np.asarray(c.workspace_min, float) + 1e-6)
        tree.setBBXMax(np.asarray(c.workspace_max, float) - 1e-6)
        tree.useBBXLimit(True)
        return tree

    # the mirror: every cell the map marked, sorted by packed key, with OctoMap's log-odds of it and the
    # time it expires at (the latest of its marks' stamp + decay; inf: never; NaN: expired)
    def _mirror_clear(self) -> None:
        self._mkeys = np.zeros(0, np.int64)
        self._mlog = np.zeros(0, np.float32)
        self._mexpire = np.zeros(0, float)

    def _mirror_index(self, packed: np.ndarray) -> np.ndarray:
        """Indices in the mirror of the sorted unique ``packed`` keys (added, unknown: log-odds 0)."""
        at = np.searchsorted(self._mkeys, packed)
        found = at < len(self._mkeys)
        found[found] = self._mkeys[at[found]] == packed[found]
        if found.all():
            return at
        new = ~found
        where = at[new]                 # both sorted: each new key goes in before the mirror's key there
        self._mkeys = np.insert(self._mkeys, where, packed[new])
        self._mlog = np.insert(self._mlog, where, np.float32(0.0))
        self._mexpire = np.insert(self._mexpire, where, np.nan)
        return at + (np.cumsum(new) - new)      # shifted by the new keys before each

    @staticmethod
    def _unpacked(packed: np.ndarray) -> list[np.ndarray]:
        """The x, y, z keys of :meth:`_packed` keys (16 bits each)."""
        return [(packed >> shift) & 0xFFFF for shift in (32, 16, 0)]

    def _centres(self, packed: np.ndarray) -> np.ndarray:
        k = np.stack(self._unpacked(packed), axis=1)
        return np.ascontiguousarray((k - KEY_OFFSET + 0.5) * self.config.resolution)

    def _update(self, packed: np.ndarray, update, lazy: bool = False) -> None:
        """OctoMap's updateNode at the centre of each cell of ``packed``.  The binding loops over the rows
        in Python and boxes each number of a float array anew; rows of Python floats made once per cell
        centre (``_axis_centres``, the same values) cost ~25% less per cell.  Cells outside the
        workspace (none: the map marks none) go as a float array."""
        rel = [axis - first for axis, first in zip(self._unpacked(packed), self._first)]
        if not len(packed) or any(r.min() < 0 or r.max() >= len(t) for r, t in zip(rel, self._axis_centres)):
            self._tree.updateNodes(self._centres(packed), update, lazy)
            return
        rows = np.empty((len(packed), 3), dtype=object)
        for i in range(3):
            rows[:, i] = self._axis_centres[i][rel[i]]
        self._tree.updateNodes(rows, update, lazy)

    def _expiry(self, stamp: float, decay: Optional[float]) -> float:
        decay = self.config.decay if decay is None else float(decay)
        if not (math.isfinite(decay) and decay >= 0.0):
            raise OccupancyError("decay", f"must be >= 0 s, got {decay}")
        return float(stamp) + decay if decay > 0 else math.inf

    def _mark(self, packed: np.ndarray, expiry: float) -> None:
        """A hit on each cell of the sorted unique ``packed`` keys: OctoMap's updateNodes on those not
        already at its upper clamp (a hit there changes nothing), the mirror as OctoMap adds (float32)."""
        if not len(packed):
            return
        at = self._mirror_index(packed)
        self._mexpire[at] = np.fmax(self._mexpire[at], expiry)
        todo = at[self._mlog[at] < self._hi]
        if len(todo):
            self._mlog[todo] = np.minimum(self._mlog[todo] + self._hit, self._hi)
            self._update(self._mkeys[todo], True)

    def _free(self, at: np.ndarray) -> None:
        """A miss on the mirror's cells ``at``."""
        todo = at[self._mlog[at] > self._lo]
        if len(todo):
            self._mlog[todo] = np.maximum(self._mlog[todo] + self._miss, self._lo)
            self._update(self._mkeys[todo], False)

    def _mirror_read(self, packed: np.ndarray, expiry: float) -> None:
        """After a ray-traced insertion: the mirror's cells and the newly ``packed`` end cells read back."""
        at = self._mirror_index(packed)
        self._mexpire[at] = np.fmax(self._mexpire[at], expiry)
        for i, point in enumerate(self._centres(self._mkeys)):
            node = self._tree.search(point)
            try:
                self._mlog[i] = node.getLogOdds()
            except octomap.NullPointerException:            # never updated (outside the bounding box)
                self._mlog[i] = 0.0

    def _candidates(self) -> np.ndarray:
        """Mirror indices of the occupied cells."""
        return np.nonzero(self._mlog >= self._occupied_log)[0]

    @property
    def tree(self):
        return self._tree

    def clear(self) -> None:
        self._tree = self._new_tree()
        self._mirror_clear()
        self.updates += 1

    # -- insertion --------------------------------------------------------------------------------
    def insert_depth(self, depth: np.ndarray, K: Sequence[float], encoding: str, camera_pose: np.ndarray,
                     stamp: float = 0.0, stride: int = 1, max_range: Optional[float] = None,
                     decay: Optional[float] = None, **filters) -> InsertStats:
        """A depth image; ``camera_pose``: world -> optical frame (x right, y down, z forward); ``stride``:
        every stride-th pixel and row only (the "rays" clearing; the projective one picks its own);
        ``max_range`` / ``decay``: this sensor's (None: the config's)."""
        max_range = self._max_range(max_range)
        if self.config.clearing == "rays":
            points, none = depth_points(depth, K, encoding, stride)
            stats = self.insert_points(points, camera_pose, stamp, max_range, decay, **filters)
            stats.no_return += none
            self.totals.no_return += none
            return stats
        z, K, none = _depth(depth, K, encoding)
        pose = _pose("sensor pose", camera_pose)
        self._stamp(stamp)
        expiry = self._expiry(stamp, decay)
        v, u = sampled_pixels(z, min(K[0], K[4]), self.config.resolution)
        stats, world, mark = self._filtered(_project(z, K, v, u), pose, max_range, filters)
        stats.no_return = none
        stats.returns = int(z.size) - stats.no_return
        # cells the camera sees through: the map's occupied cells projected into the image
        at = self._candidates()
        if len(at):
            inv = np.linalg.inv(pose)
            c = self._centres(self._mkeys[at]) @ inv[:3, :3].T + inv[:3, 3]
            with np.errstate(divide="ignore", invalid="ignore"):
                front = (c[:, 2] > 0) & (_norms(c) <= max_range)
                pu = np.rint(K[0] * c[:, 0] / c[:, 2] + K[2])
                pv = np.rint(K[4] * c[:, 1] / c[:, 2] + K[5])
            inside = front & (pu >= 0) & (pu < z.shape[1]) & (pv >= 0) & (pv < z.shape[0])
            idx = np.nonzero(inside)[0]
            measured = z.ravel()[pv[idx].astype(np.intp) * z.shape[1] + pu[idx].astype(np.intp)]
            with np.errstate(invalid="ignore"):
                through = measured > c[idx, 2] + self.config.resolution
            self._free(at[idx[through]])
        self._mark(_unique(self._packed(world)), expiry)         # world: the points to mark only
        return self._done(stats)

    def _max_range(self, max_range: Optional[float]) -> float:
        return self.config.max_range if max_range is None else _positive("max_range", max_range, MAX_RANGE)

    def insert_scan(self, ranges: Sequence[float], angle_min: float, angle_increment: float,
                    range_min: float, range_max: float, sensor_pose: np.ndarray, stamp: float = 0.0,
                    max_range: Optional[float] = None, decay: Optional[float] = None,
                    **filters) -> InsertStats:
        """A laser scan; ``sensor_pose``: world -> the scan's frame (beams in its xy plane); ``max_range`` /
        ``decay``: this sensor's (None: the config's)."""
        points, none = scan_points(ranges, angle_min, angle_increment, range_min, range_max)
        max_range = min(self._max_range(max_range), range_max)
        if self.config.clearing == "rays":
            stats = self.insert_points(points, sensor_pose, stamp, max_range, decay, **filters)
            stats.no_return += none
            self.totals.no_return += none
            return stats
        pose = _pose("sensor pose", sensor_pose)
        self._stamp(stamp)
        expiry = self._expiry(stamp, decay)
        stats, world, mark = self._filtered(points, pose, max_range, filters)
        stats.no_return = none
        at = self._candidates()
        if len(at) and angle_increment != 0:
            # each beam's measured range (beyond range_max: clears to max_range; no return: nothing)
            r = np.asarray(ranges, dtype=float).reshape(-1)
            with np.errstate(invalid="ignore"):
                beam = np.where(r == np.inf, np.inf,
                                np.where(np.isfinite(r) & (r >= range_min) & (r <= range_max), r, np.nan))
            inv = np.linalg.inv(pose)
            c = self._centres(self._mkeys[at]) @ inv[:3, :3].T + inv[:3, 3]
            dist = np.hypot(c[:, 0], c[:, 1])
            i = np.rint((np.arctan2(c[:, 1], c[:, 0]) - angle_min) / angle_increment)
            n = len(beam)
            # angles wrap: a cell behind a 360 degree scanner's first beam is near its last
            i = np.where((i < 0) | (i >= n), np.rint((np.arctan2(c[:, 1], c[:, 0]) + 2 * np.pi - angle_min)
                                                     / angle_increment), i)
            ok = (np.abs(c[:, 2]) <= 0.5 * self.config.resolution) & (dist <= max_range) & (i >= 0) & (i < n)
            idx = np.nonzero(ok)[0]
            with np.errstate(invalid="ignore"):
                through = beam[i[idx].astype(np.intp)] > dist[idx] + self.config.resolution
            self._free(at[idx[through]])
        self._mark(_unique(self._packed(world)), expiry)
        return self._done(stats)

    def insert_points(self, points: np.ndarray, sensor_pose: np.ndarray, stamp: float = 0.0,
                      max_range: Optional[float] = None, decay: Optional[float] = None,
                      **filters) -> InsertStats:
        """End points (N, 3) in the sensor frame (non-finite rows: no return), ray traced in OctoMap; the
        sensor at ``sensor_pose`` (world -> sensor) at ``stamp`` (s).  ``filters``: ``link_poses`` (link
        -> world pose at the stamp, for the self filter), else joint ``positions`` with the root at
        ``robot_base``; ``bodies``: world bodies whose inside is left out; ``max_range`` / ``decay``: this
        sensor's (None: the config's)."""
        points = np.asarray(points, dtype=float)
        if points.ndim != 2 or points.shape[1] != 3:
            raise OccupancyError("point cloud", f"shape {points.shape}: need (N, 3)")
        pose = _pose("sensor pose", sensor_pose)
        self._stamp(stamp)
        expiry = self._expiry(stamp, decay)
        max_range = self._max_range(max_range)
        stats, world, mark = self._filtered(points, pose, max_range, filters, keep_far=True)
        if len(world):
            # OctoMap marks each end point's cell within max_range once and clears every cell a ray crosses
            # once, occupied winning (bounding box limit: only cells inside the workspace are updated);
            # discretize: one ray per end cell (to its centre), not per point: 4x faster on a VGA frame
            self._tree.insertPointCloud(np.ascontiguousarray(world), np.ascontiguousarray(pose[:3, 3], float),
                                        maxrange=max_range, discretize=True)
            self._mirror_read(_unique(self._packed(world[mark])), expiry)
        return self._done(stats)

    @staticmethod
    def _stamp(stamp: float) -> None:
        if not math.isfinite(float(stamp)):
            raise OccupancyError("stamp", "not finite")

    def _filtered(self, points: np.ndarray, pose: np.ndarray, max_range: float, filters: dict,
                  keep_far: bool = False) -> tuple[InsertStats, np.ndarray, np.ndarray]:
        """(stats, world end points, mask of those to mark occupied) of sensor-frame ``points``: no return,
        the self filter, the world bodies, the workspace, max_range.  ``keep_far``: the points beyond
        max_range (and outside the workspace) kept in the world points (their rays clear), not marked."""
        if len(points) > MAX_POINTS:
            raise OccupancyError("point cloud", f"{len(points)} points, over {MAX_POINTS}")
        unknown = set(filters) - {"positions", "robot_base", "link_poses", "bodies"}
        if unknown:
            raise TypeError(f"unknown filter arguments {sorted(unknown)}")
        stats = InsertStats()
        finite = _all_columns(np.isfinite(points))
        stats.no_return = int(len(points) - finite.sum())
        if not finite.all():
            points = points[finite]
        world = points @ pose[:3, :3].T + pose[:3, 3]
        stats.returns = len(world)
        near = np.einsum("ij,ij->i", points, points) <= max_range * max_range     # the sensor's distance
        keep = np.ones(len(world), bool)
        if self.self_filter is not None and near.any():
            on_robot = np.zeros(len(world), bool)
            on_robot[near] = self.self_filter.mask(world[near], filters.get("positions"),
                                                   filters.get("robot_base"), filters.get("link_poses"))
            stats.self_filtered = int(on_robot.sum())
            keep &= ~on_robot
        bodies = filters.get("bodies") or ()
        if bodies and near.any():
            in_body = np.zeros(len(world), bool)
            in_body[near] = inside_any(bodies, world[near]) & keep[near]
            stats.body_filtered = int(in_body.sum())
            keep &= ~in_body
        lo, hi = np.asarray(self.config.workspace_min), np.asarray(self.config.workspace_max)
        x, y, z = world[:, 0], world[:, 1], world[:, 2]
        outside = near & ~((x >= lo[0]) & (x <= hi[0]) & (y >= lo[1]) & (y <= hi[1]) & (z >= lo[2]) &
                           (z <= hi[2])) & keep
        stats.outside = int(outside.sum())
        if keep_far:
            world, mark = world[keep], (near & ~outside)[keep]
            stats.inserted = len(world)
        else:
            mark = keep & near & ~outside
            if not mark.all():                  # (a copy of every point otherwise)
                world = world[mark]
            mark = np.ones(len(world), bool)
            stats.inserted = len(world)
        return stats, world, mark

    def _done(self, stats: InsertStats) -> InsertStats:
        self.updates += 1
        for name in ("returns", "inserted", "outside", "self_filtered", "body_filtered", "no_return"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(stats, name))
        return stats

    def _keys(self, points: np.ndarray) -> np.ndarray:
        return (np.floor(points / self.config.resolution).astype(np.int64) + KEY_OFFSET)

    def _packed(self, points: np.ndarray) -> np.ndarray:
        k = self._keys(points)
        return (k[:, 0] << 32) | (k[:, 1] << 16) | k[:, 2]        # keys are 16 bits each

    # -- decay ------------------------------------------------------------------------------------
    def expire(self, now: float) -> int:
        """Drop every cell last marked before ``now - decay`` (the decay of the sensor that marked it; of the
        latest expiry when several did): unknown again; how many were dropped."""
        if not len(self._mkeys):
            return 0
        with np.errstate(invalid="ignore"):
            old = np.nonzero(self._mexpire < float(now))[0]
        if not len(old):
            return 0
        self._mexpire[old] = np.nan
        self._mlog[old] = self._lo
        # set free (clamped), not deleted: OctoMap's deleteNode leaves emptied inner nodes behind as leaves
        # with their old (occupied) value
        self._update(self._mkeys[old], -2.0 * float(self._hi) - 1.0, True)
        self._tree.updateInnerOccupancy()
        self.updates += 1
        return len(old)

    # -- queries ----------------------------------------------------------------------------------
    def occupied_keys(self) -> np.ndarray:
        """(N, 3) int64 OctoMap keys of the occupied cells at full resolution (a pruned leaf expanded)."""
        c = self.config
        lo = np.floor(np.asarray(c.workspace_min) / c.resolution).astype(np.int64) + KEY_OFFSET
        hi = np.floor(np.asarray(c.workspace_max) / c.resolution).astype(np.int64) + KEY_OFFSET
        return occupied_keys(self._tree, lo, hi)

    def occupied_centers(self) -> np.ndarray:
        return (self.occupied_keys() - KEY_OFFSET + 0.5) * self.config.resolution

    def memory_bytes(self) -> int:
        return int(self._tree.memoryUsage())

    def to_message_fields(self) -> dict:
        return to_message_fields(self._tree)

    def collision_object(self):
        """A coal ``OcTree`` of the occupied cells (None when nothing is occupied), in the world frame (made
        by planning/backend.py, the one module that imports the planning libraries)."""
        from ..planning.backend import octree

        centers = self.occupied_centers()
        return octree(centers, self.config.resolution) if len(centers) else None


def occupied_keys(tree, lo: Optional[np.ndarray] = None, hi: Optional[np.ndarray] = None,
                  max_cells: int = MAX_CELLS) -> np.ndarray:
    """(N, 3) int64 keys of an OcTree's occupied leaves, a leaf larger than one cell expanded (clipped to
    the keys ``lo`` .. ``hi`` when given); OccupancyError past ``max_cells`` cells (a peer's tree can hold
    one occupied leaf of a kilometre)."""
    if not tree.size():
        return np.zeros((0, 3), np.int64)
    res = tree.getResolution()
    rows, total = [], 0
    for leaf in tree.begin_leafs():
        if not tree.isNodeOccupied(leaf):
            continue
        size = leaf.getSize()
        c = np.asarray(leaf.getCoordinate(), float)
        first = np.floor((c - 0.5 * size) / res + 0.5).astype(np.int64) + KEY_OFFSET
        last = first + max(int(round(size / res)), 1) - 1
        if lo is not None:
            first, last = np.maximum(first, lo), np.minimum(last, hi)
        n = last - first + 1
        if np.any(n <= 0):
            continue
        total += int(np.prod(n))
        if total > max_cells:
            raise OccupancyError("octomap", f"over {max_cells} occupied cells")
        if total == 1 or np.all(n == 1):
            rows.append(first[None])
        else:
            grid = np.stack(np.meshgrid(*(np.arange(a, b + 1) for a, b in zip(first, last)), indexing="ij"),
                            axis=-1)
            rows.append(grid.reshape(-1, 3))
    if not rows:
        return np.zeros((0, 3), np.int64)
    return np.unique(np.concatenate(rows), axis=0)


_BINARY_HEADER = b"# Octomap OcTree binary file\nid OcTree\nsize %d\nres %r\ndata\n"


def to_message_fields(tree) -> dict:
    """``octomap_msgs/Octomap`` fields (binary=True, id, resolution, data) as ``binaryMapToMsg`` fills
    them: ``data`` is ``writeBinaryData``'s output (max-likelihood tree, no file header).  The map itself
    is left as it is (OctoMap's writeBinary makes its tree max-likelihood: a copy is written)."""
    copy = octomap.OcTree.read(tree.write())
    blob = copy.writeBinary()
    head, sep, data = blob.partition(b"\ndata\n")
    if not sep:
        raise OccupancyError("octomap", "OctoMap's binary output has no data line")
    return {"binary": True, "id": BINARY_ID, "resolution": float(tree.getResolution()),
            "data": np.frombuffer(data, dtype=np.uint8).astype(np.int8)}


def binary_node_count(data: bytes) -> int:
    """Nodes in ``writeBinaryData`` output: the root and one per non-zero 2-bit child field."""
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    if not raw.size:
        return 0
    fields = np.stack([(raw >> s) & 3 for s in (0, 2, 4, 6)])
    return 1 + int(np.count_nonzero(fields))


MAX_MESSAGE_BYTES = 256 << 20


def decode_binary(data, resolution: float, map_id: str = BINARY_ID):
    """An OcTree read with OctoMap from an ``octomap_msgs/Octomap``'s binary data (as ``binaryMsgToMap``)."""
    require()
    if map_id != BINARY_ID:
        raise OccupancyError("octomap", f"id {map_id!r}: only {BINARY_ID} is read")
    _positive("octomap resolution", resolution, MAX_RESOLUTION)
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        raw = np.asarray(data).astype(np.uint8).tobytes()      # int8[] of a message: the same bytes
    if len(raw) > MAX_MESSAGE_BYTES or len(raw) % 2:
        raise OccupancyError("octomap", f"{len(raw)} data bytes: need an even count, at most "
                                        f"{MAX_MESSAGE_BYTES}")
    tree = octomap.OcTree(float(resolution))
    if raw and not tree.readBinary(_BINARY_HEADER % (binary_node_count(raw), float(resolution)) + raw):
        raise OccupancyError("octomap", "OctoMap could not read the binary data")
    return tree


# -- the map as collision geometry for the planner -------------------------------------------------------
MAX_BOXES = 4000                        # boxes of the planner's occupancy body (coarser cells beyond)
BODY_NAME = "occupancy"


def merged_boxes(keys: np.ndarray) -> np.ndarray:
    """(M, 6) inclusive key ranges ``x0 y0 z0 x1 y1 z1`` covering exactly the cells ``keys`` (N, 3): runs
    along x, then equal runs stacked along y, then equal rectangles along z (greedy, no overlap)."""
    keys = np.unique(np.asarray(keys, dtype=np.int64).reshape(-1, 3), axis=0)
    if not len(keys):
        return np.zeros((0, 6), np.int64)

    def runs(groups: dict) -> list:
        out = []
        for head, values in groups.items():
            values = sorted(values)
            start = prev = values[0]
            for v in values[1:]:
                if v != prev + 1:
                    out.append((head, start, prev))
                    start = v
                prev = v
            out.append((head, start, prev))
        return out

    along_x: dict = {}
    for x, y, z in keys.tolist():
        along_x.setdefault((y, z), []).append(x)
    along_y: dict = {}
    for (y, z), x0, x1 in runs(along_x):
        along_y.setdefault((x0, x1, z), []).append(y)
    along_z: dict = {}
    for (x0, x1, z), y0, y1 in runs(along_y):
        along_z.setdefault((x0, x1, y0, y1), []).append(z)
    return np.array([(x0, y0, z0, x1, y1, z1) for (x0, x1, y0, y1), z0, z1 in runs(along_z)], dtype=np.int64)


def occupancy_body(keys: np.ndarray, resolution: float, max_boxes: int = MAX_BOXES):
    """A world body (:class:`robot_bridge.model.Robot`, not a robot) whose one collision geometry is a
    triangle mesh of boxes covering the occupied cells ``keys`` at ``resolution``, in the world frame: one
    geometry, so the planner's collision scene holds one pair per robot link (a geometry per box made the
    scene's pair bookkeeping quadratic: 8 s for 100 boxes).  Beyond ``max_boxes`` the cells are merged into
    cells twice as large (a superset: never less covered), again until the boxes fit.  None for no cells."""
    from ..model import Geometry, Link, Mesh, Robot
    from ..planning.backend import TRANSIENT

    keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
    if not len(keys):
        return None
    scale = 1
    while True:
        boxes = merged_boxes((keys - KEY_OFFSET) // scale)
        if len(boxes) <= max_boxes:
            break
        scale *= 2
    size = resolution * scale
    lo, hi = boxes[:, :3] * size, (boxes[:, 3:] + 1) * size
    corners = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], dtype=float)
    vertices = (lo[:, None] + corners[None] * (hi - lo)[:, None]).reshape(-1, 3)
    # two outward triangles per face of a box whose corner index is 4 i + 2 j + k
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], dtype=np.int64)
    triangles = (np.arange(len(boxes))[:, None, None] * 8 + faces[None]).reshape(-1, 3)
    mesh = Mesh(uri=TRANSIENT + BODY_NAME, vertices=vertices, triangles=triangles)
    body = Robot(BODY_NAME, links={BODY_NAME: Link(BODY_NAME, collisions=[Geometry(mesh, name="cells")])},
                 is_robot=False)
    body.extras["occupancy_cell"] = size
    body.extras["occupancy_boxes"] = (lo, hi)
    return body


def body_from_octomap(data, resolution: float, map_id: str = BINARY_ID, max_boxes: int = MAX_BOXES):
    """The world body of an ``octomap_msgs/Octomap``'s binary data (None: nothing occupied); bounded:
    OccupancyError past MAX_MESSAGE_BYTES or MAX_CELLS occupied cells."""
    keys = occupied_keys(decode_binary(data, resolution, map_id))
    return occupancy_body(keys, float(resolution), max_boxes)
