"""sensor_bridge_node on an OpenRAVE XML robot of our own with a BaseFlashLidar3D and a forcesensor
(test/fixtures/realworld/openrave/sensor_bot.robot.xml): sensor_msgs/PointCloud2 and
geometry_msgs/WrenchStamped in sim and relay mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import PointCloud2, PointField

from fixtures.sim.models import box_body
from robot_bridge.formats import load
from robot_bridge.ros import conversions as conv
from robot_bridge.sim.imu import STANDARD_GRAVITY

SENSOR_BOT = (Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "openrave"
              / "sensor_bot.robot.xml")


def cloud_points(msg: PointCloud2) -> np.ndarray:
    """x, y, z per point through the fields' own offsets and point_step / row_step (not assumed)."""
    offsets = {f.name: f.offset for f in msg.fields}
    assert all(f.datatype == PointField.FLOAT32 and f.count == 1 for f in msg.fields)
    raw = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.row_step)
    out = np.empty((msg.height, msg.width, 3), dtype=np.float32)
    for k, name in enumerate("xyz"):
        cols = (np.arange(msg.width) * msg.point_step + offsets[name])[:, None] + np.arange(4)
        out[..., k] = raw[:, cols].reshape(msg.height, msg.width, 4).copy().view(np.float32)[..., 0]
    return out


def test_sim_flash_lidar_point_cloud_of_a_plane(sensor_harness):
    robot = load(SENSOR_BOT)
    robot.environment["wall"] = box_body("wall", [0.1, 20, 20], [2.1, 0, 0])      # face at x = 2.0
    h = sensor_harness(robot, default_mode="off", **{"sensors.flash.mode": "sim"})
    clouds = h.listen(PointCloud2, "flash/points")
    assert h.spin_until(lambda: clouds)
    msg = clouds[-1]
    assert msg.header.frame_id == "flash"
    assert (msg.height, msg.width) == (24, 32)                                     # organized
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == [
        ("x", 0, PointField.FLOAT32, 1), ("y", 4, PointField.FLOAT32, 1), ("z", 8, PointField.FLOAT32, 1)]
    assert msg.point_step == 12 and msg.row_step == 12 * 32 and len(msg.data) == msg.row_step * msg.height
    assert not msg.is_bigendian and msg.is_dense
    assert conv.validate_pointcloud2(msg) is None
    points = cloud_points(msg)
    v, u = np.mgrid[0:24, 0:32].astype(float)
    expected = np.stack([1.85 * (u - 15.5) / 16.0, 1.85 * (v - 11.5) / 12.0, np.full(u.shape, 1.85)], -1)
    assert np.max(np.abs(points - expected)) < 1e-6           # every point on the plane z = 1.85


def test_sim_force_sensor_reads_the_load_below(sensor_harness):
    h = sensor_harness(load(SENSOR_BOT), default_mode="off", **{"sensors.ft.mode": "sim"})
    wrenches = h.listen(WrenchStamped, "ft/wrench")
    assert h.spin_until(lambda: wrenches)
    msg = wrenches[-1]
    assert msg.header.frame_id == "ft"
    f, t = msg.wrench.force, msg.wrench.torque
    assert [f.x, f.y, f.z] == pytest.approx([0, 0, -2.5 * STANDARD_GRAVITY], abs=1e-9)
    assert [t.x, t.y, t.z] == pytest.approx([0, 2.5 * STANDARD_GRAVITY * 0.17, 0], abs=1e-9)


def test_relay_point_cloud_and_wrench(sensor_harness):
    h = sensor_harness(load(SENSOR_BOT), default_mode="relay")
    clouds = h.listen(PointCloud2, "flash/points")
    wrenches = h.listen(WrenchStamped, "ft/wrench")
    driver_cloud = h.publisher(PointCloud2, "driver/flash/points")
    driver_wrench = h.publisher(WrenchStamped, "driver/ft/wrench")
    points = np.full((24, 32, 3), np.nan, dtype=np.float32)
    points[5, 7] = (0.1, 0.2, 3.0)
    good = conv.pointcloud2_msg(points, "driver_frame", conv.Time(sec=7))
    bad = conv.pointcloud2_msg(points, "driver_frame", conv.Time(sec=8))
    bad.row_step = 100                                                       # < width * point_step
    wrench = conv.wrench_msg([1, 2, 3], [4, 5, 6], "driver_frame", conv.Time(sec=9))

    def relayed():
        driver_cloud.publish(bad)
        driver_cloud.publish(good)
        driver_wrench.publish(wrench)
        return clouds and wrenches

    assert h.spin_until(relayed)
    msg = clouds[-1]
    assert msg.header.frame_id == "flash" and msg.header.stamp.sec == 7
    assert bytes(msg.data) == bytes(good.data) and msg.is_dense is False
    assert all(c.header.stamp.sec == 7 for c in clouds)                       # the bad one never passes
    assert h.bridge.dropped["flash"]
    w = wrenches[-1]
    assert w.header.frame_id == "ft" and (w.wrench.force.z, w.wrench.torque.x) == (3.0, 4.0)


def test_a_mesh_that_cannot_load_is_logged_once(sensor_harness, tmp_path, capfd):
    from robot_bridge.model import Geometry, Mesh

    robot = load(SENSOR_BOT)
    broken = tmp_path / "broken.wrl"
    broken.write_text("#VRML V2.0 utf8\nShape { geometry IndexedFaceSet { coordIndex [ 0 1 2 ] } }\n")
    for name in ("arm", "hand", "finger"):                       # one file, three links
        robot.links[name].collisions = [Geometry(Mesh(uri="broken.wrl", path=str(broken)))]
    h = sensor_harness(robot, default_mode="off", **{"sensors.flash.mode": "sim"})
    clouds = h.listen(PointCloud2, "flash/points")
    assert h.spin_until(lambda: clouds)
    err = capfd.readouterr().err
    assert err.count("mesh 'broken.wrl' cannot be loaded") == 1, err
