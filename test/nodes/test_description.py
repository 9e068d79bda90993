"""description_node over real rclpy: latched topics, JointState -> /tf, reload, parameters."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.urdf_tree import urdf_tree  # noqa: E402
from robot_bridge.nodes.description import DescriptionNode  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.tf import matrix  # noqa: E402

from fixtures.description_node import (DATA, LWA3, LWA3_SRDF, Harness,  # noqa: E402, F401
                                      compose, static_edges, tf_and_joint_states,
                                      check_tf_equals_fk)


@pytest.fixture(scope="module", autouse=True)
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


def test_late_joiner_gets_description_semantics_and_full_tf_static(harness_factory):
    pytest.importorskip("robot_bridge.formats.srdf")
    h = harness_factory(description_file=str(LWA3), srdf_file=str(LWA3_SRDF))
    h.spin_until(lambda: False, timeout=0.3)          # everything is published before the probe subscribes
    urdf = h.latched(String, "/robot_description").data
    assert '<robot name="lwa3_gripper"' in urdf and 'name="finger_right_joint"' in urdf
    srdf = h.latched(String, "/robot_description_semantic").data
    assert srdf == LWA3_SRDF.read_text(encoding="utf-8")
    static = h.latched(TFMessage, "/tf_static", qos.tf_static_listener_qos())
    edges = static_edges(static)
    # hand-listed: the robot in the world, fixed joint, tool, three sensors, camera optical frame, hpp
    # gripper frame
    assert {c: p for c, (p, _) in edges.items()} == {
        "base": "world", "gripper_base": "link7", "arm_tool": "gripper_base", "base_laser": "base",
        "wrist_camera": "link7", "wrist_camera_optical_frame": "wrist_camera", "wrist_imu": "link7",
        "gripper_hand": "gripper_base"}
    # values from the files: hpp gripper at z = 0.1 in gripper_base (SRDF <position xyz="0 0 0.1">)
    expected = np.eye(4)
    expected[2, 3] = 0.1
    np.testing.assert_allclose(edges["gripper_hand"][1], expected, atol=1e-12)
    np.testing.assert_array_equal(edges["base"][1], np.eye(4))     # a robot file placing it nowhere: origin
    robot = load(LWA3)
    np.testing.assert_allclose(edges["arm_tool"][1], robot.manipulators["arm"].tool, atol=1e-12)
    markers = h.latched(MarkerArray, "/description_node/markers")
    assert markers.markers[0].action == Marker.DELETEALL
    namespaces = {m.ns for m in markers.markers[1:]}
    assert {"tool", "gripper", "sensor"} <= namespaces
    frames = {m.header.frame_id for m in markers.markers[1:]}
    assert {"arm_tool", "gripper_hand", "base_laser", "wrist_camera_optical_frame"} <= frames


@pytest.mark.parametrize("relpath", ["openrave/test/testdata/arm_bucket_assy_Amimic.robot.xml",
                                     "openrave/src/robots/barrettwam.robot.xml"])
def test_corpus_joint_states_to_tf_equals_fk(harness_factory, corpus, openrave_data, relpath):
    path = corpus / relpath
    robot = load(path, search_path=[openrave_data])
    if relpath.endswith("Amimic.robot.xml"):   # the point of this robot: active, nonlinear mimic joints
        assert any(j.is_mimic and not j.passive for j in robot.joints.values())
    h = harness_factory(description_file=str(path), search_path=[str(openrave_data)], publish_frequency=0.0)
    check_tf_equals_fk(h, robot, np.random.default_rng(7))


def test_multi_dof_and_prefix(harness_factory, fixtures):
    path = fixtures / "description" / "two_link.robot.xml"
    h = harness_factory(description_file=str(path), frame_prefix="r2/")
    check_tf_equals_fk(h, load(path), np.random.default_rng(3), prefix="r2/")


def test_bad_messages_are_ignored_and_unknown_names_skipped(harness_factory, fixtures):
    h = harness_factory(description_file=str(fixtures / "description" / "two_link.robot.xml"),
                        publish_frequency=0.0)
    tf, pub = tf_and_joint_states(h)
    pub.publish(JointState(name=["hinge", "ball_axis0"], position=[0.1]))          # length mismatch
    pub.publish(JointState(name=["hinge", "nope"], position=[0.5, 1.0]))           # unknown name
    assert h.spin_until(lambda: tf)
    h.spin_until(lambda: False, timeout=0.2)
    assert len(tf) == 1
    assert [t.child_frame_id for t in tf[0].transforms] == ["upper"]
    rot = matrix(tf[0].transforms[0])[:3, :3]
    np.testing.assert_allclose(rot[0, 2], np.sin(0.5), atol=1e-12)                # about y by 0.5


def test_publish_frequency_limits_per_stamp(harness_factory, fixtures):
    h = harness_factory(description_file=str(fixtures / "description" / "two_link.robot.xml"),
                        publish_frequency=10.0)
    tf, pub = tf_and_joint_states(h)
    for nanosec in (0, 50_000_000, 100_000_000):                                  # 0, 50, 100 ms
        msg = JointState(name=["hinge"], position=[0.0])
        msg.header.stamp.sec, msg.header.stamp.nanosec = 5, nanosec
        pub.publish(msg)
    h.spin_until(lambda: len(tf) >= 2)
    h.spin_until(lambda: False, timeout=0.2)
    assert [m.transforms[0].header.stamp.nanosec for m in tf] == [0, 100_000_000]


def test_reload_broken_then_smaller_robot(harness_factory, fixtures, tmp_path):
    pytest.importorskip("robot_bridge.formats.srdf")
    work = tmp_path / "robot.robot.xml"
    shutil.copy(LWA3, work)
    h = harness_factory(description_file=str(work))
    before = h.latched(String, "/robot_description").data
    generated = h.latched(String, "/robot_description_semantic").data      # no srdf_file: generated
    assert '<group name="arm">' in generated and 'base_link="base" tip_link="gripper_base"' in generated
    work.write_text("<Robot name='broken'><KinBody>", encoding="utf-8")
    res = h.call_reload()
    assert not res.success and "robot.robot.xml" in res.message
    assert h.latched(String, "/robot_description").data == before      # still the old model
    assert "arm_tool" in static_edges(h.latched(TFMessage, "/tf_static", qos.tf_static_listener_qos()))

    shutil.copy(fixtures / "description" / "two_link.robot.xml", work)
    res = h.call_reload()
    assert res.success, res.message
    assert '<robot name="two_link"' in h.latched(String, "/robot_description").data
    static = static_edges(h.latched(TFMessage, "/tf_static", qos.tf_static_listener_qos()))
    assert set(static) == {"root", "tip"}              # the lwa3 frames are gone from the latched message
    semantic = h.latched(String, "/robot_description_semantic").data
    assert semantic == ""                              # the previous SRDF is withdrawn


def test_bad_file_at_startup_then_parameter_change(harness_factory, fixtures, tmp_path):
    h = harness_factory(description_file=str(tmp_path / "missing.robot.xml"))
    h.spin_until(lambda: False, timeout=0.2)
    assert h.node.model is None                        # alive, waiting
    res = h.call_reload()
    assert not res.success and "missing.robot.xml" in res.message

    bad = tmp_path / "bad.robot.xml"
    bad.write_text("not xml", encoding="utf-8")
    result = h.set_param("description_file", str(bad))
    assert not result.successful and "bad.robot.xml" in result.reason
    assert h.node.get_parameter("description_file").value.endswith("missing.robot.xml")

    good = shutil.copy(fixtures / "description" / "two_link.robot.xml", tmp_path)   # in a launch-time root
    assert h.set_param("description_file", str(good)).successful
    assert '<robot name="two_link"' in h.latched(String, "/robot_description").data
    assert not h.set_param("publish_frequency", -1.0).successful


def test_robot_pose_places_the_robot_in_the_world(harness_factory, fixtures, tmp_path):
    """issue 43: world -> root on /tf_static at robot_pose (set at run time: reloads); a file placing the
    robot itself refuses it."""
    good = shutil.copy(fixtures / "description" / "two_link.robot.xml", tmp_path)
    h = harness_factory(description_file=str(good))
    edges = static_edges(h.latched(TFMessage, "/tf_static", qos.tf_static_listener_qos()))
    assert edges["root"][0] == "world"
    np.testing.assert_array_equal(edges["root"][1], np.eye(4))
    assert h.set_param("robot_pose", [0.0, 0.0, 0.1, 0.0, 0.0, np.pi / 2]).successful
    placed = np.array([[0.0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0.1], [0, 0, 0, 1]])
    assert h.spin_until(lambda: np.allclose(static_edges(h.latched(
        TFMessage, "/tf_static", qos.tf_static_listener_qos()))["root"][1], placed, atol=1e-9))
    env = tmp_path / "placed.env.xml"
    env.write_text(f"<Environment><Robot file='{good}'><translation>1 0 0</translation></Robot>"
                   "</Environment>", encoding="utf-8")
    result = h.set_param("description_file", str(env))
    assert not result.successful and "places it already" in result.reason
    unset = Parameter("robot_pose", Parameter.Type.DOUBLE_ARRAY, [])
    assert h.node.set_parameters([unset])[0].successful
    assert h.set_param("description_file", str(env)).successful
    assert h.spin_until(lambda: np.allclose(static_edges(h.latched(
        TFMessage, "/tf_static", qos.tf_static_listener_qos()))["root"][1][:3, 3], [1, 0, 0]))


def test_publish_default_joint_states(harness_factory, fixtures):
    h = harness_factory(description_file=str(fixtures / "description" / "two_link.robot.xml"),
                        publish_default_joint_states=True)
    states = h.collect(JointState, "/joint_states", 10)
    tf = h.collect(TFMessage, "/tf", qos.tf_qos())
    assert h.spin_until(lambda: states and tf)
    assert list(states[0].name) == ["hinge", "ball_axis0", "ball_axis1", "ball_axis2"]
    assert list(states[0].position) == [0.0] * 4
    # another source appears: the node stops publishing defaults
    other = h.probe.create_publisher(JointState, "/joint_states", 10)
    assert h.spin_until(lambda: h.node.count_publishers("/joint_states") > 1)
    h.spin_until(lambda: False, timeout=0.3)
    states.clear()
    h.spin_until(lambda: False, timeout=0.35)
    assert states == []
    del other


def _expected_tf(path: Path, names: list[str], value: float) -> dict[str, tuple[str, np.ndarray]]:
    """child -> (parent, 7 values) the model of ``path`` publishes for ``names`` all at ``value``."""
    from robot_bridge.kinematics.state_publisher import StatePublisher

    moving, _unknown = StatePublisher(load(path)).update(names, [value] * len(names))
    return {c: (p, v) for p, c, v in zip(moving.parents, moving.children, moving.values, strict=True)}


def test_reload_swaps_the_model_atomically_while_joint_states_flow(harness_factory, fixtures):
    """JointStates stream from another thread while the model is swapped back and forth: every /tf
    message is wholly one model's frames with that model's values for the message's positions."""
    import threading

    two_link = fixtures / "description" / "two_link.robot.xml"
    models = {"two_link": two_link, "lwa3": LWA3}
    names = ["hinge", "ball_axis0", "ball_axis1", "ball_axis2"] + \
        [j.name for j in urdf_tree(load(LWA3))[1] if j.type != "fixed"]
    h = harness_factory(description_file=str(two_link), publish_frequency=0.0)
    tf, pub = tf_and_joint_states(h)
    stop, sent = threading.Event(), [0]

    def stream():
        k = 0
        while not stop.is_set():
            k += 1
            msg = JointState(name=names, position=[0.001 * k] * len(names))
            msg.header.stamp.sec = k
            pub.publish(msg)
            sent[0] = k
            stop.wait(0.002)

    sender = threading.Thread(target=stream, daemon=True)
    sender.start()
    try:
        for _swap in range(3):
            for name in ("lwa3", "two_link"):
                ok, error = h.node.reload({"description_file": str(models[name])})
                assert ok, error
                mark = sent[0]
                assert h.spin_until(lambda m=mark: any(x.transforms[0].header.stamp.sec > m + 5 for x in tf))
    finally:
        stop.set()
        sender.join()
    seen = set()
    frames = {name: set(_expected_tf(path, names, 0.0)) for name, path in models.items()}
    for msg in tf:
        children = {t.child_frame_id for t in msg.transforms}
        model = next(name for name, f in frames.items() if f == children)     # one model, whole
        seen.add(model)
        k = msg.transforms[0].header.stamp.sec
        expected = _expected_tf(models[model], names, 0.001 * k)
        for t in msg.transforms:
            assert t.header.stamp.sec == k
            parent, values = expected[t.child_frame_id]
            tr, rot = t.transform.translation, t.transform.rotation
            assert t.header.frame_id == parent
            np.testing.assert_allclose([tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w], values, atol=1e-12)
    assert seen == {"two_link", "lwa3"}


