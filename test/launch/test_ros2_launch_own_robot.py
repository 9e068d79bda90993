"""A user's own robot through the real `ros2 launch` (issue 31): `package://` meshes under an activated venv,
.xacro files with xacro_args, and the launch arguments of `robot-bridge run`.

The launch file is this source tree's (run by path), so the test checks the code it sits next to; the nodes
are the venv's executables with this tree on PYTHONPATH.  Every launch is stopped with SIGINT, checked gone.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from fixtures.ros2_cli import (LATCHED, BASE_NODES as NODES, Ros2Process, echo_once, ros2_executable,  # noqa: E402
                               stop_daemon, wait_for_nodes, wait_until)
from fixtures.xacro_arm import XACRO, write_xacro_arm  # noqa: E402

rclpy = pytest.importorskip("rclpy")
pytestmark = pytest.mark.timeout(600)      # each test starts a whole bridge: minutes on 2 loaded cores

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "launch" / "bridge.launch.py"
# j1's origin in the fixture: base -> l1 is this translation and roll, then a rotation about z by j1
J1_XYZ, J1_ROLL = np.array([0.1, 0.2, 0.3]), 0.4


@pytest.fixture(scope="module", autouse=True)
def tools():
    ros2_executable()                                      # skips the module with the reason when absent
    yield
    stop_daemon()


def launch_env(**extra: str) -> dict[str, str]:
    """As `source .venv/bin/activate` leaves it: the venv prefix on AMENT_PREFIX_PATH; this tree's code."""
    prefixes = [sys.prefix, *extra.pop("prefixes", "").split(os.pathsep)]
    return {"AMENT_PREFIX_PATH": os.pathsep.join(p for p in prefixes if p), "PYTHONPATH": str(REPO), **extra}


def ament_prefix(root: Path, package: str) -> Path:
    """A ROS 2 install prefix holding ``package`` (share/<package>/package.xml, listed in its ament index)."""
    share = root / "share"
    (share / package / "meshes").mkdir(parents=True)
    (share / package / "package.xml").write_text(f'<package format="3"><name>{package}</name></package>\n')
    (share / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (share / "ament_index" / "resource_index" / "packages" / package).write_text("")
    return root


def stl_box(path: Path) -> None:
    import trimesh

    trimesh.creation.box([0.1, 0.1, 0.1]).export(str(path))


class TfListener:
    """A hidden node (own context) recording base->l1 from /tf and j1 from /joint_states by stamp."""

    def __init__(self):
        from rclpy.executors import SingleThreadedExecutor

        from fixtures.spinning import Spinner
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage

        from robot_bridge.ros import qos

        self.context = rclpy.Context()
        self.context.init()
        self.node = rclpy.create_node("_own_robot_test_listener", context=self.context)
        self.lock = threading.Lock()
        self.tf: dict[int, np.ndarray] = {}
        self.q: dict[int, float] = {}
        self.node.create_subscription(TFMessage, "/tf", self._on_tf, qos.tf_qos())
        self.node.create_subscription(JointState, "/joint_states", self._on_js, qos.joint_states_qos())
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor, name="listener-spin")

    @staticmethod
    def _ns(stamp) -> int:
        return stamp.sec * 10**9 + stamp.nanosec

    def _on_tf(self, msg):
        for t in msg.transforms:
            if t.child_frame_id == "l1" and t.header.frame_id == "base":
                r, p = t.transform.rotation, t.transform.translation
                with self.lock:
                    self.tf[self._ns(t.header.stamp)] = np.array([p.x, p.y, p.z, r.x, r.y, r.z, r.w])

    def _on_js(self, msg):
        if "j1" in msg.name:
            with self.lock:
                self.q[self._ns(msg.header.stamp)] = msg.position[list(msg.name).index("j1")]

    def pairs(self) -> list[tuple[float, np.ndarray]]:
        with self.lock:
            return [(self.q[s], self.tf[s]) for s in sorted(set(self.q) & set(self.tf))]

    def close(self):
        self.spinner.close([self.node], self.context)     # the spin ends before the node goes


def expected_l1(q: float) -> np.ndarray:
    """base -> l1 by hand: translation J1_XYZ, rotation roll(J1_ROLL) * yaw(q), as (x y z qx qy qz qw)."""
    roll = np.array([math.sin(J1_ROLL / 2), 0, 0, math.cos(J1_ROLL / 2)])
    yaw = np.array([0, 0, math.sin(q / 2), math.cos(q / 2)])
    x1, y1, z1, w1 = roll
    x2, y2, z2, w2 = yaw
    quat = np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])
    return np.concatenate([J1_XYZ, quat])


def same_pose(a: np.ndarray, b: np.ndarray) -> bool:
    return np.allclose(a[:3], b[:3], atol=1e-9) and min(np.abs(a[3:] - b[3:]).max(),
                                                        np.abs(a[3:] + b[3:]).max()) < 1e-9


URDF = """<robot name="arm">
  <link name="base"><visual><geometry><mesh filename="package://present_pkg/meshes/base.stl"/></geometry></visual>
  </link>
  <link name="l1">
    <visual><geometry><mesh filename="package://absent_pkg/meshes/l1.dae"/></geometry></visual>
    <visual><geometry><mesh filename="package://absent_pkg/meshes/l1_cover.stl"/></geometry></visual>
  </link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.4 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>
"""


