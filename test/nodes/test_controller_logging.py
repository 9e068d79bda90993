"""rclpy's logger ties each call site (function, file, line) to the severity, name and filter parameters of
its first call, and raises ValueError when a later call differs ("Logger severity cannot be changed between
calls.").  The controller's ``_terminate`` logged successes and failures from one site: after one success,
every failed goal raised there and reached its client ABORTED with code 0 and no reason.  Every node and ROS
adapter module is checked here for the whole class: a logger method is called where it is named (never
chosen at run time), ``log(message, severity)`` is not used, and a throttle period is a constant."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "robot_bridge"
SEVERITIES = {"debug", "info", "warning", "warn", "error", "fatal"}
FILTERS = {"throttle_duration_sec", "throttle_time_source_type", "skip_first", "once"}


def _is_logger(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "get_logger()" in text or text.split(".")[-1].lower() in {"logger", "_logger"}


def _constant(node: ast.AST) -> bool:
    """A literal, or a module-level UPPER_CASE name (WARN_THROTTLE)."""
    return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id.isupper())


def violations(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and _is_logger(n.value):
            if n.attr in SEVERITIES and id(n) not in called:
                found.append(f"{name}:{n.lineno}: {ast.unparse(n)} taken as a value (severity chosen at run "
                             "time: one call site per severity)")
            if n.attr == "log":
                found.append(f"{name}:{n.lineno}: {ast.unparse(n)}(message, severity): one call site per "
                             "severity")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SEVERITIES \
                and _is_logger(n.func.value):
            for keyword in n.keywords:
                if keyword.arg in FILTERS and not _constant(keyword.value):
                    found.append(f"{name}:{n.lineno}: {keyword.arg}={ast.unparse(keyword.value)} varies "
                                 "(rclpy: 'filter parameters cannot be changed between calls')")
    return found


def test_the_check_finds_the_controllers_old_terminate():
    """The form that broke (and its siblings) is found: the check can fail."""
    old = ("def _terminate(self, outcome):\n"
           "    level = self.get_logger().info if outcome.ok else self.get_logger().warning\n"
           "    level('goal ended')\n"
           "    self.get_logger().log('x', severity)\n"
           "    self.get_logger().warning('x', throttle_duration_sec=float(self._p('warn_throttle')))\n")
    assert len(violations(old, "old")) == 4
    fixed = ("def _terminate(self, outcome):\n"
             "    if outcome.ok:\n        self.get_logger().info('goal ended')\n"
             "    else:\n        self.get_logger().warning('x', throttle_duration_sec=WARN_THROTTLE)\n")
    assert violations(fixed, "fixed") == []


@pytest.mark.parametrize("folder", ["nodes", "ros"])
def test_every_log_call_site_keeps_one_severity_and_filter(folder):
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        found += violations(path.read_text(), str(path.relative_to(ROOT.parent)))
    assert not found, "\n".join(found)


def test_a_failed_goal_after_a_success_logs_and_ends_with_its_code():
    """The controller's _terminate itself, with rclpy's logger: a success then an abort and a cancel."""
    rclpy = pytest.importorskip("rclpy")
    from robot_bridge.control import ErrorCode, GoalState, Outcome
    from robot_bridge.nodes.controller import ControllerNode

    class Handle:
        is_active, is_cancel_requested = True, True

        def __init__(self):
            self.ended = []

        def succeed(self):
            self.ended.append("succeeded")

        def abort(self):
            self.ended.append("aborted")

        def canceled(self):
            self.ended.append("canceled")

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("terminate_probe", context=context)
        handle = Handle()
        for outcome in (Outcome(GoalState.SUCCEEDED, ErrorCode.SUCCESSFUL, "goal reached"),
                        Outcome(GoalState.ABORTED, ErrorCode.PATH_TOLERANCE_VIOLATED, "path"),
                        Outcome(GoalState.CANCELED, ErrorCode.INVALID_GOAL, "preempted")):
            ControllerNode._terminate(node, handle, outcome)
        assert handle.ended == ["succeeded", "aborted", "canceled"]
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_sensor_bridge_warnings_follow_a_changed_warn_throttle_without_raising():
    """warn_throttle is dynamic: with rclpy's throttle filter, the next warning after a change raised
    ValueError ("Logging filter parameters cannot be changed between calls.") out of the callback."""
    rclpy = pytest.importorskip("rclpy")
    from fixtures.sim.models import pan_robot
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from robot_bridge.nodes.sensor_bridge import SensorBridge

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = SensorBridge(pan_robot(), context=context)
        bad = JointState(name=["pan"], position=[])
        node._on_joint_states(bad)
        assert node.set_parameters([Parameter("warn_throttle", value=0.0)])[0].successful
        node._on_joint_states(bad)
        node._on_joint_states(JointState(name=["pan"], position=[float("nan")]))
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
