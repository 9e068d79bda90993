"""Parameters mean what they say: the three nodes of the bridge, described, refused and changed through
the real parameter services (what ``ros2 param describe/set`` call)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
import rclpy  # noqa: E402
from rcl_interfaces.msg import ParameterType  # noqa: E402
from rclpy.exceptions import InvalidParameterValueException  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from robot_bridge import bringup  # noqa: E402
from robot_bridge.cli.verbs.run import create_node  # noqa: E402

from fixtures.bridge_nodes import TIMEOUT, Bridge  # noqa: E402, F401

OBJECTS = bringup.DATA_DIR / "objects.yaml"


@pytest.fixture(scope="module")
def bridge():
    b = Bridge({"sensor_bridge": {"default_mode": "off", "sensors.base_laser.mode": "relay"}},
               bringup.Options(objects=str(OBJECTS)))
    yield b
    b.close()


def test_descriptors_carry_ranges_choices_and_read_only(bridge):
    d = bridge.describe("controller_node", "state_rate")
    assert (d.floating_point_range[0].from_value, d.floating_point_range[0].to_value) == (0.1, 10000.0)
    assert not d.read_only and d.description.startswith("Hz of /joint_states")
    d = bridge.describe("controller_node", "hardware")
    assert d.read_only and "one of: sim, canopen" in d.additional_constraints
    d = bridge.describe("controller_node", "canopen.heartbeat_ms")
    assert (d.integer_range[0].from_value, d.integer_range[0].to_value) == (0, 65535)
    d = bridge.describe("sensor_bridge", "default_mode")
    assert "one of: relay, sim, off" in d.additional_constraints
    d = bridge.describe("sensor_bridge", "sensors.wrist_imu.gyro_bias")
    assert d.type == ParameterType.PARAMETER_DOUBLE_ARRAY and "length 0 or 3" in d.additional_constraints
    d = bridge.describe("description_node", "publish_frequency")
    assert d.floating_point_range[0].from_value == 0.0 and not d.read_only
    assert bridge.describe("description_node", "publish_default_joint_states").read_only


@pytest.mark.parametrize("node, name, value, reason", [
    ("controller_node", "state_rate", -1.0, "out of range"),     # rclpy's range check, from the descriptor
    ("controller_node", "hardware", "foo", "read-only"),
    ("controller_node", "joints", ["foo"], "read-only"),
    ("controller_node", "sim.fault_rate", -3.0, "out of range"),
    ("sensor_bridge", "warn_throttle", -1.0, "out of range"),
    ("sensor_bridge", "default_mode", "relay", "read-only"),
    ("description_node", "publish_frequency", -5.0, "out of range"),
])
def test_bad_values_are_refused_with_the_reason(bridge, node, name, value, reason):
    before = bridge.nodes[node].params.get(name)
    result = bridge.set(node, name, value)
    assert not result.successful
    assert reason in result.reason.lower() or reason in result.reason
    assert bridge.nodes[node].params.get(name) == before


def test_a_wrong_choice_or_range_at_start_up_is_refused():
    context = rclpy.Context()
    context.init()
    try:
        for node, params, reason in (
                ("controller_node", {"hardware": "foo"}, "hardware='foo' is not one of: 'sim', 'canopen'"),
                ("sensor_bridge", {"default_mode": "simulate"}, "default_mode='simulate' is not one of"),
                ("controller_node", {"state_rate": -1.0}, "state_rate")):
            spec = next(s for s in bringup.node_set() if s.name == node)
            spec.parameters.update(params)
            with pytest.raises(InvalidParameterValueException, match=reason):
                create_node(spec, context)
    finally:
        context.try_shutdown()


def test_accepted_dynamic_values_take_effect(bridge):
    controller = bridge.nodes["controller_node"]
    assert bridge.set("controller_node", "state_rate", 10.0).successful
    assert controller.timers_by_rate["state_rate"].timer_period_ns == 100_000_000
    assert bridge.set("controller_node", "sim.fault_rate", 0.5).successful
    assert controller.hardware.fault_rate == 0.5
    assert bridge.set("controller_node", "sim.fault_rate", 0.0).successful

    description = bridge.nodes["description_node"]
    assert bridge.set("description_node", "publish_frequency", 4.0).successful
    assert description.gate.interval_ns == 250_000_000

    sensors = bridge.nodes["sensor_bridge"]
    assert bridge.set("sensor_bridge", "sensors.base_laser.max_rate", 2.0).successful
    assert sensors.relays[("base_laser", "scan")].min_period_ns == 500_000_000
    assert bridge.set("sensor_bridge", "sensors.base_laser.restamp", True).successful
    assert sensors.relays[("base_laser", "scan")].restamp is True


# -- who may widen what: parameters that reach the file system or become frame ids ---------------------

@pytest.mark.parametrize("node, name, value, reason", [
    # the readers' roots: only folders under those trusted at launch (the launch-time files' folders,
    # search_path, $OPENRAVE_DATA); what was accepted before from any peer on the domain
    ("description_node", "search_path", ["/", "/etc"], "'/' resolves to /, outside the folders trusted"),
    ("description_node", "description_file", "/etc/passwd", "resolves to /etc/passwd, outside the folders"),
    ("description_node", "srdf_file", "/etc/robot.srdf", "resolves to /etc/robot.srdf, outside the folders"),
    ("world_node", "objects_file", "/etc/passwd", "resolves to /etc/passwd, outside the folders"),
    ("world_node", "search_path", ["/"], "'/' resolves to /, outside the folders"),
    # where meshes are written and served, and the HTTP listener: fixed at launch
    ("description_node", "mesh_dir", "/etc", "read-only"),
    ("description_node", "mesh_cache_dir", "/proc/self", "read-only"),
    ("description_node", "mesh_uri", "http", "read-only"),
    ("description_node", "mesh_http_host", "0.0.0.0", "read-only"),
])
def test_widening_file_access_at_run_time_is_refused_old_value_kept(bridge, node, name, value, reason):
    before = bridge.nodes[node].params.get(name)
    model = getattr(bridge.nodes[node], "model", None)
    result = bridge.set(node, name, value)
    assert not result.successful and reason in result.reason, result.reason
    assert bridge.nodes[node].params.get(name) == before
    assert getattr(bridge.nodes[node], "model", None) is model          # nothing reloaded


def test_description_file_switches_within_the_launch_time_roots(bridge):
    """The documented run-time switch stays: a file beside the launch-time one loads; the way back too."""
    node = bridge.nodes["description_node"]
    launched = node.params.get("description_file")
    other = str(bringup.DATA_DIR / "lwa3_gripper.robot.xml")
    assert bridge.set("description_node", "description_file", other).successful
    assert node.model.robot.name == "lwa3_gripper"
    assert bridge.set("description_node", "description_file", launched).successful
    assert node.params.get("description_file") == launched


@pytest.mark.parametrize("name, value", [
    ("frame_prefix", "a b\x00c"),
    ("frame_prefix", "arm\x00"),
    ("world_frame", "world\x1b[2J"),
    ("environment_prefix", "env\n"),
    ("frame_prefix", "r 2/"),
    ("world_frame", "/world"),
])
def test_frame_names_with_control_characters_are_refused_at_run_time(bridge, name, value):
    """Through the parameter service (what ``ros2 param set`` calls) the message's C string ends at a NUL:
    what arrives is checked ('a b\\x00c' arrives as 'a b', refused for its space; 'arm\\x00' as 'arm',
    a good name).  In the process (rclpy's set_parameters) the NUL itself reaches the check."""
    node = bridge.nodes["description_node"]
    before, model = node.params.get(name), node.model
    arrived = value.partition("\x00")[0]
    results = [node.set_parameters([Parameter(name, value=value)])[0]]
    if arrived != "arm":
        results.append(bridge.set("description_node", name, value))
    for result, seen in zip(results, [value, arrived]):
        assert not result.successful and result.reason.startswith(f"{name}={seen!r}: "), result.reason
        assert "expected a tf2 frame id" in result.reason and "\n" not in result.reason
        assert node.params.get(name) == before
        assert node.model is model                                       # not reloaded with it


def test_frame_names_with_control_characters_are_refused_at_start_up():
    context = rclpy.Context()
    context.init()
    try:
        for node, params, reason in (
                ("description_node", {"frame_prefix": "a b\x00c"}, r"frame_prefix='a b\\x00c': control "
                                                                    r"character '\\x00' at index 3"),
                ("sensor_bridge", {"frame_prefix": "r\x01/"}, r"control character '\\x01' at index 1"),
                ("sensor_bridge", {"joint_states_topic": "joint states"}, r"whitespace ' ' at index 5")):
            spec = next(s for s in bringup.node_set() if s.name == node)
            spec.parameters.update(params)
            with pytest.raises(InvalidParameterValueException, match=reason):
                create_node(spec, context)
    finally:
        context.try_shutdown()


def test_a_node_given_a_bad_frame_name_says_so_in_one_line_and_does_not_start(tmp_path):
    """From a params file (rcl's YAML parser passes control characters through, and cuts at NUL)."""
    yaml = tmp_path / "world.yaml"
    yaml.write_text('/**:\n  ros__parameters:\n    frame_prefix: "a\\x1b[31mb"\n')
    code = str(Path(bringup.__file__).resolve().parents[1])             # the code under test, as imported
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=code)
    node = subprocess.Popen([sys.executable, "-m", "robot_bridge.nodes.world", "--ros-args", "--params-file",
                             str(yaml)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = node.communicate(timeout=90)       # under the suite's 120 s per test: never orphaned
    except subprocess.TimeoutExpired:
        node.kill()
        output = node.communicate()[0]
        pytest.fail(f"the node started with frame_prefix 'a\\x1b[31mb' and kept running: {output!r}")
    lines = output.splitlines()
    assert node.returncode == 2, lines                 # issue 31: a node that does not start exits 2
    assert len(lines) == 1 and "\x1b" not in lines[0], lines
    assert "[ERROR]" in lines[0] and "parameter frame_prefix refused at start-up" in lines[0], lines
    assert "control character '\\x1b' at index 1" in lines[0], lines


@pytest.mark.parametrize("executable, args, reason", [
    ("controller", ["-p", "state_rate:=-1.0"], r"parameter state_rate refused at start-up.*out of range"),
    ("controller", ["-p", "state_rate:=fast"], r"the node does not start: .*state_rate"),
    ("description", ["-p", "publish_frequency:=-5.0"], r"parameter publish_frequency refused at start-up"),
])
def test_a_bad_start_up_parameter_is_one_error_line_and_exit_status_2(executable, args, reason):
    """Issue 31: `ros2 run robot_bridge controller_node --ros-args -p state_rate:=-1.0` printed a 26-line
    traceback (the half-built node destroyed at shutdown); now one line with the reason, exit status 2."""
    code = str(Path(bringup.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=code)
    node = subprocess.Popen([sys.executable, "-m", f"robot_bridge.nodes.{executable}", "--ros-args", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = node.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        node.kill()
        output = node.communicate()[0]
        pytest.fail(f"the node started with {args} and kept running: {output!r}")
    lines = output.splitlines()
    assert node.returncode == 2, lines
    assert len(lines) == 1 and "[ERROR]" in lines[0] and re.search(reason, lines[0]), lines


# -- parameters fit the thing they set (issue 31) ------------------------------------------------------

def test_each_sensor_declares_only_what_its_type_reads(bridge):
    sensors = bridge.nodes["sensor_bridge"]
    declared = {name for name in sensors._parameters if name.startswith("sensors.")}
    laser = {n.split(".", 2)[2] for n in declared if n.startswith("sensors.base_laser.")}
    imu = {n.split(".", 2)[2] for n in declared if n.startswith("sensors.wrist_imu.")}
    camera = {n.split(".", 2)[2] for n in declared if n.startswith("sensors.wrist_camera.")}
    assert not laser & {"gyro_bias", "encoding", "height", "width", "orientation_covariance"}, laser
    assert {"mode", "rate", "noise_std", "angle_increment", "rep117"} <= laser
    assert {"gyro_bias", "accel_noise_std", "orientation_covariance"} <= imu and "encoding" not in imu
    assert {"encoding", "width", "height", "depth_topic"} <= camera and "gyro_bias" not in camera
    # the docs/sensor_bridge_node.md table still lists every sensor parameter: each declared by some type
    from robot_bridge.nodes import sensor_bridge

    assert {p.name for p in sensor_bridge.SENSOR_PARAMETERS} == laser | imu | camera | {"input_info_topic"} \
        or {p.name for p in sensor_bridge.SENSOR_PARAMETERS} == laser | imu | camera


def test_an_integer_is_taken_where_a_double_is_meant():
    """`publish_frequency 50` was refused: "Wrong parameter type, expected '3' got '2'"."""
    context = rclpy.Context()
    context.init()
    node = None
    try:
        spec = next(s for s in bringup.node_set() if s.name == "description_node")
        spec.parameters.update(publish_frequency=50)
        node = create_node(spec, context)
        value = node.get_parameter("publish_frequency").value
        assert value == 50.0 and isinstance(value, float)
        assert node.set_parameters([Parameter("publish_frequency", value=8)])[0].successful
        assert node.get_parameter("publish_frequency").value == 8.0 and node.gate.interval_ns == 125_000_000
        assert not node.set_parameters([Parameter("publish_frequency", value=-8)])[0].successful
    finally:
        if node is not None:
            node.destroy_node()
        context.try_shutdown()


def test_an_integer_for_a_double_through_the_parameter_service(bridge):
    assert bridge.set("controller_node", "state_rate", 20).successful
    assert bridge.nodes["controller_node"].timers_by_rate["state_rate"].timer_period_ns == 50_000_000
    assert bridge.set("controller_node", "state_rate", 50.0).successful


def test_read_only_parameters_describing_the_robot_hold_their_values(bridge):
    """`ros2 param get /controller_node joints` said "Parameter not set"."""
    controller = bridge.nodes["controller_node"]
    got = bridge.call("controller_node", lambda c: c.get_parameters(["joints"])).values[0]
    assert got.type == ParameterType.PARAMETER_STRING_ARRAY
    assert list(got.string_array_value) == controller.joints and len(controller.joints) > 1
    assert not bridge.set("controller_node", "joints", ["x"]).successful        # still read-only
    got = bridge.call("controller_node", lambda c: c.get_parameters(["controllers"])).values[0]
    assert got.type == ParameterType.PARAMETER_STRING_ARRAY                     # not "Parameter not set"
    assert list(got.string_array_value) == []          # none named: the one controller at ~/ (config default)


# -- safety parameters a peer could loosen: physical ranges, ROS-name prefixes (issue 41) ----------------

LOOSENED = [
    ("controller_node", "constraints.path_position", 7.0, r"out of range|outside \[0\.0, 0\.5\]"),
    ("controller_node", "constraints.goal_position", 7.0, r"out of range|outside \[0\.0, 0\.5\]"),
    ("controller_node", "constraints.stopped_velocity_tolerance", 7.0,
     r"out of range|outside \[0\.0, 0\.5\]"),
    ("controller_node", "sim.fault_rate", 7.0, r"out of range|outside \[0\.0, 1\.0\]"),
    ("description_node", "frame_prefix", "../../../../etc/passwd", r"character '\.' at index 0"),
    ("description_node", "frame_prefix", "arm\u202e/", r"character '\\u202e' at index 3"),
    ("description_node", "environment_prefix", "env/../x", r"character '\.' at index 4"),
    ("description_node", "frame_prefix", "arm//", r"an empty one"),
]


@pytest.mark.parametrize("node, name, value, reason", LOOSENED)
def test_loosened_safety_parameters_are_refused_at_run_time(bridge, node, name, value, reason):
    before = bridge.nodes[node].params.get(name)
    for result in (bridge.nodes[node].set_parameters([Parameter(name, value=value)])[0],
                   bridge.set(node, name, value)):
        assert not result.successful and re.search(reason, result.reason), result.reason
    assert bridge.nodes[node].params.get(name) == before


def test_loosened_safety_parameters_are_refused_at_start_up():
    context = rclpy.Context()
    context.init()
    try:
        for node, name, value, reason in LOOSENED:
            spec = next(s for s in bringup.node_set() if s.name == node)
            spec.parameters[name] = value
            with pytest.raises(InvalidParameterValueException, match=reason):
                create_node(spec, context)
    finally:
        context.try_shutdown()


def test_ros_name_prefixes_are_accepted():
    from robot_bridge.ros.params import string_refusal

    for good in ("", "arm1/", "left_", "robot/arm_2/", "_x"):
        assert string_refusal(good, "prefix") is None, good
