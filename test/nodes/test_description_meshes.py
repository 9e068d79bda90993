"""description_node's meshes as a user gets them: the node executable on a corpus robot with Inventor
meshes converts them into the mesh cache by default, robot_description names the cached files, every
dropped or missing mesh is a warning in the log, and a restart converts nothing (cache hit)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

rclpy = pytest.importorskip("rclpy")
trimesh = pytest.importorskip("trimesh")

from lxml import etree  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from robot_bridge.ros import qos  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0


def run_until_description(robot: Path, cache: Path, *params: str, search: Path | None = None,
                          env: dict | None = None) -> tuple[str, str]:
    """Start the node executable, wait for robot_description, stop it; (description, log)."""
    args = ["-p", f"description_file:={robot}", "-p", f"mesh_cache_dir:={cache}", *params]
    if search is not None:
        args += ["-p", f"search_path:=[{search}]"]
    proc = subprocess.Popen([sys.executable, "-m", "robot_bridge.nodes.description", "--ros-args", *args],
                            cwd=REPO, env=env or dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("mesh_probe", context=context)
    got = []
    node.create_subscription(String, "/robot_description", lambda m: got.append(m.data),
                             qos.description_qos())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        end = time.monotonic() + TIMEOUT
        while not got and time.monotonic() < end and proc.poll() is None:
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            log = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            log = proc.communicate()[0]
    assert got, f"no robot_description:\n{log}"
    return got[0], log


def mesh_uris(description: str) -> list[str]:
    return [m.get("filename") for m in etree.fromstring(description.encode()).iter("mesh")]


def counts(log: str) -> tuple[int, int]:
    m = re.search(r"meshes: (\d+) converted, (\d+) from the cache", log)
    assert m, log
    return int(m.group(1)), int(m.group(2))


def test_default_converts_into_cache_and_restart_converts_nothing(openrave_data, tmp_path):
    robot = openrave_data / "robots" / "barrettwam.robot.xml"
    cache = tmp_path / "cache"
    first, log1 = run_until_description(robot, cache, search=openrave_data)
    uris = mesh_uris(first)
    assert len(uris) >= 2 * 17
    for uri in set(uris):
        path = Path(unquote(urlsplit(uri).path))
        assert uri.startswith("file://") and path.parent == cache.resolve(), uri
        assert len(trimesh.load(str(path), force="mesh").faces) > 0
    converted, cached = counts(log1)
    # one conversion per Inventor file the model names (a file of several colours: its parts too)
    from robot_bridge.formats import load, meshes

    model = load(robot, search_path=[str(openrave_data)])
    sources = {g.shape.path for link in model.links.values() for g in link.visuals + link.collisions
               if getattr(g.shape, "path", None) and meshes.is_inventor(g.shape.path)}
    assert converted == len(sources) == 12 and cached == 0
    assert len(set(uris)) > converted                   # barrettwam has files of several colours
    second, log2 = run_until_description(robot, cache, search=openrave_data)
    assert second == first
    assert counts(log2) == (0, converted)


def test_every_missing_mesh_is_a_warning(openrave_data, tmp_path):
    # bobcat_base_model3.wrl.or is absent upstream
    robot = openrave_data.parent / "test" / "testdata" / "bobcat.robot.xml"
    _, log = run_until_description(robot, tmp_path / "cache", search=openrave_data)
    warnings = [line for line in log.splitlines() if "WARN" in line]
    assert [w for w in warnings if "'bobcat_arm_vrml/bobcat_base_model3.wrl.or'" in w and "dropped" in w], log


def test_http_serves_the_cache_read_only_and_stops_with_the_node(openrave_data, tmp_path):
    import urllib.error
    import urllib.request

    from rclpy.parameter import Parameter

    from robot_bridge.nodes.description import DescriptionNode

    robot = openrave_data / "robots" / "barrettwam.robot.xml"
    secret = tmp_path / "secret.stl"
    secret.write_bytes(b"solid secret\nendsolid secret\n")
    cache = tmp_path / "cache"
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = DescriptionNode(context=context, parameter_overrides=[
            Parameter("description_file", value=str(robot)),
            Parameter("search_path", value=[str(openrave_data)]),
            Parameter("mesh_cache_dir", value=str(cache)), Parameter("mesh_uri", value="http"),
            Parameter("mesh_http_host", value="127.0.0.1")])
        try:
            uris = mesh_uris(node.model.urdf)
            base = node.mesh_server.base_url
            assert uris and all(u.startswith(base + "/") for u in uris)
            for uri in set(uris):
                with urllib.request.urlopen(uri, timeout=10) as r:
                    data = r.read()
                    assert r.headers["Content-Type"] == "model/stl"
                mesh = trimesh.load(trimesh.util.wrap_as_stream(data), file_type="stl", force="mesh")
                assert len(mesh.faces) > 0
            name = uris[0].rsplit("/", 1)[1]
            for path in ("/", "/../secret.stl", "/%2e%2e/secret.stl", f"/{name}/..", f"/x/{name}",
                         "/" + name.replace(".stl", ".txt"), f"/{'0' * 64}.stl"):
                with pytest.raises(urllib.error.HTTPError) as err:
                    urllib.request.urlopen(base + path, timeout=10)
                assert err.value.code == 404, path
        finally:
            node.destroy_node()
        with pytest.raises(urllib.error.URLError):       # stopped with the node
            urllib.request.urlopen(uris[0], timeout=5)
    finally:
        rclpy.shutdown(context=context)


def test_urdf_with_package_meshes_keeps_every_visual_as_written(corpus, tmp_path):
    """As robot_state_publisher: the corpus panda.urdf's package:// meshes stay as written (resolved where
    example-robot-data is installed, one warning each where it is not)."""
    from fixtures.installed import installed_file
    from rclpy.parameter import Parameter

    from robot_bridge.nodes.description import DescriptionNode

    path = corpus / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf"
    source = etree.parse(str(path)).getroot()
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = DescriptionNode(context=context, parameter_overrides=[
            Parameter("description_file", value=str(path)), Parameter("mesh_cache_dir", value=str(tmp_path))])
        try:
            published = etree.fromstring(node.model.urdf.encode())
            assert len(published.findall("link/visual")) == len(source.findall("link/visual")) == 11
            assert [m.get("filename") for m in published.iter("mesh")] == \
                [m.get("filename") for m in source.iter("mesh")]
            # unresolved: each mesh this host does not have installed (fixtures.installed: found without us)
            missing = {m.get("filename") for m in source.iter("mesh")
                       if installed_file(m.get("filename")) is None}
            assert len(node.model.report.unresolved) == len(missing)
            assert not node.model.report.meshes_converted and not list(tmp_path.iterdir())
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
