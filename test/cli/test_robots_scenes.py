"""Robots x scenes (issue 43): four robots of different sources, each started once as a whole bridge
(``robot-bridge run``, sim mode, world_node and planner_node included) at a placement that is not the
identity, in a cluttered scene of this test (table, shelf, crates: test/fixtures/planning/scene/, placed by
this process as world_node's detector):

- ``embedded``: the embedded LWA3 arm and its SRDF, placed by ``--robot-pose``;
- ``panda``: example-robot-data's Panda (cmeel wheel) with test/fixtures/srdf/panda_scenes.srdf (an hpp
  gripper without joints, the end effector's finger driven by GripperCommand), by ``--robot-pose``;
- ``ur5``: example-robot-data's UR5 with the gripper-less test/fixtures/srdf/ur5_scenes.srdf, by
  ``--robot-pose``; its URDF's root link is named ``world``, the world frame itself: /tf_static places its
  child ``base_link`` (robot_bridge.model.placement);
- ``wam``: the corpus's Barrett WAM (OpenRAVE XML, read by relative path from ../shared/corpus) placed by
  the environment file test/fixtures/planning/scene/wam.env.xml (skipped when the corpus is absent).

Per robot: joint goals whose straight joint line is blocked (``ROBOT_BRIDGE_SCENE_GOALS`` of them, default
``GOALS``; the issue's 20 in a documented run), every SRDF group_state of the planned group, two pose goals in
``world``, ``ROBOT_BRIDGE_SCENE_PICKS`` pick-and-place cycles of the block by its hpp handle where the robot
has a gripper, and a goal in collision refused with GOAL_IN_COLLISION (-12) and no motion.  The WAM runs
the goal in collision only (``Spec.moves`` says why).

Independent truth: fixtures/planning/pin_checker.py (pinocchio + coal) on the URDF the bridge publishes, the
world bodies moved into the robot's root frame by the world -> root transform of /tf_static, world and self
collision checked every 0.01 rad of the recorded /joint_states, every recorded position within the URDF's
limits.  The picked block is not in the checker (the fingers touch it; carried, it moves with the hand).
Goals and states come from the checker alone (seeded), never from the planner."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(1500)    # one robot's bridge start-up, its goals, its stop, on loaded cores

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")
pytest.importorskip("moveit_msgs.action", reason="moveit_msgs is not built into this environment")
pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")
pytest.importorskip("pinocchio", reason="pinocchio (pin) is needed for the independent checker")

from geometry_msgs.msg import Pose  # noqa: E402
from moveit_msgs.action import MoveGroup, Pickup, Place  # noqa: E402
from moveit_msgs.msg import (BoundingVolume, Constraints, Grasp, JointConstraint, MotionPlanRequest,  # noqa: E402
                             MoveItErrorCodes, OrientationConstraint, PlaceLocation, PositionConstraint)
from rclpy.action import ActionClient  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from shape_msgs.msg import SolidPrimitive  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose  # noqa: E402

from fixtures.bridge_probe import Output, Probe, start_run, stop  # noqa: E402
from fixtures.planning import scenes  # noqa: E402
from fixtures.planning.pin_checker import PinChecker  # noqa: E402
from fixtures.waiting import wait_until  # noqa: E402
from robot_bridge.cli.verbs.run import READY  # noqa: E402
from robot_bridge.model.transform import from_rpy, make, to_quat_xyzw  # noqa: E402
from robot_bridge.ros.actions import get_result, send_goal  # noqa: E402
from robot_bridge.ros.tf import matrix as tf_matrix  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"
FIXTURES = REPO / "test" / "fixtures"
SCENE = FIXTURES / "planning" / "scene"
CORPUS = REPO.parent / "shared" / "corpus"
GOALS = 4                  # blocked joint goals per robot in CI (the 20: ROBOT_BRIDGE_SCENE_GOALS=20)
PICKS = 1                  # pick-and-place cycles per gripper robot in CI (ROBOT_BRIDGE_SCENE_PICKS)
N_GOALS = int(os.environ.get("ROBOT_BRIDGE_SCENE_GOALS", GOALS))
N_PICKS = int(os.environ.get("ROBOT_BRIDGE_SCENE_PICKS", PICKS))
STEP = 0.01                # rad: the checker's step along the recorded path
TOLERANCE = 0.01           # rad: the controller's goal tolerance
REACH = 1.0                # rad: a joint goal lies at most this far from the state before it, per joint
SCALING = 1.0              # velocity and acceleration scaling of every goal (fast: the suite's time budget)


@dataclass
class Spec:
    """One robot of the matrix: its files, where it stands, its scene (body class -> poses in the robot's
    root frame: x, y, z, yaw) and its block's pick and place spots (root frame, the block's centre)."""
    robot: str
    srdf: Optional[str]
    group: str
    tip: str
    pose: Optional[str] = None          # --robot-pose (None: the environment file places it)
    search: list = field(default_factory=list)
    scene: dict = field(default_factory=dict)
    block: Optional[tuple] = None       # (pick xyz, place xyz) in the root frame; None: no gripper
    start: dict = field(default_factory=dict)   # a collision-free state the goals start from
    prefix: str = ""                    # --frame-prefix
    moves: Optional[str] = None         # why its joint, named and pose goals are not run (None: they are)


def _erd() -> Optional[Path]:
    return scenes.erd_share()


def _specs() -> dict:
    erd = _erd()
    robots = erd / "example-robot-data" / "robots" if erd else Path("/nonexistent")
    return {
        "embedded": Spec(str(DATA / "lwa3_gripper.robot.xml"), str(DATA / "lwa3_gripper.srdf"), "arm",
                         "gripper_base", pose="0.4 -0.3 0.05 0 0 0.6",
                         scene={"table": [(0.7, 0.0, 0.55, 0.0)], "crate": [(0.8, 0.25, 0.55, 0.3)],
                                "shelf": [(0.0, 0.75, 0.0, np.pi / 2)]},
                         block=((0.5, -0.3, 0.59), (0.55, -0.05, 0.59)),
                         start={"j1": 0.0, "j2": 0.4, "j3": 0.0, "j4": 1.2, "j5": 0.0, "j6": 0.9, "j7": 0.0}),
        "panda": Spec(str(robots / "panda_description" / "urdf" / "panda.urdf"),
                      str(FIXTURES / "srdf" / "panda_scenes.srdf"), "arm", "panda_hand_tcp",
                      pose="0.3 -0.2 0.05 0 0 0.5", search=[str(erd)],
                      scene={"table": [(0.55, 0.0, 0.15, 0.0)], "crate": [(0.5, 0.2, 0.15, 0.0)],
                             "shelf": [(0.0, 0.5, -0.05, np.pi / 2)]},
                      block=((0.45, -0.2, 0.19), (0.55, -0.05, 0.19)),
                      start={"panda_joint1": 0.0, "panda_joint2": -0.785398, "panda_joint3": 0.0,
                             "panda_joint4": -2.35619, "panda_joint5": 0.0, "panda_joint6": 1.5707,
                             "panda_joint7": 0.785398}),
        "ur5": Spec(str(robots / "ur_description" / "urdf" / "ur5_robot.urdf"),
                    str(FIXTURES / "srdf" / "ur5_scenes.srdf"), "manipulator", "tool0",
                    pose="-0.2 0.4 0.02 0 0 -0.8", search=[str(erd)],
                    scene={"table": [(0.5, 0.0, -0.15, 0.0)], "crate": [(0.45, -0.25, -0.15, 0.0)],
                           "shelf": [(-0.1, -0.55, -0.02, -np.pi / 2)]},
                    start={"shoulder_pan_joint": 0.0, "shoulder_lift_joint": -1.57, "elbow_joint": 1.57,
                           "wrist_1_joint": -1.57, "wrist_2_joint": -1.57, "wrist_3_joint": 0.0}),
        "wam": Spec(str(SCENE / "wam.env.xml"), None, "arm", "wam7",
                    search=[str(CORPUS / "openrave" / "src")],
                    moves="the checker on the WAM's 46 meshes found no blocked joint goal from its start "
                          "state in 1000 samples and took 10 min for it (to do: a start state bent over "
                          "the table)",
                    scene={"table": [(0.7, 0.0, 0.35, 0.0)], "crate": [(0.65, -0.3, 0.35, 0.0)],
                           "shelf": [(0.1, 0.7, -0.1, np.pi / 2)]}),
    }


SPECS = _specs()


def _skip_reason(name: str) -> Optional[str]:
    if name in ("panda", "ur5") and _erd() is None:
        return "example-robot-data is not installed (pip install example-robot-data)"
    if name == "wam" and not (CORPUS / "MANIFEST.md").is_file():
        return f"the corpus is absent ({CORPUS})"
    return None


# -- the bridge and this process's view of it ----------------------------------------------------------------
class Client:
    """The probe's subscriptions (latched description, /tf_static, every /joint_states sample), the scene's
    detections (10 Hz) and the action clients."""

    def __init__(self, probe: Probe):
        self.probe, self.node = probe, probe.node
        self.lock = threading.Lock()
        self.samples: list[tuple[list, list]] = []       # (names, positions) of every /joint_states
        self.urdf: Optional[str] = None
        self.static: dict[str, tuple[str, np.ndarray]] = {}
        self.objects: list[str] = []
        self.items: list = []
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        static = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(JointState, "/joint_states", self._on_joints, 100)
        self.node.create_subscription(String, "/robot_description", self._on_urdf, latched)
        self.node.create_subscription(TFMessage, "/tf_static", self._on_static, static)
        self.node.create_subscription(String, "/world_node/objects", self._on_objects, latched)
        self.detections = self.node.create_publisher(Detection3DArray, "/detections", 10)
        self.move = ActionClient(self.node, MoveGroup, "/move_action")
        self.pickup = ActionClient(self.node, Pickup, "/pickup")
        self.place = ActionClient(self.node, Place, "/place")
        self.node.create_timer(0.1, self._detect)

    def _on_joints(self, msg: JointState) -> None:
        with self.lock:
            self.samples.append((list(msg.name), list(msg.position)))

    def _on_urdf(self, msg: String) -> None:
        with self.lock:
            self.urdf = msg.data

    def _on_static(self, msg: TFMessage) -> None:
        with self.lock:
            for t in msg.transforms:
                self.static[t.child_frame_id] = (t.header.frame_id, tf_matrix(t))

    def _on_objects(self, msg: String) -> None:
        with self.lock:
            self.objects.append(msg.data)

    def _detect(self) -> None:
        with self.lock:
            items = list(self.items)
        if not items:
            return
        msg = Detection3DArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = "world"
        for class_id, track, pose in items:
            det = Detection3D(id=track)
            hyp = ObjectHypothesisWithPose()
            hyp.hypothesis.class_id = class_id
            hyp.hypothesis.score = 0.9
            hyp.pose.pose = to_pose(pose)
            det.results.append(hyp)
            msg.detections.append(det)
        self.detections.publish(msg)

    def detect(self, items) -> None:
        with self.lock:
            self.items = list(items)

    def count(self) -> int:
        with self.lock:
            return len(self.samples)

    def state(self) -> dict:
        with self.lock:
            out: dict = {}
            for names, positions in self.samples[-5:]:
                out.update(zip(names, positions))
            return out

    def since(self, start: int) -> list[dict]:
        with self.lock:
            return [dict(zip(n, p)) for n, p in self.samples[start:]]

    def world_has(self, *names: str) -> bool:
        with self.lock:
            return bool(self.objects) and all(f'name="{n}"' in self.objects[-1] for n in names)

    def run(self, client: ActionClient, goal, timeout: float = 300.0):
        assert client.wait_for_server(timeout_sec=60.0), f"no {client._action_name} server"
        sent = send_goal(self.node, client, goal)
        assert wait_until(sent.done, 30.0, f"{client._action_name} goal answered")
        handle = sent.result()
        assert handle.accepted, f"{client._action_name} goal rejected"
        future = get_result(self.node, handle)
        assert wait_until(future.done, timeout, f"{client._action_name} result")
        return future.result().result


def to_pose(m: np.ndarray) -> Pose:
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = map(float, m[:3, 3])
    x, y, z, w = to_quat_xyzw(m[:3, :3])
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = map(float, (x, y, z, w))
    return pose


def xyz_yaw(x: float, y: float, z: float, yaw: float = 0.0) -> np.ndarray:
    return make(from_rpy((0.0, 0.0, yaw)), (x, y, z))


@dataclass
class Robot:
    """A robot's running bridge as the test judges it."""
    name: str
    spec: Spec
    client: Client
    process: object
    output: Output
    checker: PinChecker
    placement: np.ndarray               # world -> root, from /tf_static
    joints: list                        # the planned group's joints (the checker's limits)
    lower: np.ndarray
    upper: np.ndarray
    report: dict = field(default_factory=dict)