def test_fast_path_unavailable_falls_back_to_the_executor(monkeypatch, fixtures):
    from robot_bridge.ros import fast_relay

    def unavailable(*_args, **_kwargs):
        raise fast_relay.FastPathUnavailable("no rcl handles in this rclpy")

    monkeypatch.setattr(fast_relay, "SerializedRelay", unavailable)
    node = DescriptionNode(parameter_overrides=[
        Parameter("description_file", value=str(fixtures / "description" / "two_link.robot.xml"))])
    try:
        assert node.tf_relay is None
        subs = [s for s in node.subscriptions if s.topic_name == "/joint_states"]
        assert len(subs) == 1                                                   # the executor's (contained)
        assert getattr(subs[0].callback, "__wrapped__", None) == node._on_joint_state
    finally:
        node.destroy_node()


def test_compiled_drain_serves_a_known_stream_and_restarts_on_every_swap(fixtures):
    """Fast path: a stream of the model's own joint names is taken, applied and published by the relay's
    compiled drain (no Python per message); what it cannot judge (a NaN) goes to Python; a reload or a
    rate gate set while it runs takes effect from the next message."""
    from robot_bridge.kinematics import fk_kernel

    if fk_kernel.kernel() is None:
        pytest.skip("numba unavailable: no compiled drain")
    path = fixtures / "description" / "two_link.robot.xml"
    h = Harness("fast_path", description_file=str(path), publish_frequency=0.0)
    try:
        io = h.node.tf_relay.io
        assert io is not None, "the eventfd wake with a drain is this platform's fast path"
        names = list(h.node.model.state.default_joint_state()[0])
        tf, pub = tf_and_joint_states(h)
        sec = [0]

        def send(value=None, nanosec=0, wait=True):
            sec[0] += 1
            msg = JointState(name=names, position=[0.01 * sec[0] if value is None else value] * len(names))
            msg.header.stamp.sec, msg.header.stamp.nanosec = sec[0], nanosec
            pub.publish(msg)
            if wait:
                assert h.spin_until(lambda s=sec[0]: any(m.transforms[0].header.stamp.sec == s for m in tf))

        def check(msg, prefix=""):
            k = msg.transforms[0].header.stamp.sec
            expected = _expected_tf(path, names, 0.01 * k)
            for t in msg.transforms:
                assert t.child_frame_id.startswith(prefix) and t.header.stamp.sec == k
                parent, values = expected[t.child_frame_id[len(prefix):]]
                tr, rot = t.transform.translation, t.transform.rotation
                np.testing.assert_allclose([tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w], values, atol=1e-12)

        for _ in range(10):
            send()
        assert io.handled >= 1          # the first made the plan in Python, then the drain took over
        assert h.node.counts == {"joint_states": 10, "tf": 10}
        for msg in tf:
            check(msg)

        handled = io.handled
        send(value=float("nan"), wait=False)          # the drain leaves it to Python: ignored, warned
        send()
        assert [m.transforms[0].header.stamp.sec for m in tf[-2:]] == [10, 12]
        assert io.handled == handled + 1              # the good message after it: compiled again

        assert h.set_param("frame_prefix", "p/").successful                    # a reload
        send()
        check(tf[-1], prefix="p/")
        send()
        assert io.handled == handled + 3

        assert h.set_param("publish_frequency", 10.0).successful               # a gate to consult
        start, base = len(tf), sec[0] + 1
        for step in range(10):                          # stamps 20 ms apart: one in five passes 10 Hz
            taken = h.node.counts["joint_states"]
            msg = JointState(name=names, position=[0.01 * base] * len(names))
            msg.header.stamp.sec, msg.header.stamp.nanosec = base, step * 20_000_000
            pub.publish(msg)
            assert h.spin_until(lambda t=taken: h.node.counts["joint_states"] > t)
        assert h.spin_until(lambda: len(tf) >= start + 2)
        h.spin_until(lambda: False, timeout=0.2)
        assert [m.transforms[0].header.stamp.nanosec for m in tf[start:]] == [0, 100_000_000]
        assert io.handled == handled + 3                                    # the gate is Python's
        from robot_bridge.ros import joint_state_tf
        assert len(joint_state_tf._drainer().signatures) == 1      # warmed at load: none compiled since
    finally:
        h.close()
