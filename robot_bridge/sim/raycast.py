"""Ray intersection with primitives (analytic, float64) and triangle meshes.

Every function takes rays already expressed in the shape's own frame
(``origins``/``directions`` of shape (N, 3), directions unit length) and
returns ``(t, normals)``: the distance to the first hit at ``t >= 0`` (inf when
missed) and the outward surface normal at the hit, in the same frame.  A ray
starting inside a solid hits the surface where it leaves it.

Triangle meshes go through :class:`TriangleMesh`, whose backend is picked by
measurement (``bench/sensor_bench.py``): Embree (``embreex``) when installed,
else trimesh's rtree-accelerated ``ray_triangle`` module, else vectorised numpy
Möller–Trumbore.  The backend only finds *which* triangle is hit; the distance
to that triangle's plane is then computed in float64, so every backend returns
the same precise value.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import numpy as np

_EPS = 1e-12
BACKENDS = ("embree", "trimesh", "numpy")


def _no_hit(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, np.inf), np.zeros((n, 3))


def _first_positive(t_near: np.ndarray, t_far: np.ndarray, valid: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Entry distance where the entry lies ahead, else the exit (origin inside); inf if behind or missed."""
    valid = valid & (t_far >= 0.0) & (t_near <= t_far)
    use_far = t_near < 0.0
    t = np.where(use_far, t_far, t_near)
    return np.where(valid, t, np.inf), use_far