def _root_of(urdf: str) -> str:
    from lxml import etree

    root = etree.fromstring(urdf.encode())
    children = {j.find("child").get("link") for j in root.findall("joint")}     # not a <transmission>'s
    return next(link.get("name") for link in root.findall("link") if link.get("name") not in children)


def _child_of(urdf: str, link: str) -> str:
    """The child of ``link``'s first fixed joint."""
    from lxml import etree

    return next(j.find("child").get("link") for j in etree.fromstring(urdf.encode()).findall("joint")
                if j.get("type") == "fixed" and j.find("parent").get("link") == link)


def _in_root(urdf: str, link: str) -> np.ndarray:
    """A fixed link's pose in the root frame (pinocchio's universe), at any joint values."""
    import pinocchio as pin

    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    return np.array(data.oMf[model.getFrameId(link)].homogeneous)


def _group_joints(spec: Spec, urdf: str) -> list[str]:
    """The planned group's joints, from the robot's own files (the checker's view, not the planner's)."""
    from robot_bridge.control.groups import group_joints
    from robot_bridge.formats import load, srdf

    robot = load(spec.robot, search_path=spec.search or None)
    if spec.srdf:
        srdf.attach_semantics(robot, srdf.read_srdf(spec.srdf, robot))
    members = group_joints(robot, spec.group)
    from lxml import etree

    order = [j.get("name") for j in etree.fromstring(urdf.encode()).findall("joint")
             if j.get("type") in ("revolute", "prismatic") and j.find("mimic") is None]
    return [j for j in order if j in members]


