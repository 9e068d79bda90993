"""The fast path knows the rcl it binds: the path each distribution runs; a wrong layout stands it down."""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from robot_bridge.ros import fast_relay, rcl_layout

pytest.importorskip("tf2_msgs.msg")
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.nodes.description import DescriptionNode  # noqa: E402
from robot_bridge.ros import qos  # noqa: E402

TWO_LINK = Path(__file__).resolve().parents[1] / "fixtures" / "description" / "two_link.robot.xml"
# The /joint_states -> /tf path each distribution runs: CI runs Kilted and Jazzy, both on the fast path;
# an rcl the layouts were not written for (Humble's 5.x) stands down to the executor.
EXPECTED_PATH = {"kilted": "fast", "jazzy": "fast", "humble": "executor"}


@pytest.fixture(scope="module", autouse=True)
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.fixture
def fresh_check(monkeypatch):
    """The process-wide rcl check done again (restored afterwards)."""
    monkeypatch.setattr(fast_relay, "_libraries", None)
    monkeypatch.setattr(fast_relay, "_unavailable", None, raising=False)
    return monkeypatch


def test_the_distribution_is_named_from_the_installed_rclpy():
    name, version = rcl_layout.distro(), rcl_layout.rclpy_version()
    assert version is not None
    assert name == {"3": "humble", "7": "jazzy", "9": "kilted"}[version.split(".")[0]]


@pytest.mark.parametrize("version, ok", [("9.2.8", True), ("10.1.3", True), ("5.3.9", False),
                                         ("11.0.0", False), (None, False), ("garbage", False)])
def test_only_the_rcl_versions_the_layouts_were_written_for_pass(version, ok):
    problem = rcl_layout.version_problem(version)
    assert (problem is None) == ok
    if not ok:
        assert "9.x (jazzy), 10.x (kilted)" in problem


def test_the_probe_reads_rcutils_own_fill_back_and_catches_a_shifted_struct():
    rcutils = ctypes.CDLL("librcutils.so", mode=ctypes.RTLD_GLOBAL)
    args = (rcutils, fast_relay._SerializedMessage, fast_relay._Allocator)
    assert rcl_layout.probe_problem(*args) is None
    assert "layout differs" in rcl_layout.probe_problem(*args, shifted=True)


