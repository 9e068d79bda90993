"""world_node with real rclpy: description_node and world_node run as their own processes, this test process
is the detector (publishes /joint_states and Detection3DArray) and the observer (/tf, markers, objects).

Everything waits on conditions and checks message contents and stamps, never wall-clock sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")

from geometry_msgs.msg import Pose  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.fk import forward_kinematics  # noqa: E402
from robot_bridge.kinematics.frames import optical_offset  # noqa: E402
from robot_bridge.model.transform import from_rpy, make, to_quat_xyzw  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.tf import matrix as tf_matrix  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"
WORLD = DATA / "default.env.xml"
ARM = {"j1": 0.3, "j2": -0.4, "j3": 0.2, "j4": 0.9, "j5": -0.3, "j6": 0.5, "j7": 0.1, "finger_joint": 0.01}
CAMERA_LOCAL = make(from_rpy((0.1, 0.2, -0.3)), (0.02, -0.01, 0.45))   # the can in the optical frame
TIMEOUT = 2.5       # s: long enough that a stalled test process (loaded CI) does not lose the can


def start(module: str, *params: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", f"robot_bridge.nodes.{module}", "--ros-args"]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


class Observer:
    """The test's own node: detector, joint-state source and recorder."""

    def __init__(self, node):
        self.node = node
        self.lock = threading.Lock()
        self.tf: list[tuple[float, str, str, np.ndarray]] = []        # (stamp, parent, child, matrix)
        self.markers: list[Marker] = []
        self.objects: list[str] = []
        self.objects_yaml: list[dict] = []
        self.since = 0.0                  # s: /tf and markers stamped earlier are not recorded
        latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.tf_qos())
        node.create_subscription(MarkerArray, "/world_node/markers", self._on_markers, latched)
        node.create_subscription(String, "/world_node/objects", lambda m: self._add(self.objects, m.data),
                                 latched)
        node.create_subscription(String, "/world_node/objects_yaml",
                                 lambda m: self._add(self.objects_yaml, yaml.safe_load(m.data)), latched)
        self.joints_pub = node.create_publisher(JointState, "/joint_states", 10)
        self.detections_pub = node.create_publisher(Detection3DArray, "/detections", 10)

    def clear(self, since: float) -> None:
        """Forget what was recorded; /tf and markers stamped before ``since`` (s) are no longer recorded."""
        with self.lock:
            self.since = since
            for records in (self.tf, self.markers, self.objects, self.objects_yaml):
                records.clear()

    def _add(self, target: list, item) -> None:
        with self.lock:
            target.append(item)

    def _on_tf(self, msg: TFMessage) -> None:
        with self.lock:
            for t in msg.transforms:
                stamp = t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
                if t.header.frame_id == "world" and stamp >= self.since:
                    self.tf.append((stamp, t.header.frame_id, t.child_frame_id, tf_matrix(t)))

    def _on_markers(self, msg: MarkerArray) -> None:
        with self.lock:
            self.markers.extend(m for m in msg.markers
                                if m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= self.since)

    # -- queries ---------------------------------------------------------------------------------
    def last_tf(self, child: str):
        with self.lock:
            hits = [t for t in self.tf if t[2] == child]
        return hits[-1] if hits else None

    def latest_objects(self) -> dict:
        with self.lock:
            doc = self.objects_yaml[-1] if self.objects_yaml else {"objects": []}
        return {o["name"]: o for o in doc["objects"]}

    # -- output ----------------------------------------------------------------------------------
    def publish_joints(self) -> None:
        msg = JointState(name=list(ARM), position=list(ARM.values()))
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.joints_pub.publish(msg)

    def detect(self, *items: tuple[str, np.ndarray, str]) -> None:
        """items: (class id, 4x4 pose in the frame, frame)."""
        msg = Detection3DArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = "wrist_camera_optical_frame"
        for class_id, pose, frame in items:
            det = Detection3D()
            det.header.stamp = msg.header.stamp
            det.header.frame_id = frame
            hyp = ObjectHypothesisWithPose()
            hyp.hypothesis.class_id = class_id
            hyp.hypothesis.score = 0.9
            hyp.pose.pose = to_pose(pose)
            det.results.append(hyp)
            msg.detections.append(det)
        self.detections_pub.publish(msg)


