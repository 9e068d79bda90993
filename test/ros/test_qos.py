"""QoS profiles match robot_state_publisher / tf2_ros (values from their sources), and late joiners get
the latched /robot_description and /tf_static."""

from __future__ import annotations

import threading
import uuid

import pytest
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, HistoryPolicy, ReliabilityPolicy
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from robot_bridge.ros import qos
from fixtures.waiting import wait_until

KEEP_LAST, RELIABLE, BEST_EFFORT = HistoryPolicy.KEEP_LAST, ReliabilityPolicy.RELIABLE, \
    ReliabilityPolicy.BEST_EFFORT
LATCHED, VOLATILE = DurabilityPolicy.TRANSIENT_LOCAL, DurabilityPolicy.VOLATILE


@pytest.mark.parametrize("profile, expected", [
    # robot_state_publisher: rclcpp::QoS(1).transient_local() for robot_description
    (qos.description_qos, (KEEP_LAST, 1, RELIABLE, LATCHED)),
    # tf2_ros::StaticBroadcasterQoS: depth 1, transient_local
    (qos.tf_static_qos, (KEEP_LAST, 1, RELIABLE, LATCHED)),
    # tf2_ros::StaticListenerQoS: depth 100, transient_local
    (qos.tf_static_listener_qos, (KEEP_LAST, 100, RELIABLE, LATCHED)),
    # tf2_ros::DynamicBroadcasterQoS / DynamicListenerQoS: depth 100
    (qos.tf_qos, (KEEP_LAST, 100, RELIABLE, VOLATILE)),
    # rmw_qos_profile_sensor_data: keep last 5, best effort, volatile
    (qos.sensor_data_qos, (KEEP_LAST, 5, BEST_EFFORT, VOLATILE)),
    # SensorDataQoS (matches any publisher), deep enough to ride out a 0.2 s stall at 5 kHz
    (qos.joint_states_qos, (KEEP_LAST, 1000, BEST_EFFORT, VOLATILE)),
])
def test_profile_values(profile, expected):
    p = profile()
    assert (p.history, p.depth, p.reliability, p.durability) == expected


def test_profiles_are_fresh_objects():
    first = qos.tf_static_qos()
    first.depth = 7
    assert qos.tf_static_qos().depth == 1


def _transform(parent, child, xyz, quat_xyzw, sec):
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = parent, child
    t.header.stamp.sec = sec
    tr, rot = t.transform.translation, t.transform.rotation
    tr.x, tr.y, tr.z = xyz
    rot.x, rot.y, rot.z, rot.w = quat_xyzw
    return t


def _collect(node, msg_type, topic, profile):
    received, lock = [], threading.Lock()

    def on_message(msg):
        with lock:
            received.append(msg)

    node.create_subscription(msg_type, topic, on_message, profile)
    return received


def test_tf_static_reaches_a_late_joining_subscriber(ros_process):
    topic = f"/tf_static_{uuid.uuid4().hex[:8]}"
    broadcaster = ros_process("broadcaster").node("static_broadcaster")
    publisher = broadcaster.create_publisher(TFMessage, topic, qos.tf_static_qos())
    old = TFMessage(transforms=[_transform("world", "stale", (9.0, 9.0, 9.0), (0.0, 0.0, 0.0, 1.0), 1)])
    latest = TFMessage(transforms=[
        _transform("base_link", "arm_link", (0.1, -0.2, 0.3), (0.0, 0.0, 0.70710678, 0.70710678), 42),
        _transform("arm_link", "tool", (0.0, 0.0, 0.5), (1.0, 0.0, 0.0, 0.0), 42),
    ])
    publisher.publish(old)
    publisher.publish(latest)  # depth 1: replaces `old` in the latched history

    # The subscriber's participant is created only after both messages were published.
    listener = ros_process("late_listener").node("late_listener")
    received = _collect(listener, TFMessage, topic, qos.tf_static_listener_qos())
    wait_until(lambda: received, 20.0, "late joiner got nothing on a transient_local topic")

    first = received[0]  # reliable, in order: `old` would arrive before `latest` had it been kept
    assert [(t.header.frame_id, t.child_frame_id) for t in first.transforms] == [
        ("base_link", "arm_link"), ("arm_link", "tool")]
    t0 = first.transforms[0]
    assert t0.header.stamp.sec == 42
    assert (t0.transform.translation.x, t0.transform.translation.y, t0.transform.translation.z) == \
        (0.1, -0.2, 0.3)
    assert (t0.transform.rotation.z, t0.transform.rotation.w) == (0.70710678, 0.70710678)
    assert first.transforms[1].transform.rotation.x == 1.0


def test_robot_description_reaches_a_late_joining_subscriber(ros_process):
    topic = f"/robot_description_{uuid.uuid4().hex[:8]}"
    urdf = '<robot name="r"><link name="base_link"/></robot>'
    describer = ros_process("describer").node("describer")
    publisher = describer.create_publisher(String, topic, qos.description_qos())
    publisher.publish(String(data=urdf))

    listener = ros_process("late_viewer").node("late_viewer")
    received = _collect(listener, String, topic, qos.description_qos())
    wait_until(lambda: received, 20.0, "late joiner got no robot_description")
    assert received[0].data == urdf
