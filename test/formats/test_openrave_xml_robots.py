"""Corpus robots checked against counts made by hand in the files (<Body name=...>, <Joint ...> elements
followed through their includes), not copied from the reader's output."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.kinematics import forward_kinematics

D = math.pi / 180.0
WAM_JOINTS = ["Shoulder_Yaw", "Shoulder_Pitch", "Shoulder_Roll", "Elbow", "Wrist_Yaw", "Wrist_Pitch",
              "Wrist_Roll"]
HAND_LINKS = ["handbase", "Finger0-0", "Finger0-1", "Finger0-2", "Finger1-0", "Finger1-1", "Finger1-2",
              "Finger2-1", "Finger2-2"]
HAND_JOINTS = ["JF1", "JF1mimic", "JF2", "JF2mimic", "JF3", "JF3mimic", "JF4", "JF4mimic"]


@pytest.fixture
def rload(corpus, openrave_data):
    return lambda rel: load(corpus / "openrave" / rel, search_path=[openrave_data])


def test_wam7_kinbody(rload):
    r = rload("src/robots/wam7.kinbody.xml")             # wam0..wam7, 7 hinges
    assert list(r.links) == [f"wam{i}" for i in range(8)] and list(r.joints) == WAM_JOINTS
    assert r.dof == 7 and not r.is_robot and r.name == "WAM7"
    yaw = r.joints["Wrist_Yaw"]
    assert (yaw.lower[0], yaw.upper[0]) == pytest.approx((-275 * D, 75 * D))
    assert yaw.offset[0] == pytest.approx(-100 * D)      # beyond +-180 deg: internal offset = midpoint


def test_barretthand_passive_mimic_fingers(rload):
    r = rload("src/robots/barretthand.kinbody.xml")      # 9 bodies, 4 hinges + 4 passive mimic hinges
    assert list(r.links) == HAND_LINKS and list(r.joints) == HAND_JOINTS
    assert r.dof == 8 and [j.name for j in r.active_joints] == ["JF1", "JF2", "JF3", "JF4"]
    for name in ("JF1mimic", "JF2mimic", "JF3mimic", "JF4mimic"):
        assert r.joints[name].passive and r.joints[name].is_mimic
    m = r.joints["JF1mimic"].mimic[0]
    assert m.position == "JF1/3+0.8727" and m.velocity == {"JF1": "0.3333333333333333"}
    assert r.joints["JF4mimic"].mimic[0].position == "JF4"
    assert len(r.collision_ignore) == 10                  # ten <adjacent> pairs
    q = 0.9
    poses = forward_kinematics(r, {"JF1": q})
    values = r.__dict__["_kinematic_model"]
    assert values is not None
    # the mimic finger turns by JF1/3 + 0.8727 relative to its zero pose
    zero = forward_kinematics(r, {"JF1": 0.0})
    rel_q = np.linalg.inv(poses["Finger0-1"]) @ poses["Finger0-2"]
    rel_0 = np.linalg.inv(zero["Finger0-1"]) @ zero["Finger0-2"]
    angle = math.acos(np.clip((np.trace((np.linalg.inv(rel_0) @ rel_q)[:3, :3]) - 1) / 2, -1, 1))
    assert angle == pytest.approx(q / 3, abs=1e-9)


def test_barrettwam_robot(rload):
    r = rload("src/robots/barrettwam.robot.xml")         # wam7 + barretthand + passive dummyhand
    assert list(r.links) == [f"wam{i}" for i in range(8)] + HAND_LINKS
    assert list(r.joints) == WAM_JOINTS + HAND_JOINTS + ["dummyhand"]
    assert r.joints["dummyhand"].type == "fixed" and r.joints["dummyhand"].parent == "wam7"
    assert len(r.active_joints) == 11 and r.dof == 15
    m = r.manipulators["arm"]
    assert (m.base, m.effector, m.gripper_joints) == ("wam0", "wam7", ["JF1", "JF2", "JF3", "JF4"])
    assert m.closing_directions == [1, 1, 1, 0] and (m.ik_solver, m.ik_solver_args) == ("WAM7ikfast", "0.05")
    np.testing.assert_allclose(m.tool[:3, 3], [0, 0, 0.16])
    # handbase re-opened with only <offsetfrom>wam7</offsetfrom>: it sits exactly on wam7
    p = forward_kinematics(r)
    np.testing.assert_allclose(p["handbase"], p["wam7"], atol=1e-9)


def test_barrettwam_dual_prefixed(rload):
    r = rload("src/robots/barrettwam-dual.robot.xml")    # chest + 2 x 17 links, 2 x 16 + 2 dummy joints
    assert len(r.links) == 35 and len(r.joints) == 34 and list(r.links)[0] == "chest"
    for side in ("l_", "r_"):
        assert {side + n for n in [f"wam{i}" for i in range(8)] + HAND_LINKS} <= set(r.links)
        assert {side + n for n in WAM_JOINTS + HAND_JOINTS + ["dummyhand"]} <= set(r.joints)
        assert r.joints[side + "JF1mimic"].mimic[0].position == side + "JF1/3+0.8727"   # Robot prefix
        m = r.manipulators[side + "arm"]
        assert (m.base, m.effector) == (side + "wam0", side + "wam7")
        assert m.gripper_joints == [side + j for j in ("JF1", "JF2", "JF3", "JF4")]
    assert set(r.manipulators) == {"l_arm", "r_arm"}
    assert r.joints["leftdummy"].type == "fixed" and r.joints["leftdummy"].child == "l_wam0"
    # wam0 is at (-0.22,-0.14,-0.346) in wam7.kinbody.xml; the wrapper applies Rx(+-90) then (0,-+0.35,0.7):
    # Rx(90)(-0.22,-0.14,-0.346) = (-0.22,0.346,-0.14) -> (-0.22,-0.004,0.56); Rx(-90) -> (-0.22,0.004,0.84)
    p = forward_kinematics(r)
    np.testing.assert_allclose(p["l_wam0"][:3, 3], [-0.22, -0.004, 0.56], atol=1e-9)
    np.testing.assert_allclose(p["r_wam0"][:3, 3], [-0.22, 0.004, 0.84], atol=1e-9)


def test_barrettsegway_reopened_link_two_translations(rload):
    r = rload("src/robots/barrettsegway.robot.xml")      # segway + barrettwam (17) ; 16 + dummy0
    assert list(r.links)[0] == "segway" and len(r.links) == 18 and len(r.joints) == 17
    assert r.root == "segway" and r.joints["dummy0"].child == "wam0"
    assert r.links["segway"].inertial.mass == 40
    np.testing.assert_allclose(r.placement[:3, 3], [0, 0, 0.742])
    # wam0: (-0.22,-0.14,-0.346) + (0.22,0.14,0.346) + (-0.15,-0.14,0.742) = (-0.15,-0.14,0.742);
    # minus segway's (0,0,0.742) -> (-0.15,-0.14,0) in the root frame.
    # wam1 follows wam0 (its joint was read earlier).
    p = forward_kinematics(r)
    np.testing.assert_allclose(p["wam0"][:3, 3], [-0.15, -0.14, 0], atol=1e-9)
    arm = rload("src/robots/barrettwam.robot.xml")
    pa = forward_kinematics(arm)
    np.testing.assert_allclose(np.linalg.inv(p["wam0"]) @ p["wam1"], np.linalg.inv(pa["wam0"]) @ pa["wam1"],
                               atol=1e-9)


def test_balljoint_spherical(rload):
    r = rload("src/data/balljoint.kinbody.xml")
    assert list(r.links) == ["b0", "b1"] and list(r.joints) == ["joint0"]
    j = r.joints["joint0"]
    assert j.type == "spherical" and j.dof == 3 and r.dof == 3
    np.testing.assert_allclose(j.lower, [-100] * 3) and np.testing.assert_allclose(j.upper, [100] * 3)


def test_schunk_manip_kinbody_prefix_and_reopened_prefixed_link(rload):
    r = rload("src/robots/schunk_manip.kinbody.xml")     # gripper_base + L_finger + R_finger, 2 sliders
    assert list(r.links) == ["gripper_base", "L_finger", "R_finger"]
    assert list(r.joints) == ["jfinger_L", "jfinger_R"]
    assert all(j.type == "prismatic" for j in r.joints.values())
    jr = r.joints["jfinger_R"]
    assert jr.passive and jr.mimic[0].position == "-jfinger_L"
    pz = forward_kinematics(r)
    p1 = forward_kinematics(r, {"jfinger_L": 0.01})
    moved_l = np.linalg.norm(p1["L_finger"][:3, 3] - pz["L_finger"][:3, 3])
    moved_r = np.linalg.norm(p1["R_finger"][:3, 3] - pz["R_finger"][:3, 3])
    assert moved_l == pytest.approx(0.01) and moved_r == pytest.approx(0.01)


def test_diffdrive_caster_spherical_passive_and_unnamed_dummy(rload):
    r = rload("src/robots/diffdrive_caster.robot.xml")   # 5 bodies + barrettwam 17; 4 + 16 + unnamed dummy
    assert len(r.links) == 22 and len(r.joints) == 21
    assert r.joints["wheel_left"].type == "continuous"      # circular, no limits
    for caster in ("caster_back", "caster_front"):
        assert r.joints[caster].type == "spherical" and r.joints[caster].passive
    assert r.dof == 2 + 3 + 3 + 15


def test_arm_bucket_active_multistatement_mimic(rload):
    r = rload("test/testdata/arm_bucket_assy_Amimic.robot.xml")   # 10 bodies, 12 joints (P0-P8, A, L, bucket)
    all_joints = set(r.joints) | set(r.extras["closed_loop_joints"])
    assert len(r.links) == 10
    assert all_joints == {f"P{i}" for i in range(9)} | {"A", "L", "bucket"}
    loops = r.extras["closed_loop_joints"]
    joint = {**r.joints, **loops}
    for name in ("P0", "P1", "P3", "P4"):                 # enable="true" mimic joints are active in OpenRAVE
        assert not joint[name].passive and joint[name].is_mimic
    assert "polyroots6" in joint["P4"].mimic[0].position and "\n" not in joint["P4"].mimic[0].position
    assert joint["P0"].mimic[0].velocity == {"P1": "0", "P2": "0", "A": "0"}
    assert any("bobcat_base_model3.wrl.or" in w for w in r.warnings)


def test_testwamcamera_env_sensors_and_jointvalues(rload):
    r = rload("src/data/testwamcamera.env.xml")
    assert r.name == "BarrettWAM" and len(r.links) == 17 and len(r.joints) == 16
    # declaration order (upstream only moves new sensors in front of ones the included robot already had)
    assert list(r.sensors) == ["camera", "laser", "spinninglaser", "flashlidar"]
    cam, laser = r.sensors["camera"], r.sensors["laser"]
    assert (cam.type, cam.link, cam.interface) == ("camera", "wam4", "BaseCamera")
    params = cam.params
    assert (params["fx"], params["cx"], params["width"], params["height"]) == (640, 320, 640, 480)
    assert (laser.type, laser.link) == ("laser", "wam1")
    assert laser.params["angle_min"] == pytest.approx(-135 * D) and laser.params["range_max"] == 5
    assert laser.params["angle_increment"] == pytest.approx(0.35 * D) and laser.params["scan_time"] == 0.1
    assert r.sensors["spinninglaser"].type == "laser" and r.sensors["flashlidar"].link == "wam2"
    # <jointvalues>0 0 0 0.8 0 0 0 0 0 0 3</jointvalues>: the 11 active DOFs in declaration order
    assert r.joints["Elbow"].initial[0] == 0.8 and r.joints["JF4"].initial[0] == 3
    assert len(r.environment) == 12       # shelf1 shelf2 floor wall1 segway mug1-6 Destination
    assert {"shelf1", "shelf2", "floor", "wall1", "Destination"} <= set(r.environment)
    np.testing.assert_allclose(r.environment["shelf2"].placement[:3, 3], [-2, 0.472, 0], atol=1e-9)
    assert "camtrans" in r.extras


def test_camera_robot_and_sensor_file(rload):
    r = rload("src/data/camera.robot.xml")
    assert list(r.links) == ["base"] and r.links["base"].static and not r.joints
    assert r.sensors["camera"].params["fx"] == 2000 and r.sensors["camera"].params["frame_rate"] == 5
    s = rload("src/data/camera.sensor.xml")
    assert s.extras["sensor_definition"] and s.sensors["camera"].params["fy"] == 640


def test_tridof_robot_file(rload):
    r = rload("src/robots/tridof.robot.xml")
    assert len(r.links) == 6 and len(r.joints) == 5 and len(r.manipulators) == 1


def test_customreader_env_keeps_plugin_elements(rload):
    r = rload("src/cppexamples/customreader.env.xml")
    assert r.name == "wam" and {"plugin", "controller", "module"} <= set(r.extras)
    assert "piddata" in r.extras["controller"][0]["xml"]