def _disabled(spec: Spec) -> set:
    from robot_bridge.formats import load, srdf

    robot = load(spec.robot, search_path=spec.search or None)
    if spec.srdf:
        srdf.attach_semantics(robot, srdf.read_srdf(spec.srdf, robot))
    if robot.semantics is None:                     # no SRDF: the robot file's own ignored pairs
        return {tuple(sorted(p)) for p in robot.collision_ignore}, robot
    return scenes.disabled_pairs(robot), robot


def scene_items(spec: Spec, placement: np.ndarray) -> list:
    """(class, track id, world pose) of every scene body: the spec's root-frame poses moved by the
    robot's placement."""
    items = []
    for cls, poses in spec.scene.items():
        for i, p in enumerate(poses):
            items.append((cls, f"{cls}{i}", placement @ xyz_yaw(*p)))
    return items


def _checker(spec: Spec, urdf: str, placement: np.ndarray) -> PinChecker:
    """pinocchio + coal on the published URDF, in its root frame: the scene bodies and the environment file's
    bodies moved there by the inverse of /tf_static's world -> root."""
    from robot_bridge.formats import load

    disabled, robot = _disabled(spec)
    checker = PinChecker(urdf, disabled, package_dirs=spec.search)
    to_root = np.linalg.inv(placement)
    for name, shape, pose in scenes.world_shapes(robot):          # the environment file's bodies
        checker.add_shape(f"env/{name}", shape, to_root @ pose)
    for cls, track, world in scene_items(spec, placement):
        body = load(str(SCENE / f"{cls}.kinbody.xml"))
        for link in body.links.values():
            for i, geom in enumerate(link.collisions or link.visuals):
                checker.add_shape(f"{track}/{i}", geom.shape, to_root @ world @ geom.origin)
    return checker


