"""description_node compiles nothing on its start-up path: it answers /joint_states through the numpy path
while the kernels compile (or load from their cache) on a thread, then switches to the compiled path
without a gap -- every JointState answered once, in order, with the joint values so far carried over and
the same /tf values on both paths."""

from __future__ import annotations

import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics import fk_kernel  # noqa: E402
from robot_bridge.kinematics.state_publisher import StatePublisher  # noqa: E402
from robot_bridge.nodes import description  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402

from fixtures.description_node import LWA3, Harness  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.fixture
def held_compilation(monkeypatch):
    """The node starts as in a fresh process (no kernel in memory); its compiled twin is held back until
    the test releases it, so a /tf that arrives before provably came before the compilation ended."""
    if fk_kernel.kernel() is None:
        pytest.skip("numba unavailable: nothing to switch to")
    started, release = threading.Event(), threading.Event()
    real = description.compiled_model

    def held(model):
        started.set()
        assert release.wait(60)
        return real(model)

    monkeypatch.setattr(fk_kernel, "ready", lambda: False)
    monkeypatch.setattr(description, "compiled_model", held)
    yield started, release
    release.set()


def _values(msg: TFMessage) -> dict[str, np.ndarray]:
    out = {}
    for t in msg.transforms:
        tr, rot = t.transform.translation, t.transform.rotation
        out[t.child_frame_id] = np.array([tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w])
    return out


@pytest.mark.parametrize("tf_path", ["fast_path", "executor"])
def test_tf_answers_before_compilation_ends_then_switches_without_a_gap(held_compilation, tf_path):
    started, release = held_compilation
    h = Harness(tf_path, description_file=str(LWA3), publish_frequency=0.0)
    try:
        assert h.node.model.state._rows_kernel is None and h.node.model.joint_tf._fused is None   # numpy
        tf = h.collect(TFMessage, "/tf", qos.tf_qos())
        pub = h.probe.create_publisher(JointState, "/joint_states", 10)
        assert h.spin_until(lambda: pub.get_subscription_count() > 0)
        names = list(h.node.model.state.default_joint_state()[0])
        truth = StatePublisher(load(LWA3), compiled=False)           # the same messages, numpy only
        expected: dict[int, dict] = {}
        rng = np.random.default_rng(7)

        def send(k: int, subset: list[str]):
            positions = rng.uniform(-0.5, 0.5, len(subset))
            msg = JointState(name=subset, position=list(positions))
            msg.header.stamp.sec = k
            moving, _ = truth.update(subset, positions)
            expected[k] = {c: v for c, v in zip(moving.children, moving.values, strict=True)}
            pub.publish(msg)
            assert h.spin_until(lambda: any(m.transforms[0].header.stamp.sec == k for m in tf), timeout=10)

        for k in range(1, 6):
            send(k, names)
        assert started.wait(10)                   # the compilation runs (held), the answers came before
        assert h.node.model.joint_tf._fused is None and h.node._upgrade is None

        release.set()
        assert h.spin_until(lambda: h.node._upgrade is not None, timeout=60)
        k = 5
        while h.node.model.joint_tf._fused is None and k < 40:        # taken over by the next message
            k += 1
            send(k, names[:1] if k % 2 else names)   # one joint alone: the others' values carried over
        assert h.node.model.state._rows_kernel is not None and h.node.model.joint_tf._fused is not None
        for j in range(k + 1, k + 10):           # a stream of one name list: the compiled drain's
            send(j, names)
        last = j

        stamps = [m.transforms[0].header.stamp.sec for m in tf]
        assert stamps == list(range(1, last + 1))                     # each answered once, in order
        for msg in tf:
            got, want = _values(msg), expected[msg.transforms[0].header.stamp.sec]
            assert got.keys() == want.keys()
            for child, values in want.items():
                np.testing.assert_allclose(got[child], values, atol=1e-12, err_msg=child)
        np.testing.assert_allclose(h.node.model.state.q, truth.q, atol=1e-15)
        if tf_path == "fast_path":
            assert h.node.tf_relay.io.handled > 0          # after the switch the compiled drain took over
    finally:
        release.set()
        h.close()


def test_a_reload_during_compilation_gets_its_own_compiled_twin(held_compilation, fixtures):
    started, release = held_compilation
    h = Harness("fast_path", description_file=str(LWA3), publish_frequency=0.0)
    try:
        assert started.wait(10)
        two_link = fixtures / "description" / "two_link.robot.xml"
        assert h.set_param("description_file", str(two_link)).successful
        reloaded = h.node.model
        assert reloaded.joint_tf._fused is None
        release.set()                          # both twins build; only the current model's is taken
        tf = h.collect(TFMessage, "/tf", qos.tf_qos())
        pub = h.probe.create_publisher(JointState, "/joint_states", 10)
        assert h.spin_until(lambda: pub.get_subscription_count() > 0)
        names = list(reloaded.state.default_joint_state()[0])
        for k in range(1, 40):
            msg = JointState(name=names, position=[0.1 * k] * len(names))
            msg.header.stamp.sec = k
            pub.publish(msg)
            assert h.spin_until(lambda k=k: any(m.transforms[0].header.stamp.sec == k for m in tf),
                                timeout=10)
            if h.node.model.joint_tf._fused is not None:
                break
        assert h.node.model.joint_tf._fused is not None
        assert h.node.model.robot is reloaded.robot              # the reloaded robot, now compiled
    finally:
        release.set()
        h.close()


_NOTHING_COMPILED = """
import sys
from robot_bridge.bringup import DATA_DIR
from robot_bridge.kinematics import fk_kernel
from robot_bridge.nodes.description import load_model
from robot_bridge.ros.markers import robot_markers
from robot_bridge.world.planning_scene import body_shapes
from robot_bridge.formats import load

model = load_model(str(DATA_DIR / "default.env.xml"), compiled=False,
                   shared_frames={"world_frame": "world", "environment": True})
assert model.robot.environment, "the world has no environment bodies"
model.state.static_transforms()                     # /tf_static, environment bodies included
robot_markers(model.robot, "", None)
for body in model.robot.environment.values():
    robot_markers(body, "", None)
    body_shapes(body)
for path in sys.argv[1:]:                           # OpenRAVE XML including COLLADA files
    load(path)
print("compiled" if fk_kernel.ready() else "nothing compiled")
"""


def test_start_up_work_compiles_no_kernel(tmp_path):
    """What description_node does before its compile thread starts -- loading (an OpenRAVE XML robot
    including COLLADA files too), /tf_static with the environment bodies, markers, the bodies' shapes --
    compiles no numba kernel: each of those poses is evaluated once, by numpy.  (Main compiled the kernels
    in the constructor for the environment bodies' /tf_static: on a fresh install a SIGINT then waited
    seconds for the compiler.)  A fresh process with an empty kernel cache: nothing in memory either."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    if fk_kernel.kernel() is None:
        pytest.skip("numba unavailable: nothing could be compiled")
    repo = Path(__file__).resolve().parents[2]
    includes = repo / ".." / "shared" / "corpus" / "openrave" / "src" / "robots" / "pa10schunk.robot.xml"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "kernels"), "PYTHONPATH": str(repo)}
    out = subprocess.run([sys.executable, "-c", _NOTHING_COMPILED] + ([str(includes)] if includes.exists()
                                                                       else []),
                         capture_output=True, text=True, timeout=300, env=env, cwd=repo)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "nothing compiled", out.stdout + out.stderr
