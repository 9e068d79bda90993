"""MarkerArray content: frames, shapes and hand-derived geometry (no node needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("visualization_msgs.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from visualization_msgs.msg import Marker  # noqa: E402

from robot_bridge.model import (AttachedSensor, Contact, Gripper, Handle, Link, Manipulator,  # noqa: E402
                                Robot, Semantics)
from robot_bridge.ros.markers import camera_frustum, laser_fan, robot_markers  # noqa: E402


def test_camera_frustum_corners_follow_the_pinhole_model():
    seg = camera_frustum({"width": 640, "height": 480, "fx": 320.0, "fy": 320.0, "cx": 320.0, "cy": 240.0},
                         depth=1.0)
    corners = {tuple(np.round(b, 12)) for a, b in seg[:4]}
    # u = 0 -> x = -cx / fx = -1, v = 0 -> y = -cy / fy = -0.75 (optical frame: x right, y down, z forward)
    assert corners == {(-1.0, -0.75, 1.0), (1.0, -0.75, 1.0), (1.0, 0.75, 1.0), (-1.0, 0.75, 1.0)}
    assert len(seg) == 8


def test_laser_fan_spans_the_scan_angles_at_capped_range():
    seg = laser_fan({"angle_min": -math.pi / 2, "angle_max": math.pi / 2, "range_max": 30.0}, max_range=2.0)
    np.testing.assert_allclose(seg[0][1], [0.0, -2.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(seg[1][1], [0.0, 2.0, 0.0], atol=1e-12)
    radii = [np.linalg.norm(b) for a, b in seg[2:]]
    np.testing.assert_allclose(radii, 2.0)


def test_robot_markers_cover_tools_handles_grippers_contacts_and_sensors():
    r = Robot("m")
    r.links["base"] = Link("base")
    r.manipulators["arm"] = Manipulator("arm", "base", "base", direction=np.array([0.0, 0.0, 2.0]))
    r.sensors["cam"] = AttachedSensor("cam", "base", type="camera", params={"width": 4, "height": 2})
    r.sensors["lidar"] = AttachedSensor("lidar", "base", type="laser")
    r.sensors["imu"] = AttachedSensor("imu", "base", type="imu")
    r.semantics = Semantics(
        handles={"h": Handle("h", "base", mask=[True, True, True, False, False, True], clearance=0.05)},
        grippers={"g": Gripper("g", "base", clearance=0.0)},
        contacts={"c": Contact("c", "base", points=np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0.0]]),
                               shapes=[[0, 1, 2]])})
    markers = robot_markers(r, "p/", Time(sec=3)).markers
    assert markers[0].action == Marker.DELETEALL
    by = {}
    for m in markers[1:]:
        by.setdefault((m.ns, m.type), []).append(m)
        assert m.frame_locked and m.header.stamp.sec == 3
        assert m.id == sum(1 for o in markers[1:markers.index(m)] if o.ns == m.ns)    # ids count per ns
    arrow = by[("tool", Marker.ARROW)][0]
    assert arrow.header.frame_id == "p/arm_tool"
    assert [arrow.points[1].x, arrow.points[1].y, arrow.points[1].z] == pytest.approx([0, 0, 0.1])
    sphere = by[("handle", Marker.SPHERE)][0]
    assert sphere.header.frame_id == "p/handle_h" and sphere.scale.x == pytest.approx(0.1)
    assert by[("handle", Marker.TEXT_VIEW_FACING)][0].text == "h mask 111001"
    assert ("gripper", Marker.SPHERE) not in by                    # zero clearance: no sphere
    assert by[("gripper", Marker.ARROW)][0].header.frame_id == "p/gripper_g"
    contact = by[("contact", Marker.LINE_LIST)][0]
    assert contact.header.frame_id == "p/base" and len(contact.points) == 6     # closed triangle
    sensors = {m.header.frame_id for m in by[("sensor", Marker.LINE_LIST)]}
    assert sensors == {"p/cam_optical_frame", "p/lidar"}            # no marker for the IMU
