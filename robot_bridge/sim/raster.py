"""Primary visibility of a pinhole camera by a z-buffer over triangles (numba), not one ray at a time.

For each pixel the kernel finds the nearest triangle its ray (through the pixel centre) meets, with the
same test a ray caster makes: barycentric coordinates of the ray's hit on the triangle's plane, each
``>= -1e-9`` (as :func:`robot_bridge.sim.raycast.moller_trumbore`), in float64, depth compared along the
ray.  Triangles crossing the camera plane need no clipping: the inside test is on the ray itself (edge
functions in 3-D), the clipped triangle only bounds the pixels tried.  Only the triangle index leaves the
kernel: the distance is then computed as for every ray caster backend (plane of that triangle, float64).

numba is optional (``pip install robot_bridge[raycast]``): without it :data:`AVAILABLE` is False and the
camera casts rays through :meth:`robot_bridge.sim.scene.Scene.cast` as before.  numba is imported when
the kernel is first needed (:func:`warm_up`), not with this module; compiled code is cached in a user folder
(:mod:`robot_bridge.jit`), so only the first process pays the compilation (~1-2 s; see
``bench/sensor_bench.py``'s ``raster_jit_seconds``).
"""

from __future__ import annotations

import threading

import numpy as np

from .. import jit

AVAILABLE = jit.AVAILABLE              # without numba the camera falls back to ray casting
_NEAR = 1e-9          # bounds only: hits at depth below this are not looked for
_TOL = -1e-9          # barycentric tolerance, as the numpy Möller–Trumbore backend
_MARGIN = 1e-3        # pixels: bounds are widened by this


def _clip(poly, src, n, a, b, c, d):  # pragma: no cover (numba)
    """Sutherland–Hodgman: the polygon ``poly[src, :n]`` cut to ``a x + b y + c z + d >= 0``, into
    ``poly[1 - src]``; returns its vertex count."""
    dst = 1 - src
    m = 0
    for i in range(n):
        j = (i + 1) % n
        di = a * poly[src, i, 0] + b * poly[src, i, 1] + c * poly[src, i, 2] + d
        dj = a * poly[src, j, 0] + b * poly[src, j, 1] + c * poly[src, j, 2] + d
        if di >= 0.0:
            for k in range(3):
                poly[dst, m, k] = poly[src, i, k]
            m += 1
        if (di >= 0.0) != (dj >= 0.0):
            t = di / (di - dj)
            for k in range(3):
                poly[dst, m, k] = poly[src, i, k] + t * (poly[src, j, k] - poly[src, i, k])
            m += 1
    return m


