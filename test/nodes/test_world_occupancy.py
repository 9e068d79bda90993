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

octomap = pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")
pytest.importorskip("rclpy")
pytest.importorskip("moveit_msgs.msg")

from moveit_msgs.msg import PlanningScene  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.fk import forward_kinematics  # noqa: E402
from robot_bridge.kinematics.frames import optical_offset  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.planning_scene import moveit_qos  # noqa: E402
from robot_bridge.world.occupancy import KEY_OFFSET, binary_node_count, occupied_keys  # noqa: E402

from fixtures.world_bridge import ARM, DATA, start, stop, wait_until  # noqa: E402

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

    procs = [start("description", f"description_file:={env}"),
             start("sensor_bridge", f"description_file:={env}", "default_mode:=off",
                   "sensors.wrist_camera.mode:=sim", "sensors.wrist_camera.rate:=5.0",
                   "sensors.wrist_camera.depth_topic:=/wrist_camera/depth"),
             start("world", "occupancy_depth_topics:=[/wrist_camera/depth]",
                   "occupancy_camera_info_topics:=[/wrist_camera/camera_info]", "occupancy_rate:=5.0",
                   "occupancy_publish_rate:=5.0")]

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