def test_package_meshes_load_under_an_activated_venv(tmp_path):
    """Issue 31: with the venv's AMENT_PREFIX_PATH, a mesh of a package the host lacks was mapped onto the
    venv's share folder and refused as unsafe.  Now: an installed package's meshes resolve through the ament
    index (and are published as written), a missing package's meshes are kept with one warning each."""
    prefix = ament_prefix(tmp_path / "install", "present_pkg")
    stl_box(prefix / "share" / "present_pkg" / "meshes" / "base.stl")
    robot = tmp_path / "robot" / "urdf" / "arm.urdf"
    robot.parent.mkdir(parents=True)
    robot.write_text(URDF)
    launch = Ros2Process(["launch", str(LAUNCH_FILE), f"robot:={robot}"], tmp_path / "launch.log",
                         **launch_env(prefixes=str(prefix)))
    listener = TfListener()
    try:
        wait_for_nodes(NODES, launch, timeout=180)
        launch.wait_for_log(r"robot_description after|\[ERROR\]", timeout=120)
        assert "UnsafeInputError" not in launch.log and "[ERROR]" not in launch.log, launch.log
        urdf = echo_once("/robot_description", "std_msgs/msg/String", "data", "--full-length", *LATCHED,
                         timeout=60)
        meshes = re.findall(r'filename="([^"]+)"', urdf)
        assert sorted(meshes) == sorted(["package://present_pkg/meshes/base.stl",
                                         "package://absent_pkg/meshes/l1.dae",
                                         "package://absent_pkg/meshes/l1_cover.stl"]), urdf
        pairs = wait_until(listener.pairs, 120, what="/tf and /joint_states of one stamp")
        for q, pose in pairs:
            assert same_pose(pose, expected_l1(q)), (q, pose, expected_l1(q))
        log = launch.log
        assert "UnsafeInputError" not in log and "Traceback" not in log, log
        for missing in ("package://absent_pkg/meshes/l1.dae", "package://absent_pkg/meshes/l1_cover.stl"):
            lines = [line for line in log.splitlines() if missing in line]
            assert len(lines) == 1 and "WARN" in lines[0], (missing, lines)
        assert "present_pkg" not in log, log          # found: nothing to say
    finally:
        listener.close()
        assert not launch.close()


def test_every_run_flag_is_a_launch_argument_listed_by_show_args():
    """Issue 31: bridge.launch.py had no params_file, search_path, keep_going (flags of robot-bridge run)."""
    import argparse

    from fixtures.ros2_cli import ros2

    from robot_bridge.cli.verbs import run

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    # run's own output, which ros2 launch does not print: its ready line (and how long it waits for it)
    run_only = {"ready_timeout"}
    flags = {a.dest for a in parser._actions if a.dest != "help"}
    assert run_only <= flags
    shown = ros2("launch", str(LAUNCH_FILE), "--show-args", timeout=120).stdout
    arguments = set(re.findall(r"^\s+'(\w+)':$", shown, flags=re.M))
    assert flags - run_only - arguments == set(), shown
    assert {"params_file", "search_path", "keep_going", "xacro_args"} <= arguments


def test_xacro_robot_with_xacro_args_params_file_and_search_path(tmp_path):
    """Issue 31: robot:=arm.urdf.xacro failed (read as URDF).  Now it is expanded by xacro with
    xacro_args:=...; params_file and search_path reach the nodes as `robot-bridge run`'s flags do."""
    from fixtures.ros2_cli import PARAM, ros2

    robot = write_xacro_arm(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    params = tmp_path / "params.yaml"
    params.write_text("controller_node:\n  ros__parameters:\n    state_rate: 37.0\n")
    launch = Ros2Process(["launch", str(LAUNCH_FILE), f"robot:={robot}", "xacro_args:=reach:=0.75",
                          f"params_file:={params}", f"search_path:={extra}"], tmp_path / "launch.log",
                         **launch_env())
    try:
        wait_for_nodes(NODES, launch, timeout=180)
        launch.wait_for_log(r"robot_description after|\[ERROR\]", timeout=120)
        assert "[ERROR]" not in launch.log, launch.log
        urdf = echo_once("/robot_description", "std_msgs/msg/String", "data", "--full-length", *LATCHED,
                         timeout=60)
        from lxml import etree

        root = etree.fromstring(urdf.encode())
        assert root.get("name") == "xarm"
        assert sorted(link.get("name") for link in root.iter("link")) == ["base", "l1"]
        origin = root.find("joint[@name='l1_joint']/origin")
        assert np.allclose([float(v) for v in origin.get("xyz").split()], [0, 0, 0.75]), urdf
        assert "xacro:" not in urdf and "${" not in urdf
        get = ros2("param", "get", "/controller_node", "state_rate", *PARAM).stdout
        assert "37.0" in get, get
        for node in NODES:
            got = ros2("param", "get", node, "search_path", *PARAM).stdout
            assert str(extra) in got, (node, got)
        got = ros2("param", "get", "/description_node", "xacro_args", *PARAM).stdout
        assert "reach:=0.75" in got, got
        assert "Traceback" not in launch.log, launch.log
    finally:
        assert not launch.close()


def test_keep_going_false_stops_a_launch_whose_robot_does_not_load(tmp_path):
    robot = write_xacro_arm(tmp_path, XACRO.replace("$(arg reach)", "${undefined_length}"))
    launch = Ros2Process(["launch", str(LAUNCH_FILE), f"robot:={robot}", "keep_going:=false"],
                         tmp_path / "launch.log", **launch_env())
    try:
        status = launch.process.wait(200)
        assert status != 0, launch.log
        assert not launch.started(), launch.log
        # xacro's error, with the file and the line of the expression
        assert re.search(rf"{re.escape(str(robot))}:6: xacro: name 'undefined_length' is not defined",
                         launch.log), launch.log
    finally:
        launch.close()
