"""``robot-bridge moveit-config``: the files parse, and the controllers and joints MoveIt is told about are
exactly the actions and joints controller_node serves when started with the written controller_node.yaml
(observed on the running node: its action servers and each controller's controller_state topic)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from robot_bridge.bringup import DEFAULT_ROBOT, DEFAULT_SRDF
from robot_bridge.cli.main import main as cli
from robot_bridge.formats import srdf, urdf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "hardware"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nodes"))
from lwa_fixture import Harness  # noqa: E402

ACTION_TYPES = {"FollowJointTrajectory": "control_msgs/action/FollowJointTrajectory",
                "GripperCommand": "control_msgs/action/GripperCommand"}


def generate(args, out: Path) -> dict:
    assert cli(["moveit-config", *map(str, args), "-o", str(out)]) == 0
    files = {p.name: p for p in out.iterdir() if p.is_file()}
    loaded = {name: yaml.safe_load(path.read_text()) for name, path in files.items()
              if name.endswith(".yaml")}
    assert set(loaded) == {"moveit_controllers.yaml", "joint_limits.yaml", "kinematics.yaml",
                           "controller_node.yaml"}
    [urdf_file] = [p for n, p in files.items() if n.endswith(".urdf")]
    [srdf_file] = [p for n, p in files.items() if n.endswith(".srdf")]
    check = Path(sys.executable).parent / "check_urdf"
    if check.exists():
        assert subprocess.run([str(check), str(urdf_file)], capture_output=True).returncode == 0
    robot = urdf.read(urdf_file)
    semantics = srdf.read_srdf(srdf_file, robot)                # every name resolves in the URDF
    assert semantics.warnings == []
    return {"robot": robot, "semantics": semantics, **loaded}


def served(files: dict, during=None) -> dict:
    """Start controller_node with the written parameters; what it serves: action -> type, and the
    joint_names of each named controller's controller_state (``during(harness)`` runs while it is up)."""
    params = files["controller_node.yaml"]["controller_node"]["ros__parameters"]
    h = Harness(None, **params)
    try:
        from control_msgs.msg import JointTrajectoryControllerState
        from rclpy.action import get_action_server_names_and_types_by_node

        states, lock = {}, threading.Lock()

        def keep(topic):
            def callback(msg):
                with lock:
                    states[topic] = msg
            return callback
        for name in params["controllers"]:
            topic = f"/controller_node/{name}/controller_state"
            h.probe.create_subscription(JointTrajectoryControllerState, topic, keep(topic), 10)
        h.wait_for(lambda: len(states) == len(params["controllers"]), 10.0, "every controller_state")
        actions = {}
        deadline = time.monotonic() + 10.0
        count = len(params["controllers"]) + len(h.node.grippers)
        while time.monotonic() < deadline and len(actions) < count:
            actions = dict(get_action_server_names_and_types_by_node(h.probe, "controller_node", "/"))
            time.sleep(0.1)
        if during is not None:
            during(h)
        return {"actions": {k: v[0] for k, v in actions.items()},
                "state_joints": {t: list(m.joint_names) for t, m in states.items()},
                "grippers": {g.prefix: g.joint for g in h.node.grippers},
                "limits": dict(zip(h.node.joints, h.node.limits))}
    finally:
        h.close()


def check_names_match(files: dict, running: dict) -> dict:
    manager = files["moveit_controllers.yaml"]["moveit_simple_controller_manager"]
    names = manager["controller_names"]
    assert names and set(names) <= set(manager)
    expected_actions = {}
    for name in names:
        entry = manager[name]
        action = f"/{name}/{entry['action_ns']}"
        expected_actions[action] = ACTION_TYPES[entry["type"]]
        if entry["type"] == "FollowJointTrajectory":
            assert running["state_joints"][f"/{name}/controller_state"] == entry["joints"]
        else:
            assert entry["joints"] == [running["grippers"]["~/"] if name == "controller_node" else
                                       running["grippers"][f"~/{name.split('/', 1)[1]}/"]]
    assert running["actions"] == expected_actions            # nothing missing, nothing extra
    # joint_limits.yaml: the limits the controller enforces; kinematics.yaml: one solver per arm group
    for joint, entry in files["joint_limits.yaml"]["joint_limits"].items():
        assert entry["max_velocity"] == pytest.approx(running["limits"][joint].velocity)
        assert entry["max_acceleration"] == pytest.approx(running["limits"][joint].acceleration)
    arm_groups = {n.split("/", 1)[1] for n in names if manager[n]["type"] == "FollowJointTrajectory"}
    assert set(files["kinematics.yaml"]) == arm_groups
    assert arm_groups <= set(files["semantics"].groups)
    return manager


@pytest.mark.timeout(180)
def test_embedded_robot_with_its_srdf(tmp_path):
    files = generate([DEFAULT_ROBOT, "--srdf", DEFAULT_SRDF], tmp_path / "moveit")

    def execute(h):
        """What MoveIt's controller manager does with the config: a goal on <name>/<action_ns>."""
        from test_controller_actions import SUCCEEDED, Client

        entry = files["moveit_controllers.yaml"]["moveit_simple_controller_manager"]["controller_node/arm"]
        client = Client({"joint_names": entry["joints"], "points": [
            {"positions": [0.2] * 7, "velocities": [0.0] * 7, "time_from_start": 1.5}]},
            "/controller_node/arm/" + entry["action_ns"])
        try:
            result = client.result(timeout=60.0)
        finally:
            client.close()
        assert result["status"] == SUCCEEDED and result["error_code"] == 0, result
    running = served(files, execute)
    manager = check_names_match(files, running)
    assert manager["controller_node/arm"]["joints"] == [f"j{i}" for i in range(1, 8)]
    assert manager["controller_node"] == {"type": "GripperCommand", "action_ns": "gripper_cmd",
                                          "default": True, "joints": ["finger_joint"]}
    # the tool frame is a URDF link on a fixed joint from the effector; states name driven joints only
    tool = files["robot"].joints["arm_tool_joint"]
    assert (tool.type, tool.parent, tool.child) == ("fixed", "gripper_base", "arm_tool")
    assert tool.origin[:3, 3] == pytest.approx([0.0, 0.0, 0.1])
    states = {(s.name, s.group): s.values for s in files["semantics"].group_states}
    assert states[("home", "arm")] == {"j1": [0.0], "j2": [0.4], "j3": [0.0], "j4": [1.2], "j5": [0.0],
                                       "j6": [0.9], "j7": [0.0]}
    assert all("finger_right_joint" not in values and "gripper_mount" not in values
               for values in states.values())                 # no mimic, no passive joint


@pytest.mark.timeout(180)
def test_corpus_openrave_robot(openrave_data, tmp_path):
    robot_file = openrave_data / "robots" / "barrettwam.robot.xml"
    files = generate([robot_file, "--search-path", openrave_data], tmp_path / "moveit")
    running = served(files)
    manager = check_names_match(files, running)
    arm = manager["controller_node/arm"]["joints"]
    assert len(arm) == 7 and not set(arm) & {"JF1", "JF2", "JF3", "JF4"}
    assert manager["controller_node"]["type"] == "GripperCommand"
    # generated semantics: the arm chain ends at the tool link
    assert files["semantics"].groups["arm"].chains == [("wam0", "arm_tool")]
    assert {s.name for s in files["semantics"].group_states if s.group == "arm"} == {"home"}
