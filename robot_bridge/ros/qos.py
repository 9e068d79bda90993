"""QoS profiles matching robot_state_publisher and tf2_ros, so standard tools interoperate.

Functions return a fresh profile each call (QoSProfile objects are mutable).
"""

from __future__ import annotations

import copy

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)


def _profile(depth: int, durability: DurabilityPolicy) -> QoSProfile:
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE, durability=durability)


def description_qos() -> QoSProfile:
    """/robot_description: latched, so late subscribers (rviz, MoveIt) get the last description."""
    return _profile(1, DurabilityPolicy.TRANSIENT_LOCAL)


def tf_static_qos() -> QoSProfile:
    """/tf_static publisher (tf2_ros StaticBroadcasterQoS): depth 1, latched."""
    return _profile(1, DurabilityPolicy.TRANSIENT_LOCAL)


def tf_static_listener_qos() -> QoSProfile:
    """/tf_static subscriber (tf2_ros StaticListenerQoS): latched, deep enough for many publishers."""
    return _profile(100, DurabilityPolicy.TRANSIENT_LOCAL)


def tf_qos() -> QoSProfile:
    """/tf publisher and subscriber (tf2_ros DynamicBroadcasterQoS / DynamicListenerQoS)."""
    return _profile(100, DurabilityPolicy.VOLATILE)


def sensor_data_qos(depth: int = 5) -> QoSProfile:
    """Sensor streams: best effort, volatile, depth 5 (rclpy qos_profile_sensor_data).

    A deeper history keeps the same compatibility (best effort matches every publisher) and
    lets a busy executor catch up on a burst instead of dropping it."""
    profile = copy.copy(qos_profile_sensor_data)
    profile.depth = depth
    return profile


def joint_states_qos() -> QoSProfile:
    """/joint_states subscriptions: SensorDataQoS with room for 0.2 s at 5 kHz.

    A host that stalls a process for tens of ms (seen on shared VMs) overflowed depth 100 at 5 kHz and
    lost messages; a deeper history costs nothing until a backlog forms (Fast DDS allocates lazily)."""
    return sensor_data_qos(depth=1000)