def start_robot(name: str) -> Robot:
    spec = SPECS[name]
    args = ["--robot", spec.robot, "--objects", str(SCENE / "objects.yaml")]
    if spec.srdf:
        args += ["--srdf", spec.srdf]
    if spec.pose:
        args += ["--robot-pose", spec.pose]
    for d in spec.search:
        args += ["--search-path", d]
    if spec.prefix:
        args += ["--frame-prefix", spec.prefix]
    t0 = time.monotonic()
    process = start_run(*args)
    output = Output(process)
    probe = Probe(f"scenes_{name}")
    client = Client(probe)
    try:
        output.wait_for(READY, timeout=300.0)
        assert wait_until(lambda: client.urdf is not None and client.count() >= 3, 120.0,
                          "robot_description and /joint_states")
        urdf = client.urdf
        root = spec.prefix + _root_of(urdf)
        child = _child_of(urdf, root) if root == "world" else None     # the root is the world: its child
        frame = child or root
        assert wait_until(lambda: frame in client.static, 60.0, f"/tf_static world -> {frame}")
        parent, placement = client.static[frame]
        assert parent == "world", parent
        if child:                                # world -> root, through the child's pose in the root
            placement = placement @ np.linalg.inv(_in_root(urdf, child))
        assert not np.allclose(placement, np.eye(4)), "the robot stands at the identity"
        client.detect(scene_items(spec, placement))
        tracks = [f"{cls}_{i}" for cls, poses in spec.scene.items() for i in range(len(poses))]
        assert wait_until(lambda: client.world_has(*tracks), 120.0, f"world_node placing {tracks}")
        output.wait_for("planning for robot", timeout=600.0)
        joints = _group_joints(spec, urdf)
        checker = _checker(spec, urdf, placement)
        idx = [checker.model.getJointId(j) for j in joints]
        lower = np.array([checker.model.lowerPositionLimit[checker.model.joints[i].idx_q] for i in idx])
        upper = np.array([checker.model.upperPositionLimit[checker.model.joints[i].idx_q] for i in idx])
        robot = Robot(name, spec, client, process, output, checker, placement, joints, lower, upper)
        robot.report["start_s"] = round(time.monotonic() - t0, 1)
        return robot
    except BaseException:
        probe.close()
        print(stop(process, output)[-6000:])
        raise


