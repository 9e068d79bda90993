"""COLLADA reader: one self-written fixture per OpenRAVE extra (test/fixtures/collada/,
a 4-link toy arm in millimetres), barrett-wam-sensors.zae by hand-read values,
containers and errors."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from robot_bridge.errors import SchemaError, UnknownReferenceError, UnsafeInputError, XMLSyntaxError
from robot_bridge.formats import collada, limits, zae
from robot_bridge.model import Box, Mesh
from robot_bridge.model import transform as tf

D2R = np.pi / 180.0


@pytest.fixture
def fx(fixtures):
    return lambda name: collada.read(fixtures / "collada" / name)


def rot_z(deg):
    return tf.make(tf.rotation_axis_angle([0, 0, 1], deg * D2R))


# -- core kinematics of the toy arm (every fixture shares it) ------------------------
def test_toy_kinematics_units_limits_and_axis_info(fx):
    r = fx("interface_type.dae")
    assert list(r.links) == ["base", "arm", "slider", "tip"]
    j1, j2, j3 = r.joints["j1"], r.joints["j2"], r.joints["j3"]
    assert (j1.parent, j1.child, j1.type) == ("base", "arm", "revolute")
    np.testing.assert_allclose(j1.origin, tf.translation([0, 0, 0.1]))          # 100 mm
    np.testing.assert_allclose(j2.origin[:3, 3], [0.2, 0, 0])
    np.testing.assert_allclose(j2.axes[0], [1, 0, 0])                             # normalised from (2,0,0)
    # hard limits from <joint>, soft from axis_info; degrees -> rad, mm -> m
    np.testing.assert_allclose([j1.lower[0], j1.upper[0]], [-90 * D2R, 90 * D2R])
    np.testing.assert_allclose([j1.soft_lower[0], j1.soft_upper[0]], [-80 * D2R, 70 * D2R])
    np.testing.assert_allclose([j2.lower[0], j2.upper[0]], [0.0, 0.1])
    assert j2.soft_lower is None
    # motion speed/acceleration (deg/s), planning weight, resolution, default prismatic speed
    np.testing.assert_allclose([j1.velocity[0], j1.acceleration[0]], [np.pi / 2, np.pi])
    np.testing.assert_allclose([j1.weight[0], j1.resolution[0]], [2.5, 0.01])
    assert j2.velocity[0] == pytest.approx(0.01)
    # no limits at all -> circular revolute (continuous); active=false -> passive
    assert j3.type == "continuous" and j3.passive and not j1.passive
    assert j1.extras["dof_index"] == 0
    # initial value from the scene's bind_joint_axis value (30 deg)
    assert j1.initial[0] == pytest.approx(30 * D2R)
    # geometry_info box primitive, placed by its translate, invisible, in metres
    (g,) = r.links["base"].visuals
    assert isinstance(g.shape, Box) and not g.visible
    np.testing.assert_allclose(g.shape.half_extents, [0.05, 0.06, 0.07])
    np.testing.assert_allclose(g.origin[:3, 3], [0.01, 0.02, 0.03])


def test_interface_type(fx):
    r = fx("interface_type.dae")
    assert r.is_robot
    assert r.extras["interface_type"] == {"interface": "MyGenericRobot", "type": "robot",
                                          "plugin": "myplugin"}


def test_manipulator(fx):
    m = fx("manipulator.dae").manipulators["leftarm"]
    assert (m.base, m.effector) == ("base", "tip")
    expected = tf.translation([0, 0, 0.22]) @ tf.make(tf.rotation_axis_angle([0, 1, 0], np.pi / 2))
    np.testing.assert_allclose(m.tool, expected, atol=1e-12)
    np.testing.assert_allclose(m.direction, [0, 0, 1])
    assert m.gripper_joints == ["j2", "j1"]
    assert m.closing_directions == [-1.0, 1.0] and m.chucking_directions == [-1.0, 1.0]
    assert m.ik_solver == "WAM7ikfast" and m.ik_solver_args == "Transform6D"
    assert m.ik_free_joints == ["j1"]
    assert [s["type"] for s in m.extras["iksolvers"]] == ["Transform6D", "Translation3D"]
    assert m.extras["iksolvers"][0]["free_joint_stepsizes"] == [0.1]
    assert m.extras["iksolvers"][1]["free_joints"] == ["j2"]


def test_collision(fx):
    r = fx("collision.dae")
    assert r.collision_ignore == [("base", "slider")]
    assert r.links["tip"].extras["collision_enabled"] is False
    (g,) = r.links["arm"].extras["geometry_groups"]["environment"]
    assert isinstance(g.shape, Box)


def test_formula_with_partials(fx):
    r = fx("formula.dae")
    m = r.joints["j3"].mimic[0]
    # prismatic j2 is in document units (mm) inside formulas: j2[mm] = j2[m] / 0.001
    assert m.position == "(((-0.5) * j1) + ((j2 / 0.001) ^ 2.0))"
    assert m.velocity == {"j1": "(-0.5)", "j2": "(2.0 * (j2 / 0.001))"}
    assert m.acceleration == {"j2": "2.0"}
    from robot_bridge.kinematics import forward_kinematics
    poses = forward_kinematics(r, {"j1": 0.4, "j2": 0.003})
    q3 = -0.5 * 0.4 + 3.0 ** 2
    expected = (tf.translation([0, 0, 0.1]) @ rot_z(0.4 / D2R) @ tf.translation([0.2 + 0.003, 0, 0])
                @ tf.translation([0.05, 0, 0]) @ rot_z(q3 / D2R))
    np.testing.assert_allclose(poses["tip"], expected, atol=1e-12)


def test_actuator(fx):
    a = fx("actuator.dae").actuators["motor0"]
    assert (a.type, a.joint) == ("electric_motor", "j1")
    assert a.params["nominal_torque"] == 0.012 and a.params["torque_constant"] == 0.0552
    assert a.params["rotor_inertia"] == pytest.approx(2.3e-6)
    assert len([k for k in a.params if k != "actuator_id"]) == 11


def test_every_sensor_type(fx):
    s = fx("sensors.dae").sensors
    laser = s["laser2d"]
    assert (laser.link, laser.type, laser.interface) == ("arm", "laser", "BaseLaser2D")
    np.testing.assert_allclose(laser.origin, tf.translation([0.1, 0, 0]) @ rot_z(90), atol=1e-12)
    assert laser.params == pytest.approx({"angle_min": -np.pi / 2, "angle_max": np.pi / 2,
                                          "angle_increment": D2R, "range_min": 0.01, "range_max": 4.0,
                                          "scan_time": 0.025, "time_increment": 0.0005})
    assert s["laser3d"].type == "laser" and s["laser3d"].params["range_max"] == 30.0
    assert s["flash"].type == "flash_lidar" and s["flash"].params["range_min"] == 0.2
    cam = s["cam"]
    assert (cam.type, cam.link) == ("camera", "tip")
    assert cam.params.pop("distortion") == pytest.approx([0.1, -0.2, 0.0, 0.0, 0.05])
    assert cam.params == pytest.approx({"width": 640, "height": 480, "fx": 500.0, "fy": 510.0, "cx": 320.0,
                                        "cy": 240.0, "format": "mono8", "frame_rate": 25.0,
                                        "distortion_model": "plumb_bob"})
    stereo = s["stereo"]
    assert stereo.type == "camera" and stereo.params["fx"] == 500.0
    assert [c["sensor"] for c in stereo.params["stereo_cameras"]] == ["s_cam_l", "s_cam_r"]
    assert stereo.params["stereo_cameras"][1]["rectification"][2] == 0.1
    assert (s["enc"].type, s["enc"].params["rate"]) == ("other", pytest.approx(1000.0))
    assert (s["ft"].type, s["ft"].params["rate"]) == ("force6d", pytest.approx(500.0))
    imu = s["imu"]
    assert imu.type == "imu" and imu.params["rate"] == pytest.approx(100.0)
    assert imu.params["orientation_covariance"] == [1, 0, 0, 0, 2, 0, 0, 0, 3]
    assert imu.params["linear_acceleration_covariance"][8] == 9
    assert (s["odom"].type, s["odom"].params["target"]) == ("odometry", "base")


# -- barrett-wam-sensors.zae (values read from the .dae with unzip -p) --------------------
@pytest.fixture(scope="module")
def wam(corpus):
    return collada.read(corpus / "openrave/src/robots/barrett-wam-sensors.zae")


def test_barrett_manipulator(wam):
    m = wam.manipulators["arm"]
    assert (m.base, m.effector) == ("wam0", "wam7")           # kmodel1/link0, kmodel1/link7
    np.testing.assert_allclose(m.tool, tf.translation([0, 0, 0.22]))
    np.testing.assert_allclose(m.direction, [0, 0, 1])
    assert m.gripper_joints == ["JF1", "JF2", "JF3", "JF4"]   # joint9, joint10, joint7, joint8
    assert m.chucking_directions == [1.0, 1.0, 1.0, 0.0]


def test_barrett_sensors(wam):
    laser, cam = wam.sensors["base_laser"], wam.sensors["base_camera"]
    assert (laser.link, laser.type, laser.interface) == ("wam1", "laser", "BaseLaser2D")
    np.testing.assert_allclose(laser.origin, tf.translation([0.2, 0, -0.1]))
    assert (cam.link, cam.type, cam.interface) == ("wam4", "camera", "BaseCamera")
    expected = tf.translation([0, -0.2, 0]) @ tf.make(tf.rotation_axis_angle([0, 1, 0], np.pi / 2))
    np.testing.assert_allclose(cam.origin, expected, atol=1e-12)
    assert cam.params["width"] == 640 and cam.params["height"] == 480
    assert (cam.params["fx"], cam.params["fy"], cam.params["cx"], cam.params["cy"]) == (640, 640, 320, 240)
    assert cam.params["frame_rate"] == pytest.approx(5.0)
    assert cam.raw["focal_length"] == 0.01


def test_barrett_joints_and_extras(wam):
    j = wam.joints["Wrist_Yaw"]                                # limits -275..75 deg
    np.testing.assert_allclose([j.lower[0], j.upper[0]], [-275 * D2R, 75 * D2R])
    assert j.offset[0] == pytest.approx(-100 * D2R)            # OpenRAVE's midpoint offset
    assert wam.joints["Shoulder_Yaw"].velocity[0] == pytest.approx(1.5708, abs=1e-4)
    fm = wam.joints["JF1mimic"]                                 # joint12: passive, index -1
    assert fm.passive and fm.mimic[0].position == "((JF1 * 0.333333) + 0.8727)"
    assert fm.mimic[0].velocity == {"JF1": "0.33333"}
    assert len(wam.collision_ignore) == 13 and ("wam1", "wam3") in wam.collision_ignore
    assert wam.actuators["motor0"].joint == "Shoulder_Yaw"
    assert wam.links["wam1"].inertial.mass == pytest.approx(8.3936)
    assert sum(len(link.visuals) for link in wam.links.values()) == 18
    mesh = wam.links["wam0"].visuals[0].shape
    assert isinstance(mesh, Mesh) and mesh.triangles.shape == (3164, 3)
    assert mesh.uri.endswith("barrett-wam-sensors.zae#g1_link0_geom0")
    np.testing.assert_allclose(wam.links["wam1"].visuals[0].material.diffuse, [0.247059] * 3, atol=1e-6)


# -- containers and errors -------------------------------------------------------------
def _zip(tmp_path, members: dict[str, bytes], name="r.zae", compression=zipfile.ZIP_DEFLATED):
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return path


def test_zae_manifest_and_single_dae(fixtures, tmp_path):
    data = (fixtures / "collada" / "manipulator.dae").read_bytes()
    manifest = b"<dae_root>./sub/robot.dae</dae_root>"
    r = collada.read(_zip(tmp_path, {"manifest.xml": manifest, "sub/robot.dae": data, "x.dae": b"junk"}))
    assert "leftarm" in r.manipulators
    r = collada.read(_zip(tmp_path, {"only.dae": data}, name="b.zae"))
    assert list(r.links) == ["base", "arm", "slider", "tip"]
    with pytest.raises(SchemaError, match="2 .dae documents"):
        collada.read(_zip(tmp_path, {"a.dae": data, "b.dae": data}, name="c.zae"))


def test_zae_bomb_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_XML_BYTES", 1 << 20)
    bomb = _zip(tmp_path, {"robot.dae": b"<COLLADA>" + b" " * (4 << 20) + b"</COLLADA>"})
    with pytest.raises(UnsafeInputError, match="robot.dae"):
        collada.read(bomb)
    ratio = _zip(tmp_path, {"robot.dae": b"<COLLADA>" + b" " * (900 << 10) + b"</COLLADA>"}, name="q.zae")
    monkeypatch.setattr(zae, "_CHUNK", 1 << 16)
    with pytest.raises(UnsafeInputError, match="ratio|inflates"):
        collada.read(ratio)


def test_bad_documents(tmp_path, fixtures):
    text = (fixtures / "collada" / "manipulator.dae").read_text()
    bad = tmp_path / "bad.dae"
    bad.write_text(text.replace('joint="kmodel/j2"', 'joint="kmodel/nope"', 1))
    with pytest.raises(UnknownReferenceError, match="kmodel/nope") as info:
        collada.read(bad)
    assert info.value.line and "bad.dae" in str(info.value)
    bad.write_text(text.replace("<max>90</max>", "<max>ninety</max>", 1))
    with pytest.raises(SchemaError, match="ninety"):
        collada.read(bad)
    bad.write_text(text[:200])
    with pytest.raises(XMLSyntaxError):
        collada.read(bad)
    assert not zae.is_zip(bad)
