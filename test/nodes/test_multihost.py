"""Two "hosts": description_node in one network namespace, a subscriber in another, joined by a
veth pair.  Fast DDS runs over UDPv4 only (no shared memory: the namespaces share /dev/shm) with
the peer addresses as initial peers, written into a profile in tmp.  robot_description,
/tf_static and /tf must arrive across the link.  Needs root and ``ip netns``; skips otherwise."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from robot_bridge.bringup import dds_profile_environment  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ROBOT = REPO / "test" / "fixtures" / "description" / "two_link.robot.xml"
TIMEOUT = 60.0

PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <transport_descriptors>
    <transport_descriptor><transport_id>udp</transport_id><type>UDPv4</type></transport_descriptor>
  </transport_descriptors>
  <participant profile_name="multihost" is_default_profile="true">
    <rtps>
      <participantID>{participant}</participantID>
      <userTransports><transport_id>udp</transport_id></userTransports>
      <useBuiltinTransports>false</useBuiltinTransports>
      <builtin><initialPeersList>{peers}</initialPeersList></builtin>
    </rtps>
  </participant>
</profiles>
"""
PEER = "<locator><udpv4><address>{ip}</address><port>{port}</port></udpv4></locator>"

SUBSCRIBER = r"""
import json, sys, time
import rclpy
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from robot_bridge.ros import qos

rclpy.init()
node = rclpy.create_node("multihost_listener")
got = {}
node.create_subscription(String, "/robot_description", lambda m: got.setdefault("robot_description", m.data),
                         qos.description_qos())
node.create_subscription(TFMessage, "/tf_static",
                         lambda m: got.setdefault("tf_static", [t.child_frame_id for t in m.transforms]),
                         qos.tf_static_listener_qos())
node.create_subscription(TFMessage, "/tf",
                         lambda m: got.setdefault("tf", [t.child_frame_id for t in m.transforms]),
                         qos.tf_qos())
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and len(got) < 3:
    rclpy.spin_once(node, timeout_sec=0.1)
got.setdefault("_nodes", node.get_node_names())
print(json.dumps(got))
sys.exit(0 if len(got) == 4 else 1)
"""


MESH_LISTENER = r"""
import json, sys, time, urllib.error, urllib.request
import rclpy
import trimesh
from lxml import etree
from std_msgs.msg import String
from robot_bridge.ros import qos

rclpy.init()
node = rclpy.create_node("multihost_mesh_listener")
got = []
node.create_subscription(String, "/robot_description", lambda m: got.append(m.data), qos.description_qos())
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and not got:
    rclpy.spin_once(node, timeout_sec=0.1)
if not got:
    print(json.dumps({"error": "no robot_description", "nodes": node.get_node_names()}))
    sys.exit(1)
uris = [m.get("filename") for m in etree.fromstring(got[0].encode()).iter("mesh")]
faces = {}
for uri in sorted(set(uris)):
    with urllib.request.urlopen(uri, timeout=20) as r:
        mesh = trimesh.load(trimesh.util.wrap_as_stream(r.read()), file_type="stl", force="mesh")
    faces[uri] = len(mesh.faces)
base = uris[0].rsplit("/", 1)[0]
outside = {}
for path in ("/", "/../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/robot.urdf"):
    try:
        urllib.request.urlopen(base + path, timeout=20)
        outside[path] = 200
    except urllib.error.HTTPError as exc:
        outside[path] = exc.code
print(json.dumps({"uris": uris, "faces": faces, "outside": outside}))
"""

PROBE = r"""
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
    print("served")
except urllib.error.HTTPError as exc:
    print(f"http {exc.code}")
except OSError as exc:
    print(f"refused {exc}")
"""


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20)


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 'ip' command not found"
    probe = f"rbprobe{os.getpid()}"
    res = _run("ip", "netns", "add", probe)
    if res.returncode != 0:
        return f"'ip netns add' failed: {res.stderr.strip()}"
    _run("ip", "netns", "del", probe)
    return None


@pytest.fixture
def two_hosts():
    reason = _netns_unavailable()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
    hosts = {"a": (f"rbA{tag}", f"vA{tag}", f"{subnet}.1"), "b": (f"rbB{tag}", f"vB{tag}", f"{subnet}.2")}
    try:
        for ns, _veth, _ip in hosts.values():
            assert _run("ip", "netns", "add", ns).returncode == 0
        (na, va, _), (nb, vb, _) = hosts["a"], hosts["b"]
        steps = [("ip", "link", "add", va, "netns", na, "type", "veth", "peer", "name", vb, "netns", nb)]
        for ns, veth, ip in hosts.values():
            steps += [("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", veth),
                      ("ip", "-n", ns, "link", "set", veth, "up", "multicast", "on"),
                      ("ip", "-n", ns, "link", "set", "lo", "up")]
        for step in steps:
            res = _run(*step)
            assert res.returncode == 0, f"{' '.join(step)}: {res.stderr}"
        # Fast DDS lists the interfaces when a participant starts: wait until both ends are really up
        deadline = time.monotonic() + 10.0
        while not all("state UP" in _run("ip", "-n", ns, "link", "show", veth).stdout
                      for ns, veth, _ip in hosts.values()):
            assert time.monotonic() < deadline, "veth pair did not come up"
            time.sleep(0.05)
        yield hosts
    finally:
        for ns, _veth, _ip in hosts.values():
            _run("ip", "netns", "del", ns)        # removes its end of the veth pair too


