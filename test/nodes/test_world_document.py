"""Issue 41: any peer could make three nodes open any path on the host.  A forged ``world_node/objects``
document naming /etc/shadow, /proc/self/environ and /nonexistent/x.xml went to ``formats.load`` in
controller_node, sensor_bridge and planner_node, and their /rosout lines told what each path was (not XML,
binary data, not found): an existence and type oracle.

Here the real nodes run in this process (each in its own namespace and rclpy context), the test publishes
the forged document on their objects topic and records, until each node's objects worker has handled it,
every path opened (a Python audit hook on "open") or stat'ed (os.stat / os.lstat wrapped: they raise no
audit event).  None of the forged paths, nor anything under /etc, /proc or /nonexistent, may be touched;
the node's /rosout says one generic refusal per body, the same for the existing and the missing path; a
body file in the package's data (trusted) is still read.  The controller's /joint_states keeps its rate
throughout: judged on the stamps it publishes (largest gap between consecutive stamps), never on sleeps."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from fixtures.opens import RECORDING as _RECORDING  # noqa: E402
from fixtures.spinning import spun  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.world import PlacedBody, load_mapping, to_xml  # noqa: E402
import robot_bridge  # noqa: E402
from fixtures.waiting import wait_until  # noqa: E402

DATA = Path(robot_bridge.__file__).resolve().parent / "data"
WORLD = DATA / "default.env.xml"
FORGED = {"a": "/etc/shadow", "b": "/proc/self/environ", "c": "/nonexistent/x.xml"}
FORBIDDEN = ("/etc", "/proc", "/nonexistent")
# what the old nodes logged about those paths: none of it may reach /rosout
ORACLE_WORDS = ("not XML", "not found", "binary", "regular file", "No such file", "Permission", "directory",
                "empty file", "shadow", "environ", "nonexistent")
STATE_RATE = 20.0



@pytest.fixture
def touched(monkeypatch):
    """Paths opened or stat'ed from when the test starts recording (``touched.start()``)."""
    seen: list[str] = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)

        def wrapped(path, *args, _real=real, **kwargs):
            if _RECORDING and isinstance(path, (str, bytes, os.PathLike)):
                seen.append(os.fsdecode(os.fspath(path)))
            return _real(path, *args, **kwargs)
        monkeypatch.setattr(os, name, wrapped)
    yield seen
    if seen in _RECORDING:
        _RECORDING.remove(seen)


def forged_document() -> str:
    ball = load_mapping(DATA / "objects.yaml").classes["ball"]
    bodies = [PlacedBody(name, "x", path, np.eye(4)) for name, path in FORGED.items()]
    return to_xml(bodies + [PlacedBody("ball_0", "ball", ball.file, np.eye(4))], stamp=1.0)


