"""Issue 44: a box in the simulated scene that nobody announced to world_node is seen by the simulated wrist
depth camera and becomes occupied cells of world_node's OctoMap on /planning_scene.

description_node, sensor_bridge (the wrist camera in sim, depth on /wrist_camera/depth) and world_node
(occupancy_depth_topics, no description_file: the box is no body of its world) run as processes once for the
module; this test process subscribes /planning_scene and reads each diff's octomap_msgs/Octomap with the
OctoMap library.  Truth: the box and the camera's pose from the robot file's forward kinematics.  Waits on
the map's contents with a deadline, never on wall-clock sleeps."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(300)     # three or four nodes start on loaded cores

octomap = pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")
pytest.importorskip("rclpy")
pytest.importorskip("moveit_msgs.msg")

from moveit_msgs.msg import PlanningScene  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.fk import forward_kinematics  # noqa: E402
from robot_bridge.kinematics.frames import optical_offset  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.planning_scene import moveit_qos  # noqa: E402
from robot_bridge.world.occupancy import KEY_OFFSET, binary_node_count, occupied_keys  # noqa: E402

from fixtures.world_bridge import ARM, DATA, start, stop, wait_until  # noqa: E402

try:                                    # planner_node and the independent checker: the planning extra
    import pinocchio  # noqa: F401
    import roboplan  # noqa: F401
    from moveit_msgs.action import MoveGroup
    PLANNING = True
except ImportError:
    PLANNING = False
RES = 0.02
ROBOT = DATA / "lwa3_gripper.robot.xml"
HALF = np.array([0.15, 0.15, 0.1])
AHEAD = 0.5                     # the box's centre this far along the camera's optical axis (+z)


def camera_pose() -> np.ndarray:
    """The wrist camera's optical frame in the world with the arm at ``ARM`` (the joint states sent)."""
    robot = load(ROBOT)
    cam = robot.sensors["wrist_camera"]
    return robot.placement @ forward_kinematics(robot, ARM)[cam.link] @ cam.origin @ optical_offset(cam)


def box_pose() -> np.ndarray:
    pose = camera_pose().copy()
    pose[:3, 3] = pose[:3, 3] + AHEAD * pose[:3, 2]
    return pose


@pytest.fixture(scope="module")
def mapped(tmp_path_factory, module_detector_node):
    folder = tmp_path_factory.mktemp("occupancy")
    pose = box_pose()
    rows = " ".join(f"{v:.9f}" for v in pose[:3, :3].ravel())
    (folder / ROBOT.name).write_text(ROBOT.read_text())          # beside the world: a trusted root
    srdf = folder / "lwa3_gripper.srdf"
    srdf.write_text((DATA / "lwa3_gripper.srdf").read_text())
    env = folder / "unannounced.env.xml"
    env.write_text(f"""<Environment><Robot file="{ROBOT.name}"/>
  <KinBody name="obstacle"><translation>{pose[0, 3]:.9f} {pose[1, 3]:.9f} {pose[2, 3]:.9f}</translation>
    <rotationmat>{rows}</rotationmat>
    <Body name="obstacle" type="static"><Geom type="box"><extents>{HALF[0]} {HALF[1]} {HALF[2]}</extents>
    </Geom></Body></KinBody></Environment>""")
    assert np.allclose(load(env).environment["obstacle"].placement, pose, atol=1e-8)
    node = module_detector_node
    lock = threading.Lock()
    maps: list = []

    def on_scene(msg: PlanningScene) -> None:
        octo = msg.world.octomap.octomap
        if msg.is_diff and octo.id and len(octo.data):
            with lock:
                maps.append((msg.world.octomap.header.frame_id, octo))

    node.create_subscription(PlanningScene, "/planning_scene", on_scene, moveit_qos())
    joints = node.create_publisher(JointState, "/joint_states", 10)

    def publish_joints() -> None:           # the links' TF (description_node) and the camera's view (sim)
        msg = JointState(name=list(ARM), position=list(ARM.values()))
        msg.header.stamp = node.get_clock().now().to_msg()
        joints.publish(msg)

    urdf: list = []
    node.create_subscription(String, "/robot_description", lambda m: urdf.append(m.data),
                             qos.description_qos())
    procs = [start("description", f"description_file:={env}", f"srdf_file:={srdf}"),
             start("sensor_bridge", f"description_file:={env}", "default_mode:=off",
                   "sensors.wrist_camera.mode:=sim", "sensors.wrist_camera.rate:=5.0",
                   "sensors.wrist_camera.depth_topic:=/wrist_camera/depth"),
             start("world", "occupancy_depth_topics:=[/wrist_camera/depth]",
                   "occupancy_camera_info_topics:=[/wrist_camera/camera_info]", "occupancy_rate:=5.0",
                   "occupancy_depth_max_ranges:=[2.5]", "occupancy_depth_decays:=[0.0]",
                   "occupancy_publish_rate:=5.0")]
    if PLANNING:
        procs.append(start("planner", "objects_topic:=''"))          # no world_node bodies: the map only

    depth_seen: list = []
    node.create_subscription(Image, "/wrist_camera/depth",
                             lambda m: None if depth_seen else depth_seen.append(m), qos.sensor_data_qos())

    def robot_pixels() -> int:
        """Pixels of a received depth image nearer than the box's face: the arm's own links."""
        msg = depth_seen[0]
        depth = np.frombuffer(bytes(msg.data), np.float32).reshape(msg.height, msg.width)
        return int(np.sum(np.isfinite(depth) & (depth < AHEAD - HALF[2] - 0.05)))

    def latest():
        publish_joints()
        with lock:
            return maps[-1] if maps else None

    latest.robot_pixels = robot_pixels
    latest.urdf = lambda: urdf[-1] if urdf else None
    latest.node = node
    yield latest
    outputs = [stop(p) for p in procs]
    for out in outputs:
        assert "Traceback" not in out, out