@pytest.fixture(scope="module", params=list(SPECS))
def robot(request):
    reason = _skip_reason(request.param)
    if reason:
        pytest.skip(reason)
    t0 = time.monotonic()
    bot = start_robot(request.param)
    try:
        yield bot
    finally:
        bot.client.detect([])
        bot.client.probe.close()
        text = stop(bot.process, bot.output)
        bot.report["total_s"] = round(time.monotonic() - t0, 1)
        print(f"\n{request.param}: {bot.report}")
        print(text[-3000:])
        REPORTS[request.param] = dict(bot.report)
    assert "Traceback" not in text, text[-6000:]


REPORTS: dict = {}


# -- goals ---------------------------------------------------------------------------------------------------
def joint_request(group: str, values: dict) -> MotionPlanRequest:
    req = MotionPlanRequest(group_name=group, allowed_planning_time=10.0,
                            max_velocity_scaling_factor=SCALING, max_acceleration_scaling_factor=SCALING)
    req.goal_constraints.append(Constraints(joint_constraints=[
        JointConstraint(joint_name=n, position=float(v), tolerance_above=1e-3, tolerance_below=1e-3,
                        weight=1.0) for n, v in values.items()]))
    return req


def named_request(group: str, name: str) -> MotionPlanRequest:
    req = MotionPlanRequest(group_name=group, allowed_planning_time=10.0,
                            max_velocity_scaling_factor=SCALING, max_acceleration_scaling_factor=SCALING)
    req.goal_constraints.append(Constraints(name=name))
    return req


