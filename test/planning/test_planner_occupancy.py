"""Issue 44: the planner plans around the sensors' occupancy map.  A box that no body file describes is seen
face by face (points on each face from a sensor in front of it) into an OccupancyMap; the map becomes one
world body of merged boxes (what planner_node makes of world_node's octomap); the path the planner finds
through the place the box occupies is checked by the independent pinocchio + coal checker against the box
itself, every 0.01 rad; a plan made before the box was mapped is invalid once it is (the planner node's
stop and replan)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")
pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pytest.importorskip("pinocchio", reason="pinocchio (pin) is needed for the independent checker")

from fixtures.planning import scenes  # noqa: E402
from fixtures.planning.pin_checker import PinChecker  # noqa: E402

from robot_bridge.planning import JointGoal  # noqa: E402
from robot_bridge.world.occupancy import (KEY_OFFSET, OccupancyMap, body_from_octomap,  # noqa: E402
                                          merged_boxes, occupancy_body)

START = {"j1": -0.9, "j2": 0.6, "j4": 0.9}
GOAL = {"j1": 0.9, "j2": 0.6, "j4": 0.9}
MIDDLE = {"j1": 0.0, "j2": 0.6, "j4": 0.9}
SIZE = np.array([0.16, 0.16, 0.16])


def faces_seen(occupancy: OccupancyMap, centre: np.ndarray, half: np.ndarray) -> None:
    """Each face of the box as a sensor 1 m in front of it sees it (points every 5 mm)."""
    for axis in range(3):
        for sign in (-1.0, 1.0):
            others = [a for a in range(3) if a != axis]
            u, v = np.meshgrid(*(np.arange(-half[a], half[a] + 1e-9, 0.005) for a in others))
            points = np.zeros((u.size, 3))
            points[:, others[0]], points[:, others[1]] = u.ravel(), v.ravel()
            points[:, axis] = sign * half[axis]
            points += centre
            sensor = np.eye(4)
            sensor[:3, 3] = centre
            sensor[axis, 3] += sign * (half[axis] + 1.0)
            occupancy.insert_points(points - sensor[:3, 3], sensor)


def test_merged_boxes_cover_exactly_the_cells_and_coarser_cells_cover_more():
    rng = np.random.default_rng(2)
    keys = np.unique(rng.integers(0, 12, size=(600, 3)), axis=0)
    boxes = merged_boxes(keys)
    cells = [(x, y, z) for x0, y0, z0, x1, y1, z1 in boxes.tolist()
             for x in range(x0, x1 + 1) for y in range(y0, y1 + 1) for z in range(z0, z1 + 1)]
    assert len(cells) == len(set(cells)) == len(keys)              # no overlap
    assert set(cells) == set(map(tuple, keys.tolist())) and len(boxes) < len(keys)
    body = occupancy_body(keys + KEY_OFFSET, 0.02, max_boxes=20)
    lo, hi = body.extras["occupancy_boxes"]
    assert len(lo) <= 20 and body.extras["occupancy_cell"] > 0.02
    centres = (keys + 0.5) * 0.02
    inside = np.zeros(len(centres), bool)
    for a, b in zip(lo, hi):
        inside |= np.all((centres >= a) & (centres <= b), axis=1)
    assert inside.all()
    # one mesh geometry: the boxes' faces, each triangle's normal pointing out of its box
    (geometry,) = body.links["occupancy"].collisions
    v, t = geometry.shape.vertices, geometry.shape.triangles
    assert len(t) == 12 * len(lo)
    normals = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
    centre_of = (lo + hi)[np.arange(len(t)) // 12] / 2
    assert np.all(np.einsum("ij,ij->i", normals, v[t].mean(axis=1) - centre_of) > 0)
    assert occupancy_body(np.zeros((0, 3)), 0.02) is None


def test_the_planner_plans_around_what_the_sensors_mapped():
    from robot_bridge.formats.srdf import to_srdf
    from robot_bridge.formats.urdf import to_urdf
    from robot_bridge.planning.master import MasterModel

    robot = scenes.embedded_robot()
    urdf, _ = to_urdf(robot)
    master = MasterModel(seed=4)
    assert master.set_description(urdf, to_srdf(robot.semantics, robot.name)) is None
    planner = master.planner
    centre = planner.link_pose("gripper_base", planner.vector(MIDDLE))[:3, 3]
    box = np.eye(4)
    box[:3, 3] = centre
    checker = PinChecker(planner.urdf, scenes.disabled_pairs(robot))
    checker.add_box("unseen_box", SIZE, box)
    base = planner.positions(planner.state)
    names = list(START)
    straight = np.array([[START[n] for n in names], [GOAL[n] for n in names]])
    assert checker.path_collisions(names, straight, base, 0.01)          # the box is in the way
    assert not checker.collides(checker.q({**base, **START}))
    assert not checker.collides(checker.q({**base, **GOAL}))

    blind = master.plan(JointGoal(GOAL), group="arm", start=START, timeout=10.0)     # the box unknown
    assert blind.code == 1 and checker.path_collisions(blind.plan.trajectory.joint_names,
                                                       blind.plan.trajectory.positions, base, 0.01)
    assert planner.path_valid(blind.plan.trajectory).valid

    occupancy = OccupancyMap()
    faces_seen(occupancy, centre, SIZE / 2)
    fields = occupancy.to_message_fields()                 # as planner_node receives it on /planning_scene
    body = body_from_octomap(fields["data"].tobytes(), fields["resolution"])
    assert master.set_occupancy(body) is None
    assert planner.in_collision(planner.vector(MIDDLE))
    # the plan made blind is invalid now, the map named (planner_node stops the arm and replans)
    check = planner.path_valid(blind.plan.trajectory)
    assert not check.valid and check.bodies == ["occupancy"]
    result = master.plan(JointGoal(GOAL), group="arm", start=START, timeout=10.0)
    assert result.code == 1, result.message
    traj = result.plan.trajectory
    assert checker.path_collisions(traj.joint_names, traj.positions, base, 0.01) == []
    goal = {**base, **GOAL}
    assert np.allclose(traj.positions[-1], [goal[n] for n in traj.joint_names], atol=1e-6)
    # no map (an empty one): the box is unknown to the planner again
    assert master.set_occupancy(None) is None
    assert not planner.in_collision(planner.vector(MIDDLE))
