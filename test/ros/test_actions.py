"""robot_bridge.ros.actions: action client requests made by the thread that spins the node (rclpy before
ros2/rclpy#1308 drops a response that arrives between a request and its bookkeeping: ros2/rclpy#1123)."""

from __future__ import annotations

import threading

import pytest
import rclpy
from rclpy.task import Future

from robot_bridge.ros.actions import destroy_actions, get_result, in_spin_thread, send_goal
from fixtures.waiting import wait_until

pytest.importorskip("control_msgs.action")


def test_a_request_is_made_by_the_spinning_thread_and_its_result_forwarded(ros_process):
    node = ros_process("spun").node("client")
    made_by, inner = [], Future()

    def request() -> Future:
        made_by.append(threading.current_thread().name)
        return inner

    out = in_spin_thread(node, request)
    wait_until(lambda: made_by, 20.0, "the request made")
    assert made_by == ["spin-spun"]
    assert not out.done()
    inner.set_result(42)
    wait_until(out.done, 20.0, "the result forwarded")
    assert out.result() == 42

    def failing() -> Future:
        raise RuntimeError("client destroyed")
    failed = in_spin_thread(node, failing)
    wait_until(failed.done, 20.0, "the failure forwarded")
    assert isinstance(failed.exception(), RuntimeError)


def test_without_an_executor_the_request_is_made_at_once():
    context = rclpy.Context()
    context.init()
    try:
        node = rclpy.create_node("unspun", context=context)
        try:
            inner = Future()
            assert in_spin_thread(node, lambda: inner) is inner
        finally:
            node.destroy_node()
    finally:
        context.try_shutdown()


def test_goals_sent_from_another_thread_all_get_their_handle_and_result(ros_process):
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionClient, ActionServer

    def execute(handle):
        handle.succeed()
        result = GripperCommand.Result()
        result.position, result.reached_goal = handle.request.command.position, True
        return result

    server_node = ros_process("server").node("gripper")
    ActionServer(server_node, GripperCommand, "/test_actions/gripper", execute)
    node = ros_process("client").node("client")
    client = ActionClient(node, GripperCommand, "/test_actions/gripper")
    assert client.wait_for_server(timeout_sec=30.0)
    for i in range(20):                        # each from this thread while "spin-client" spins
        goal = GripperCommand.Goal()
        goal.command.position = 0.001 * i
        sent = send_goal(node, client, goal)
        wait_until(sent.done, 30.0, lambda: f"goal {i}: no handle")
        assert sent.result().accepted
        result = get_result(node, sent.result())
        wait_until(result.done, 30.0, lambda: f"goal {i}: no result")
        assert result.result().result.position == pytest.approx(0.001 * i)
    # the client is not destroyed here, under the running spin of its node (ros2/rclpy#663): the fixture
    # destroys it (destroy_actions) once the spin thread has ended


def test_a_node_with_action_clients_and_servers_leaves_the_graph_when_destroyed(ros_process):
    """rclpy's destroy_node leaves action clients and servers, which keep the node's handle: without
    destroy_actions the node stays listed (`ros2 node list`) as long as the test holds them."""
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionClient, ActionServer

    observer = ros_process("observer").node("observer")
    # the leaving nodes are not spun: destroying a node (or its actions) while an executor waits on it
    # is outside rclpy's contract (ros2/rclpy#663)
    context = rclpy.Context()
    context.init()
    try:
        held = {}
        for name, with_actions in (("plain_destroy", False), ("destroy_actions", True)):
            node = rclpy.create_node(name, context=context)
            held[name] = [ActionClient(node, GripperCommand, f"/{name}/client"),
                          ActionServer(node, GripperCommand, f"/{name}/server", lambda handle: None)]
            wait_until(lambda: name in observer.get_node_names(), 30.0, f"{name} in the graph")
            if with_actions:
                destroy_actions(node)
            node.destroy_node()
        wait_until(lambda: "destroy_actions" not in observer.get_node_names(), 30.0, "destroy_actions gone")
        # the control case: its handle is still held, so it is still in the graph
        assert "plain_destroy" in observer.get_node_names()
        for waitable in held["plain_destroy"]:
            waitable.destroy()
        wait_until(lambda: "plain_destroy" not in observer.get_node_names(), 30.0, "plain_destroy gone")
    finally:
        context.try_shutdown()