def to_pose(m: np.ndarray) -> Pose:
    p = Pose()
    p.position.x, p.position.y, p.position.z = (float(v) for v in m[:3, 3])
    p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w = (float(v) for v in to_quat_xyzw(m))
    return p


def wait_until(predicate, action=None, timeout: float = 60.0) -> bool:
    """Poll ``predicate``, doing ``action`` (e.g. publish) each round; the deadline only guards hangs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if action is not None:
            action()
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _detector():
    """The test's node in its own context, spun by a thread."""
    import rclpy
    from fixtures.spinning import spun

    context = rclpy.Context()
    context.init()
    node = rclpy.create_node("detector", context=context)
    # the spin ends, the test's action clients (which would keep the node in the graph) and the node go,
    # the context goes down, whatever happened: no node of a test outlives it (fixtures/spinning.py)
    with spun(context, node):
        yield node


@pytest.fixture
def detector_node():
    """The test's node in its own context, spun by a thread."""
    yield from _detector()


@pytest.fixture(scope="module")
def module_detector_node():
    """The node of a module's tests that share one bridge (a module-scoped fixture's node)."""
    yield from _detector()


MAPPING = f"""
defaults: {{timeout: {TIMEOUT}, jitter: 0.005, jitter_angle: 0.02, match_distance: 0.15}}
classes:
  can: {{file: {DATA / 'objects' / 'can.kinbody.xml'}}}
  ball: {{file: {DATA / 'objects' / 'ball.kinbody.xml'}}}
  block: {{file: {DATA / 'objects' / 'block.kinbody.xml'}, static: true, timeout: 0.2}}
"""
# a mapping without the test's classes: ~/reload with it removes every detected body (static ones too)
EMPTYING = f"classes:\n  unused: {{file: {DATA / 'objects' / 'can.kinbody.xml'}}}\n"


class Process:
    """A node process whose output is read as it comes (never blocks on a full pipe; readable while it
    runs)."""

    def __init__(self, module: str, *params: str, env: dict | None = None):
        self.proc = start(module, *params, env=env)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),
                                       daemon=True)
        self.reader.start()

    def output(self, since: int = 0) -> str:
        return "".join(self.lines[since:])

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10.0)
        return self.output()


def module_bridge(mapping_file: Path, mapping: str, node):
    """description_node and world_node (``mapping`` written to ``mapping_file``) for a module's tests, with
    an Observer on ``node``; yields the observer (``procs``: the processes, ``mapping_file``)."""
    mapping_file.write_text(mapping)
    procs = {"description": Process("description", f"description_file:={WORLD}"),
             "world": Process("world", f"objects_file:={mapping_file}", "publish_rate:=20.0")}
    observer = Observer(node)
    observer.mapping_file = mapping_file
    observer.procs = procs
    try:
        yield observer
    finally:
        outputs = [p.stop() for p in procs.values()]
    for out in outputs:
        assert "Traceback" not in out, out


@pytest.fixture(scope="module")
def running_bridge(tmp_path_factory, module_detector_node):
    """The module's bridge, started once (``bridge`` resets it for each test)."""
    yield from module_bridge(tmp_path_factory.mktemp("world") / "objects.yaml", MAPPING, module_detector_node)


def call_reload(node) -> tuple[bool, str]:
    from std_srvs.srv import Trigger

    client = node.create_client(Trigger, "/world_node/reload")
    assert client.wait_for_service(timeout_sec=60)
    future = client.call_async(Trigger.Request())
    assert wait_until(future.done)
    return future.result().success, future.result().message


def reset_world(obs: "Observer", mapping: str) -> float:
    """world_node of a module's bridge as a fresh one: ``mapping`` in its mapping file, no detected body (a
    reload with a mapping of none of the test's classes, then ``mapping``), and the observer's records
    emptied once world_node's documents say so (what it sent before is ordered before them; /tf and markers
    stamped earlier are left out).  Returns that document's stamp (s)."""
    obs.node_since = {name: len(p.lines) for name, p in obs.procs.items()}
    t0 = obs.node.get_clock().now().nanoseconds * 1e-9
    for text in (EMPTYING, mapping):
        obs.mapping_file.write_text(text)
        success, message = call_reload(obs.node)
        assert success, message

    def emptied() -> bool:          # a document sent by the reloads (same host clock)
        with obs.lock:
            return bool(obs.objects_yaml and obs.objects) and not obs.objects_yaml[-1]["objects"] and \
                obs.objects_yaml[-1]["stamp"] >= t0 and 'KinBody name=' not in obs.objects[-1]
    assert wait_until(emptied, timeout=60.0), "world_node did not publish an empty world"
    since = obs.objects_yaml[-1]["stamp"]
    obs.clear(since)
    return since


