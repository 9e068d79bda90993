"""Occupancy map costs (issue 44; prints JSON): OctoMap (robot_bridge.world.occupancy) beside a plain numpy
voxel hash, same run, same input.

Scene: a room of axis-aligned boxes (floor, back wall, side wall, a table, two boxes on it) rendered here by a
numpy ray-box intersection.  Every frame is a new view (the camera moves 3 mm / turns 0.002 rad a frame).

- ``depth_640x480``: per frame, a 32FC1 640x480 depth image (fx = fy = 525) into the map:
  ``octomap_map`` is ``OccupancyMap.insert_depth`` with projective clearing, the configuration the nodes use
  (pixels sampled where a voxel spans several, filters, the end cells into OctoMap with updateNodes, the
  map's occupied cells in the frustum projected into the image and missed when seen through);
  ``octomap_map_first_frame`` its first frame (every cell new: none yet at OctoMap's clamp);
  ``octomap_map_alone`` the same in a pass of its own before the others (the others' frames between two of
  its frames evict its caches);
  ``octomap_map_rays`` the map with ``clearing="rays"`` (OctoMap insertPointCloud with ray clearing, one ray
  per end cell: ``discretize``); ``octomap_every_ray`` the same points through insertPointCloud with one ray
  per point (fewer frames: slow);
  ``octomap_end_points_only`` OctoMap's updateNodes on the end cells (no clearing: the floor of OctoMap's
  cost); ``octomap_map_rays_stride_2`` / ``_4`` the rays map fed every 2nd / 4th pixel of every 2nd / 4th
  row (with their cells' agreement with the full-resolution voxel hash); ``numpy_voxel_hash`` the baseline:
  back-projection, keys, np.unique and a Python set of packed keys (no clearing, no probabilities).
  ``ratio_map_to_voxel_hash`` = octomap_map / numpy_voxel_hash, ``ratio_rays_to_map`` = octomap_map_rays /
  octomap_map (CPU time).
- ``scan_720``: a 720-beam laser scan (0.5 deg) at 0.3 m height, the map (projective), the map with rays, and
  the raw ways.
- ``memory``: OctoMap's memoryUsage after the depth frames, per m^3 of space it knows (free or occupied),
  and per occupied cell; the voxel hash's bytes (set + ints) per occupied cell; a dense 2 cm grid of one
  byte per cell is 125000 B per m^3.
- ``agreement``: the occupied cells of the map (and of the rays map) and of the voxel hash after the same
  frames: the share of each that has a cell of the other within one voxel (Chebyshev distance <= 1 in keys).

Times: wall (``ms``) and process CPU (``cpu_ms``: all threads; OctoMap parallelises with OpenMP) per frame,
median over the frames.  Goal: under 10 ms per VGA frame (``goal_met_cpu``, ``goal_met_wall``).

Usage: .venv/bin/python bench/occupancy_bench.py [--frames 10] [--resolution 0.02]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from robot_bridge.world.occupancy import (  # noqa: E402
    KEY_OFFSET, OccupancyConfig, OccupancyMap, depth_points, occupied_keys, scan_points)

W, H, F = 640, 480, 525.0
K = [F, 0.0, (W - 1) / 2, 0.0, F, (H - 1) / 2, 0.0, 0.0, 1.0]
BOXES = [  # (min, max) in the world: floor, back wall, side wall, table top, two boxes on it
    ((-0.5, -2.0, -0.05), (3.0, 2.0, 0.0)), ((2.4, -2.0, 0.0), (2.5, 2.0, 2.0)),
    ((-0.5, 1.6, 0.0), (3.0, 1.7, 2.0)), ((0.8, -0.6, 0.7), (1.4, 0.6, 0.75)),
    ((0.9, -0.3, 0.75), (1.1, -0.1, 0.95)), ((1.0, 0.2, 0.75), (1.3, 0.35, 1.05)),
]
STRIDES = (2, 4)     # the map fed every 2nd / 4th pixel and row (320x240, 160x120 rays)
CONFIG = dict(workspace_min=(-1.0, -2.0, -0.2), workspace_max=(3.0, 2.0, 2.2), max_range=4.0)


def camera_pose(k: int) -> np.ndarray:
    """World -> optical frame: at (0, 0, 1.2) looking along +x, pitched down 0.35 rad, moving a little."""
    pitch, yaw = 0.35 + 0.002 * (k % 20), 0.002 * k
    look = np.array([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), -np.sin(pitch)])
    right = np.cross(look, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(look, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, look], axis=1)
    pose[:3, 3] = (0.003 * k, 0.0, 1.2)
    return pose


def cast(origin: np.ndarray, dirs: np.ndarray) -> np.ndarray:
    """Ray parameter t of the nearest box hit per direction (inf: none)."""
    best = np.full(len(dirs), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / dirs
        for lo, hi in BOXES:
            t1, t2 = (np.asarray(lo) - origin) * inv, (np.asarray(hi) - origin) * inv
            near = np.nanmax(np.minimum(t1, t2), axis=1)
            far = np.nanmin(np.maximum(t1, t2), axis=1)
            hit = (near <= far) & (near > 0)
            best = np.where(hit & (near < best), near, best)
    return best


def render_depth(pose: np.ndarray) -> np.ndarray:
    u, v = np.meshgrid(np.arange(W, dtype=float), np.arange(H, dtype=float))
    d = np.stack([(u - K[2]) / F, (v - K[5]) / F, np.ones_like(u)], axis=-1).reshape(-1, 3)   # z = 1
    t = cast(pose[:3, 3], d @ pose[:3, :3].T)
    return np.where(np.isfinite(t), t, np.nan).reshape(H, W).astype(np.float32)


def scan(k: int) -> tuple[np.ndarray, np.ndarray]:
    pose = np.eye(4)
    pose[:3, 3] = (0.002 * k, 0.0, 0.3)
    angles = -np.pi + np.radians(0.5) * np.arange(720)
    dirs = np.stack([np.cos(angles), np.sin(angles), np.zeros(720)], axis=1)
    return pose, cast(pose[:3, 3], dirs)


def packed(world: np.ndarray, res: float) -> np.ndarray:
    k = np.floor(world / res).astype(np.int64) + KEY_OFFSET
    return (k[:, 0] << 32) | (k[:, 1] << 16) | k[:, 2]


def cell_centres(world: np.ndarray, res: float) -> np.ndarray:
    """Centres of the distinct cells of ``world`` points (unique on packed keys: np.unique(axis=0) is 10x
    slower)."""
    p = np.unique(packed(world, res))
    k = np.stack([(p >> 32) & 0xFFFF, (p >> 16) & 0xFFFF, p & 0xFFFF], axis=1) - KEY_OFFSET
    return np.ascontiguousarray((k + 0.5) * res)


def timed(fn, *args) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn(*args)
    return 1e3 * (time.perf_counter() - w), 1e3 * (time.process_time() - c)


def summary(samples: list[tuple[float, float]]) -> dict:
    return {"ms": round(statistics.median(s[0] for s in samples), 3),
            "cpu_ms": round(statistics.median(s[1] for s in samples), 3), "frames": len(samples)}


def within_one(a: np.ndarray, b: np.ndarray) -> float:
    """Share of keys ``a`` with a key of ``b`` within Chebyshev distance 1."""
    if not len(a):
        return 1.0

    def pack(k):
        return (k[:, 0] << 32) | (k[:, 1] << 16) | k[:, 2]

    others = pack(b)
    found = np.zeros(len(a), bool)
    for offset in np.stack(np.meshgrid(*[(-1, 0, 1)] * 3, indexing="ij"), axis=-1).reshape(-1, 3):
        found |= np.isin(pack(a + offset), others)
    return round(float(found.mean()), 4)


def bench(frames: int, res: float) -> dict:
    import octomap

    config = OccupancyConfig(resolution=res, **CONFIG)
    rays_config = OccupancyConfig(resolution=res, clearing="rays", **CONFIG)
    occupancy, rays_map = OccupancyMap(config), OccupancyMap(rays_config)
    every_ray, end_points = octomap.OcTree(res), octomap.OcTree(res)
    hashed: set = set()
    images = [(camera_pose(k), render_depth(camera_pose(k))) for k in range(frames)]
    strided = {s: OccupancyMap(rays_config) for s in STRIDES}
    times: dict[str, list] = {"octomap_map": [], "octomap_map_rays": [],
                              **{f"octomap_map_rays_stride_{s}": [] for s in STRIDES},
                              "octomap_every_ray": [], "octomap_end_points_only": [], "numpy_voxel_hash": []}

    def baseline(depth, pose):
        pts, _ = depth_points(depth, K, "32FC1")
        world = pts @ pose[:3, :3].T + pose[:3, 3]
        lo, hi = np.asarray(config.workspace_min), np.asarray(config.workspace_max)
        world = world[np.all((world >= lo) & (world <= hi), axis=1)
                      & (np.linalg.norm(world - pose[:3, 3], axis=1) <= config.max_range)]
        hashed.update(np.unique(packed(world, res)).tolist())

    def octomap_raw(tree, depth, pose, rays):
        pts, _ = depth_points(depth, K, "32FC1")
        world = np.ascontiguousarray(pts @ pose[:3, :3].T + pose[:3, 3])
        if rays:
            tree.insertPointCloud(world, np.ascontiguousarray(pose[:3, 3]), maxrange=config.max_range)
        else:
            near = world[np.linalg.norm(world - pose[:3, 3], axis=1) <= config.max_range]
            tree.updateNodes(cell_centres(near, res), True)

    alone = OccupancyMap(config)              # the same frames back to back, nothing else between them
    times["octomap_map_alone"] = [timed(alone.insert_depth, depth, K, "32FC1", pose, float(k))
                                  for k, (pose, depth) in enumerate(images)]
    for k, (pose, depth) in enumerate(images):
        times["octomap_map"].append(timed(occupancy.insert_depth, depth, K, "32FC1", pose, float(k)))
        times["octomap_map_rays"].append(timed(rays_map.insert_depth, depth, K, "32FC1", pose, float(k)))
        times["numpy_voxel_hash"].append(timed(baseline, depth, pose))
        for stride, smap in strided.items():
            times[f"octomap_map_rays_stride_{stride}"].append(
                timed(smap.insert_depth, depth, K, "32FC1", pose, float(k), stride))
        times["octomap_end_points_only"].append(timed(octomap_raw, end_points, depth, pose, False))
        if k < min(frames, 3):
            times["octomap_every_ray"].append(timed(octomap_raw, every_ray, depth, pose, True))
    depth_out = {name: summary(s) for name, s in times.items()}
    depth_out["octomap_map_first_frame"] = summary(times["octomap_map"][:1])
    depth_out["ratio_map_to_voxel_hash"] = round(depth_out["octomap_map"]["cpu_ms"]
                                                 / depth_out["numpy_voxel_hash"]["cpu_ms"], 3)
    depth_out["ratio_rays_to_map"] = round(depth_out["octomap_map_rays"]["cpu_ms"]
                                           / depth_out["octomap_map"]["cpu_ms"], 1)
    depth_out["goal_ms"] = 10.0
    best = {k: min(depth_out[m][k] for m in ("octomap_map", "octomap_map_alone")) for k in ("ms", "cpu_ms")}
    depth_out["goal_met_cpu"], depth_out["goal_met_wall"] = best["cpu_ms"] < 10.0, best["ms"] < 10.0

    keys = occupancy.occupied_keys()
    base = np.array(sorted(hashed), dtype=np.int64)
    base = np.stack([(base >> 32) & 0xFFFF, (base >> 16) & 0xFFFF, base & 0xFFFF], axis=1)
    tree = occupancy.tree
    known = sum(leaf.getSize() ** 3 for leaf in tree.begin_leafs())
    memory = {"octomap_bytes": int(tree.memoryUsage()), "octomap_known_m3": round(known, 3),
              "octomap_bytes_per_known_m3": round(tree.memoryUsage() / known) if known else None,
              "octomap_occupied_cells": len(keys),
              "octomap_bytes_per_occupied_cell": round(tree.memoryUsage() / max(len(keys), 1), 1),
              "voxel_hash_bytes": sys.getsizeof(hashed) + 32 * len(hashed),
              "voxel_hash_cells": len(hashed),
              "voxel_hash_bytes_per_cell": round((sys.getsizeof(hashed) + 32 * len(hashed))
                                                 / max(len(hashed), 1), 1),
              "dense_grid_bytes_per_m3": round(1.0 / res ** 3),
              "rays_octomap_bytes": int(rays_map.tree.memoryUsage())}
    for stride, smap in strided.items():
        skeys = smap.occupied_keys()
        depth_out[f"octomap_map_rays_stride_{stride}"].update(
            occupied_cells=len(skeys), cells_near_voxel_hash=within_one(skeys, base),
            voxel_hash_cells_near_it=within_one(base, skeys))
    rkeys = rays_map.occupied_keys()
    agreement = {"map_cells": len(keys), "voxel_hash_cells": len(base), "rays_map_cells": len(rkeys),
                 "map_cells_near_voxel_hash": within_one(keys, base),
                 "voxel_hash_cells_near_map": within_one(base, keys),
                 "rays_map_cells_near_voxel_hash": within_one(rkeys, base),
                 "voxel_hash_cells_near_rays_map": within_one(base, rkeys),
                 "exactly_equal": bool(len(keys) == len(base) and np.array_equal(keys, base))}
    assert occupied_keys(tree).shape == keys.shape

    scan_map, scan_rays = OccupancyMap(config), OccupancyMap(rays_config)
    scan_tree, scan_end = octomap.OcTree(res), octomap.OcTree(res)
    scan_hash: set = set()
    stimes: dict[str, list] = {k: [] for k in ("octomap_map", "octomap_map_rays", "octomap_every_ray",
                                               "octomap_end_points_only", "numpy_voxel_hash")}

    def scan_raw(tree, ranges, pose, rays):
        pts, _ = scan_points(ranges, -np.pi, np.radians(0.5), 0.05, 10.0)
        world = np.ascontiguousarray(pts @ pose[:3, :3].T + pose[:3, 3])
        if rays:
            tree.insertPointCloud(world, np.ascontiguousarray(pose[:3, 3]), maxrange=config.max_range)
        else:
            tree.updateNodes(cell_centres(world, res), True)

    def scan_hash_insert(ranges, pose):
        pts, _ = scan_points(ranges, -np.pi, np.radians(0.5), 0.05, 10.0)
        world = pts @ pose[:3, :3].T + pose[:3, 3]
        scan_hash.update(np.unique(packed(world, res)).tolist())

    for k in range(max(frames, 20)):
        pose, ranges = scan(k)
        stimes["octomap_map"].append(timed(scan_map.insert_scan, ranges, -np.pi, np.radians(0.5), 0.05, 10.0,
                                           pose, float(k)))
        stimes["octomap_map_rays"].append(timed(scan_rays.insert_scan, ranges, -np.pi, np.radians(0.5), 0.05,
                                                10.0, pose, float(k)))
        stimes["octomap_every_ray"].append(timed(scan_raw, scan_tree, ranges, pose, True))
        stimes["octomap_end_points_only"].append(timed(scan_raw, scan_end, ranges, pose, False))
        stimes["numpy_voxel_hash"].append(timed(scan_hash_insert, ranges, pose))
    scan_out = {name: summary(s) for name, s in stimes.items()}
    scan_out["ratio_map_to_voxel_hash"] = round(scan_out["octomap_map"]["cpu_ms"]
                                                / max(scan_out["numpy_voxel_hash"]["cpu_ms"], 1e-3), 2)
    return {"resolution": res, "frames": frames, "depth_640x480": depth_out, "scan_720": scan_out,
            "memory": memory, "agreement": agreement,
            "load_1min": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--resolution", type=float, default=0.02)
    args = parser.parse_args()
    print(json.dumps(bench(max(1, args.frames), args.resolution), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