def _kernel(tris, width, height, fx, fy, cx, cy, as_, bs, dmin, zbuf, ids, id_offset):  # pragma: no cover
    """Z-buffer ``tris`` (F, 3, 3) camera-frame vertices (``as_``/``bs``: ``(u - cx) / fx`` per column,
    ``(v - cy) / fy`` per row) into ``zbuf`` (depth along z, (H*W,)) and ``ids``
    (triangle index + ``id_offset``, -1 none).  Hits closer than ``dmin`` along the ray are skipped."""
    px = np.empty(16)
    py = np.empty(16)
    poly = np.empty((2, 16, 3))          # clipping: polygon in poly[src], result in poly[1 - src]
    for f in range(tris.shape[0]):
        ax, ay, az = tris[f, 0, 0], tris[f, 0, 1], tris[f, 0, 2]
        bx, by, bz = tris[f, 1, 0], tris[f, 1, 1], tris[f, 1, 2]
        qx, qy, qz = tris[f, 2, 0], tris[f, 2, 1], tris[f, 2, 2]
        if az < _NEAR and bz < _NEAR and qz < _NEAR:
            continue
        # plane normal n = (b - a) x (q - a), offset c = n . a
        e1x, e1y, e1z = bx - ax, by - ay, bz - az
        e2x, e2y, e2z = qx - ax, qy - ay, qz - az
        nx = e1y * e2z - e1z * e2y
        ny = e1z * e2x - e1x * e2z
        nz = e1x * e2y - e1y * e2x
        if nx == 0.0 and ny == 0.0 and nz == 0.0:
            continue
        c = nx * ax + ny * ay + nz * az
        if c == 0.0:                     # the plane passes through the camera: seen edge-on
            continue
        sgn = 1.0 if c > 0.0 else -1.0
        # edge functions: r . (b x q), r . (q x a), r . (a x b); their sum is r . n
        c0x, c0y, c0z = by * qz - bz * qy, bz * qx - bx * qz, bx * qy - by * qx
        c1x, c1y, c1z = qy * az - qz * ay, qz * ax - qx * az, qx * ay - qy * ax
        c2x, c2y, c2z = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
        # pixel bounds: of the triangle itself when all of it lies ahead; else of its part inside the view
        # frustum (one pixel wider) and ahead of z = _NEAR (a sliver reaching behind the camera projects
        # towards infinity: bounding that by the image edge would test huge areas for nothing)
        if az >= _NEAR and bz >= _NEAR and qz >= _NEAR:
            k = 3
            for i in range(3):
                px[i] = fx * tris[f, i, 0] / tris[f, i, 2] + cx
                py[i] = fy * tris[f, i, 1] / tris[f, i, 2] + cy
        else:
            for i in range(3):
                poly[0, i, 0], poly[0, i, 1], poly[0, i, 2] = tris[f, i, 0], tris[f, i, 1], tris[f, i, 2]
            k = 3
            k = _clip(poly, 0, k, fx, 0.0, cx + 1.0, 0.0)                # u >= -1
            k = _clip(poly, 1, k, -fx, 0.0, width - cx, 0.0)             # u <= width
            k = _clip(poly, 0, k, 0.0, fy, cy + 1.0, 0.0)                # v >= -1
            k = _clip(poly, 1, k, 0.0, -fy, height - cy, 0.0)            # v <= height
            k = _clip(poly, 0, k, 0.0, 0.0, 1.0, -_NEAR)                 # z >= _NEAR
            if k == 0:
                continue
            for i in range(k):
                px[i] = fx * poly[1, i, 0] / poly[1, i, 2] + cx
                py[i] = fy * poly[1, i, 1] / poly[1, i, 2] + cy
        umin, umax, vmin, vmax = px[0], px[0], py[0], py[0]
        for i in range(1, k):
            umin = min(umin, px[i])
            umax = max(umax, px[i])
            vmin = min(vmin, py[i])
            vmax = max(vmax, py[i])
        if umax < -1.0 or vmax < -1.0 or umin > width or vmin > height:
            continue
        # pixel centres (integer coordinates) within the bounds, widened by far more than their rounding
        u0 = max(0, int(np.ceil(umin - _MARGIN)))
        u1 = min(width - 1, int(np.floor(umax + _MARGIN)))
        v0 = max(0, int(np.ceil(vmin - _MARGIN)))
        v1 = min(height - 1, int(np.floor(vmax + _MARGIN)))
        # inside: every barycentric e_i / (r . n) >= _TOL, tested without dividing (sign of r . n)
        for v in range(v0, v1 + 1):
            b = bs[v]
            row = v * width
            n_row = b * ny + nz
            e0_row, e1_row, e2_row = b * c0y + c0z, b * c1y + c1z, b * c2y + c2z
            # the row's span: a hit has s = c / (r . n) > 0, so sign(r . n) = sign(c) there, and each test
            # sign(c) (e_i - _TOL r . n) >= 0 is linear in a; the span (one pixel wider) only bounds the loop
            alo, ahi = -np.inf, np.inf
            for i in range(4):
                if i == 0:
                    k_, m_ = sgn * nx, sgn * n_row
                elif i == 1:
                    k_, m_ = sgn * (c0x - _TOL * nx), sgn * (e0_row - _TOL * n_row)
                elif i == 2:
                    k_, m_ = sgn * (c1x - _TOL * nx), sgn * (e1_row - _TOL * n_row)
                else:
                    k_, m_ = sgn * (c2x - _TOL * nx), sgn * (e2_row - _TOL * n_row)
                if k_ > 0.0:
                    alo = max(alo, -m_ / k_)
                elif k_ < 0.0:
                    ahi = min(ahi, -m_ / k_)
                elif m_ < 0.0:
                    ahi = -np.inf
            if not alo <= ahi:
                continue
            ulo, uhi = alo * fx + cx - 1.0, ahi * fx + cx + 1.0
            if ulo > u1 or uhi < u0:
                continue
            ustart = int(np.ceil(ulo)) if ulo > u0 else u0           # converted only within [u0, u1]
            uend = int(np.floor(uhi)) if uhi < u1 else u1
            for u in range(ustart, uend + 1):
                a = as_[u]
                rn = a * nx + n_row
                if rn > 0.0:
                    limit = _TOL * rn
                    if (a * c0x + e0_row < limit or a * c1x + e1_row < limit
                            or a * c2x + e2_row < limit):
                        continue
                elif rn < 0.0:
                    limit = _TOL * rn
                    if (a * c0x + e0_row > limit or a * c1x + e1_row > limit
                            or a * c2x + e2_row > limit):
                        continue
                else:
                    continue
                s = c / rn
                p = row + u
                if s <= 0.0 or s >= zbuf[p]:
                    continue
                if dmin > 0.0 and s * np.sqrt(a * a + b * b + 1.0) < dmin:
                    continue
                zbuf[p] = s
                ids[p] = f + id_offset