def pose_request(group: str, link: str, world: np.ndarray) -> MotionPlanRequest:
    req = MotionPlanRequest(group_name=group, allowed_planning_time=10.0,
                            max_velocity_scaling_factor=SCALING, max_acceleration_scaling_factor=SCALING)
    pc = PositionConstraint(link_name=link, weight=1.0)
    pc.header.frame_id = "world"
    region = BoundingVolume(primitives=[SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[1e-3])],
                            primitive_poses=[to_pose(world)])
    pc.constraint_region = region
    oc = OrientationConstraint(link_name=link, orientation=to_pose(world).orientation, weight=1.0,
                               absolute_x_axis_tolerance=1e-3, absolute_y_axis_tolerance=1e-3,
                               absolute_z_axis_tolerance=1e-3)
    oc.header.frame_id = "world"
    req.goal_constraints.append(Constraints(position_constraints=[pc], orientation_constraints=[oc]))
    return req


def move(bot: Robot, request: MotionPlanRequest):
    goal = MoveGroup.Goal(request=request)
    return bot.client.run(bot.client.move, goal)


def q_of(bot: Robot, values: dict) -> dict:
    return dict(bot.client.state(), **values)


def free(bot: Robot, values: dict) -> bool:
    return not bot.checker.collides(bot.checker.q(q_of(bot, values)))


def blocked(bot: Robot, a: np.ndarray, b: np.ndarray, step: float = 0.05) -> bool:
    """The straight joint line from ``a`` to ``b`` collides in the checker at one of its points ``step``
    apart (a coarse look, ending at the first collision: the goals' search needs some blocked lines, not
    every one; the executed paths are judged at STEP)."""
    base = bot.client.state()
    n = max(1, int(np.ceil(np.max(np.abs(b - a)) / step)))
    for s in np.linspace(0.0, 1.0, n + 1)[1:-1]:
        if bot.checker.collides(bot.checker.q(dict(base, **dict(zip(bot.joints, a + s * (b - a)))))):
            return True
    return False


def sample(bot: Robot, rng, around: np.ndarray, reach: float) -> np.ndarray:
    lo = np.maximum(bot.lower, around - reach)
    hi = np.minimum(bot.upper, around + reach)
    return rng.uniform(lo, hi)


def blocked_goals(bot: Robot, start: np.ndarray, n: int, seed: int = 7, tries: int = 1000) -> list:
    """``n`` collision-free goals, each within REACH of the one before (from ``start``), whose straight joint
    line from it collides in the checker (world or self)."""
    rng = np.random.default_rng(seed)
    goals, here = [], start
    for _ in range(n):
        for _ in range(tries):
            q = sample(bot, rng, here, REACH)
            if free(bot, dict(zip(bot.joints, q))) and blocked(bot, here, q):
                goals.append(q)
                here = q
                break
        else:
            raise AssertionError(f"{bot.name}: no blocked goal found in {tries} samples from {here}")
    return goals


def judge(bot: Robot, since: int, what: str) -> None:
    """The recorded /joint_states since sample ``since``: every 0.01 rad free of world and self collision,
    every position within the URDF's limits."""
    states = bot.client.since(since)
    assert states, f"{what}: no /joint_states"
    rows = np.array([[s.get(j, np.nan) for j in bot.joints] for s in states])
    assert np.isfinite(rows).all(), f"{what}: /joint_states lack joints of {bot.joints}"
    below, above = rows < bot.lower - 1e-6, rows > bot.upper + 1e-6
    assert not below.any() and not above.any(), f"{what}: a joint beyond its limits"
    base = {k: v for k, v in states[-1].items() if k not in bot.joints}
    bad = bot.checker.path_collisions(bot.joints, rows, base, STEP)
    if bad:
        pairs = bot.checker.colliding_pairs(bot.checker.q(bad[0]))
        raise AssertionError(f"{what}: {len(bad)} colliding samples on the recorded path, first: {pairs}")


def reached(bot: Robot, target: dict, tol: float = TOLERANCE) -> bool:
    return wait_until(lambda: all(abs(bot.client.state()[n] - v) <= tol for n, v in target.items()), 30.0,
                      lambda: f"{bot.name} at {target} (now {bot.client.state()})")


