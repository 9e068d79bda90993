"""``robot-bridge run`` is honest and complete: --search-path, --params-file, ready only when every node
loaded the robot (else one error line per node and status 2, or --keep-going), Ctrl-C at any moment of
start-up stops it without a traceback and is never lost."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
from rclpy.parameter_client import AsyncParameterClient  # noqa: E402

from fixtures.bridge_probe import Output, Probe, start_run, stop  # noqa: E402
from robot_bridge.cli.verbs.run import PAUSE_ENV, READY  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "robot_bridge" / "data"
NODES = ("/description_node", "/sensor_bridge", "/controller_node")


def _env_including_the_arm(tmp_path: Path) -> Path:
    """A world whose robot is found only through the search path."""
    env = tmp_path / "world.env.xml"
    env.write_text('<Environment><Robot file="lwa3_gripper.robot.xml"/></Environment>\n')
    return env


def test_search_path_reaches_every_node_and_a_failed_load_is_an_error_per_node(tmp_path):
    env = _env_including_the_arm(tmp_path)
    process = start_run("--robot", str(env))
    output = Output(process)
    process.wait(timeout=120)
    output.thread.join(timeout=5)
    assert process.returncode == 2, output.text
    errors = [line for line in output.lines if line.startswith("robot-bridge run: error: ")]
    assert [e.split(": ")[2] for e in errors] == list(NODES), output.text
    assert all("lwa3_gripper.robot.xml" in e for e in errors), errors
    assert READY not in output.text

    process = start_run("--robot", str(env), "--search-path", str(DATA))
    output = Output(process)
    try:
        output.wait_for(READY)
    finally:
        text = stop(process, output)
    assert process.returncode == 0 and "error" not in text.lower(), text


def test_keep_going_runs_without_the_robot(tmp_path):
    process = start_run("--robot", str(tmp_path / "missing.robot.xml"), "--keep-going", "--no-planner")
    output = Output(process)
    try:
        line = output.wait_for("(--keep-going)")
        assert "3 of 3 nodes without a robot" in line
        assert process.poll() is None
    finally:
        text = stop(process, output)
    assert process.returncode == 0 and READY not in text
    assert sum(line.startswith("robot-bridge run: error: ") for line in text.splitlines()) == 3, text


def test_params_file_sets_node_and_per_sensor_parameters_like_a_launch_parameters_file(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("""\
/**:
  ros__parameters:
    warn_throttle: 7.0
arm1/controller_node:
  ros__parameters:
    state_rate: 25.0
/arm1/sensor_bridge:
  ros__parameters:
    sensors:
      base_laser:
        noise_std: 0.25
controller_node:          # a node outside the namespace: not ours
  ros__parameters:
    control_rate: 1.0
""")
    process = start_run("--namespace", "arm1", "--params-file", str(params))
    output = Output(process)
    probe = Probe()
    try:
        output.wait_for(READY)

        def get(node, names):
            client = AsyncParameterClient(probe.node, node)
            assert client.wait_for_services(60)
            for _ in range(6):
                future = client.get_parameters(names)
                deadline = time.monotonic() + 5
                while not future.done() and time.monotonic() < deadline:
                    time.sleep(0.01)
                if future.done():
                    return [v.double_value for v in future.result().values]
            raise AssertionError(f"{node}: no answer")

        assert get("/arm1/controller_node", ["state_rate", "control_rate"]) == [25.0, 100.0]
        assert get("/arm1/sensor_bridge", ["sensors.base_laser.noise_std", "warn_throttle"]) == [0.25, 7.0]
    finally:
        probe.close()
        text = stop(process, output)
    assert process.returncode == 0, text


def test_params_file_with_a_bad_value_is_refused_naming_the_node(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("controller_node:\n  ros__parameters:\n    hardware: foo\n")
    process = start_run("--params-file", str(params))
    output = Output(process)
    process.wait(timeout=120)
    output.thread.join(timeout=5)
    assert process.returncode == 2
    assert "robot-bridge run: error: cannot start controller_node:" in output.text
    assert "hardware='foo' is not one of: 'sim', 'canopen'" in output.text


@pytest.mark.parametrize("when", ["early", "description loaded", "sensors set up"])
def test_ctrl_c_during_start_up_stops_without_traceback_and_is_never_lost(when):
    """Ctrl-C while importing, or while start-up is held (test hook) right after the description node or the
    sensor bridge was created: no traceback, never ready, stopped with status 0."""
    pause = {"description loaded": "sensor_bridge", "sensors set up": "controller_node"}.get(when)
    process = start_run(env_extra={PAUSE_ENV: pause} if pause else None)
    output = Output(process)
    if pause:
        output.wait_for(f"paused before {pause}")
    else:                           # importing (the interpreter's own start-up is done by then)
        time.sleep(0.8)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    output.thread.join(timeout=5)
    text = output.text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert process.returncode in (0, 130, -signal.SIGINT), text     # -2: before Python's own handler
    if pause:
        assert not any(line.startswith(READY) for line in output.lines), text
        assert process.returncode == 0 and "robot-bridge run: stopped" in text
        if when == "sensors set up":
            assert "[controller_node]" not in text, text


def test_a_description_warning_appears_once_in_one_process(tmp_path):
    """The file is read once for the three nodes; its warning is logged by the description node only."""
    env = tmp_path / "w.env.xml"
    env.write_text((DATA / "default.env.xml").read_text().replace(
        '<Robot file="lwa3_gripper.robot.xml"/>', '<Robot file="lwa3_gripper.robot.xml"/><Frobnicate/>'))
    process = start_run("--robot", str(env), "--search-path", str(DATA))
    output = Output(process)
    try:
        output.wait_for(READY)
    finally:
        text = stop(process, output)
    lines = [line for line in text.splitlines() if "<Frobnicate> in <environment> is not supported" in line]
    assert len(lines) == 1 and "[description_node]" in lines[0], text


def test_ready_lists_the_planner_only_once_it_serves_and_otherwise_says_why():
    """Issue 43: the ready line came as soon as the nodes existed, the planner's model still to be built.
    At a bound of 0 s the planner (no robot_description delivered yet: the executor had not spun) is named
    as not ready, with its reason; with the default bound the line lists every node and the planner answers
    a plan at once.  Fails on the old code (no --ready-timeout; the line listed the planner regardless)."""
    from moveit_msgs.msg import Constraints, MotionPlanRequest
    from moveit_msgs.srv import GetMotionPlan

    from robot_bridge.bringup import planner_unavailable

    if planner_unavailable():
        pytest.skip(planner_unavailable())
    process = start_run("--ready-timeout", "0")
    output = Output(process)
    try:
        line = output.wait_for(READY)
    finally:
        stop(process, output)
    reasons = ("loading the planning libraries", "no robot_description yet")
    assert any(f"/planner_node: not ready: {r}" in line for r in reasons), line
    assert "/planner_node," not in line.split(";")[0] and not line.split(";")[0].endswith("/planner_node")

    process = start_run()
    output = Output(process)
    probe = Probe()
    try:
        line = output.wait_for(READY)
        assert "not ready" not in line and "/planner_node" in line, line
        request = MotionPlanRequest(group_name="arm", allowed_planning_time=10.0)
        request.goal_constraints.append(Constraints(name="home"))
        answer = probe.call(GetMotionPlan, "/plan_kinematic_path", GetMotionPlan.Request(
            motion_plan_request=request))
        assert answer.motion_plan_response.error_code.val == 1, answer.motion_plan_response
    finally:
        probe.close()
        text = stop(process, output)
    assert process.returncode == 0, text
