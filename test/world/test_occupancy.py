"""Issue 44: sensor points -> an OctoMap occupancy map, checked against geometry computed here (a box
rendered by a numpy ray-box intersection, a hand-placed link) and against OctoMap reading its own message."""

from __future__ import annotations

import numpy as np
import pytest

octomap = pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")

from robot_bridge.model import Box, Geometry, Joint, Link, Robot  # noqa: E402
from robot_bridge.world.occupancy import (  # noqa: E402
    CLEARING, KEY_OFFSET, BodyFilter, FilterBody, OccupancyConfig, OccupancyError, OccupancyMap, SelfFilter,
    decode_binary, occupied_keys)

RES = 0.02
W, H, F = 160, 120, 120.0                       # a small pinhole: cheap, still ~1 ray per 1 cm at 1 m
K = [F, 0.0, (W - 1) / 2, 0.0, F, (H - 1) / 2, 0.0, 0.0, 1.0]
# optical frame (x right, y down, z forward) looking along world +x from the origin
CAMERA = np.array([[0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
BOX_LO, BOX_HI = np.array([1.01, -0.15, -0.11]), np.array([1.31, 0.13, 0.17])   # front face mid-cell


def render(lo, hi, pose=CAMERA, w=W, h=H, k=K) -> np.ndarray:
    """32FC1 depth (along the optical axis) of an axis-aligned world box, NaN where the ray misses."""
    u, v = np.meshgrid(np.arange(w, dtype=float), np.arange(h, dtype=float))
    d_cam = np.stack([(u - k[2]) / k[0], (v - k[5]) / k[4], np.ones_like(u)], axis=-1)   # z = 1
    d = d_cam @ pose[:3, :3].T
    o = pose[:3, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (lo - o) / d, (hi - o) / d
    near = np.nanmax(np.minimum(t1, t2), axis=-1)
    far = np.nanmin(np.maximum(t1, t2), axis=-1)
    return np.where((near <= far) & (near > 0), near, np.nan).astype(np.float32)   # t is the depth (z = 1)


def cells(keys) -> set:
    return set(map(tuple, np.asarray(keys).tolist()))


def centre(keys) -> np.ndarray:
    return (np.asarray(keys) - KEY_OFFSET + 0.5) * RES


def state(tree, point) -> str:
    """"occupied", "free" or "unknown" (octomap-python wraps a missing node: it raises on use)."""
    node = tree.search(np.asarray(point, float))
    try:
        return "occupied" if tree.isNodeOccupied(node) else "free"
    except octomap.NullPointerException:
        return "unknown"


def near_box(points, lo, hi, slack) -> np.ndarray:
    return np.all((points >= lo - slack) & (points <= hi + slack), axis=1)


@pytest.mark.parametrize("clearing", CLEARING)
def test_a_box_seen_by_a_depth_camera_fills_its_visible_face_within_one_voxel_and_nothing_else(clearing):
    depth = render(BOX_LO, BOX_HI)
    assert np.isfinite(depth).sum() > 1000 and np.isnan(depth).sum() > 1000
    occupancy = OccupancyMap(OccupancyConfig(clearing=clearing))
    stats = occupancy.insert_depth(depth, K, "32FC1", CAMERA, stamp=1.0)
    assert stats.returns == np.isfinite(depth).sum() and stats.no_return == np.isnan(depth).sum()
    if clearing == "rays":
        assert stats.inserted == stats.returns
    else:       # a 2 cm voxel spans 2.4 pixels at 1 m: every 2nd pixel and row is enough
        assert stats.returns / 5 < stats.inserted < stats.returns / 3
    keys = occupancy.occupied_keys()
    centres = centre(keys)
    # no cell farther than one voxel from the box
    assert len(keys) and near_box(centres, BOX_LO, BOX_HI, RES).all()
    # the front face (x = 1.01), sampled every 5 mm, each sample has an occupied cell within one voxel
    ys, zs = np.meshgrid(np.arange(BOX_LO[1], BOX_HI[1], 0.005), np.arange(BOX_LO[2], BOX_HI[2], 0.005))
    face = np.stack([np.full(ys.size, BOX_LO[0]), ys.ravel(), zs.ravel()], axis=1)
    face_keys = np.floor(face / RES).astype(np.int64) + KEY_OFFSET
    occupied = cells(keys)
    offsets = [(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]
    missing = [k for k in face_keys.tolist() if not any((k[0] + a, k[1] + b, k[2] + c) in occupied
                                                        for a, b, c in offsets)]
    assert not missing
    # rays: the space in front of the face is known free, behind it unknown; projective: free space unknown
    assert state(occupancy.tree, [0.6, 0.0, 0.0]) == ("free" if clearing == "rays" else "unknown")
    assert state(occupancy.tree, [1.2, 0.0, 0.0]) == "unknown"


def test_a_depth_camera_clears_the_cells_of_a_box_that_moved_back_projectively():
    occupancy = OccupancyMap()
    occupancy.insert_depth(render(BOX_LO, BOX_HI), K, "32FC1", CAMERA)
    front = [BOX_LO[0], 0.0, 0.0]
    assert state(occupancy.tree, front) == "occupied"
    # a larger box farther back, covering the first one's outline (where a pixel has no return, nothing
    # is seen through)
    lo2, hi2 = BOX_LO + [0.3, -0.1, -0.1], BOX_HI + [0.3, 0.1, 0.1]
    frames = 0
    while state(occupancy.tree, front) == "occupied":          # seen through: misses
        occupancy.insert_depth(render(lo2, hi2), K, "32FC1", CAMERA)
        frames += 1
        assert frames <= 3
    assert frames >= 2                                          # one hit outweighs one miss
    keys = occupancy.occupied_keys()
    assert len(keys) and near_box(centre(keys), lo2, hi2, RES).all()
    # the same tree OctoMap builds from the same hits and misses, cell by cell (the mirror is exact)
    for i, point in enumerate(occupancy._centres(occupancy._mkeys)):
        assert occupancy.tree.search(point).getLogOdds() == pytest.approx(float(occupancy._mlog[i]), abs=1e-6)
    # cells out of the image or hidden behind the measured surface are left as they are
    side = OccupancyMap()
    side.insert_points(np.array([[1.5, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.eye(4))     # behind the box; aside
    side.insert_depth(render(BOX_LO, BOX_HI), K, "32FC1", CAMERA)
    assert state(side.tree, [1.5, 0.0, 0.0]) == "occupied" and state(side.tree, [0.0, 1.0, 0.0]) == "occupied"


def test_16uc1_millimetres_give_the_same_cells_as_32fc1_metres():
    depth = render(BOX_LO, BOX_HI)
    mm = np.where(np.isfinite(depth), np.round(depth * 1000.0), 0).astype(np.uint16)
    a, b = OccupancyMap(), OccupancyMap()
    a.insert_depth(depth, K, "32FC1", CAMERA)
    b.insert_depth(mm, K, "16UC1", CAMERA)
    assert len(a.occupied_keys()) and cells(a.occupied_keys()) == cells(b.occupied_keys())
    with pytest.raises(OccupancyError, match="16UC1 needs uint16"):
        b.insert_depth(depth, K, "16UC1", CAMERA)


def scan_at(distance: float, count: int = 91):
    return np.full(count, distance), -np.pi / 8, (np.pi / 4) / (count - 1)


@pytest.mark.parametrize("clearing", CLEARING)
def test_a_cell_is_cleared_when_later_scans_see_through_it(clearing):
    occupancy = OccupancyMap(OccupancyConfig(max_range=5.0, workspace_max=(5.0, 2.0, 2.5), clearing=clearing))
    ranges, lo, inc = scan_at(1.01)
    sensor = np.eye(4)
    sensor[2, 3] = 0.31
    occupancy.insert_scan(ranges, lo, inc, 0.05, 4.0, sensor)
    wall = np.array([1.01, 0.0, 0.31])
    tree = occupancy.tree
    assert state(tree, wall) == "occupied"
    ranges, lo, inc = scan_at(2.01)            # the wall is gone: the beams reach 2 m, through its cells
    sweeps = 0
    while state(tree, wall) == "occupied":
        occupancy.insert_scan(ranges, lo, inc, 0.05, 4.0, sensor)
        sweeps += 1
        assert sweeps <= 3                   # hit 0.7 then misses at 0.4: log-odds 0.85 - 3 x 0.41 < 0
    assert sweeps >= 2
    assert state(tree, wall) == "free" and state(tree, [2.01, 0.0, 0.31]) == "occupied"
    # a beam beyond range_max (inf) clears (rays: the unknown space too) but marks nothing
    occupancy.insert_scan(np.full(91, np.inf), lo, inc, 0.05, 4.0, sensor)
    assert state(tree, [3.5, 0.0, 0.31]) == ("free" if clearing == "rays" else "unknown")
    assert state(tree, [4.5, 0.0, 0.31]) == "unknown"
    for _ in range(8):                       # three hits at most: log-odds 2.5 < 8 x 0.41
        occupancy.insert_scan(np.full(91, np.inf), lo, inc, 0.05, 4.0, sensor)
    assert state(tree, [2.01, 0.0, 0.31]) == "free"


def test_cells_not_seen_again_within_the_decay_drop_out():
    occupancy = OccupancyMap(OccupancyConfig(decay=1.0))
    depth = render(BOX_LO, BOX_HI)
    occupancy.insert_depth(depth, K, "32FC1", CAMERA, stamp=10.0)
    first = cells(occupancy.occupied_keys())
    assert first and occupancy.expire(10.9) == 0
    # a second box, seen later, survives the first one's expiry
    lo2, hi2 = BOX_LO + [0.0, 0.0, 0.5], BOX_HI + [0.0, 0.0, 0.5]
    occupancy.insert_depth(render(lo2, hi2), K, "32FC1", CAMERA, stamp=10.5)
    assert occupancy.expire(11.2) > 0
    left = centre(occupancy.occupied_keys())
    assert len(left) and near_box(left, lo2, hi2, RES).all()
    assert occupancy.expire(11.6) > 0 and not len(occupancy.occupied_keys())


def arm() -> tuple[Robot, str]:
    """A base and one link (a 0.4 m box along its x) turning about z 0.3 m above the base."""
    base = Link("base", collisions=[Geometry(Box(np.array([0.1, 0.1, 0.1])))])
    origin = np.eye(4)
    origin[:3, 3] = (0.2, 0.0, 0.0)
    upper = Link("upper", collisions=[Geometry(Box(np.array([0.2, 0.05, 0.05])), origin=origin)])
    j = np.eye(4)
    j[2, 3] = 0.3
    joint = Joint("j1", "revolute", "base", "upper", origin=j, axes=[np.array([0.0, 0.0, 1.0])],
                  lower=np.array([-3.0]), upper=np.array([3.0]))
    return Robot("arm", links={"base": base, "upper": upper}, joints={"j1": joint}), "j1"


def test_the_self_filter_drops_points_on_the_links_at_the_given_configuration():
    robot, joint = arm()
    base = np.eye(4)
    base[:3, 3] = (1.0, 0.0, 0.0)
    occupancy = OccupancyMap(self_filter=SelfFilter(robot, padding=0.02))
    # at j1 = pi/2 the link spans world y 0 .. 0.4 at x = 1, z = 0.3: points on it, and two off it
    on_link = np.array([[1.0, 0.1, 0.3], [1.0, 0.35, 0.3], [1.06, 0.2, 0.34]])
    off = np.array([[1.01, -0.31, 0.31], [1.31, 0.21, 0.31]])
    sensor = np.eye(4)
    sensor[:3, 3] = (0.0, 0.0, 1.0)
    pts = np.vstack([on_link, off]) - sensor[:3, 3]
    stats = occupancy.insert_points(pts, sensor, positions={joint: np.pi / 2}, robot_base=base)
    assert stats.self_filtered == 3 and stats.inserted == 2
    expected = cells(np.floor(off / RES).astype(np.int64) + KEY_OFFSET)
    assert cells(occupancy.occupied_keys()) == expected
    # at j1 = 0 the link points along x instead: the same points are no longer on it
    occupancy.clear()
    stats = occupancy.insert_points(pts, sensor, positions={joint: 0.0}, robot_base=base)
    assert stats.self_filtered == 0
    # link poses given (as TF has them at the stamp): the upper link placed by hand along world y
    along_y = np.eye(4)
    along_y[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    along_y[:3, 3] = (1.0, 0.0, 0.3)
    occupancy.clear()
    stats = occupancy.insert_points(pts, sensor, link_poses={"upper": along_y})
    assert stats.self_filtered == 3
    # a world body filters what lies inside it
    occupancy.clear()
    where = np.eye(4)
    where[:3, 3] = off[1]
    body = FilterBody(Box(np.array([0.05, 0.05, 0.05])), where)
    stats = occupancy.insert_points(pts, sensor, bodies=[body])
    assert stats.body_filtered == 1 and stats.inserted == 4
    # world bodies (as world_node holds them): the arm itself placed as a body, its upper link at j1 = 0
    occupancy.clear()
    robot_as_body, _ = arm()
    on_upper = np.array([[1.21, 0.01, 0.31], [1.01, -0.31, 0.31]])      # on the upper link along x; off
    stats = occupancy.insert_points(on_upper - sensor[:3, 3], sensor,
                                    bodies=BodyFilter(0.02).bodies([(robot_as_body, base)]))
    assert stats.body_filtered == 1 and stats.inserted == 1


def test_the_workspace_bounds_the_map_and_counts_what_falls_outside():
    config = OccupancyConfig(workspace_min=(-1.0, -1.0, -1.0), workspace_max=(1.5, 1.0, 1.0), max_range=5.0)
    occupancy = OccupancyMap(config)
    pts = np.array([[1.21, 0.01, 0.01], [2.01, 0.01, 0.01], [1.21, 1.51, 0.01]])
    stats = occupancy.insert_points(pts, np.eye(4))
    assert stats.outside == 2
    assert cells(occupancy.occupied_keys()) == cells(np.floor(pts[:1] / RES).astype(np.int64) + KEY_OFFSET)
    for leaf in occupancy.tree.begin_leafs():                   # free cells too: none outside
        c, half = np.asarray(leaf.getCoordinate()), leaf.getSize() / 2
        assert np.all(c - half >= np.array(config.workspace_min) - 1e-6)     # float32 coordinates
        assert np.all(c + half <= np.array(config.workspace_max) + 1e-6)
    # the ray to (2, 0, 0) still cleared the part inside: (1.4, 0, 0) is known free
    assert state(occupancy.tree, [1.41, 0.01, 0.01]) == "free"


def test_the_message_data_is_octomaps_binary_data_and_decodes_to_the_same_cells():
    occupancy = OccupancyMap()
    occupancy.insert_depth(render(BOX_LO, BOX_HI), K, "32FC1", CAMERA)
    before = occupancy.occupied_keys()
    log_odds = occupancy.tree.search(centre(before[:1])[0]).getLogOdds()
    fields = occupancy.to_message_fields()
    assert fields["binary"] is True and fields["id"] == "OcTree" and fields["resolution"] == RES
    data = fields["data"].astype(np.uint8).tobytes()
    assert not data.startswith(b"#")                            # writeBinaryData: no file header
    # OctoMap itself reads the bytes as binaryMsgToMap does (readBinaryData after a header of ours)
    decoded = decode_binary(fields["data"], fields["resolution"])
    assert cells(occupied_keys(decoded)) == cells(before)
    # the map's own probabilities are untouched by writing it (OctoMap's writeBinary clamps its tree)
    assert occupancy.tree.search(centre(before[:1])[0]).getLogOdds() == log_odds
    empty = OccupancyMap().to_message_fields()
    assert not len(empty["data"]) and not len(occupied_keys(decode_binary(empty["data"], RES)))


def test_the_coal_object_collides_where_the_box_is_and_nowhere_else():
    coal = pytest.importorskip("coal")
    occupancy = OccupancyMap()
    occupancy.insert_depth(render(BOX_LO, BOX_HI), K, "32FC1", CAMERA)
    octree = occupancy.collision_object()
    probe = coal.Sphere(0.03)

    def hits(x, y, z) -> bool:
        request, result = coal.CollisionRequest(), coal.CollisionResult()
        at = coal.Transform3s(np.eye(3), np.array([x, y, z]))
        return coal.collide(octree, coal.Transform3s(), probe, at, request, result) > 0

    assert hits(1.0, 0.0, 0.0) and hits(1.02, 0.1, 0.1)
    assert not hits(0.8, 0.0, 0.0) and not hits(1.0, 0.4, 0.0)


def test_inputs_over_their_bounds_are_refused_with_typed_errors():
    occupancy = OccupancyMap()
    with pytest.raises(OccupancyError, match="depth image"):
        occupancy.insert_depth(np.zeros((5000, 10), np.float32), K, "32FC1", CAMERA)
    with pytest.raises(OccupancyError, match="encoding"):
        occupancy.insert_depth(np.zeros((10, 10), np.float32), K, "mono8", CAMERA)
    with pytest.raises(OccupancyError, match="camera info"):
        occupancy.insert_depth(np.zeros((10, 10), np.float32), [0.0] * 9, "32FC1", CAMERA)
    bad = CAMERA.copy()
    bad[0, 3] = np.nan
    with pytest.raises(OccupancyError, match="sensor pose"):
        occupancy.insert_depth(np.ones((10, 10), np.float32), K, "32FC1", bad)
    with pytest.raises(OccupancyError, match="point cloud"):
        occupancy.insert_points(np.zeros((10, 2)), np.eye(4))
    with pytest.raises(OccupancyError, match="laser scan"):
        occupancy.insert_scan(np.ones(200_000), 0.0, 0.01, 0.1, 4.0, np.eye(4))
    with pytest.raises(OccupancyError, match="resolution"):
        OccupancyConfig(resolution=0.0)
    with pytest.raises(OccupancyError, match="workspace"):
        OccupancyConfig(workspace_min=(0, 0, 0), workspace_max=(1000, 1000, 1000), resolution=0.005)
    with pytest.raises(OccupancyError, match="octomap"):
        decode_binary(b"\x03", RES)
    assert not len(occupancy.occupied_keys())


@pytest.mark.parametrize("clearing", CLEARING)
def test_each_sensor_has_its_own_max_range_and_decay(clearing):
    occupancy = OccupancyMap(OccupancyConfig(clearing=clearing))          # the config's decay: never
    depth = render(BOX_LO, BOX_HI)                                        # the face 1.01 m ahead
    occupancy.insert_depth(depth, K, "32FC1", CAMERA, max_range=0.9)
    assert not len(occupancy.occupied_keys())                             # beyond this camera's range
    occupancy.insert_depth(depth, K, "32FC1", CAMERA, stamp=10.0, decay=1.0)
    face = cells(occupancy.occupied_keys())
    assert face
    p, q = np.array([[0.51, 0.51, 0.51]]), np.array([[0.51, -0.51, 0.51]])
    occupancy.insert_points(p, np.eye(4), stamp=10.0, decay=5.0)
    occupancy.insert_points(q, np.eye(4), stamp=10.0)                     # the config's: never
    occupancy.insert_points(p + [0.0, 0.0, 0.2], np.eye(4), stamp=10.0, decay=1.0)
    occupancy.insert_points(p + [0.0, 0.0, 0.2], np.eye(4), stamp=10.0, decay=3.0)    # the later expiry
    assert occupancy.expire(10.9) == 0
    occupancy.expire(11.5)
    left = cells(occupancy.occupied_keys())
    assert not (left & face) and len(left) == 3
    occupancy.expire(13.5)
    assert len(cells(occupancy.occupied_keys())) == 2
    occupancy.expire(15.5)
    assert cells(occupancy.occupied_keys()) == cells(np.floor(q / RES).astype(np.int64) + KEY_OFFSET)
    with pytest.raises(OccupancyError, match="decay"):
        occupancy.insert_points(p, np.eye(4), decay=-1.0)
    with pytest.raises(OccupancyError, match="max_range"):
        occupancy.insert_points(p, np.eye(4), max_range=0.0)