def check_nodes(obs: "Observer") -> None:
    """After a test on a module's bridge: every node still runs and printed no traceback during it."""
    for name, p in obs.procs.items():
        during = p.output(obs.node_since[name])
        print(f"-- {name} during the test:\n{during[-4000:]}")             # shown when the test fails
        assert p.proc.poll() is None, f"{name} exited {p.proc.returncode}:\n{during[-4000:]}"
        assert "Traceback" not in during, during


@pytest.fixture
def bridge(running_bridge):
    """The module's bridge as a fresh one (``reset_world``); after the test, ``check_nodes``."""
    reset_world(running_bridge, MAPPING)
    yield running_bridge
    check_nodes(running_bridge)


def expected_camera_pose() -> np.ndarray:
    robot = load(WORLD)
    cam = robot.sensors["wrist_camera"]
    return robot.placement @ forward_kinematics(robot, ARM)[cam.link] @ cam.origin @ optical_offset(cam)


def test_detected_can_appears_on_tf_markers_and_objects_through_the_arm(bridge, tmp_path):
    obs = bridge
    camera = expected_camera_pose()
    assert not np.allclose(camera, forward_kinematics(load(WORLD))["link7"])     # the arm is not at zero

    def publish():
        obs.publish_joints()
        obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"))

    assert wait_until(lambda: obs.last_tf("can_0") is not None, publish), "can_0 never appeared on /tf"
    np.testing.assert_allclose(obs.last_tf("can_0")[3], camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)

    assert wait_until(lambda: any(m.ns == "can_0" and m.action == Marker.ADD for m in obs.markers))
    (marker,) = [m for m in obs.markers if m.ns == "can_0" and m.action == Marker.ADD][-1:]
    assert marker.type == Marker.CYLINDER and marker.header.frame_id == "can_0" and marker.frame_locked
    assert marker.scale.x == pytest.approx(0.07) and marker.scale.z == pytest.approx(0.12)
    assert marker.pose.position.z == pytest.approx(0.06)

    assert wait_until(lambda: "can_0" in obs.latest_objects())
    entry = obs.latest_objects()["can_0"]
    assert entry["class"] == "can" and Path(entry["file"]) == DATA / "objects" / "can.kinbody.xml"
    with obs.lock:
        xml = next(x for x in reversed(obs.objects) if 'name="can_0"' in x)
    (tmp_path / "objects.env.xml").write_text(xml)
    env = load(tmp_path / "objects.env.xml", allowed_roots=[tmp_path, DATA])
    bodies = {env.name: env, **env.environment}
    assert list(bodies) == ["can_0"]
    np.testing.assert_allclose(bodies["can_0"].placement, camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)


