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

from fixtures.hardware.lwa_fixture import Harness

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
        from fixtures.hardware.controller import SUCCEEDED, Client

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
    # the one manipulator's gripper: its first gripper joint (barrettwam.robot.xml <joints>JF1 JF2 JF3 JF4)
    assert manager["controller_node"] == {"type": "GripperCommand", "action_ns": "gripper_cmd",
                                          "default": True, "joints": ["JF1"]}
    assert [n for n, e in manager.items() if isinstance(e, dict) and e.get("type") == "GripperCommand"] == \
        ["controller_node"]
    # generated semantics: the arm chain ends at the tool link
    assert files["semantics"].groups["arm"].chains == [("wam0", "arm_tool")]
    assert {s.name for s in files["semantics"].group_states if s.group == "arm"} == {"home"}


# -- issue 32: a complete config from every robot ---------------------------------------------------------
PANDA = ("moveit_resources", "panda_description", "urdf", "panda.urdf")
PANDA_SRDF = ("moveit_resources", "panda_moveit_config", "config", "panda.srdf")
PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]


def run_cli(args, capsys) -> tuple[int, str, str]:
    code = cli(["moveit-config", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.timeout(180)
def test_plain_urdf_groups_guessed_from_the_longest_chain(corpus, tmp_path, capsys):
    """Without an SRDF (main wrote ``controller_names: []`` and an empty kinematics.yaml, exit 0): the
    longest serial chain becomes group ``arm``, said on stdout; the fingers past the hand are named as
    such, and the missing gripper is said."""
    out = tmp_path / "moveit"
    code, stdout, _ = run_cli([corpus.joinpath(*PANDA), "-o", out], capsys)
    assert code == 0
    assert "guessed (no SRDF groups): group 'arm': the longest serial chain of driven joints, " \
           "panda_link0 -> panda_hand (7 joints" in stdout
    assert "branches into panda_finger_joint1" in stdout
    assert "note: no gripper could be told" in stdout
    manager = yaml.safe_load((out / "moveit_controllers.yaml").read_text())
    manager = manager["moveit_simple_controller_manager"]
    assert manager["controller_names"] == ["controller_node/arm"]
    assert manager["controller_node/arm"]["joints"] == PANDA_ARM
    kinematics = yaml.safe_load((out / "kinematics.yaml").read_text())
    assert kinematics == {"arm": {"kinematics_solver": "kdl_kinematics_plugin/KDLKinematicsPlugin",
                                  "kinematics_solver_search_resolution": 0.005,
                                  "kinematics_solver_timeout": 0.005}}
    semantics = srdf.read_srdf(out / "panda.srdf", urdf.read(out / "panda.urdf"))
    assert semantics.groups["arm"].chains == [("panda_link0", "panda_hand")]


@pytest.mark.timeout(180)
def test_plain_urdf_with_srdf_gripper_gets_a_served_gripper_controller(corpus, tmp_path):
    """A plain URDF with an SRDF end effector (panda ``hand``): main gave the arm a controller and the
    gripper none; now ``controller_node`` GripperCommand on panda_finger_joint1, and the running
    controller_node serves exactly the actions the config names."""
    files = generate([corpus.joinpath(*PANDA), "--srdf", corpus.joinpath(*PANDA_SRDF)], tmp_path / "moveit")
    manager = check_names_match(files, served(files))
    assert manager["controller_names"] == ["controller_node/panda_arm", "controller_node"]
    assert manager["controller_node/panda_arm"]["joints"] == PANDA_ARM
    assert manager["controller_node"] == {"type": "GripperCommand", "action_ns": "gripper_cmd",
                                          "default": True, "joints": ["panda_finger_joint1"]}


@pytest.mark.timeout(180)
def test_hpp_panda_srdf_groups_get_their_controllers_and_kinematics(corpus, tmp_path, capsys):
    """example-robot-data's Panda with an SRDF written as hpp users write it (its end effector names the
    group ``arm``): main ignored the SRDF's groups (``guessed (no SRDF groups): group 'chain'``), so ``arm``
    had no kinematics; now ``arm`` is the FollowJointTrajectory controller of the 7 arm joints with its KDL
    entry, the finger the GripperCommand, the end effector refused as a gripper with the reason, and the
    running controller_node serves exactly those actions."""
    robot = corpus / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf"
    hpp = Path(__file__).resolve().parents[1] / "fixtures" / "srdf" / "panda_hpp.srdf"
    out = tmp_path / "moveit"
    code, stdout, _ = run_cli([robot, "--srdf", hpp, "-o", out], capsys)
    assert code == 0 and "guessed" not in stdout, stdout
    assert "end effector 'end_effector' (group 'arm', parent link 'panda_hand_tcp') refused as a gripper" \
        in stdout
    files = generate([robot, "--srdf", hpp], tmp_path / "again")
    manager = check_names_match(files, served(files))
    assert manager["controller_names"] == ["controller_node/arm", "controller_node"]
    assert manager["controller_node/arm"]["joints"] == PANDA_ARM
    assert manager["controller_node"]["joints"] == ["panda_finger_joint1"]
    assert set(files["kinematics.yaml"]) == {"arm"}
    assert files["controller_node.yaml"]["controller_node"]["ros__parameters"]["controllers"] == ["arm"]
    assert files["semantics"].state("default").group == "arm"


@pytest.mark.parametrize("parts, reason", [
    (("hpp_tutorial", "urdf", "box.urdf"), "robot 'box' has nothing to plan for: no driven joint"),
    (("openrave", "src", "robots", "barretthand.robot.xml"),
     "nothing to plan for: no driven joint (active 1-DOF, not mimic or passive) outside its grippers"),
])
def test_nothing_to_plan_for_exits_nonzero_with_the_reason(corpus, tmp_path, capsys, parts, reason):
    out = tmp_path / "moveit"
    code, stdout, stderr = run_cli([corpus.joinpath(*parts), "--search-path", corpus / "openrave" / "src",
                                    "-o", out], capsys)
    assert code == 2 and reason in stderr, stderr
    assert not out.exists()                        # nothing written


def corpus_robot_files(corpus: Path) -> list[Path]:
    """Every robot description of the corpus: OpenRAVE robots and environments (a whole scene read as one
    robot), URDF, COLLADA (mesh-only .dae documents do not read: skipped as broken) and zipped COLLADA."""
    return sorted(p for pattern in ("*.robot.xml", "*.env.xml", "*.urdf", "*.dae", "*.zae")
                  for p in corpus.rglob(pattern))


@pytest.mark.timeout(900)
def test_every_corpus_robot_gets_groups_controllers_and_kinematics(corpus):
    """Every robot of the corpus that reads: with a driven joint outside its manipulators' grippers (a
    manipulator or a chain to plan for) it gets planning groups, each with a FollowJointTrajectory
    controller of driven joints and a kinematics entry, and a GripperCommand controller on each
    manipulator's driving gripper joint; otherwise NothingToPlanError with the reason (what the command
    prints before exiting 2)."""
    from robot_bridge.errors import DescriptionError, NothingToPlanError
    from robot_bridge.formats import load
    from robot_bridge.formats.moveit_config import plan_moveit_config
    from robot_bridge.model.groups import driven_joints

    planned, refused = [], []
    for path in corpus_robot_files(corpus):
        try:
            robot = load(path, search_path=[corpus / "openrave" / "src"])
        except DescriptionError:
            continue                                   # the corpus's broken files (their own tests)
        driven = driven_joints(robot)
        gripper = {j for m in robot.manipulators.values() for j in m.gripper_joints}
        if not [j for j in driven if j not in gripper]:
            with pytest.raises(NothingToPlanError, match="nothing to plan for"):
                plan_moveit_config(robot)
            refused.append(path.name)
            continue
        plan = plan_moveit_config(robot)
        controllers = plan.controllers()
        arms = {n: e for n, e in controllers.items() if e["type"] == "FollowJointTrajectory"}
        assert arms and all(e["joints"] and set(e["joints"]) <= set(driven) - gripper
                            for e in arms.values()), path
        assert {n.split("/", 1)[1] for n in arms} <= set(plan.semantics.groups), path
        # one GripperCommand per manipulator whose first gripper joint is driven, on that joint: named
        # controller_node alone, else controller_node/<manipulator>_gripper (no SRDF: nothing else is one)
        grippers = {n: e for n, e in controllers.items() if e["type"] == "GripperCommand"}
        expected = {m.name: m.gripper_joints[0] for m in robot.manipulators.values()
                    if m.gripper_joints and m.gripper_joints[0] in driven}
        if robot.semantics is None:
            names = {m: "controller_node" if len(expected) == 1 else f"controller_node/{m}_gripper"
                     for m in expected}
            assert grippers == {names[m]: {"type": "GripperCommand", "action_ns": "gripper_cmd",
                                           "default": True, "joints": [j]} for m, j in expected.items()}, path
        else:
            assert {e["joints"][0] for e in grippers.values()} >= set(expected.values()), path
        if not robot.manipulators and robot.semantics is None:
            assert any("longest serial chain" in g for g in plan.guesses), path
        planned.append(path.name)
    assert len(planned) >= 40 and len(refused) >= 50, (planned, refused)
    assert {"barrettwam.robot.xml", "panda.urdf", "pr2_desc.urdf", "kawada-hironx.zae"} <= set(planned)


def rcl_parameters(node_name: str, document: dict, tmp_path: Path) -> dict:
    """The parameters a node gets from ``document`` through rcl's own YAML parser (a ``--params-file``
    wrapped as MoveItConfigsBuilder passes it): name -> value, typed as rcl typed them."""
    import rclpy
    from rclpy.node import Node

    params = tmp_path / f"{node_name}.params.yaml"
    params.write_text(yaml.safe_dump({node_name: {"ros__parameters": document}}))
    context = rclpy.Context()
    rclpy.init(args=["--ros-args", "--params-file", str(params)], context=context)
    try:
        node = Node(node_name, context=context, automatically_declare_parameters_from_overrides=True)
        try:
            return {name: p.value for name, p in node._parameters.items()}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_controller_and_limit_keys_as_moveit_reads_them(tmp_path):
    """The written YAML through rcl's parser, then the names and types MoveIt 2 reads:

    - moveit_controllers.yaml: moveit2 ``moveit_plugins/moveit_simple_controller_manager/src/
      moveit_simple_controller_manager.cpp`` (``initialize``): string array
      ``moveit_simple_controller_manager.controller_names``; per name
      ``moveit_simple_controller_manager.<name>.action_ns`` (string),
      ``.type`` (string: FollowJointTrajectory or GripperCommand), ``.joints`` (non-empty string array),
      ``.default`` (bool); the action is ``<name>/<action_ns>``.
    - joint_limits.yaml (loaded under ``robot_description_planning``): moveit2 ``moveit_ros/planning/
      robot_model_loader/src/robot_model_loader.cpp`` reads ``robot_description_planning.joint_limits.
      <joint>.has_velocity_limits`` (bool), ``max_velocity`` (double), ``has_acceleration_limits``,
      ``max_acceleration``; the same keys and types as ros2_control ``joint_limits/include/joint_limits/
      joint_limits_rosparam.hpp`` (``declare_parameters``); an integer where a double is read is a
      ParameterTypeException there.
    - kinematics.yaml: ``<group>.kinematics_solver`` a plugin MoveIt ships
      (kdl_kinematics_plugin/KDLKinematicsPlugin), for every planning group of the SRDF."""
    files = generate([DEFAULT_ROBOT, "--srdf", DEFAULT_SRDF], tmp_path / "moveit")
    manager = rcl_parameters("move_group", {k: v for k, v in files["moveit_controllers.yaml"].items()},
                             tmp_path)
    base = "moveit_simple_controller_manager"
    names = manager[f"{base}.controller_names"]
    assert isinstance(names, list) and names and all(isinstance(n, str) for n in names)
    for name in names:
        assert isinstance(manager[f"{base}.{name}.action_ns"], str)
        assert manager[f"{base}.{name}.type"] in ("FollowJointTrajectory", "GripperCommand")
        joints = manager[f"{base}.{name}.joints"]
        assert isinstance(joints, list) and joints and all(isinstance(j, str) for j in joints)
        assert manager[f"{base}.{name}.default"] is True
    assert {f"/{n}/{manager[f'{base}.{n}.action_ns']}" for n in names} == {
        "/controller_node/arm/follow_joint_trajectory", "/controller_node/gripper_cmd"}
    limits = rcl_parameters("move_group", {"robot_description_planning": files["joint_limits.yaml"]},
                            tmp_path)
    prefix = "robot_description_planning.joint_limits."
    joints = {k[len(prefix):].split(".")[0] for k in limits if k.startswith(prefix)}
    assert joints >= {f"j{i}" for i in range(1, 8)}
    for joint in joints:
        for key in ("has_velocity_limits", "has_acceleration_limits"):
            assert limits[f"{prefix}{joint}.{key}"] is True
        for key in ("max_velocity", "max_acceleration"):
            value = limits[f"{prefix}{joint}.{key}"]
            assert type(value) is float and value > 0.0, (joint, key, value)
    for key in ("default_velocity_scaling_factor", "default_acceleration_scaling_factor"):
        assert type(limits[f"robot_description_planning.{key}"]) is float
    kinematics = files["kinematics.yaml"]
    assert kinematics and set(kinematics) <= set(files["semantics"].groups)
    assert {e["kinematics_solver"] for e in kinematics.values()} == {
        "kdl_kinematics_plugin/KDLKinematicsPlugin"}


def test_two_manipulators_with_grippers_get_four_distinct_controllers(openrave_data):
    """barrettwam-dual: each arm and each hand its own MoveIt controller (on main the hands were named like
    the arms, ``controller_node/l_arm``, and overwrote their FollowJointTrajectory entries); the node serves
    each hand under its group, ``controller_node/<manipulator>_gripper/gripper_cmd``."""
    from robot_bridge.control.groups import gripper_prefix, gripper_specs
    from robot_bridge.formats import load
    from robot_bridge.formats.moveit_config import plan_moveit_config
    from robot_bridge.model.groups import driven_joints

    robot = load(openrave_data / "robots" / "barrettwam-dual.robot.xml", search_path=[openrave_data])
    controllers = plan_moveit_config(robot).controllers()
    assert {name: (e["type"], e["action_ns"], e["joints"][0]) for name, e in controllers.items()} == {
        "controller_node/l_arm": ("FollowJointTrajectory", "follow_joint_trajectory", "l_Shoulder_Yaw"),
        "controller_node/r_arm": ("FollowJointTrajectory", "follow_joint_trajectory", "r_Shoulder_Yaw"),
        "controller_node/l_arm_gripper": ("GripperCommand", "gripper_cmd", "l_JF1"),
        "controller_node/r_arm_gripper": ("GripperCommand", "gripper_cmd", "r_JF1")}
    specs, _ = gripper_specs(robot, driven_joints(robot))
    assert sorted(f"controller_node/{gripper_prefix(s, specs)}gripper_cmd" for s in specs) == [
        "controller_node/l_arm_gripper/gripper_cmd", "controller_node/r_arm_gripper/gripper_cmd"]