def go(bot: Robot, request: MotionPlanRequest, what: str) -> dict:
    """Run a MoveGroup goal, judge its recorded path; the planned end state."""
    since = bot.client.count()
    before = bot.client.state()
    result = move(bot, request)
    if result.error_code.val != MoveItErrorCodes.SUCCESS:       # what the planner started from, and who talks
        js = result.trajectory_start.joint_state
        off = {n: round(p - before[n], 4) for n, p in zip(js.name, js.position) if n in before}
        raise AssertionError(f"{what}: {result.error_code.message}; planned start minus the state before the "
                             f"goal: {off}; /joint_states publishers "
                             f"{bot.client.node.count_publishers('/joint_states')}")
    traj = result.planned_trajectory.joint_trajectory
    end = dict(zip(traj.joint_names, traj.points[-1].positions))
    assert reached(bot, end)
    # a few samples at rest after the end
    n = bot.client.count()
    assert wait_until(lambda: bot.client.count() >= n + 3, 10.0, "/joint_states after the goal")
    judge(bot, since, what)
    return end


def tip_world(bot: Robot, values: dict) -> np.ndarray:
    import pinocchio as pin

    q = bot.checker.q(values)
    pin.framesForwardKinematics(bot.checker.model, bot.checker.data, q)
    return bot.placement @ bot.checker.data.oMf[bot.checker.model.getFrameId(bot.spec.tip)].homogeneous


def named_states(spec: Spec) -> list:
    """The SRDF's group_states of the planned group (none without an SRDF)."""
    if not spec.srdf:
        return []
    from robot_bridge.formats import srdf

    return [s for s in srdf.read_srdf(spec.srdf).group_states if s.group == spec.group]


def planner_knows(bot: Robot, body: str) -> bool:
    """A plan-only Pickup of ``body`` with a planning time too short to plan is not INVALID_OBJECT_NAME:
    the planner has world_node's document with the body (it hears it after this process does)."""
    goal = Pickup.Goal(target_name=body, group_name=bot.spec.group, allowed_planning_time=0.01)
    goal.planning_options.plan_only = True
    return bot.client.run(bot.client.pickup, goal).error_code.val != MoveItErrorCodes.INVALID_OBJECT_NAME


# -- the tests -----------------------------------------------------------------------------------------------
def test_blocked_joint_goals_named_states_and_pose_goals(robot):
    bot, spec = robot, robot.spec
    if spec.moves:
        pytest.skip(f"{bot.name}: {spec.moves}")
    t0 = time.monotonic()
    start = {j: spec.start.get(j, 0.0) for j in bot.joints}
    if not free(bot, start):
        rng = np.random.default_rng(3)
        here = np.array([bot.client.state()[j] for j in bot.joints])
        for _ in range(2000):
            q = sample(bot, rng, here, REACH)
            if free(bot, dict(zip(bot.joints, q))):
                start = dict(zip(bot.joints, q))
                break
        else:
            raise AssertionError(f"{bot.name}: no collision-free start state in 2000 samples")
    go(bot, joint_request(spec.group, start), "the start state")
    here = np.array([start[j] for j in bot.joints])
    goals = blocked_goals(bot, here, N_GOALS)
    t1 = time.monotonic()
    for k, q in enumerate(goals):
        go(bot, joint_request(spec.group, dict(zip(bot.joints, q))), f"blocked joint goal {k}")
    bot.report["blocked_goals"] = f"{len(goals)} reached in {time.monotonic() - t1:.1f} s"

    # the named states: every group_state of the planned group in the SRDF
    named = named_states(spec)
    for state in named:
        end = go(bot, named_request(spec.group, state.name), f"named state {state.name!r}")
        for j, v in state.values.items():
            assert abs(end[j] - float(v[0])) < 1e-3, (state.name, j, end[j], v)
    bot.report["named_states"] = [s.name for s in named]

    # two pose goals in world: the tip of two free states of the checker, reached within 2 mm / 0.01 rad
    rng = np.random.default_rng(11)
    here = np.array([bot.client.state()[j] for j in bot.joints])
    for k in range(2):
        for _ in range(2000):
            q = dict(zip(bot.joints, sample(bot, rng, here, 0.6)))
            if free(bot, q):
                break
        else:
            raise AssertionError(f"{bot.name}: no collision-free pose goal state in 2000 samples")
        target = tip_world(bot, q_of(bot, q))
        end = go(bot, pose_request(spec.group, spec.tip, target), f"pose goal {k}")
        got = tip_world(bot, q_of(bot, end))
        assert np.linalg.norm(got[:3, 3] - target[:3, 3]) < 2e-3, (got, target)
        angle = np.arccos(np.clip((np.trace(got[:3, :3].T @ target[:3, :3]) - 1) / 2, -1, 1))
        assert angle < 0.01, angle
        here = np.array([end[j] for j in bot.joints])
    bot.report["pose_goals"] = 2
    bot.report["motion_s"] = round(time.monotonic() - t0, 1)


