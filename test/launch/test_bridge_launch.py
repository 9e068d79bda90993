"""launch/bridge.launch.py run against the launch/launch_ros stand-in: its nodes equal bringup.py's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fake_launch_modules as fake  # noqa: E402  (test double, this test only)

from robot_bridge import bringup  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / "launch" / "bridge.launch.py"


def launch(arguments: dict[str, str]):
    """Load the launch file with the stand-in modules and execute it with these command-line arguments."""
    with fake.installed():
        spec = importlib.util.spec_from_file_location("bridge_launch_under_test", LAUNCH_FILE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        return description, *fake.execute(description, arguments)


def as_node_kwargs(spec: bringup.NodeSpec) -> dict:
    return dict(executable=spec.executable, package=spec.package, name=spec.name, namespace=spec.namespace,
                parameters=[spec.parameters], remappings=list(spec.remappings),
                arguments=list(spec.arguments), output="screen")


def test_declares_every_bringup_argument_with_its_default():
    description, _, _ = launch({})
    declared = {e.name: (e.default_value, e.description) for e in description.entities
                if isinstance(e, fake.DeclareLaunchArgument)}
    assert declared == {name: (default, text) for name, default, text in bringup.ARGUMENTS}
    assert set(declared) == {"robot", "srdf", "mode", "hardware", "namespace", "frame_prefix",
                             "use_sim_time", "rviz"}


@pytest.mark.parametrize("arguments", [
    {},
    {"mode": "real", "namespace": "arm1", "frame_prefix": "arm1/", "use_sim_time": "true"},
    {"robot": "/robots/other.urdf", "srdf": "/robots/other.srdf", "hardware": "sim", "rviz": "true"},
])
def test_nodes_and_parameters_equal_bringup(arguments):
    _, _, actions = launch(arguments)
    expected = bringup.node_set(bringup.Options.from_strings(arguments))
    assert all(isinstance(a, fake.Node) for a in actions)
    assert [a.kwargs for a in actions] == [as_node_kwargs(s) for s in expected]


def test_default_launch_is_the_sim_bridge_on_the_embedded_robot():
    _, _, actions = launch({})
    by_name = {a.kwargs["name"]: a.kwargs for a in actions}
    assert list(by_name) == ["description_node", "sensor_bridge", "controller_node"]
    assert [by_name[n]["executable"] for n in by_name] == ["description_node", "sensor_bridge_node",
                                                           "controller_node"]
    description = by_name["description_node"]["parameters"][0]
    assert description["description_file"] == str(bringup.DEFAULT_ROBOT)
    assert description["srdf_file"] == str(bringup.DEFAULT_SRDF)
    assert by_name["sensor_bridge"]["parameters"][0]["default_mode"] == "sim"
    assert by_name["controller_node"]["parameters"][0]["hardware"] == "sim"


def test_rviz_only_on_request_with_the_shipped_config():
    _, _, actions = launch({"rviz": "true"})
    rviz = [a.kwargs for a in actions if a.kwargs["executable"] == "rviz2"]
    assert len(rviz) == 1
    assert rviz[0]["arguments"][0] == "-d"
    assert Path(rviz[0]["arguments"][1]).is_file()
    _, _, actions = launch({})
    assert not [a for a in actions if a.kwargs["executable"] == "rviz2"]


def test_fast_dds_profile_is_exported_unless_one_is_chosen(monkeypatch):
    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("FASTRTPS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    _, context, _ = launch({})
    profile = bringup.config_file(bringup.FASTDDS_PROFILE)
    expected = {"FASTDDS_DEFAULT_PROFILES_FILE": str(profile)} if profile.is_file() else {}
    assert context.environment == expected
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "/mine.xml")
    _, context, _ = launch({})
    assert context.environment == {}


def test_bad_argument_values_fail_the_launch():
    with pytest.raises(ValueError, match="mode='simulation'"):
        launch({"mode": "simulation"})
    with pytest.raises(ValueError, match="rviz='maybe'"):
        launch({"rviz": "maybe"})
    with pytest.raises(ValueError, match="not declared"):
        launch({"robt": "x.urdf"})