def test_description_and_tf_cross_namespaces(two_hosts, tmp_path):
    profiles = _profiles(two_hosts, tmp_path)
    script = tmp_path / "listener.py"
    script.write_text(SUBSCRIBER)
    env = _env()
    ns_a, ns_b = two_hosts["a"][0], two_hosts["b"][0]
    node = subprocess.Popen(
        ["ip", "netns", "exec", ns_a, sys.executable, "-m", "robot_bridge.nodes.description", "--ros-args",
         "-p", f"description_file:={ROBOT}", "-p", "publish_default_joint_states:=true"],
        env={**env, **dds_profile_environment(profiles["a"])}, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        # the listener starts once the node is up (its first log line)
        ready = node.stdout.readline()
        assert "links" in ready, f"description_node did not start: {ready}"
        listener = subprocess.run(["ip", "netns", "exec", ns_b, sys.executable, str(script), str(TIMEOUT)],
                                  env={**env, **dds_profile_environment(profiles["b"])}, cwd=REPO,
                                  capture_output=True, text=True, timeout=TIMEOUT + 30)
    finally:
        node_out = _stop(node, timeout=10)
    assert listener.returncode == 0, \
        f"listener: {listener.stdout} {listener.stderr[-1500:]}\nnode: {node_out[-1500:]}"
    got = json.loads(listener.stdout.strip().splitlines()[-1])
    assert '<robot name="two_link"' in got["robot_description"]
    assert "tip" in got["tf_static"]
    assert "upper" in got["tf"]


def _stop(node: subprocess.Popen, timeout: float) -> str:
    """Terminate the node (killed after ``timeout`` s) and return its output."""
    node.terminate()
    try:
        return node.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        node.kill()
        return node.communicate()[0]


def _env() -> dict:
    """This process's environment for a node in a namespace: discovery over the subnet, Fast DDS."""
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
           "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    env.pop("ROS_STATIC_PEERS", None)
    return env


def _profiles(two_hosts, tmp_path) -> dict:
    """One profile per "host" with a fixed participant id and full initial-peer locators (RTPS metatraffic
    unicast port 7400 + 250 domain + 10 + 2 id): discovery does not depend on which ids Fast DDS would pick
    or on the size of its default initial-peers port range."""
    domain = int(os.environ.get("ROS_DOMAIN_ID", "0"))
    peers = "".join(PEER.format(ip=ip, port=7400 + 250 * domain + 10 + 2 * i)
                    for i, (_ns, _v, ip) in enumerate(two_hosts.values()))
    profiles = {}
    for i, host in enumerate(("a", "b")):
        profiles[host] = tmp_path / f"fastdds_multihost_{host}.xml"
        profiles[host].write_text(PROFILE.format(peers=peers, participant=i))
    return profiles


def test_meshes_over_http_across_namespaces(two_hosts, tmp_path):
    """mesh_uri http: the listener host fetches every mesh robot_description names from the bridge host and
    loads it; paths outside the cache are 404; the server stops with the node."""
    openrave = REPO.parent / "shared" / "corpus" / "openrave" / "src"
    if not openrave.is_dir():
        pytest.skip("robot corpus not found")
    robot = openrave / "robots" / "barrettwam.robot.xml"
    profiles = _profiles(two_hosts, tmp_path)
    (tmp_path / "listener.py").write_text(MESH_LISTENER)
    (tmp_path / "probe.py").write_text(PROBE)
    env = _env()
    (ns_a, _, ip_a), (ns_b, _, _) = two_hosts["a"], two_hosts["b"]
    node = subprocess.Popen(
        ["ip", "netns", "exec", ns_a, sys.executable, "-m", "robot_bridge.nodes.description", "--ros-args",
         "-p", f"description_file:={robot}", "-p", f"search_path:=[{openrave}]",
         "-p", f"mesh_cache_dir:={tmp_path / 'cache'}", "-p", "mesh_uri:=http",
         "-p", f"mesh_http_host:={ip_a}", "-p", "mesh_http_port:=8642"],
        env={**env, **dds_profile_environment(profiles["a"])}, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    b_env = {**env, **dds_profile_environment(profiles["b"])}
    try:
        started = [node.stdout.readline()]
        while started[-1] and "meshes:" not in started[-1]:      # loaded and serving
            started.append(node.stdout.readline())
        assert "served at" in started[-1], f"description_node did not start: {''.join(started)}"
        listener = subprocess.run(["ip", "netns", "exec", ns_b, sys.executable, str(tmp_path / "listener.py"),
                                   str(TIMEOUT)], env=b_env, cwd=REPO, capture_output=True, text=True,
                                  timeout=TIMEOUT + 120)
    finally:
        node_out = _stop(node, timeout=20)
    assert listener.returncode == 0, \
        f"listener: {listener.stdout} {listener.stderr[-1500:]}\nnode: {node_out[-1500:]}"
    got = json.loads(listener.stdout.strip().splitlines()[-1])
    uris = got["uris"]
    assert len(uris) >= 2 * 17 and all(u.startswith(f"http://{ip_a}:8642/") for u in uris)
    assert set(got["faces"]) == set(uris) and all(n > 0 for n in got["faces"].values())
    assert set(got["outside"].values()) == {404}, got["outside"]
    after = subprocess.run(["ip", "netns", "exec", ns_b, sys.executable, str(tmp_path / "probe.py"), uris[0]],
                           env=b_env, capture_output=True, text=True, timeout=60)
    assert after.stdout.startswith("refused"), after.stdout + after.stderr
