"""robot_bridge.bringup (the node set) and ``robot-bridge run`` (all nodes in one process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from robot_bridge import bringup, node_table
from robot_bridge.ros import rcl_layout

REPO = Path(__file__).resolve().parents[1]


def by_name(specs):
    return {s.name: s for s in specs}


def schema(spec: bringup.NodeSpec) -> dict:
    """name -> default of every parameter the node declares (sensor parameters for the default robot)."""
    import importlib

    from robot_bridge.nodes import sensor_bridge

    module = importlib.import_module(node_table.BY_NAME[spec.name].module)
    declared = {name: default for name, default, _ in module.PARAMETERS}
    if spec.name == "sensor_bridge":
        for sensor in ("base_laser", "wrist_camera", "wrist_imu"):
            declared.update({f"sensors.{sensor}.{n}": d for n, d, _ in sensor_bridge.SENSOR_PARAMETERS})
    declared["use_sim_time"] = False
    return declared


def test_default_node_set():
    specs = by_name(bringup.node_set(bringup.Options(planner=False)))
    assert list(specs) == ["description_node", "sensor_bridge", "controller_node"]
    d, s, c = specs["description_node"], specs["sensor_bridge"], specs["controller_node"]
    assert {x.package for x in specs.values()} == {"robot_bridge"}
    assert [x.executable for x in specs.values()] == ["description_node", "sensor_bridge_node",
                                                      "controller_node"]
    assert all(x.namespace == "" for x in specs.values())
    default_robot = str(REPO / "robot_bridge" / "data" / "default.env.xml")
    for spec in specs.values():
        assert spec.parameters["description_file"] == default_robot
        assert spec.parameters["use_sim_time"] is False
    assert d.parameters["srdf_file"] == str(REPO / "robot_bridge" / "data" / "lwa3_gripper.srdf")
    assert d.parameters["publish_default_joint_states"] is False      # the controller publishes them
    assert s.parameters["default_mode"] == "sim"
    assert c.parameters["hardware"] == "sim"
    # the controller's absolute /joint_states joins its listeners' namespace
    assert c.remappings == (("/joint_states", "joint_states"),)


def test_objects_argument_starts_world_node():
    assert "world_node" not in by_name(bringup.node_set())           # off by default
    options = bringup.Options.from_strings({"objects": "/m/objects.yaml", "namespace": "r",
                                            "frame_prefix": "r/"})
    w = by_name(bringup.node_set(options))["world_node"]
    assert (w.package, w.executable, w.namespace) == ("robot_bridge", "world_node", "/r")
    assert w.parameters["objects_file"] == "/m/objects.yaml" and w.parameters["frame_prefix"] == "r/"
    assert w.parameters["publish_rate"] == 10.0                        # from config/world.yaml
    assert w.factory == "robot_bridge.nodes.world:WorldNode"
    # the nodes reading world_node's documents trust the objects file's folder for its body files
    nodes = by_name(bringup.node_set(options))
    assert nodes["sensor_bridge"].parameters["objects_roots"] == ["/m"]
    assert nodes["controller_node"].parameters["sim.objects_roots"] == ["/m"]
    assert "objects_roots" not in by_name(bringup.node_set())["sensor_bridge"].parameters


def test_planner_starts_in_sim_mode_when_installed_and_can_be_switched_off(monkeypatch):
    reason = bringup.planner_unavailable()
    names = list(by_name(bringup.node_set()))
    if reason is None:
        assert names[-1] == "planner_node"
        p = by_name(bringup.node_set(bringup.Options(namespace="r", frame_prefix="r/")))["planner_node"]
        assert (p.package, p.executable, p.namespace) == ("robot_bridge", "planner_node", "/r")
        assert p.parameters["frame_prefix"] == "r/" and p.parameters["description_file"].endswith(
            "default.env.xml")
        assert p.parameters["trajectory_action"] == "controller_node/follow_joint_trajectory"
        assert p.factory == "robot_bridge.nodes.planner:PlannerNode"
    else:
        assert "planner_node" not in names and "install" in reason
    for options in (bringup.Options.from_strings({"planner": "false"}), bringup.Options(mode="real")):
        assert "planner_node" not in by_name(bringup.node_set(options))
    # without the extra: not started, one line naming what to install
    from robot_bridge import planning

    monkeypatch.setattr(planning, "available", lambda: False)
    assert "planner_node" not in by_name(bringup.node_set())
    assert "pip install 'robot_bridge[planning]'" in bringup.planner_unavailable()


def test_yaml_values_are_used_and_arguments_override_them():
    specs = by_name(bringup.node_set())
    on_disk = yaml.safe_load((REPO / "config" / "description.yaml").read_text())
    frequency = on_disk["description_node"]["ros__parameters"]["publish_frequency"]
    assert specs["description_node"].parameters["publish_frequency"] == frequency
    sensors = yaml.safe_load((REPO / "config" / "sensor_bridge.yaml").read_text())["sensor_bridge"]
    noise = sensors["ros__parameters"]["sensors"]["base_laser"]["noise_std"]
    assert specs["sensor_bridge"].parameters["sensors.base_laser.noise_std"] == noise   # nested -> dotted
    assert specs["sensor_bridge"].parameters["description_file"] != ""                  # yaml had ""


def test_real_mode_relays_every_sensor_and_drives_canopen():
    specs = by_name(bringup.node_set(bringup.Options(mode="real")))
    sensor = specs["sensor_bridge"].parameters
    assert sensor["default_mode"] == "relay"
    modes = {k: v for k, v in sensor.items() if k.startswith("sensors.") and k.endswith(".mode")}
    assert modes and set(modes.values()) == {"relay"}       # the yaml's per-sensor sim modes follow the mode
    assert specs["controller_node"].parameters["hardware"] == "canopen"
    real_sim = by_name(bringup.node_set(bringup.Options(mode="real", hardware="sim")))
    assert real_sim["controller_node"].parameters["hardware"] == "sim"


def test_namespace_prefix_and_sim_time():
    o = bringup.Options.from_strings({"namespace": "arm1/", "frame_prefix": "arm1/", "use_sim_time": "True"})
    specs = bringup.node_set(o)
    assert {s.namespace for s in specs} == {"/arm1"}
    assert all(s.parameters["use_sim_time"] is True for s in specs)
    assert by_name(specs)["description_node"].parameters["frame_prefix"] == "arm1/"
    assert by_name(specs)["sensor_bridge"].parameters["frame_prefix"] == "arm1/"


def test_srdf_default_only_for_the_embedded_robot():
    assert bringup.Options(robot=str(bringup.DEFAULT_ROBOT)).srdf_file == str(bringup.DEFAULT_SRDF)
    assert bringup.Options(robot="/elsewhere/robot.urdf").srdf_file == ""
    assert bringup.Options(robot="/elsewhere/robot.urdf", srdf="/elsewhere/r.srdf").srdf_file == \
        "/elsewhere/r.srdf"


def test_rviz_node():
    specs = bringup.node_set(bringup.Options(rviz=True, namespace="x"))
    rviz = specs[-1]
    assert (rviz.package, rviz.executable, rviz.namespace, rviz.factory) == ("rviz2", "rviz2", "/x", "")
    assert rviz.arguments == ("-d", str(REPO / "config" / "robot_bridge.rviz"))
    text = (REPO / "config" / "robot_bridge.rviz").read_text()
    for display in ("RobotModel", "TF", "LaserScan", "Image", "MarkerArray"):
        assert f"rviz_default_plugins/{display}" in text
    assert yaml.safe_load(text)["Visualization Manager"]["Displays"][1]["Description Topic"]["Value"] == \
        "/robot_description"


def test_robot_pose_reaches_the_description_sensor_controller_and_planner_nodes():
    """issue 43: one placement for the nodes that need it (the controller: its simulated fingers close on
    the world's bodies where the robot stands; the sensor bridge: its simulated sensors see them from
    there); not given: the nodes' own defaults."""
    specs = by_name(bringup.node_set(bringup.Options.from_strings({"robot_pose": "0, 0, 0.1, 0 0 1.5"})))
    placed = [name for name, spec in specs.items() if "robot_pose" in spec.parameters]
    expected = ["description_node", "sensor_bridge", "controller_node"] + \
        (["planner_node"] if bringup.planner_unavailable() is None else [])
    assert placed == expected
    for name in placed:
        assert specs[name].parameters["robot_pose"] == [0.0, 0.0, 0.1, 0.0, 0.0, 1.5]
    assert not [n for n, spec in by_name(bringup.node_set()).items() if "robot_pose" in spec.parameters]