_compiled: list = []
_lock = threading.Lock()


def _rasterizer():
    """The compiled kernel (compiled on its first call, or loaded from the cache)."""
    global _clip
    with _lock:
        if not _compiled:
            _clip = jit.njit(nogil=True)(_clip)             # the kernel's callee, compiled with it
            _compiled.append(jit.njit(nogil=True)(_kernel))
    return _compiled[0]


def nearest_triangles(triangle_sets, rotation: np.ndarray, position: np.ndarray, width: int, height: int,
                      fx: float, fy: float, cx: float, cy: float, range_min: float = 0.0) -> np.ndarray:
    """Per pixel (row-major, (H*W,)), the index of the nearest triangle hit at ``>= range_min`` along
    the pixel's ray, -1 for none; indices run through ``triangle_sets`` ((vertices, faces, pose) of each:
    ``pose`` places the vertices in the world, None when they are in the world frame) one after the
    other.  The camera's optical frame is at ``rotation``/``position`` in the world."""
    kernel = _rasterizer()
    zbuf = np.full(width * height, np.inf)
    ids = np.full(width * height, -1, dtype=np.int64)
    offset = 0
    as_ = (np.arange(width, dtype=float) - cx) / fx
    bs = (np.arange(height, dtype=float) - cy) / fy
    rot = np.ascontiguousarray(rotation, dtype=float)
    for vertices, faces, pose in triangle_sets:
        if len(faces):
            vertices = np.asarray(vertices, dtype=float)
            if pose is None:                                                  # world -> optical frame
                local = (vertices - position) @ rot
            else:                                                             # shape -> optical frame
                local = vertices @ (pose[:3, :3].T @ rot) + (pose[:3, 3] - position) @ rot
            kernel(np.ascontiguousarray(local[faces]), int(width), int(height), float(fx), float(fy),
                   float(cx), float(cy), as_, bs, float(range_min), zbuf, ids, offset)
        offset += len(faces)
    return ids


def warm_up() -> float:
    """Compile (or load the cached compilation of) the kernel; returns the seconds it took."""
    import time

    start = time.perf_counter()
    tri = (np.array([[-1.0, -1.0, 1.0], [1.0, -1.0, 1.0], [0.0, 1.0, 1.0]]), np.array([[0, 1, 2]]))
    nearest_triangles([tri + (None,)], np.eye(3), np.zeros(3), 4, 4, 2.0, 2.0, 1.5, 1.5)
    return time.perf_counter() - start
