"""The bridge driven by the real ros2 tools, as a user drives it: `ros2 launch`, `ros2 run`, `ros2 node/topic/
service/param`, each a separate process on this run's ROS_DOMAIN_ID with localhost discovery.

Every process started is stopped (SIGINT, as Ctrl-C) and checked gone.  What a rate or a motion is, is read
from message stamps and positions recorded by a listener, never from wall-clock sleeps.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from lxml import etree

from fixtures.ros2_cli import (LATCHED, NODES, PARAM, Ros2Process, assert_stopped_cleanly, echo_once,  # noqa: E402
                               ros2, ros2_executable, stop_daemon, urdf_links, wait_for_nodes, wait_until)

from robot_bridge import bringup  # noqa: E402
from robot_bridge.formats import load  # noqa: E402

rclpy = pytest.importorskip("rclpy")


@pytest.fixture(scope="module", autouse=True)
def tools():
    ros2_executable()                                      # skips the module with the reason when absent
    yield
    stop_daemon()


class Listener:
    """A hidden rclpy node (own context) in the test process, recording /tf and /joint_states."""

    def __init__(self, namespace: str = ""):
        from rclpy.executors import SingleThreadedExecutor

        from fixtures.spinning import Spinner
        from sensor_msgs.msg import JointState
        from tf2_msgs.msg import TFMessage

        from robot_bridge.ros import qos

        self.context = rclpy.Context()
        self.context.init()
        self.node = rclpy.create_node("_ros2_tools_test_listener", namespace=namespace, context=self.context)
        self.lock = threading.Lock()
        self.tf: list[tuple[str, int]] = []               # (child frame, stamp ns)
        self.joint_states: list = []
        self.node.create_subscription(TFMessage, "/tf", self._on_tf, qos.tf_qos())
        self.node.create_subscription(JointState, "joint_states", self._on_joint_states,
                                      qos.joint_states_qos())
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor, name="listener-spin")

    def _on_tf(self, msg):
        with self.lock:
            self.tf += [(t.child_frame_id, t.header.stamp.sec * 10**9 + t.header.stamp.nanosec)
                        for t in msg.transforms]

    def _on_joint_states(self, msg):
        with self.lock:
            self.joint_states.append(dict(zip(msg.name, msg.position)))

    def tf_stamps(self, frame: str, since: int = 0) -> np.ndarray:
        with self.lock:
            return np.array(sorted({s for f, s in self.tf[since:] if f == frame}), dtype=np.int64)

    def latest_positions(self) -> dict | None:
        with self.lock:
            return self.joint_states[-1] if self.joint_states else None

    def close(self):
        if not self.context.ok():
            return
        self.spinner.close([self.node], self.context)     # the spin ends before the node goes


# -- ros2 launch on the embedded robot --------------------------------------------------------------------

@pytest.fixture(scope="module")
def trusted(tmp_path_factory):
    """A folder on the launch's $OPENRAVE_DATA: trusted at launch, description_file may name files in it."""
    return tmp_path_factory.mktemp("trusted")


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, trusted):
    data = os.pathsep.join([str(trusted), *filter(None, [os.environ.get("OPENRAVE_DATA")])])
    launch = Ros2Process(["launch", "robot_bridge", "bridge.launch.py"],
                         tmp_path_factory.mktemp("launch") / "launch.log", OPENRAVE_DATA=data)
    listener = Listener()
    try:
        wait_for_nodes(NODES, launch)
        yield launch, listener
    finally:
        listener.close()
        assert not launch.close()                 # nothing left running after the interrupt


def test_node_list_shows_the_launched_nodes(embedded):
    # a single snapshot can miss a participant under load: the first listing with all of them has only them
    assert sorted(wait_for_nodes(NODES, embedded[0])) == NODES


def test_robot_description_is_a_urdf_with_the_models_links(embedded):
    urdf = echo_once("/robot_description", "std_msgs/msg/String", "data", *LATCHED)
    model = load(str(bringup.DEFAULT_ROBOT))
    assert urdf_links(urdf) == sorted(model.links)
    assert len(model.links) == 11


