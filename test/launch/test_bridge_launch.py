"""launch/bridge.launch.py under the real launch / launch_ros: its Node actions equal bringup.py's node set.

The launch description is visited in process the way ``ros2 launch`` visits it (declared arguments take
their defaults, environment actions run, the OpaqueFunction returns the Node actions), and every Node's
substitutions are performed, so what is compared is what launch_ros would pass each process: package,
executable, full node name, namespace, the parameters of the file launch_ros writes, remappings and
arguments.  Starting the processes is test/launch/test_ros2_launch.py's job.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.ros2_tools import missing_reason  # noqa: E402

launch = pytest.importorskip("launch", reason=missing_reason("the ROS 2 launch package"))
launch_ros_actions = pytest.importorskip("launch_ros.actions", reason=missing_reason("launch_ros"))
from launch.actions import DeclareLaunchArgument  # noqa: E402

from robot_bridge import bringup  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "bridge.launch.py"


def launch_file_description():
    spec = importlib.util.spec_from_file_location("bridge_launch_under_test", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description()


def visit(arguments: dict[str, str]):
    """Visit the launch file's description with these command-line arguments.

    Returns (description, environment variables it sets, the Node actions with substitutions performed)."""
    description = launch_file_description()
    context = launch.LaunchContext()
    context.launch_configurations.update(arguments)
    context._push_environment()
    before = dict(os.environ)
    try:
        nodes, pending = [], list(description.entities)
        while pending:
            entity = pending.pop(0)
            if isinstance(entity, launch_ros_actions.Node):
                entity._perform_substitutions(context)
                nodes.append(entity)
            else:
                pending = list(entity.visit(context) or []) + pending
        environment = {k: v for k, v in os.environ.items() if before.get(k) != v}
    finally:
        context._pop_environment()
    return description, environment, nodes


class _ParamsFileLoader(yaml.SafeLoader):
    """Reads the file as rcl's parser does: launch_ros writes a list parameter as ``!!python/tuple`` (its
    yaml.dump of the tuples it normalizes lists to), which rcl takes as a plain sequence."""


_ParamsFileLoader.add_constructor("tag:yaml.org,2002:python/tuple", yaml.SafeLoader.construct_sequence)


def node_parameters(node) -> dict:
    """The parameters launch_ros hands the process: it writes the dict to a parameter file."""
    params = {}
    for argument, is_file in node._Node__expanded_parameter_arguments or []:
        assert is_file, f"unexpected inline parameter {argument}"
        with open(argument, encoding="utf-8") as stream:
            (section,) = yaml.load(stream, _ParamsFileLoader).values()      # keyed by the node's full name
        os.unlink(argument)
        params.update(bringup.flatten(section["ros__parameters"]))
    return params


def node_arguments(node) -> list[str]:
    context, utilities = launch.LaunchContext(), launch.utilities
    return [utilities.perform_substitutions(context, utilities.normalize_to_list_of_substitutions(a))
            for a in node._Node__arguments or []]


def as_launched(node) -> dict:
    return dict(package=node.node_package, executable=node.node_executable, name=node.node_name,
                namespace=node.expanded_node_namespace, parameters=node_parameters(node),
                remappings=list(node.expanded_remapping_rules or []), arguments=node_arguments(node))


def as_spec(spec: bringup.NodeSpec) -> dict:
    namespace = spec.namespace or "/"
    return dict(package=spec.package, executable=spec.executable,
                name=namespace.rstrip("/") + "/" + spec.name, namespace=namespace,
                parameters=spec.parameters, remappings=list(spec.remappings), arguments=list(spec.arguments))


@pytest.fixture
def rviz_installed(tmp_path, monkeypatch):
    """An ament prefix that has rviz2 in its index (where the launch file looks for it)."""
    index = tmp_path / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "rviz2").touch()
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join(filter(None, [
        str(tmp_path), os.environ.get("AMENT_PREFIX_PATH", "")])))


@pytest.fixture
def rviz_missing(monkeypatch):
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    monkeypatch.setenv("AMENT_PREFIX_PATH", os.environ.get("AMENT_PREFIX_PATH") or sys.prefix)
    try:
        get_package_prefix("rviz2")
    except PackageNotFoundError:
        return
    pytest.skip("rviz2 is installed here")


def test_declares_every_bringup_argument_with_its_default():
    declared = {e.name: (e.default_value, e.description) for e in launch_file_description().entities
                if isinstance(e, DeclareLaunchArgument)}
    defaults = {name: ("".join(s.perform(None) for s in default), text) for name, (default, text)
                in declared.items()}
    assert defaults == {name: (default, text) for name, default, text in bringup.ARGUMENTS}
    assert {"robot", "srdf", "mode", "hardware", "namespace", "frame_prefix", "use_sim_time",
            "rviz"} <= set(declared)


@pytest.mark.parametrize("arguments", [
    {},
    {"mode": "real", "namespace": "arm1", "frame_prefix": "arm1/", "use_sim_time": "true"},
    {"robot": "/robots/other.urdf", "srdf": "/robots/other.srdf", "hardware": "sim", "rviz": "true"},
    {"objects": "/robots/objects.yaml", "namespace": "arm1", "frame_prefix": "arm1/"},     # + world_node
])
def test_nodes_and_parameters_equal_bringup(arguments, rviz_installed):
    _, _, nodes = visit(arguments)
    expected = bringup.node_set(bringup.Options.from_strings(arguments))
    assert [as_launched(n) for n in nodes] == [as_spec(s) for s in expected]


def test_default_launch_is_the_sim_bridge_on_the_embedded_robot():
    _, _, nodes = visit({"planner": "false"})
    by_name = {n.node_name: n for n in nodes}
    assert list(by_name) == ["/description_node", "/sensor_bridge", "/controller_node"]
    assert [n.node_executable for n in nodes] == ["description_node", "sensor_bridge_node", "controller_node"]
    description = node_parameters(by_name["/description_node"])
    assert description["description_file"] == str(bringup.DEFAULT_ROBOT)
    assert description["srdf_file"] == str(bringup.DEFAULT_SRDF)
    assert node_parameters(by_name["/sensor_bridge"])["default_mode"] == "sim"
    assert node_parameters(by_name["/controller_node"])["hardware"] == "sim"


def test_rviz_only_on_request_with_the_shipped_config(rviz_installed):
    _, _, nodes = visit({"rviz": "true"})
    rviz = [n for n in nodes if n.node_executable == "rviz2"]
    assert len(rviz) == 1
    arguments = node_arguments(rviz[0])
    assert arguments[0] == "-d" and Path(arguments[1]).is_file()
    _, _, nodes = visit({})
    assert not [n for n in nodes if n.node_executable == "rviz2"]


def test_rviz_requested_but_not_installed_starts_the_bridge_alone(rviz_missing):
    _, _, nodes = visit({"rviz": "true", "planner": "false"})
    assert [n.node_executable for n in nodes] == ["description_node", "sensor_bridge_node", "controller_node"]


def test_planner_in_sim_mode_when_installed_and_off_on_request():
    _, _, nodes = visit({})
    executables = [n.node_executable for n in nodes]
    assert ("planner_node" in executables) == (bringup.planner_unavailable() is None)
    for arguments in ({"planner": "false"}, {"mode": "real"}):
        _, _, nodes = visit(arguments)
        assert "planner_node" not in [n.node_executable for n in nodes]


def test_fast_dds_profile_is_exported_unless_one_is_chosen(monkeypatch):
    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("FASTRTPS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    _, environment, _ = visit({})
    profile = bringup.config_file(bringup.FASTDDS_PROFILE)
    assert profile.is_file()
    # under the name(s) the installed Fast DDS reads (Kilted's 3.x: the new one; Jazzy's 2.x: the old one too)
    assert environment == bringup.dds_profile_environment(profile)
    assert environment
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/mine.xml")
    _, environment, _ = visit({})
    assert environment == {name: "/mine.xml" for name in bringup.dds_profile_variables()
                           if name != "FASTDDS_DEFAULT_PROFILES_FILE"}


def test_bad_argument_values_fail_the_launch():
    with pytest.raises(ValueError, match="mode='simulation'"):
        visit({"mode": "simulation"})
    with pytest.raises(ValueError, match="rviz='maybe'"):
        visit({"rviz": "maybe"})
