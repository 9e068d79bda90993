"""Fault containment: an exception in one node's callback never takes the process (or other nodes) down.

:class:`ContainedNode` wraps every timer, subscription and service callback it creates: an exception is
logged once with the node's full name, the callback and the traceback (repeats: one throttled line), and
the node's :meth:`ContainedNode.on_callback_error` puts it in its safe state (the controller halts and
reports ERROR on /diagnostics).  A service whose callback raised answers with its response as it stood.

Test hook: ``ROBOT_BRIDGE_INJECT_FAULT=<node name or full name>[:<callback name>]`` makes the first timer
of that node (or the timer running the named method) raise :class:`InjectedFault` once, in any process the
node runs in (``robot-bridge run``, ``ros2 launch``, ``ros2 run``).
"""

from __future__ import annotations

import functools
import os
import traceback

from rclpy.node import Node

INJECT_ENV = "ROBOT_BRIDGE_INJECT_FAULT"
REPEAT_THROTTLE = 10.0          # s between log lines of a callback that keeps raising


class InjectedFault(RuntimeError):
    """Raised by the ROBOT_BRIDGE_INJECT_FAULT test hook."""


def callback_name(callback) -> str:
    name = getattr(callback, "__name__", None) or type(callback).__name__
    return name.lstrip("_") if name != "<lambda>" else "callback"


class ContainedNode(Node):
    """A Node whose callbacks are contained (see the module docstring)."""

    load_error: str | None = None       # why the node could not load its robot (None: loaded)

    def __init__(self, *args, **kwargs):
        self.callback_errors = 0            # contained exceptions so far (diagnostics, tests)
        self._thread_timers = None
        super().__init__(*args, **kwargs)
        self._inject = _injection_target(self.get_name(), self.get_fully_qualified_name())

    # -- safe state ------------------------------------------------------------------------------
    def on_callback_error(self, where: str, exc: BaseException) -> None:
        """Put the node in its safe state after ``where`` raised ``exc`` (default: keep serving)."""

    # -- wrapping -------------------------------------------------------------------------------
    def contain(self, callback, kind: str, fallback=None):
        """``callback`` wrapped: exceptions logged and contained; ``fallback(*args)`` is returned then."""
        where = f"{kind} {callback_name(callback)}"
        seen = []

        @functools.wraps(callback)
        def contained(*args):
            try:
                return callback(*args)
            except Exception as exc:  # the whole point: one callback never ends the process
                self._contain_error(where, exc, seen)
                return fallback(*args) if fallback is not None else None
        return contained

    def _contain_error(self, where: str, exc: BaseException, seen: list) -> None:
        """Log ``exc`` of the callback ``where`` (in full the first time, ``seen`` remembers) and put the
        node in its safe state."""
        self.callback_errors += 1
        full = self.get_fully_qualified_name()
        if not seen:
            seen.append(exc)
            self.get_logger().error(f"{full}: {where} raised {type(exc).__name__}: {exc}; node in "
                                    f"its safe state\n{traceback.format_exc().rstrip()}")
        else:
            self.get_logger().error(f"{full}: {where} raised again: {type(exc).__name__}: {exc}",
                                    throttle_duration_sec=REPEAT_THROTTLE)
        try:
            self.on_callback_error(where, exc)
        except Exception as inner:  # the safe state itself failed: say so, stay contained
            self.get_logger().error(f"{full}: entering the safe state failed: "
                                    f"{type(inner).__name__}: {inner}")

    def create_timer(self, timer_period_sec, callback, *args, **kwargs):
        return super().create_timer(timer_period_sec, self.contain(self._injected(callback), "timer"), *args,
                                    **kwargs)

    def create_thread_timer(self, timer_period_sec: float, callback):
        """A periodic callback on the node's timer thread (:mod:`.thread_timers`), contained like a timer's;
        an executor timer when the node follows ROS time (``use_sim_time``)."""
        from .thread_timers import ThreadTimers

        if self.get_parameter("use_sim_time").value:
            return self.create_timer(timer_period_sec, callback)
        if self._thread_timers is None:
            seen: dict = {}
            self._thread_timers = ThreadTimers(
                self.context, self.get_name(),
                lambda timer, exc: self._contain_error(f"timer {callback_name(timer.callback)}", exc,
                                                       seen.setdefault(id(timer.callback), [])))
        return self._thread_timers.create(timer_period_sec, self._injected(callback))

    def stop_thread_timers(self) -> None:
        """No thread timer callback runs after this (called by destroy_node; idempotent).  Raises
        ``TimersStillRunning`` when a callback does not end: destroy_node then destroys nothing."""
        if self._thread_timers is not None:
            self._thread_timers.stop()

    def destroy_node(self):
        self.stop_thread_timers()
        return super().destroy_node()

    def _injected(self, callback):
        """``callback``, made to raise once when the ROBOT_BRIDGE_INJECT_FAULT hook names it."""
        if self._inject is not None and self._inject_matches(callback):
            callback = _raise_once(callback, f"injected fault in {self.get_name()}'s timer "
                                             f"{callback_name(callback)} ({INJECT_ENV})")
            self._inject = None
        return callback

    def create_subscription(self, msg_type, topic, callback, qos_profile, **kwargs):
        return super().create_subscription(msg_type, topic, self.contain(callback, f"subscription {topic}:"),
                                           qos_profile, **kwargs)

    def create_service(self, srv_type, srv_name, callback, **kwargs):
        return super().create_service(srv_type, srv_name,
                                      self.contain(callback, f"service {srv_name}:",
                                                   fallback=lambda _request, response: response), **kwargs)

    def create_reload_service(self, reload, source, kept: str):
        """``~/reload`` (std_srvs/Trigger): ``reload()`` returns (success, error); on failure the error is
        logged and answered, and the node keeps serving its previous ``kept`` (``source()`` names what a
        success loaded)."""
        from std_srvs.srv import Trigger

        def on_reload(_request, response):
            response.success, error = reload()
            response.message = error or f"loaded {source()}"
            if not response.success:
                self.get_logger().error(f"reload failed, keeping the previous {kept}: {error}")
            return response
        return self.create_service(Trigger, "~/reload", on_reload)

    def _inject_matches(self, callback) -> bool:
        wanted = self._inject
        return not wanted or callback_name(callback) == wanted.lstrip("_")


def _injection_target(*names: str) -> str | None:
    """The callback name to break ('' = the first timer) when the hook names this node (by name or full
    name), else None."""
    node, _, method = os.environ.get(INJECT_ENV, "").partition(":")
    return method if node and node in names else None


def _raise_once(callback, message: str):
    fired = []

    @functools.wraps(callback)
    def breaking(*args):
        if not fired:
            fired.append(True)
            raise InjectedFault(message)
        return callback(*args)
    return breaking