def read(octo) -> np.ndarray:
    """The occupied cells OctoMap reads from the message (binaryMsgToMap: readBinaryData)."""
    data = np.asarray(octo.data, dtype=np.int8).astype(np.uint8).tobytes()
    tree = octomap.OcTree(octo.resolution)
    header = (f"# Octomap OcTree binary file\nid {octo.id}\nsize {binary_node_count(data)}\n"
              f"res {octo.resolution}\ndata\n").encode()
    assert tree.readBinary(header + data)
    return occupied_keys(tree)


def front_face_keys() -> np.ndarray:
    """Keys of the box's face toward the camera (its local -z face), sampled every 5 mm."""
    u, v = np.meshgrid(np.arange(-HALF[0], HALF[0], 0.005), np.arange(-HALF[1], HALF[1], 0.005))
    local = np.stack([u.ravel(), v.ravel(), np.full(u.size, -HALF[2]), np.ones(u.size)])
    world = (box_pose() @ local)[:3].T
    return np.floor(world / RES).astype(np.int64) + KEY_OFFSET


def covered(keys: np.ndarray, cells: np.ndarray) -> float:
    """Share of ``keys`` with an occupied cell within one voxel (Chebyshev distance in keys)."""
    occupied = set(map(tuple, cells.tolist()))
    offsets = [(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]
    return float(np.mean([any((k[0] + a, k[1] + b, k[2] + c) in occupied for a, b, c in offsets)
                          for k in keys.tolist()]))


def test_an_unannounced_box_seen_by_the_depth_camera_is_mapped_within_one_voxel(mapped):
    face = front_face_keys()
    state = {}

    def full() -> bool:
        got = mapped()
        if got is None:
            return False
        state["frame"], octo = got
        state["resolution"] = octo.resolution
        state["cells"] = read(octo)
        return covered(face, state["cells"]) == 1.0

    assert wait_until(full, timeout=90.0), f"face covered {covered(face, state.get('cells', np.zeros(0)))}"
    assert mapped.robot_pixels() > 100      # the gripper is in the camera's view: the self filter had work
    assert state["frame"] == "world" and state["resolution"] == pytest.approx(RES)
    cells = state["cells"]
    # every cell lies within one voxel of the box (in its frame: the box grown by a cell's diagonal)
    centres = (cells - KEY_OFFSET + 0.5) * RES
    local = (centres - box_pose()[:3, 3]) @ box_pose()[:3, :3]
    outside = np.any(np.abs(local) > HALF + np.sqrt(3) * RES, axis=1)
    assert not outside.any(), local[outside]
    # ... so none on the robot: the box lies 0.4 m beyond the camera, every link of the arm behind it
    robot = load(ROBOT)
    origins = np.array([p[:3, 3] for p in forward_kinematics(robot, ARM).values()])
    assert np.min(np.linalg.norm(centres[:, None] - origins[None], axis=2)) > 0.2


def test_the_planner_plans_around_the_mapped_box(mapped):
    """planner_node reads the same /planning_scene map: a goal whose straight joint path runs through the box
    is planned (plan only) around it, checked by pinocchio + coal against the box itself."""
    if not PLANNING:
        pytest.skip("the planning extra (roboplan) or pinocchio is not installed")
    from moveit_msgs.msg import Constraints, JointConstraint, MotionPlanRequest
    from rclpy.action import ActionClient

    from robot_bridge.ros.actions import get_result, send_goal

    from fixtures.planning.pin_checker import PinChecker

    assert wait_until(lambda: mapped() is not None and mapped.urdf() is not None, timeout=90.0)
    assert wait_until(lambda: covered(front_face_keys(), read(mapped()[1])) == 1.0, timeout=90.0)
    from robot_bridge.formats import srdf as srdf_format

    robot = load(ROBOT)
    srdf_format.attach_semantics(robot, srdf_format.read_srdf(str(DATA / "lwa3_gripper.srdf"), robot))
    disabled = {tuple(sorted((p.link1, p.link2))) for p in robot.semantics.collision_pairs if not p.enabled}
    disabled |= {tuple(sorted(p)) for p in robot.collision_ignore}
    bare = PinChecker(mapped.urdf(), disabled)
    checker = PinChecker(mapped.urdf(), disabled)
    checker.add_box("box", 2 * HALF, box_pose())
    # a goal beyond the box: the arm turned and bent toward it until the straight path meets the box while
    # the goal itself stays clear of it (searched with the checker; seeded)
    rng = np.random.default_rng(7)
    names = ["j1", "j2", "j3", "j4", "j5", "j6", "j7"]
    start = np.array([ARM[n] for n in names])
    base = dict(ARM)
    goal = None
    lower = np.array([robot.joints[n].lower[0] for n in names]) + 0.05
    upper = np.array([robot.joints[n].upper[0] for n in names]) - 0.05
    for _ in range(2000):
        candidate = np.clip(start + rng.uniform(-1.2, 1.2, size=len(names)), lower, upper)
        if checker.collides(checker.q({**base, **dict(zip(names, candidate))})):
            continue
        straight = np.array([start, candidate])
        if checker.path_collisions(names, straight, base, 0.02) and \
                not bare.path_collisions(names, straight, base, 0.02):
            goal = dict(zip(names, candidate.tolist()))
            break
    assert goal is not None
    client = ActionClient(mapped.node, MoveGroup, "/move_action")
    assert client.wait_for_server(timeout_sec=120.0), "no /move_action server"
    request = MotionPlanRequest(group_name="arm", allowed_planning_time=10.0)
    request.goal_constraints.append(Constraints(joint_constraints=[
        JointConstraint(joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3,
                        weight=1.0) for n, v in goal.items()]))
    move = MoveGroup.Goal(request=request)
    move.planning_options.plan_only = True

    def planned():
        mapped()                                # joint states keep coming: the planner's start is ARM
        sent = send_goal(mapped.node, client, move)
        assert wait_until(sent.done, timeout=30.0) and sent.result().accepted
        future = get_result(mapped.node, sent.result())
        assert wait_until(future.done, timeout=120.0), "no MoveGroup result"
        return future.result().result

    result = planned()
    assert result.error_code.val == 1, result.error_code
    traj = result.planned_trajectory.joint_trajectory
    positions = np.array([p.positions for p in traj.points])
    # the path starts where the arm is (so the check below covers it all) and never meets the box
    assert np.allclose(positions[0], [ARM[n] for n in traj.joint_names], atol=2e-3), positions[0]
    assert checker.path_collisions(list(traj.joint_names), positions, base, 0.01) == []
    assert np.allclose(positions[-1], [goal[n] for n in traj.joint_names], atol=2e-3)