@pytest.mark.parametrize("values, message", [
    ({"mode": "simulated"}, "mode='simulated'"),
    ({"hardware": "ethercat"}, "hardware='ethercat'"),
    ({"rviz": "perhaps"}, "rviz='perhaps'"),
    ({"namespace": "/"}, "namespace='/'"),
    ({"robots": "x"}, "unknown launch arguments: robots"),
    ({"robot_pose": "0 0 0.1"}, "robot_pose='0 0 0.1'"),
    ({"robot_pose": "0 0 x 0 0 0"}, "robot_pose='0 0 x 0 0 0'"),
    ({"robot_pose": "0 0 nan 0 0 0"}, "robot_pose='0 0 nan 0 0 0'"),
])
def test_invalid_arguments(values, message):
    with pytest.raises(ValueError, match=message):
        bringup.Options.from_strings(values)


@pytest.mark.parametrize("mode", ["sim", "real"])
def test_every_parameter_is_declared_by_its_node_with_the_same_type(mode):
    options = bringup.Options(mode=mode, namespace="n", frame_prefix="p/", objects="/o.yaml", view=True,
                              search_path="/s", robot_pose="0 0 0.1 0 0 1.5")
    for spec in bringup.node_set(options):
        declared = schema(spec)
        for name, value in spec.parameters.items():
            assert name in declared, f"{spec.name}: {name} is not a parameter of the node"
            default = declared[name]
            if not hasattr(default, "name"):            # Parameter.Type defaults: arrays without a value
                assert type(value) is type(default), f"{spec.name}: {name}={value!r} vs default {default!r}"