def intersect_box(origins: np.ndarray, directions: np.ndarray, half_extents) -> tuple[np.ndarray, np.ndarray]:
    """Slab test against the axis-aligned box ``|x_i| <= half_extents_i``."""
    h = np.asarray(half_extents, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / directions
        t1 = (-h - origins) * inv
        t2 = (h - origins) * inv
    # Rays parallel to a slab: inside it -> unbounded, outside -> miss.
    parallel = directions == 0.0
    inside_slab = np.abs(origins) <= h
    lo = np.where(parallel, np.where(inside_slab, -np.inf, np.inf), np.minimum(t1, t2))
    hi = np.where(parallel, np.where(inside_slab, np.inf, -np.inf), np.maximum(t1, t2))
    near_axis = np.argmax(lo, axis=1)
    far_axis = np.argmin(hi, axis=1)
    rows = np.arange(len(origins))
    t_near, t_far = lo[rows, near_axis], hi[rows, far_axis]
    t, use_far = _first_positive(t_near, t_far, np.ones(len(origins), dtype=bool))
    axis = np.where(use_far, far_axis, near_axis)
    normals = np.zeros_like(origins)
    hit = np.isfinite(t)
    point_axis = origins[rows, axis] + np.where(hit, t, 0.0) * directions[rows, axis]
    normals[rows[hit], axis[hit]] = np.sign(point_axis[hit])
    return t, normals


def intersect_sphere(origins: np.ndarray, directions: np.ndarray, radius: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    b = np.einsum("ij,ij->i", origins, directions)
    c = np.einsum("ij,ij->i", origins, origins) - radius * radius
    disc = b * b - c
    valid = disc >= 0.0
    root = np.sqrt(np.where(valid, disc, 0.0))
    t, _ = _first_positive(-b - root, -b + root, valid)
    normals = np.zeros_like(origins)
    hit = np.isfinite(t)
    normals[hit] = (origins[hit] + t[hit, None] * directions[hit]) / radius
    return t, normals


def intersect_cylinder(origins: np.ndarray, directions: np.ndarray, radius: float, length: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Capped cylinder along z, centred on the origin (model.geometry convention)."""
    half = 0.5 * length
    ox, oy, oz = origins.T
    dx, dy, dz = directions.T
    # Infinite side: (ox + t dx)^2 + (oy + t dy)^2 = r^2.
    a = dx * dx + dy * dy
    b = ox * dx + oy * dy
    c = ox * ox + oy * oy - radius * radius
    radial = a > _EPS
    disc = b * b - a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.where(disc >= 0.0, disc, 0.0))
        s_lo = np.where(radial, (-b - root) / a, -np.inf)
        s_hi = np.where(radial, (-b + root) / a, np.inf)
        inside_side = radial & (disc >= 0.0) | (~radial & (c <= 0.0))
        z_lo = np.where(dz != 0.0, (-half - oz) / dz, -np.inf)
        z_hi = np.where(dz != 0.0, (half - oz) / dz, np.inf)
    z_near, z_far = np.minimum(z_lo, z_hi), np.maximum(z_lo, z_hi)
    parallel_z = dz == 0.0
    z_near = np.where(parallel_z, np.where(np.abs(oz) <= half, -np.inf, np.inf), z_near)
    z_far = np.where(parallel_z, np.where(np.abs(oz) <= half, np.inf, -np.inf), z_far)
    t_near = np.maximum(s_lo, z_near)
    t_far = np.minimum(s_hi, z_far)
    t, use_far = _first_positive(t_near, t_far, inside_side)
    on_cap = np.where(use_far, z_far < s_hi, z_near > s_lo)
    normals = np.zeros_like(origins)
    hit = np.isfinite(t)
    p = origins[hit] + t[hit, None] * directions[hit]
    cap = on_cap[hit]
    n = np.zeros_like(p)
    n[cap, 2] = np.sign(p[cap, 2])
    n[~cap, :2] = p[~cap, :2] / radius
    normals[hit] = n
    return t, normals


def moller_trumbore(origins: np.ndarray, directions: np.ndarray, v0: np.ndarray, e1: np.ndarray,
                    e2: np.ndarray) -> np.ndarray:
    """Distances of each ray to each triangle, shape (N, M) (inf where missed), float64.

    Triangles are ``v0 + u e1 + v e2``; pass row-aligned single triangles
    (shape (N, 3)) to get the pairwise (N,) distances instead.
    """
    pairwise = v0.ndim == 2 and v0.shape[0] == origins.shape[0] and e1.shape == origins.shape
    if pairwise:
        d, o = directions, origins
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / det
            s = o - v0
            u = np.einsum("ij,ij->i", s, p) * inv
            q = np.cross(s, e1)
            v = np.einsum("ij,ij->i", d, q) * inv
            t = np.einsum("ij,ij->i", e2, q) * inv
    else:
        d, o = directions[:, None, :], origins[:, None, :]
        p = np.cross(d, e2[None])
        det = np.einsum("mj,nmj->nm", e1, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / det
            s = o - v0[None]
            u = np.einsum("nmj,nmj->nm", s, p) * inv
            q = np.cross(s, e1[None])
            v = np.einsum("nij,nmj->nm", d, q) * inv
            t = np.einsum("mj,nmj->nm", e2, q) * inv
    with np.errstate(invalid="ignore"):          # degenerate triangles give NaN: not a hit
        ok = (np.abs(det) > _EPS) & (u >= -1e-9) & (v >= -1e-9) & (u + v <= 1.0 + 1e-9) & (t >= 0.0)
    return np.where(ok, t, np.inf)


class TriangleMesh:
    """A static triangle mesh (in its own frame) answering first-hit ray queries."""

    def __init__(self, vertices: np.ndarray, faces: np.ndarray, backend: str = "auto"):
        self.vertices = np.ascontiguousarray(vertices, dtype=float)
        self.faces = np.ascontiguousarray(faces, dtype=np.int64)
        v = self.vertices[self.faces]
        self.v0, self.e1, self.e2 = v[:, 0], v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]
        normals = np.cross(self.e1, self.e2)
        norm = np.linalg.norm(normals, axis=1, keepdims=True)
        self.face_normals = np.divide(normals, norm, out=np.zeros_like(normals), where=norm > 0)
        self.plane_offset = np.einsum("ij,ij->i", self.face_normals, self.v0)
        # one contiguous array per axis: gathering 1-D columns is ~4x faster than rows of an (F, 3) array
        self._normal_columns = [np.ascontiguousarray(self.face_normals[:, k]) for k in range(3)]
        self.backend = resolve_backend(backend)
        self._embree = self._intersector = None
        if self.backend == "embree":
            from embreex import rtcore_scene
            from embreex.mesh_construction import TriangleMesh as EmbreeMesh

            self._embree = rtcore_scene.EmbreeScene(_embree_device())
            EmbreeMesh(scene=self._embree, vertices=self.vertices.astype(np.float32),
                       indices=self.faces.astype(np.int32))
        elif self.backend == "trimesh":
            import trimesh
            from trimesh.ray.ray_triangle import RayMeshIntersector

            self._intersector = RayMeshIntersector(trimesh.Trimesh(self.vertices, self.faces, process=False))

    def __len__(self) -> int:
        return len(self.faces)

    def first_triangle(self, origins: np.ndarray, directions: np.ndarray) -> np.ndarray:
        """Index of the first triangle each ray hits (-1 for none); ``origins`` (N, 3), or (1, 3) shared by
        every ray."""
        n = len(directions)
        if n == 0 or len(self.faces) == 0:
            return np.full(n, -1, dtype=np.int64)
        if self._embree is not None:
            # embreex reads strided buffers: a shared origin is a broadcast view, never copied N times
            o = np.broadcast_to(np.asarray(origins, dtype=np.float32), (n, 3))
            hit = self._embree.run(o, directions.astype(np.float32))
            return hit.astype(np.int64)
        origins = np.broadcast_to(origins, (n, 3))
        if self._intersector is not None:
            return np.asarray(self._intersector.intersects_first(np.ascontiguousarray(origins), directions),
                              dtype=np.int64)
        out = np.full(n, -1, dtype=np.int64)
        chunk = max(1, 2_000_000 // max(1, len(self.faces)))
        for start in range(0, n, chunk):
            t = moller_trumbore(origins[start:start + chunk], directions[start:start + chunk],
                                self.v0, self.e1, self.e2)
            best = np.argmin(t, axis=1)
            hit = np.isfinite(t[np.arange(len(best)), best])
            out[start:start + chunk] = np.where(hit, best, -1)
        return out

    def intersect(self, origins: np.ndarray, directions: np.ndarray, normals: bool = True
                  ) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """Distances (and, when asked, facing normals; else None) of the first hits."""
        hits = self.intersect_indexed(origins, directions, normals)
        return hits.distance, hits.normal

    def intersect_indexed(self, origins: np.ndarray, directions: np.ndarray, normals: bool = True,
                          cosine: bool = False) -> "MeshHits":
        """First hit of each ray: triangle, distance and, when asked, facing normal and ``|n . d|``.

        ``origins`` (N, 3), or (1, 3) shared by every ray (a camera: the plane offsets are then taken
        once per triangle instead of once per ray)."""
        tri = self.first_triangle(origins, directions)
        return plane_hits(self._normal_columns, self.plane_offset, self.face_normals, tri, origins,
                          directions, normals, cosine)


def plane_hits(normal_columns, plane_offset: np.ndarray, face_normals: np.ndarray, tri: np.ndarray,
               origins: np.ndarray, directions: np.ndarray, normals: bool = True, cosine: bool = False
               ) -> "MeshHits":
    """Hits of rays on the planes of the triangles ``tri`` they were found to meet (-1: none), float64.

    Shared by every way of finding the triangle (ray caster backends, the camera's z-buffer), so each
    returns the same distance."""
    # Every ray is computed (a miss with the last triangle, mode="wrap", then discarded): cheaper than
    # compacting the (N, 3) rays to the hits and spreading the results back.
    nx, ny, nz = (np.take(column, tri, mode="wrap") for column in normal_columns)
    d = directions
    denom = d[:, 0] * nx
    denom += d[:, 1] * ny
    denom += d[:, 2] * nz
    if len(origins) == 1:
        num = np.take(plane_offset - face_normals @ np.asarray(origins[0], dtype=float), tri,
                      mode="wrap")
    else:
        o = origins
        num = np.take(plane_offset, tri, mode="wrap") - (o[:, 0] * nx + o[:, 1] * ny + o[:, 2] * nz)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.divide(num, denom, out=num)
    # The backend picked the triangle; the distance to its plane is recomputed in float64.
    missed = ~(t >= 0.0)                   # NaN (degenerate), behind
    missed |= tri < 0                      # or nothing hit
    normal = cos = None
    if normals:
        normal = np.stack([nx, ny, nz], axis=1)
        normal *= -np.sign(denom)[:, None]              # face the ray
    if cosine:
        cos = np.abs(denom, out=denom)
    clear_misses(missed, t, tri, normal, cos)
    return MeshHits(tri, t, normal, cos)


def clear_misses(missed: np.ndarray, distance: np.ndarray, index: np.ndarray, normal: Optional[np.ndarray],
                 cosine: Optional[np.ndarray]) -> None:
    """The rays ``missed`` (bool mask) hit nothing: distance inf, index -1, normal and cosine 0 (in place;
    ``normal`` / ``cosine`` None where not asked for)."""
    if missed.any():
        distance[missed] = np.inf
        index[missed] = -1
        if normal is not None:
            normal[missed] = 0.0
        if cosine is not None:
            cosine[missed] = 0.0


@dataclass
class MeshHits:
    triangle: np.ndarray             # (N,) index of the triangle hit, -1 for none
    distance: np.ndarray             # (N,) inf where nothing was hit
    normal: Optional[np.ndarray]     # (N, 3) facing the ray, zero where missed (if asked)
    cosine: Optional[np.ndarray]     # (N,) |normal . direction|, zero where missed (if asked)


BOX_FACES = np.array([[0, 1, 2], [1, 3, 2], [4, 6, 5], [5, 6, 7], [0, 4, 1], [1, 4, 5],
                      [2, 3, 6], [3, 7, 6], [0, 2, 4], [2, 6, 4], [1, 5, 3], [3, 5, 7]], dtype=np.int64)


def box_triangles(half_extents) -> tuple[np.ndarray, np.ndarray]:
    """The box ``|x_i| <= h_i`` as 12 triangles, wound outwards (exact: its faces are planar)."""
    h = np.asarray(half_extents, dtype=float).reshape(3)
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float) * h
    return corners, BOX_FACES.copy()


_EMBREE_DEVICE = None
_EMBREE_LOCK = threading.Lock()


def _embree_device():
    """One Embree device (and its thread pool) for every mesh of the process, not one per mesh."""
    global _EMBREE_DEVICE
    with _EMBREE_LOCK:
        if _EMBREE_DEVICE is None:
            from embreex import rtcore

            _EMBREE_DEVICE = rtcore.EmbreeDevice()
        return _EMBREE_DEVICE


def resolve_backend(backend: str = "auto") -> str:
    """``auto`` -> the fastest available: embree, then trimesh (needs rtree), then numpy."""
    if backend not in ("auto",) + BACKENDS:
        raise ValueError(f"unknown ray casting backend {backend!r}; "
                         f"expected one of auto, {', '.join(BACKENDS)}")
    if backend in ("auto", "embree"):
        try:
            import embreex  # noqa: F401
            return "embree"
        except ImportError:
            if backend == "embree":
                raise
    if backend in ("auto", "trimesh"):
        try:
            import rtree  # noqa: F401  (trimesh's ray_triangle broad phase)
            return "trimesh"
        except ImportError:
            if backend == "trimesh":
                raise
    return "numpy"