def test_goal_in_collision_is_refused_without_motion(robot):
    bot, spec = robot, robot.spec
    rng = np.random.default_rng(5)
    here = np.array([bot.client.state()[j] for j in bot.joints])
    env = [n for n in (o.name for o in bot.checker.geom.geometryObjects[bot.checker.robot_geoms:])]
    for _ in range(20000):
        q = dict(zip(bot.joints, sample(bot, rng, here, np.inf)))
        pairs = bot.checker.colliding_pairs(bot.checker.q(q_of(bot, q)))
        if pairs and all(b in env for _, b in pairs):          # the robot in a world body only
            break
    else:
        raise AssertionError("no state in collision with a world body found")
    before = bot.client.state()
    result = move(bot, joint_request(spec.group, q))
    assert result.error_code.val == MoveItErrorCodes.GOAL_IN_COLLISION == -12, result.error_code.message
    n = bot.client.count()
    assert wait_until(lambda: bot.client.count() >= n + 5, 10.0, "/joint_states")
    now = bot.client.state()
    assert all(abs(now[j] - before[j]) < 1e-4 for j in bot.joints), "a refused goal moved the robot"
    bot.report["refused"] = f"-12: {result.error_code.message[:120]}"


def test_pick_and_place_by_the_hpp_handle(robot):
    bot, spec = robot, robot.spec
    if spec.block is None:
        pytest.skip(f"{bot.name} has no gripper")
    pick, place = (bot.placement @ xyz_yaw(*p) for p in spec.block)
    scene = scene_items(spec, bot.placement)
    at = pick
    t0 = time.monotonic()
    cycles = 0
    rest = named_states(spec)[0].name         # each cycle starts there: the hand above the clutter
    for cycle in range(N_PICKS):
        go(bot, named_request(spec.group, rest), f"cycle {cycle}: named state {rest!r}")
        bot.client.detect(scene + [("block", "block", at)])
        assert wait_until(lambda: bot.client.world_has("block_0"), 60.0, "world_node placing the block")
        assert wait_until(lambda: planner_knows(bot, "block_0"), 60.0, "the planner hearing of the block")
        since = bot.client.count()
        grasp = Grasp(id="block_0/top")
        grasp.post_grasp_retreat.direction.header.frame_id = "world"
        grasp.post_grasp_retreat.direction.vector.z = 1.0
        grasp.post_grasp_retreat.desired_distance = 0.08
        result = bot.client.run(bot.client.pickup, Pickup.Goal(target_name="block_0", group_name=spec.group,
                                                                possible_grasps=[grasp],
                                                                allowed_planning_time=10.0))
        assert result.error_code.val == MoveItErrorCodes.SUCCESS, \
            f"cycle {cycle} pickup: {result.error_code.message}"
        judge(bot, since, f"cycle {cycle} pickup")
        to = place if at is pick else pick
        location = PlaceLocation(id=f"spot{cycle}")
        location.place_pose.header.frame_id = "world"
        location.place_pose.pose = to_pose(to)
        since = bot.client.count()
        result = bot.client.run(bot.client.place, Place.Goal(group_name=spec.group,
                                                              attached_object_name="block_0",
                                                              place_locations=[location],
                                                              allowed_planning_time=10.0))
        assert result.error_code.val == MoveItErrorCodes.SUCCESS, \
            f"cycle {cycle} place: {result.error_code.message}"
        judge(bot, since, f"cycle {cycle} place")
        at = to
        bot.client.detect(scene + [("block", "block", at)])
        cycles += 1
    bot.report["pick_place"] = f"{cycles} cycles in {time.monotonic() - t0:.1f} s"