def test_yaml_loader_reads_wildcards_and_skips_untyped_empty_lists(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("/**:\n  ros__parameters:\n    use_sim_time: true\n"
                    "node_a:\n  ros__parameters:\n    a: {b: {c: 1}}\n    empty: []\n    x: 2.5\n"
                    "node_b:\n  ros__parameters:\n    x: 3.0\n")
    assert bringup.yaml_parameters(path, "node_a") == {"use_sim_time": True, "a.b.c": 1, "x": 2.5}
    assert bringup.yaml_parameters(tmp_path / "missing.yaml", "node_a") == {}


def test_fast_dds_profile_environment():
    profile = bringup.config_file(bringup.FASTDDS_PROFILE)
    if not profile.is_file():
        pytest.skip("no Fast DDS profile shipped")
    new, old = "FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE"
    with pytest.MonkeyPatch.context() as patch:
        # the installed Fast DDS decides (a venv exports no ROS_DISTRO): 3.x reads the new name, 2.x the old
        patch.setattr(rcl_layout, "fastdds_major", lambda: 3)
        assert bringup.dds_environment({"ROS_DISTRO": "jazzy"}) == {new: str(profile)}
        assert bringup.dds_environment({old: "/mine.xml"}) == {new: "/mine.xml"}
        assert bringup.dds_environment({new: "/mine.xml"}) == {}
        patch.setattr(rcl_layout, "fastdds_major", lambda: 2)
        assert bringup.dds_environment({}) == {new: str(profile), old: str(profile)}
        assert bringup.dds_environment({new: "/mine.xml"}) == {old: "/mine.xml"}
        assert bringup.dds_environment({new: "/mine.xml", old: "/other.xml"}) == {}
        # no Fast DDS version found (a custom install): ROS_DISTRO
        patch.setattr(rcl_layout, "fastdds_major", lambda: None)
        assert bringup.dds_environment({}) == {new: str(profile)}
        assert bringup.dds_environment({"ROS_DISTRO": "humble"}) == {new: str(profile), old: str(profile)}


def test_create_node_applies_name_namespace_parameters_and_remaps():
    """The run verb's in-process nodes, in a private context (the default robot without its world)."""
    import rclpy

    from robot_bridge.cli.verbs.run import create_node

    robot = str(REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml")
    specs = bringup.node_set(bringup.Options(robot=robot, namespace="t", frame_prefix="t/"))
    context = rclpy.Context()
    context.init()
    nodes = []
    try:
        for spec in specs:
            nodes.append(create_node(spec, context=context))
            node = nodes[-1]
            assert node.get_fully_qualified_name() == f"/t/{spec.name}"
            for name, value in spec.parameters.items():
                assert node.get_parameter(name).value == value
        controller = nodes[2]
        topics = {p.topic_name for p in controller.publishers}
        assert "/t/joint_states" in topics and "/joint_states" not in topics
    finally:
        for node in nodes:
            node.destroy_node()
        context.try_shutdown()


def _start_run(*arguments, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "robot_bridge.cli.main", "run", *arguments],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)


def _wait_ready(process, timeout=60.0) -> list[str]:
    from robot_bridge.cli.verbs.run import READY

    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(READY):
            return lines
    process.kill()
    raise AssertionError("robot-bridge run never became ready:\n" + "".join(lines))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_serves_in_its_namespace_and_stops_cleanly_on_signal(sig):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from robot_bridge.ros import qos

    robot = str(REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml")
    process = _start_run("--robot", robot, "--namespace", "rb_run_test")
    try:
        _wait_ready(process)
        context = rclpy.Context()
        context.init()
        probe = rclpy.create_node("probe", context=context, namespace="/rb_run_test")
        got: dict[str, object] = {}
        probe.create_subscription(String, "robot_description", lambda m: got.setdefault("urdf", m.data),
                                  qos.description_qos())
        probe.create_subscription(JointState, "joint_states", lambda m: got.setdefault("joints", m),
                                  qos.sensor_data_qos())
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(probe)
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
        probe.destroy_node()
        context.try_shutdown()
        assert "<robot name=\"lwa3_gripper\"" in got.get("urdf", "")
        assert list(got["joints"].name) == ["j1", "j2", "j3", "j4", "j5", "j6", "j7", "finger_joint"]
    finally:
        process.send_signal(sig)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "robot-bridge run: stopped" in output
    for failure in ("Traceback", "never retrieved", "context is invalid"):
        assert failure not in output


def test_run_reports_a_node_that_cannot_start(monkeypatch, capsys):
    """A parameter of the wrong type (e.g. from an edited YAML): one error line, status 2, nothing left."""
    from robot_bridge.cli.main import main as cli

    real = bringup.node_set

    def broken_node_set(options):
        specs = real(options)
        bad = dict(specs[0].parameters, publish_frequency="fast")
        return [bringup.NodeSpec(**{**specs[0].__dict__, "parameters": bad})] + specs[1:]

    monkeypatch.setattr(bringup, "node_set", broken_node_set)
    robot = str(REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml")
    assert cli(["run", "--robot", robot]) == 2
    err = capsys.readouterr().err
    assert "robot-bridge run: error: cannot start description_node:" in err and "publish_frequency" in err


def test_every_node_parameter_is_in_its_yaml():
    """config/<node>.yaml lists every parameter of the node's schema (arrays without a value: commented)."""
    import importlib

    nodes = [(n.module, n.name, n.config) for n in node_table.NODES if n.config]
    if bringup.planner_unavailable() is not None:
        nodes = [n for n in nodes if n[1] != "planner_node"]
    for module_name, node, name in nodes:
        module = importlib.import_module(module_name)
        text = (REPO / "config" / name).read_text()
        values = bringup.yaml_parameters(REPO / "config" / name, node)
        for parameter, default, _ in module.PARAMETERS:
            if hasattr(default, "name"):                  # Parameter.Type: an array without a value
                assert f"# {parameter.split('.')[-1]}: [" in text, f"{name}: {parameter} not shown"
            else:
                assert parameter in values, f"{name}: {parameter} missing"


def test_embedded_default_loads_with_the_readers():
    """The embedded robot, world and SRDFs as the issue describes them, read without any warning."""
    import numpy as np

    from robot_bridge.formats import load, srdf
    from robot_bridge.kinematics.fk import forward_kinematics
    from robot_bridge.model import transform

    world = load(bringup.DEFAULT_ROBOT)
    assert [j.name for j in world.active_joints] == ["j1", "j2", "j3", "j4", "j5", "j6", "j7", "finger_joint"]
    assert {n: (s.type, s.link) for n, s in world.sensors.items()} == {
        "base_laser": ("laser", "base"), "wrist_camera": ("camera", "link7"), "wrist_imu": ("imu", "link7")}
    assert world.sensors["base_laser"].params["range_min"] == 0.05
    assert list(world.manipulators) == ["arm"]
    assert world.manipulators["arm"].gripper_joints == ["finger_joint"]
    assert set(world.environment) == {"table", "crate", "can", "block", "ball"}
    assert [w for w in world.warnings if "camtrans" not in w] == []       # the viewer pose: render uses it
    # the right finger mirrors the left one (mimic): hand-derived positions in the gripper frame
    poses = forward_kinematics(world, {"finger_joint": [0.03]})
    gripper = transform.inverse(poses["gripper_base"])
    in_gripper = {f: gripper @ poses[f] for f in ("finger_left", "finger_right")}
    np.testing.assert_allclose(in_gripper["finger_left"][:3, 3], [0, 0.05, 0.04], atol=1e-12)
    np.testing.assert_allclose(in_gripper["finger_right"][:3, 3], [0, -0.05, 0.04], atol=1e-12)

    semantics = srdf.read_srdf(bringup.DEFAULT_SRDF, world)
    assert set(semantics.groups) == {"arm", "gripper"}
    assert semantics.state("home").values["j4"] == [1.2]
    can = srdf.read_srdf(bringup.DATA_DIR / "can.srdf", world.environment["can"])
    assert list(can.handles) == ["side_grasp"] and can.handles["side_grasp"].link == "can"


def test_view_node_only_on_request():
    assert not [s for s in bringup.node_set() if s.name == "view_node"]
    specs = bringup.node_set(bringup.Options.from_strings({"view": "true", "namespace": "x"}))
    view = specs[-1]
    assert (view.executable, view.namespace) == ("view_node", "/x")
    assert view.factory == "robot_bridge.nodes.view:ViewNode"
    assert "allow_control" not in view.parameters                   # read-only unless asked


def test_control_of_the_view_only_on_request_from_run_and_view():
    import argparse

    from robot_bridge.cli.verbs import run as run_verb
    from robot_bridge.cli.verbs import view as view_verb

    parser = argparse.ArgumentParser()
    run_verb.add_arguments(parser)
    options = run_verb.options_from_args(parser.parse_args(["--view", "--allow-control"]))
    view = [s for s in bringup.node_set(options) if s.name == "view_node"][0]
    assert view.parameters["allow_control"] is True
    assert run_verb.options_from_args(parser.parse_args(["--view"])).allow_control is False
    parser = argparse.ArgumentParser()
    view_verb.add_arguments(parser)
    assert view_verb.parameter_overrides(parser.parse_args([]))["allow_control"] is False
    assert view_verb.parameter_overrides(parser.parse_args(["--allow-control"]))["allow_control"] is True
