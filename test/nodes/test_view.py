"""view_node with real rclpy (no browser): it takes robot_description and /tf at its page rate, keeps its last
good robot when a bad description comes, and shows a topic that stopped as stale."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("viser")

from geometry_msgs.msg import TransformStamped  # noqa: E402
from sensor_msgs.msg import LaserScan  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402

URDF = """<robot name="pole"><link name="base"><visual><geometry><box size="0.1 0.1 1"/></geometry></visual>
</link><link name="tip"/><joint name="j" type="revolute"><parent link="base"/><child link="tip"/>
<origin xyz="0 0 1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" velocity="1" effort="1"/>
</joint></robot>"""


def wait_until(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def view():
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from robot_bridge.nodes.view import ViewNode

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = rclpy.Context()
    context.init()
    node = ViewNode(context=context, parameter_overrides=[Parameter("port", value=port),
                                                          Parameter("stale_after", value=0.5),
                                                          Parameter("discover_period", value=0.2)])
    peer = rclpy.create_node("view_test_peer", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(peer)

    def spin():
        try:
            executor.spin()
        except ExternalShutdownException:
            pass

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    yield node, peer
    executor.shutdown(timeout_sec=10)
    thread.join(timeout=10)
    node.destroy_node()
    peer.destroy_node()
    context.try_shutdown()


def test_robot_and_tf_are_taken_a_bad_description_keeps_the_last_good_robot(view):
    node, peer = view
    description = peer.create_publisher(String, "robot_description", qos.description_qos())
    tf = peer.create_publisher(TFMessage, "/tf", qos.tf_qos())
    description.publish(String(data=URDF))
    assert wait_until(lambda: node._scene is not None), "robot_description never taken"
    assert node._scene.name == "pole" and [s.name for s in node._scene.sliders] == ["j"]

    def publish(x):
        t = TransformStamped()
        t.header.frame_id, t.child_frame_id = "world", "base"
        t.transform.translation.x = x
        t.transform.rotation.w = 1.0
        tf.publish(TFMessage(transforms=[t]))

    for k in range(200):                     # a burst: the newest wins
        publish(k * 0.01)
    assert wait_until(lambda: np.isclose(node.tf.poses("world", ["base"]).get("base", np.eye(4))[0, 3], 1.99))
    assert wait_until(lambda: node.page.poses_sent > 0)

    description.publish(String(data="<robot name='broken'><link name='a'/><joint name='j'/></robot>"))
    assert wait_until(lambda: node.status.names() and node.status._topics["/robot_description"].count >= 2)
    time.sleep(0.5)
    assert node._scene.name == "pole"


def test_a_topic_that_stops_is_stale(view):
    node, peer = view
    scan = peer.create_publisher(LaserScan, "/test_scan", qos.sensor_data_qos())
    msg = LaserScan(angle_min=-1.0, angle_increment=0.5, range_min=0.1, range_max=5.0, ranges=[1.0] * 5)
    msg.header.frame_id = "base"

    def live():
        scan.publish(msg)
        return node.status.names().count("/test_scan") and node.status.state("/test_scan", time.monotonic()) \
            == "live"

    assert wait_until(live), "the scan topic was not discovered"
    assert wait_until(lambda: node.status.state("/test_scan", time.monotonic()) == "stale")
    assert "/test_scan` **STALE**" in node.status.report(time.monotonic())