class Probe:
    """The peer: publishes the forged document on ``topic``, records /rosout lines of ``logger``."""

    def __init__(self, context, namespace: str, topic: str, logger: str):
        self.node = rclpy.create_node("peer", context=context, namespace=namespace)
        self.lock = threading.Lock()
        self.lines: list[str] = []
        self.logger = logger
        self.node.create_subscription(Log, "/rosout", self._on_log,
                                      QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        self.pub = self.node.create_publisher(String, topic, qos.description_qos())

    def _on_log(self, msg: Log) -> None:
        if msg.name == self.logger:
            with self.lock:
                self.lines.append(msg.msg)

    def logged(self, text: str) -> list[str]:
        with self.lock:
            return [line for line in self.lines if text in line]

    def publish(self, touched: list) -> None:
        """Publish the forged document, recording from here on."""
        _RECORDING.append(touched)
        self.pub.publish(String(data=forged_document()))


def check(probe: Probe, touched: list, worker, what: str) -> None:
    """The forged document handled by ``worker`` without touching the forged paths, refused in one
    generic line per body."""
    # (the old nodes, without a worker: until they logged about the first body)
    wait_until(lambda: worker.handled >= 1 if worker is not None
               else probe.logged("'a'") or probe.logged("shadow"), 60.0, f"{what} to read the document")
    _RECORDING.remove(touched)
    bad = sorted({p for p in touched if p.startswith(FORBIDDEN)})
    assert bad == [], f"{what} touched {bad}"
    wait_until(lambda: probe.logged("outside the trusted roots"), 30.0, f"{what}'s refusal on /rosout")
    line = probe.logged("outside the trusted roots")[0]
    for name in FORGED:                              # one message, whatever the host has at the path
        assert f"body '{name}': file outside the trusted roots" in line, line
    with probe.lock:
        lines = list(probe.lines)
    leaks = [(word, text) for text in lines for word in ORACLE_WORDS if word in text]
    assert leaks == [], leaks
    assert not [text for text in lines if "ball_0" in text], lines        # the trusted body was read


def overrides(**values) -> list:
    return [Parameter(name, value=value) for name, value in values.items()]


def test_controller_refuses_forged_body_files_and_keeps_its_state_rate(touched):
    from robot_bridge.nodes.controller import ControllerNode

    ns = f"/t{uuid.uuid4().hex[:8]}"
    context = rclpy.Context()
    context.init()
    node = ControllerNode(context=context, namespace=ns, parameter_overrides=overrides(
        description_file=str(WORLD), state_rate=STATE_RATE))
    probe = Probe(context, ns, f"{ns}/world_node/objects", f"{ns[1:]}.controller_node")
    stamps: list[float] = []
    probe.node.create_subscription(
        JointState, "/joint_states",
        lambda msg: stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9),
        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    with spun(context, node, probe.node):
        wait_until(lambda: len(stamps) >= 5, 60.0, "/joint_states")
        first = len(stamps)
        probe.publish(touched)
        check(probe, touched, getattr(node, "objects_worker", None), "controller_node")
        assert set(node._world_objects) == {"ball_0"}
        after = len(stamps)
        wait_until(lambda: len(stamps) >= after + 10, 60.0, "/joint_states after the document")
        window = np.array(stamps[first - 1:])
    gaps = np.diff(window)
    # the state thread ran on: no gap beyond two periods plus slack for a loaded 2-core machine
    assert gaps.max() <= 2.0 / STATE_RATE + 0.25, f"largest /joint_states gap {gaps.max():.3f} s"


def test_sensor_bridge_refuses_forged_body_files(touched, sensor_harness):
    from robot_bridge.formats import load

    h = sensor_harness(load(WORLD), default_mode="off", **{"sensors.base_laser.mode": "sim"})
    bridge = h.bridge
    probe = Probe(h.context, h.namespace, f"{h.namespace}/world_node/objects",
                  f"{h.namespace[1:]}.sensor_bridge")
    h.executor.add_node(probe.node)
    try:
        probe.publish(touched)
        worker = getattr(bridge, "objects_worker", None)
        assert h.spin_until(lambda: probe.logged("outside the trusted roots") or probe.logged("shadow"),
                            timeout=60.0), "no refusal"
        check(probe, touched, worker, "sensor_bridge")
        assert set(bridge._objects_applied) == {"ball_0"} and "ball_0" in bridge.scene.bodies
    finally:
        h.executor.remove_node(probe.node)
        probe.node.destroy_node()


def test_planner_node_refuses_forged_body_files(touched):
    from robot_bridge import planning

    if not planning.installed():
        pytest.skip("the planning extra is not installed")
    from robot_bridge.nodes.planner import PlannerNode

    ns = f"/t{uuid.uuid4().hex[:8]}"
    context = rclpy.Context()
    context.init()
    node = PlannerNode(context=context, namespace=ns)
    probe = Probe(context, ns, f"{ns}/world_node/objects", f"{ns[1:]}.planner_node")
    with spun(context, node, probe.node):
        probe.publish(touched)
        check(probe, touched, getattr(node, "objects_worker", None), "planner_node")
        with node._input_lock:
            pending = node._pending_objects
        assert pending is None or set(pending) == {"ball_0"}
        assert node.objects_version == 1


KINBODY = """<KinBody name="amplified">
  <Body name="base" type="dynamic">
    <Geom type="trimesh"><Data>amplified.iv</Data><Render>amplified.iv</Render></Geom>
  </Body>
</KinBody>
"""


def amplified_document(folder: Path) -> str:
    """A document naming issue 41's 900 KB amplification file (through a KinBody in ``folder``, a trusted
    objects root) next to the package's ball."""
    from fixtures.inventor import amplified_iv

    assert amplified_iv(folder / "amplified.iv").stat().st_size < 1_000_000
    (folder / "amplified.kinbody.xml").write_text(KINBODY)
    ball = load_mapping(DATA / "objects.yaml").classes["ball"]
    return to_xml([PlacedBody("amp", "x", str(folder / "amplified.kinbody.xml"), np.eye(4)),
                   PlacedBody("ball_0", "ball", ball.file, np.eye(4))], stamp=1.0)


def check_amplified(probe: Probe, touched: list, worker, what: str) -> None:
    """The amplification body refused with the typed work-budget reason, in one line, nothing opened
    outside the trusted roots."""
    wait_until(lambda: worker.handled >= 1, 60.0, f"{what} to read the document")
    _RECORDING.remove(touched)
    bad = sorted({p for p in touched if p.startswith(FORBIDDEN)})
    assert bad == [], f"{what} touched {bad}"
    wait_until(lambda: probe.logged("MAX_MESH_WORK"), 30.0, f"{what}'s refusal on /rosout")
    lines = probe.logged("MAX_MESH_WORK")
    assert len(lines) == 1 and "body 'amp': " in lines[0] and "amplified.iv" in lines[0], lines
    with probe.lock:
        leaks = [(word, text) for text in probe.lines for word in ORACLE_WORDS if word in text]
    assert leaks == [], leaks


def test_controller_refuses_the_amplification_body_and_keeps_its_state_rate(touched, tmp_path):
    """Issue 41's 900 KB Inventor file inside the trusted roots: the old controller read it in its scene
    under the control lock (~0.5 s of work: a /joint_states gap); now the reader refuses the body on its
    worker with MAX_MESH_WORK and the state thread runs on."""
    from robot_bridge.nodes.controller import ControllerNode

    ns = f"/t{uuid.uuid4().hex[:8]}"
    context = rclpy.Context()
    context.init()
    node = ControllerNode(context=context, namespace=ns, parameter_overrides=overrides(
        description_file=str(WORLD), state_rate=STATE_RATE, **{"sim.objects_roots": [str(tmp_path)]}))
    probe = Probe(context, ns, f"{ns}/world_node/objects", f"{ns[1:]}.controller_node")
    stamps: list[float] = []
    probe.node.create_subscription(
        JointState, "/joint_states",
        lambda msg: stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9),
        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    document = amplified_document(tmp_path)
    with spun(context, node, probe.node):
        wait_until(lambda: len(stamps) >= 5, 60.0, "/joint_states")
        first = len(stamps)
        _RECORDING.append(touched)
        probe.pub.publish(String(data=document))
        check_amplified(probe, touched, node.objects_worker, "controller_node")
        assert set(node._world_objects) == {"ball_0"}
        after = len(stamps)
        wait_until(lambda: len(stamps) >= after + 10, 60.0, "/joint_states after the document")
        window = np.array(stamps[first - 1:])
    gaps = np.diff(window)
    assert gaps.max() <= 2.0 / STATE_RATE + 0.25, f"largest /joint_states gap {gaps.max():.3f} s"


def test_planner_node_refuses_the_amplification_body(touched, tmp_path):
    from robot_bridge import planning

    if not planning.installed():
        pytest.skip("the planning extra is not installed")
    from robot_bridge.nodes.planner import PlannerNode

    ns = f"/t{uuid.uuid4().hex[:8]}"
    context = rclpy.Context()
    context.init()
    node = PlannerNode(context=context, namespace=ns,
                       parameter_overrides=overrides(objects_roots=[str(tmp_path)]))
    probe = Probe(context, ns, f"{ns}/world_node/objects", f"{ns[1:]}.planner_node")
    document = amplified_document(tmp_path)
    with spun(context, node, probe.node):
        _RECORDING.append(touched)
        probe.pub.publish(String(data=document))
        check_amplified(probe, touched, node.objects_worker, "planner_node")
        with node._input_lock:
            pending = node._pending_objects
        assert pending is None or set(pending) == {"ball_0"}
        assert node.objects_version == 1


def test_sensor_bridge_refuses_the_amplification_body(touched, sensor_harness, tmp_path):
    from robot_bridge.formats import load

    document = amplified_document(tmp_path)
    h = sensor_harness(load(WORLD), default_mode="off", objects_roots=[str(tmp_path)],
                       **{"sensors.base_laser.mode": "sim"})
    bridge = h.bridge
    probe = Probe(h.context, h.namespace, f"{h.namespace}/world_node/objects",
                  f"{h.namespace[1:]}.sensor_bridge")
    h.executor.add_node(probe.node)
    try:
        _RECORDING.append(touched)
        probe.pub.publish(String(data=document))
        assert h.spin_until(lambda: probe.logged("MAX_MESH_WORK"), timeout=60.0), "no refusal"
        check_amplified(probe, touched, bridge.objects_worker, "sensor_bridge")
        assert set(bridge._objects_applied) == {"ball_0"} and "amp" not in bridge.scene.bodies
    finally:
        h.executor.remove_node(probe.node)
        probe.node.destroy_node()
