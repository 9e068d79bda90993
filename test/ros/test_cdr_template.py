"""CdrTemplate: numbers written into a message serialized once equal rclpy's serialization of the same
message built field by field."""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from robot_bridge.ros.cdr_template import CdrTemplate


@pytest.mark.parametrize("names", [["a"], ["joint_1", "j2", "a_much_longer_joint_name_3"], []])
def test_filled_template_is_the_serialized_message(names):
    n = len(names)
    template = CdrTemplate(lambda slot, stamp: JointState(header=Header(stamp=stamp(), frame_id="base"),
                                                          name=names, position=slot(n), velocity=slot(n),
                                                          effort=slot(n)))
    assert template.size == 3 * n
    rng = np.random.default_rng(n)
    for sec, nanosec in ((5, 7), (-3, 999_999_999), (2 ** 31 - 1, 0)):
        values = rng.normal(size=3 * n)
        data = template.fill(values, sec, nanosec)
        truth = JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id="base"), name=names,
                           position=list(values[:n]), velocity=list(values[n:2 * n]),
                           effort=list(values[2 * n:]))
        assert len(data) == len(serialize_message(truth))     # (padding bytes may differ: not initialised)
        assert deserialize_message(data, JointState) == truth
