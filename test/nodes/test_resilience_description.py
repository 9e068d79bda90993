"""description_node under hostile reloads and garbage /joint_states floods: it never dies, keeps
serving its last good model, and a good message afterwards still gives the right /tf."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402
from robot_bridge.ros.tf import matrix  # noqa: E402

from fixtures.description_node import TF_PATHS, Harness  # noqa: E402
from fixtures.hostile_cases import all_cases  # noqa: E402

RELOAD_CASES = [c for c in all_cases() if c.expect is not None and c.fmt != "srdf"
                and "100MB" not in c.id and "zip" not in c.id]


@pytest.fixture(scope="module", autouse=True)
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.fixture(params=TF_PATHS)
def harness(request, fixtures, tmp_path):
    work = tmp_path / "live" / "robot.robot.xml"
    work.parent.mkdir()
    shutil.copy(fixtures / "description" / "two_link.robot.xml", work)
    h = Harness(request.param, description_file=str(work), publish_frequency=0.0)
    h.work = work
    yield h
    h.close()


def test_every_hostile_reload_keeps_the_last_good_model(harness, tmp_path, monkeypatch):
    before = harness.latched(String, "/robot_description").data
    failures = {}
    for case in RELOAD_CASES:
        built = case.build(tmp_path / case.id)
        for key, value in (case.env(tmp_path / case.id) if case.env else {}).items():
            monkeypatch.setenv(key, value)
        ok, error = harness.node.reload({"description_file": str(built.path)})
        assert not ok, case.id
        failures[case.id] = error
        assert "\n" not in error and built.path.name in error, (case.id, error)
    assert len(failures) == len(RELOAD_CASES)
    assert harness.node.get_parameter("description_file").value == str(harness.work)
    assert harness.latched(String, "/robot_description").data == before
    res = harness.call_reload()                           # the configured good file still reloads
    assert res.success, res.message


def _garbage() -> list[JointState]:
    nan, inf = float("nan"), float("inf")
    msgs = [
        JointState(name=["hinge"], position=[nan]),
        JointState(name=["hinge"], position=[inf]),
        JointState(name=["hinge"], position=[-inf]),
        JointState(name=["hinge"], position=[1e308]),
        JointState(name=["hinge", "hinge"], position=[0.1, nan]),
        JointState(name=[], position=[]),
        JointState(name=["hinge"], position=[]),
        JointState(name=[], position=[1.0, 2.0]),
        JointState(name=[f"j{i}" for i in range(5000)], position=[0.0] * 5000),
        JointState(name=["", "\u00e9\u00e9", "hinge\x7f"], position=[1.0, 2.0, 3.0]),
        JointState(name=["hinge"], position=[0.2], velocity=[nan] * 7, effort=[inf] * 3),
    ]
    for m in msgs[:3]:
        m.header.stamp.sec = -5
    return msgs


def test_garbage_joint_states_flood_then_a_good_one(harness):
    tf = harness.collect(TFMessage, "/tf", qos.tf_qos())
    pub = harness.probe.create_publisher(JointState, "/joint_states", qos.sensor_data_qos())
    assert harness.spin_until(lambda: pub.get_subscription_count() > 0)
    garbage = _garbage()
    for _ in range(40):                      # a flood: ~440 bad messages, spun through the callback
        for msg in garbage:
            pub.publish(msg)
        harness.executor.spin_once(timeout_sec=0.0)
    harness.spin_until(lambda: False, timeout=0.5)
    for m in tf:                              # whatever was published is finite
        for t in m.transforms:
            q, p = t.transform.rotation, t.transform.translation
            assert all(math.isfinite(v) for v in (q.x, q.y, q.z, q.w, p.x, p.y, p.z)), t
    tf.clear()
    good = JointState(name=["hinge"], position=[0.5])
    good.header.stamp.sec = 100
    pub.publish(good)
    assert harness.spin_until(lambda: any(t.child_frame_id == "upper" and t.header.stamp.sec == 100
                                          for m in tf for t in m.transforms))
    t = next(t for m in tf for t in m.transforms if t.header.stamp.sec == 100)
    np.testing.assert_allclose(matrix(t)[0, 2], np.sin(0.5), atol=1e-12)        # about y by 0.5