def test_redetection_jitter_timeout_and_static(bridge):
    obs = bridge
    camera = expected_camera_pose()
    block_local = make(translation=(0.1, 0.0, 0.5))

    def first():
        obs.publish_joints()
        obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                   ("block", block_local, "wrist_camera_optical_frame"))

    assert wait_until(lambda: {"can_0", "block_0"} <= set(obs.latest_objects()), first)
    before = obs.latest_objects()["can_0"]

    # 2 mm away (below the 5 mm jitter), in one batch with a new ball: once the ball is there, the batch
    # was applied -- and the can neither moved nor doubled
    moved_2mm = make(translation=(0.002, 0.0, 0.0)) @ CAMERA_LOCAL
    ball_local = make(translation=(-0.1, 0.0, 0.6))
    assert wait_until(lambda: "ball_0" in obs.latest_objects(), lambda: obs.detect(
        ("can", moved_2mm, "wrist_camera_optical_frame"), ("ball", ball_local, "wrist_camera_optical_frame")))
    now = obs.latest_objects()
    assert "can_1" not in now and now["can_0"]["pose"] == before["pose"]
    with obs.lock:
        stamp = max(t[0] for t in obs.tf)
    assert wait_until(lambda: (obs.last_tf("can_0") or (0,))[0] > stamp)
    np.testing.assert_allclose(obs.last_tf("can_0")[3], camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)

    # 8 mm away: the same body moves
    moved_8mm = make(translation=(0.0, 0.008, 0.0)) @ CAMERA_LOCAL
    assert wait_until(lambda: obs.latest_objects()["can_0"]["pose"] != before["pose"],
                      lambda: obs.detect(("can", moved_8mm, "wrist_camera_optical_frame")))
    assert set(obs.latest_objects()) == {"can_0", "ball_0", "block_0"}
    assert wait_until(lambda: np.allclose(obs.last_tf("can_0")[3], camera @ moved_8mm, rtol=0, atol=1e-9))
    last_seen = obs.latest_objects()["can_0"]["last_seen"]

    # detections stop: can and ball go after the timeout; the static block stays
    assert wait_until(lambda: "can_0" not in obs.latest_objects()), "can_0 was never removed"
    with obs.lock:
        removal = next(d for d in obs.objects_yaml if not any(o["name"] == "can_0" for o in d["objects"])
                       and d["stamp"] > last_seen)
    assert removal["stamp"] - last_seen >= TIMEOUT
    assert wait_until(lambda: any(m.ns == "can_0" and m.action == Marker.DELETE for m in obs.markers))
    assert wait_until(lambda: "ball_0" not in obs.latest_objects())
    assert "block_0" in obs.latest_objects() and removal["stamp"] - last_seen > 0.2   # block timeout 0.2 s
    # /tf after the removal: the block keeps coming, the can does not
    assert wait_until(lambda: sum(1 for t in list(obs.tf)
                                  if t[2] == "block_0" and t[0] > removal["stamp"]) >= 3)
    with obs.lock:
        assert not [t for t in obs.tf if t[2] == "can_0" and t[0] > removal["stamp"]]
    assert not any(m.ns == "block_0" and m.action == Marker.DELETE for m in obs.markers)


def test_bad_detections_are_dropped_and_the_node_keeps_serving(bridge):
    obs = bridge
    nan_pose = CAMERA_LOCAL.copy()
    nan_pose[0, 3] = np.nan

    def publish():
        obs.publish_joints()
        obs.detect(("mug", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                   ("can", CAMERA_LOCAL, "no_such_frame"),
                   ("ball", nan_pose, "wrist_camera_optical_frame"),
                   ("block", CAMERA_LOCAL, "wrist_camera_optical_frame"))

    assert wait_until(lambda: "block_0" in obs.latest_objects(), publish)
    assert set(obs.latest_objects()) == {"block_0"}
    with obs.lock:
        assert all(np.isfinite(t[3]).all() for t in obs.tf)

    # a mapping that no longer loads: ~/reload fails, the previous mapping stays in service
    obs.mapping_file.write_text("classes: [unclosed\n")
    success, message = call_reload(obs.node)
    assert not success and "YAML" in message
    assert wait_until(lambda: "ball_0" in obs.latest_objects(), lambda: obs.detect(
        ("ball", CAMERA_LOCAL, "wrist_camera_optical_frame")))
    # the same through the parameter: the set is refused with the reason, the mapping stays
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    setter = obs.node.create_client(SetParameters, "/world_node/set_parameters")
    assert setter.wait_for_service(timeout_sec=30)
    value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(obs.mapping_file))
    request = SetParameters.Request(parameters=[Parameter(name="objects_file", value=value)])
    future = setter.call_async(request)
    assert wait_until(future.done)
    (result,) = future.result().results
    assert not result.successful and "YAML" in result.reason
    assert wait_until(lambda: "can_0" in obs.latest_objects(), lambda: obs.detect(
        ("can", CAMERA_LOCAL, "wrist_camera_optical_frame")))

    # world_node's log of this test (read as it runs: the node keeps serving the module's other tests)
    said = ["unknown class 'mug'", "'no_such_frame'", "non-finite",
            "reload failed, keeping the previous mapping"]
    world = obs.procs["world"]
    output = lambda: world.output(obs.node_since["world"])      # noqa: E731
    assert wait_until(lambda: all(s in output() for s in said), timeout=30.0), output()
