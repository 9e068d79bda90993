"""An independent collision checker: pinocchio + coal straight on a URDF string (what the description node
publishes), world boxes / spheres / cylinders / meshes as coal shapes.  Shares no code with
robot_bridge.planning: its own allowed pairs (the SRDF's, plus pairs it finds in collision in nearly every
random state), its own mimic handling (the URDF's <mimic> tags), its own path sampling.
Used by the planning tests and as the Python validity checker of bench/plan_bench.py's OMPL baseline.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from lxml import etree

try:
    import coal
except ImportError:                       # older wheels name it hppfcl
    import hppfcl as coal


class PinChecker:
    def __init__(self, urdf: str, disabled: set | None = None, package_dirs=(), always_samples: int = 300,
                 seed: int = 12345):
        self.model = pin.buildModelFromXML(urdf)
        self.geom = pin.buildGeomFromUrdfString(self.model, urdf, pin.GeometryType.COLLISION,
                                                package_dirs=[str(d) for d in package_dirs])
        self.robot_geoms = self.geom.ngeoms
        self.data = self.model.createData()
        self.frame_of = [self.model.frames[o.parentFrame].name for o in self.geom.geometryObjects]
        self._mimic = {}
        root = etree.fromstring(urdf.encode())
        for joint in root.iter("joint"):
            m = joint.find("mimic")
            if m is not None:
                self._mimic[joint.get("name")] = (m.get("joint"), float(m.get("multiplier", 1)),
                                                  float(m.get("offset", 0)))
        self.disabled = {tuple(sorted(p)) for p in (disabled or set())}
        self._pairs_robot(always_samples, seed)

    # -- configuration ---------------------------------------------------------------------------
    def q(self, positions: dict) -> np.ndarray:
        q = pin.neutral(self.model)
        for jid in range(1, self.model.njoints):
            name = self.model.names[jid]
            if name in self._mimic:
                src, mult, off = self._mimic[name]
                value = mult * positions.get(src, 0.0) + off
            else:
                value = positions.get(name, 0.0)
            if self.model.joints[jid].nq == 1:
                q[self.model.joints[jid].idx_q] = value
        return q

    def _pairs_robot(self, samples: int, seed: int) -> None:
        g = self.geom
        g.removeAllCollisionPairs()
        for i in range(self.robot_geoms):
            for k in range(i + 1, self.robot_geoms):
                a, b = self.frame_of[i], self.frame_of[k]
                if a != b and tuple(sorted((a, b))) not in self.disabled:
                    g.addCollisionPair(pin.CollisionPair(i, k))
        gdata = pin.GeometryData(g)
        rng = np.random.default_rng(seed)
        lo = np.where(np.isfinite(self.model.lowerPositionLimit), self.model.lowerPositionLimit, -np.pi)
        hi = np.where(np.isfinite(self.model.upperPositionLimit), self.model.upperPositionLimit, np.pi)
        counts = np.zeros(len(g.collisionPairs))
        for _ in range(samples):
            pin.computeCollisions(self.model, self.data, g, gdata, rng.uniform(lo, hi), False)
            counts += [r.isCollision() for r in gdata.collisionResults]
        always = [(g.collisionPairs[k].first, g.collisionPairs[k].second) for k in range(len(counts))
                  if counts[k] >= 0.95 * samples]
        self.always = sorted({tuple(sorted((self.frame_of[a], self.frame_of[b]))) for a, b in always})
        for a, b in always:
            g.removeCollisionPair(pin.CollisionPair(a, b))
        self.gdata = pin.GeometryData(g)

    # -- world -----------------------------------------------------------------------------------
    def add_box(self, name: str, size, pose: np.ndarray) -> None:
        self._add(name, coal.Box(*map(float, size)), pose)

    def add_sphere(self, name: str, radius: float, pose: np.ndarray) -> None:
        self._add(name, coal.Sphere(float(radius)), pose)

    def add_cylinder(self, name: str, radius: float, length: float, pose: np.ndarray) -> None:
        self._add(name, coal.Cylinder(float(radius), float(length)), pose)

    def add_shape(self, name: str, shape, pose: np.ndarray) -> None:
        """A robot_bridge model shape (Box, Sphere, Cylinder)."""
        kind = type(shape).__name__
        if kind == "Box":
            self.add_box(name, 2 * np.asarray(shape.half_extents), pose)
        elif kind == "Sphere":
            self.add_sphere(name, shape.radius, pose)
        elif kind == "Cylinder":
            self.add_cylinder(name, shape.radius, shape.length, pose)
        else:
            raise NotImplementedError(kind)

    def _add(self, name: str, shape, pose: np.ndarray) -> None:
        pose = np.asarray(pose, dtype=float)
        placement = pin.SE3(pose[:3, :3].copy(), pose[:3, 3].copy())
        obj = pin.GeometryObject(name, 0, 0, placement, shape)
        index = self.geom.addGeometryObject(obj)
        for i in range(self.robot_geoms):
            self.geom.addCollisionPair(pin.CollisionPair(i, index))
        self.gdata = pin.GeometryData(self.geom)

    # -- queries ---------------------------------------------------------------------------------
    def collides(self, q: np.ndarray) -> bool:
        return bool(pin.computeCollisions(self.model, self.data, self.geom, self.gdata, q, True))

    def colliding_pairs(self, q: np.ndarray) -> list[tuple[str, str]]:
        pin.computeCollisions(self.model, self.data, self.geom, self.gdata, q, False)
        names = [o.name for o in self.geom.geometryObjects]
        return [(names[p.first], names[p.second]) for p, r in zip(self.geom.collisionPairs,
                                                                   self.gdata.collisionResults)
                if r.isCollision()]

    def path_collisions(self, joint_names, positions, base: dict, step: float = 0.01):
        """Configurations (dicts) along the polyline ``positions`` (rows over ``joint_names``), sampled so
        no joint moves more than ``step`` between checks, that collide; [] when none does."""
        bad = []
        positions = np.asarray(positions, dtype=float)
        for a, b in zip(positions[:-1], positions[1:]):
            n = max(1, int(np.ceil(np.max(np.abs(b - a)) / step)))
            for s in np.linspace(0.0, 1.0, n + 1):
                values = dict(base)
                values.update(zip(joint_names, a + s * (b - a)))
                if self.collides(self.q(values)):
                    bad.append(values)
        if len(positions) == 1:
            values = dict(base)
            values.update(zip(joint_names, positions[0]))
            if self.collides(self.q(values)):
                bad.append(values)
        return bad


def interpolated_peaks(times, p, v, a, per_segment: int = 50) -> tuple[float, float]:
    """Largest |velocity| and |acceleration| of the quintic Hermite interpolation of one joint's samples (what
    joint_trajectory_controller executes between points; scipy's BPoly.from_derivatives, independent of the
    controller's own closed form), sampled ``per_segment`` times per interval."""
    from scipy.interpolate import BPoly

    times = np.asarray(times, dtype=float)
    spline = BPoly.from_derivatives(times, np.stack([p, v, a], axis=1))
    t = np.concatenate([np.linspace(t0, t1, per_segment, endpoint=False) for t0, t1 in zip(times[:-1],
                                                                                             times[1:])])
    return float(np.abs(spline(t, 1)).max()), float(np.abs(spline(t, 2)).max())
