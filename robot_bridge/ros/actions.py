"""Action client requests made in the thread that spins the client's node.

rclpy's ActionClient before ros2/rclpy#1308 (Humble; Jazzy up to 7.1.6, the release its PyPI wheels ship)
records a request's sequence number only after sending the request.  A response that the spinning thread
takes in between is dropped ("Ignoring unexpected goal response") and the request's Future never completes
(ros2/rclpy#1123).  A node that sends goals from a worker thread (planner_node's jobs, the view's web server,
a test) hits that window under load.  These helpers hand the request to the node's executor
(``Executor.create_task``), so the request and its response are handled by one thread on every release.
With no executor (the caller spins the node itself) the request is made at once.
"""

from __future__ import annotations

from typing import Callable

from rclpy.task import Future


def in_spin_thread(node, request: Callable[[], Future]) -> Future:
    """``request()`` (an ActionClient call returning a Future) made by ``node``'s executor; a Future with
    its result (or exception)."""
    executor = node.executor
    if executor is None:
        return request()
    out = Future(executor=executor)

    def forward(inner: Future) -> None:
        error = inner.exception()
        if error is not None:
            out.set_exception(error)
        else:
            out.set_result(inner.result())

    def make() -> None:
        try:
            inner = request()
        except Exception as exc:                # e.g. a destroyed client: the caller sees it
            out.set_exception(exc)
            return
        inner.add_done_callback(forward)

    executor.create_task(make)
    return out


def send_goal(node, client, goal, feedback_callback=None) -> Future:
    """``client.send_goal_async(goal)`` made in ``node``'s spinning thread: a Future of the goal handle."""
    return in_spin_thread(node, lambda: client.send_goal_async(goal, feedback_callback=feedback_callback))


def get_result(node, handle) -> Future:
    """``handle.get_result_async()`` made in ``node``'s spinning thread."""
    return in_spin_thread(node, handle.get_result_async)


def cancel_goal(node, handle) -> Future:
    """``handle.cancel_goal_async()`` made in ``node``'s spinning thread."""
    return in_spin_thread(node, handle.cancel_goal_async)


def destroy_actions(node) -> None:
    """Destroy ``node``'s action clients and servers; call it before ``node.destroy_node()``.

    rclpy's destroy_node (Humble to Kilted) destroys publishers, subscriptions, services and timers, not
    action clients and servers.  Each keeps the node's rcl handle alive, so a destroyed node stays in the ROS
    graph (``ros2 node list``) until its Python objects are garbage collected."""
    from rclpy.action import ActionClient, ActionServer

    for waitable in list(node.waitables):
        if isinstance(waitable, (ActionClient, ActionServer)):
            waitable.destroy()