def test_home_service_brings_joint_states_home(embedded):
    launch, listener = embedded
    wait_until(listener.latest_positions, 60, what="/joint_states")
    names = sorted(listener.latest_positions())
    away = {name: 0.02 for name in names}                  # within every joint's limits, away from home
    # a few times: `pub --once` may end before its one message is delivered
    ros2("topic", "pub", "--times", "3", "--rate", "2", "-w", "1", "/controller_node/joint_trajectory",
         "trajectory_msgs/msg/JointTrajectory",
         "{joint_names: [%s], points: [{positions: [%s], time_from_start: {sec: 1}}]}"
         % (", ".join(names), ", ".join(str(v) for v in away.values())))

    def reach(target: dict, what: str):
        def there():
            positions = listener.latest_positions()
            return all(abs(positions[n] - target[n]) < 1e-3 for n in target)
        try:
            wait_until(there, 60, what=f"/joint_states at {what} {target}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last {listener.latest_positions()}\n{launch.log[-3000:]}") from None
    reach(away, "the trajectory's end")

    result = ros2("service", "call", "/controller_node/home", "std_srvs/srv/Trigger")
    assert "success=True" in result.stdout, result.stdout
    # README: home is the SRDF group state 'home' where it names a joint, else the description's initial value
    model = load(str(bringup.DEFAULT_ROBOT))
    srdf = etree.parse(str(bringup.DEFAULT_SRDF), etree.XMLParser(resolve_entities=False, no_network=True))
    in_srdf = {j.get("name"): float(j.get("value"))
               for j in srdf.getroot().findall("group_state[@name='home']/joint")}
    home = {name: in_srdf.get(name, float(model.joints[name].initial[0])) for name in names}
    assert home != away and any(home.values())
    reach(home, "home")


def test_param_set_publish_frequency_changes_the_tf_rate(embedded):
    """/tf follows /joint_states (50 Hz) through the publish_frequency gate on message stamps: at the
    default 20 Hz no two /tf stamps of a joint are closer than 50 ms; at 50 Hz they are (never under
    20 ms)."""
    _, listener = embedded
    frame = "link1"                                        # child of the moving joint j1

    def record(count: int) -> np.ndarray:
        since = len(listener.tf)
        wait_until(lambda: listener.tf_stamps(frame, since).size >= count, 60,
                   what=f"{count} /tf messages of {frame}")
        return listener.tf_stamps(frame, since)

    assert ros2("param", "get", "/description_node", "publish_frequency", *PARAM).stdout.split()[-1] \
        == "20.0"
    before = np.diff(record(21)) / 1e9
    result = ros2("param", "set", "/description_node", "publish_frequency", "50.0", *PARAM)
    assert "Set parameter successful" in result.stdout, result.stdout
    record(5)                                              # what was in flight at the change
    after = np.diff(record(41)) / 1e9
    assert before.min() >= 0.05 - 1e-6, before
    assert after.min() >= 0.02 - 1e-6, after
    # at 20 Hz not one interval is under 50 ms; at 50 Hz they are wherever /joint_states kept up (under load
    # the controller's own 50 Hz stretches, so how many is not a fixed number)
    assert (after < 0.05 - 1e-6).sum() >= 3, (before, after)


def test_param_set_broken_description_file_is_refused_and_the_old_model_kept(embedded, trusted):
    broken = trusted / "broken.robot.xml"
    broken.write_text('<Robot name="broken">\n  <KinBody>\n    <Body name="a">\n  </KinBody>\n</Robot>\n')
    before = echo_once("/robot_description", "std_msgs/msg/String", "data", *LATCHED)
    result = ros2("param", "set", "/description_node", "description_file", str(broken), *PARAM,
                  check=False)
    (reason,) = result.stderr.strip().splitlines()
    assert reason.startswith("Setting parameter failed: "), reason
    assert f"{broken}:4:" in reason and "KinBody" in reason, reason        # the file, line and what is wrong
    kept = ros2("param", "get", "/description_node", "description_file", *PARAM).stdout
    assert str(bringup.DEFAULT_ROBOT) in kept
    assert echo_once("/robot_description", "std_msgs/msg/String", "data", *LATCHED) == before


def test_sigint_to_ros2_launch_stops_every_node_cleanly(embedded):
    """Last on the shared launch: Ctrl-C, then every node exits 0 within 10 s and nothing is left."""
    launch, listener = embedded
    listener.close()                                       # nothing of this launch stays in the domain
    assert_stopped_cleanly(launch)