def _spin_until(executor, condition, timeout=10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        executor.spin_once(timeout_sec=0.02)
    return condition()


def _tf_flows(node) -> list:
    """JointStates in, the /tf the node publishes (the node and a probe spun together)."""
    probe = rclpy.create_node("layout_probe")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    executor.add_node(probe)
    try:
        tf = []
        probe.create_subscription(TFMessage, "/tf", tf.append, qos.tf_qos())
        pub = probe.create_publisher(JointState, "/joint_states", 10)
        assert _spin_until(executor, lambda: pub.get_subscription_count() > 0)
        names = list(node.model.state.default_joint_state()[0])
        for k in range(1, 4):
            msg = JointState(name=names, position=[0.1 * k] * len(names))
            msg.header.stamp.sec = k
            pub.publish(msg)
            assert _spin_until(executor, lambda k=k: any(m.transforms[0].header.stamp.sec == k for m in tf))
        return tf
    finally:
        executor.shutdown()
        probe.destroy_node()


def test_the_path_in_use_per_distribution(fresh_check):
    expected = EXPECTED_PATH[rcl_layout.distro()]
    node = DescriptionNode(parameter_overrides=[Parameter("description_file", value=str(TWO_LINK))])
    try:
        assert ("fast" if node.tf_relay is not None else "executor") == expected, rcl_layout.distro()
        if expected == "fast" and fast_relay._eventfd_callback_supported():
            assert node.tf_relay.wake.name == "eventfd"
        assert len(_tf_flows(node)) >= 3
    finally:
        node.destroy_node()


def _fast_relay_warnings(monkeypatch) -> list[logging.LogRecord]:
    """The warnings of fast_relay's own logger, from now on (restored by ``monkeypatch`` even if the test
    fails): an earlier test's logging.config (disable_existing_loggers) or propagation change must not
    hide them."""
    logger = logging.getLogger(fast_relay.__name__)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    monkeypatch.setattr(logger, "disabled", False)
    monkeypatch.setattr(logger, "level", logging.WARNING)
    monkeypatch.setattr(logger, "handlers", [*logger.handlers, handler])
    return records


def test_a_wrong_rcl_layout_stands_the_fast_path_down_and_the_node_keeps_publishing(fresh_check):
    fresh_check.setenv(rcl_layout.TEST_HOOK, "shifted")
    records = _fast_relay_warnings(fresh_check)
    node = DescriptionNode(parameter_overrides=[Parameter("description_file", value=str(TWO_LINK))])
    try:
        assert node.tf_relay is None                                   # the executor path
        assert len(_tf_flows(node)) >= 3                               # and /tf keeps coming
    finally:
        node.destroy_node()
    # everything else built on the fast path stands down too, without a second log line
    side = rclpy.create_node("layout_side")
    try:
        publisher = side.create_publisher(String, "/layout_out", 10)
        with pytest.raises(fast_relay.FastPathUnavailable, match="layout differs"):
            fast_relay.SerializedRelay(side.create_subscription(String, "/layout_in", lambda _m: None, 10,
                                                                raw=True), publisher, lambda v, o: o,
                                       context=side.context, headroom=0, on_error=print)
        assert fast_relay.SerializedPublisher(publisher)._libs is None   # rclpy's publish(bytes)
        assert fast_relay.warm(lambda *args: None) is False
    finally:
        side.destroy_node()
    lines = [r.getMessage() for r in records]
    assert len(lines) == 1 and lines[0].startswith("rcl fast path off, using the executor path: ")
    assert "layout differs" in lines[0]


def test_template_publishers_publish_from_python_when_the_fast_path_stands_down(fresh_check):
    from std_msgs.msg import Header

    from robot_bridge.ros.cdr_template import CdrTemplate
    from robot_bridge.ros.template_publishers import TemplatePublishers

    fresh_check.setenv(rcl_layout.TEST_HOOK, "shifted")
    side, probe = rclpy.create_node("layout_templates"), rclpy.create_node("layout_templates_probe")
    executor = SingleThreadedExecutor()
    executor.add_node(side)
    executor.add_node(probe)
    try:
        template = CdrTemplate(lambda slot, stamp: JointState(header=Header(stamp=stamp()), name=["a", "b"],
                                                              position=slot(2)))
        publishers = TemplatePublishers([(side.create_publisher(JointState, "/layout_templates", 10),
                                          template, np.array([0, 1]))])
        assert publishers.compiled is False                            # no compiled rcl call
        received = []
        probe.create_subscription(JointState, "/layout_templates", received.append, 10)
        rows = (np.array([1.5, -2.0]), np.zeros(2), np.zeros(2))

        def sent():
            publishers.publish_state(rows, rows, np.zeros(2), 3 * 10**9 + 7)
            return received
        assert _spin_until(executor, sent)
        assert list(received[0].position) == [1.5, -2.0] and received[0].header.stamp.sec == 3
    finally:
        executor.shutdown()
        probe.destroy_node()
        side.destroy_node()


def test_threads_asking_at_once_check_rcl_once_and_log_once(fresh_check):
    """A node's constructor and its warm-up thread both ask for rcl: one check, one log line."""
    checks = []
    barrier = threading.Barrier(4)

    class SlowlyRefused:
        def __init__(self):
            checks.append(1)
            time.sleep(0.05)                        # the others arrive while this check runs
            raise fast_relay.FastPathUnavailable("refused for the test")

    fresh_check.setattr(fast_relay, "_Libraries", SlowlyRefused)
    outcomes = []

    def ask():
        barrier.wait()
        try:
            fast_relay._libs()
        except fast_relay.FastPathUnavailable as exc:
            outcomes.append(str(exc))

    records = _fast_relay_warnings(fresh_check)
    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(checks) == 1 and outcomes == ["refused for the test"] * 4
    assert [r.getMessage() for r in records] == [
        "rcl fast path off, using the executor path: refused for the test"]
