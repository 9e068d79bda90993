"""Parameter constraints seen and enforced through the real ``ros2 param`` against ``ros2 launch``:
describe shows ranges, choices and read-only; out-of-range, wrong-choice, read-only, outside-the-trusted-
folders and bad frame name sets are refused with the reason and change nothing (read before and after
through the node's own GetParameters service: one ``ros2`` process per case, the set under test)."""

from __future__ import annotations


import pytest

from fixtures.ros2_cli import (BASE_NODES as NODES, PARAM, Ros2Process, alive, ros2, ros2_executable,  # noqa: E402
                               stop_daemon, wait_for_nodes)
from fixtures.waiting import wait_until


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    ros2_executable()                                      # skips with the reason when absent
    launch = Ros2Process(["launch", "robot_bridge", "bridge.launch.py"],
                         tmp_path_factory.mktemp("launch") / "launch.log")
    try:
        wait_for_nodes(NODES, launch)
        yield launch
    finally:
        launch.close()
        stop_daemon()
        assert not [pid for pid in launch.started().values() if alive(pid)]


@pytest.fixture(scope="module")
def get_value(bridge):
    """``get_value(node, name)``: the parameter's ParameterValue from the node's GetParameters service."""
    from rcl_interfaces.srv import GetParameters

    from fixtures.ros_fixtures import RosProcess

    process = RosProcess("param-probe")
    probe = process.node("param_probe")
    clients: dict = {}

    def get(node: str, name: str):
        client = clients.get(node) or clients.setdefault(
            node, probe.create_client(GetParameters, f"{node}/get_parameters"))
        assert client.wait_for_service(timeout_sec=30.0), f"no {node}/get_parameters"
        future = client.call_async(GetParameters.Request(names=[name]))
        wait_until(future.done, 30.0, f"{node}/get_parameters answered")
        return list(future.result().values)
    yield get
    process.close()


@pytest.mark.parametrize("node, name, shown", [
    ("/controller_node", "state_rate", ["Min value: 0.1", "Max value: 10000.0"]),
    ("/controller_node", "hardware", ["Read only: true", "one of: sim, canopen"]),
    ("/sensor_bridge", "default_mode", ["one of: relay, sim, off"]),
    ("/sensor_bridge", "output_depth", ["Min value: 1", "Max value: 10000"]),
    ("/description_node", "publish_frequency", ["Min value: 0.0"]),
    ("/description_node", "search_path", ["at run time only under the folders trusted at launch"]),
    ("/description_node", "mesh_cache_dir", ["Read only: true"]),
    ("/description_node", "frame_prefix", ["tf2 frame id prefix: ROS name tokens"]),
])
def test_describe_shows_the_constraints(bridge, node, name, shown):
    out = ros2("param", "describe", node, name, *PARAM).stdout
    for text in shown:
        assert text in out, out


@pytest.mark.parametrize("node, name, value, reason", [
    ("/controller_node", "state_rate", "-1.0", "out of range"),
    ("/controller_node", "sim.fault_rate", "-3.0", "out of range"),
    ("/controller_node", "hardware", "foo", "read-only"),
    ("/controller_node", "joints", "[foo]", "read-only"),
    ("/description_node", "mesh_uri", "ftp", "read-only"),
    # any peer on the domain could widen the roots the readers trust, or where meshes are written and served
    ("/description_node", "search_path", "['/', '/etc']", "outside the folders trusted at launch"),
    ("/description_node", "description_file", "/etc/passwd", "outside the folders trusted at launch"),
    ("/description_node", "mesh_dir", "/etc", "read-only"),
    ("/description_node", "mesh_cache_dir", "/proc/self", "read-only"),
    # the CLI's YAML makes a NUL of \x00; the service's C string ends there: 'a b' arrives, refused
    ("/description_node", "frame_prefix", '"a b\\x00c"', "frame_prefix='a b': whitespace"),
    ("/description_node", "world_frame", '"w\\x1bx"', "control character '\\x1b'"),
])
def test_bad_values_are_refused(bridge, get_value, node, name, value, reason):
    before = get_value(node, name)                         # joints: not declared, no value
    result = ros2("param", "set", node, name, value, *PARAM, check=False)
    said = result.stdout + result.stderr
    assert said.startswith("Setting parameter failed: ") and reason in said.lower(), said
    assert get_value(node, name) == before
