"""``robot-bridge run``: the whole bridge in one process, without ``ros2 launch``.

The nodes of ``robot_bridge.bringup.node_set`` share one MultiThreadedExecutor (nodes without an
in-process class, e.g. rviz2, run as subprocesses when their executable is on PATH).  SIGINT and
SIGTERM shut the bridge down cleanly: every node is destroyed and the hardware closed.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from ... import bringup

HELP = "Start the bridge (description, sensor bridge, controller) in one process, without ros2 launch."
READY = "robot-bridge run: ready"        # printed once every node serves, or at --ready-timeout (scripts wait
                                         # for it): the ready nodes, then each other node's reason
READY_TIMEOUT = 30.0                     # s: default bound of the wait for every node to serve
# Test hook: ``ROBOT_BRIDGE_PAUSE_BEFORE=<node name>`` holds start-up before that node is created (a line says
# so) until a stop request or 60 s, so a test can deliver Ctrl-C at a known moment of start-up.
PAUSE_ENV = "ROBOT_BRIDGE_PAUSE_BEFORE"
EXIT_START_FAILED = 2
SHUTDOWN_TIMEOUT = 10.0                  # s: for callbacks still running at a stop request


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--search-path", action="append", default=None, metavar="DIR",
                        help="Directory searched for included files and meshes (repeatable; before "
                             "$OPENRAVE_DATA): every node's search_path")
    parser.add_argument("--params-file", action="append", default=[], metavar="YAML",
                        help="ROS 2 parameters file (<node name>/ros__parameters, '/**' wildcards, "
                             "namespaced names) applied to the nodes it names after config/<node>.yaml and "
                             "the flags, as a launch Node's parameters file (repeatable, later files win)")
    parser.add_argument("--keep-going", action="store_true",
                        help="Keep running when a node cannot load the robot (else: exit status 2)")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT, metavar="SECONDS",
                        help="How long to wait for every node to serve (the planner: its model built; the "
                             "controller: its first joint state) before printing the ready line, which then "
                             f"names each node not ready and why (default {READY_TIMEOUT:g})")
    for name, default, description in bringup.ARGUMENTS:
        flag = "--" + name.replace("_", "-")
        if name in RUN_FLAGS:                                   # above: repeatable, or a run default
            continue
        if name in ("use_sim_time", "rviz", "view", "allow_control"):
            parser.add_argument(flag, dest=name, action="store_true", help=description)
        elif name in bringup.BOOLEAN_ARGUMENTS:                 # default true: --environment / --no-...
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction,
                                default=bringup._flag(name, default), help=description)
        elif name in ("mode", "hardware"):
            choices = bringup.MODES if name == "mode" else bringup.HARDWARE     # (defaults are not checked)
            parser.add_argument(flag, dest=name, default=default, choices=choices, help=description)
        else:
            parser.add_argument(flag, dest=name, default=default, help=description)


RUN_FLAGS = ("search_path", "params_file", "keep_going")      # launch arguments run spells as its own flags


def options_from_args(args: argparse.Namespace) -> bringup.Options:
    values = {name: getattr(args, name) for name, _, _ in bringup.ARGUMENTS if name not in RUN_FLAGS}
    values.update(search_path=os.pathsep.join(map(str, args.search_path or [])),
                  params_file=os.pathsep.join(map(str, args.params_file)), keep_going=args.keep_going)
    return bringup.Options.from_strings(values)


def create_node(spec: bringup.NodeSpec, context=None, robot=None):
    """An in-process node for ``spec``: its class with the spec's name, namespace, parameters and remaps
    (and ``robot``, its description_file already read, for the nodes that take one)."""
    import importlib

    from rclpy.parameter import Parameter

    module_name, _, class_name = spec.factory.partition(":")
    node_class = getattr(importlib.import_module(module_name), class_name)
    cli_args = ["--ros-args", "-r", f"__node:={spec.name}"]
    for source, target in spec.remappings:
        cli_args += ["-r", f"{source}:={target}"]
    extra = {"robot": robot} if robot is not None and spec.name in bringup.READS_ROBOT else {}
    overrides = [Parameter(k, value=v) for k, v in spec.parameters.items()]
    return node_class(context=context, namespace=spec.namespace or None, cli_args=cli_args,
                      parameter_overrides=overrides, **extra)


def _read_robot_once(specs: list[bringup.NodeSpec]):
    """The robot file every node reads, read once (its warnings then appear once, from the description
    node); None when the nodes disagree on it or it does not load (each node then reports for itself)."""
    files = {(s.parameters.get("description_file"), tuple(s.parameters.get("search_path") or ()),
              s.parameters.get("xacro_args", "")) for s in specs if s.name in bringup.READS_ROBOT}
    if len(files) != 1:
        return None
    ((path, search_path, xacro_args),) = files
    try:
        from ...formats import load

        return load(path, search_path=list(search_path) or None, xacro_args=xacro_args)
    except Exception:  # the nodes say why, one error line each
        return None


def _external(spec: bringup.NodeSpec):
    """A subprocess for a node without an in-process class; None (with a note) if it is not installed."""
    import shutil
    import subprocess

    path = shutil.which(spec.executable)
    if path is None:
        print(f"robot-bridge run: {spec.executable} is not installed; {spec.name} not started",
              file=sys.stderr)
        return None
    command = [path, *spec.arguments, "--ros-args", "-r", f"__node:={spec.name}"]
    if spec.namespace:
        command += ["-r", f"__ns:={spec.namespace}"]
    for name, value in spec.parameters.items():
        command += ["-p", f"{name}:={str(value).lower() if isinstance(value, bool) else value}"]
    return subprocess.Popen(command)


def _wait_for_running_callbacks(executor) -> None:
    """Let callbacks already handed to the thread pool finish before the executor is shut down.

    rclpy's Executor.shutdown destroys its guard condition without waiting for them (its work-tracker
    wait is skipped), so a callback still running then fails with InvalidHandle.  The submitted
    handlers are only reachable through the private ``_futures`` list; without it, nothing to wait for.
    """
    deadline = time.monotonic() + SHUTDOWN_TIMEOUT
    while time.monotonic() < deadline and not all(f.done() for f in getattr(executor, "_futures", ())):
        time.sleep(0.01)


def _specs(args: argparse.Namespace) -> list[bringup.NodeSpec]:
    """The node set with --search-path, --xacro-args and every --params-file applied."""
    options = options_from_args(args)
    reason = bringup.planner_unavailable() if options.planner and options.mode == "sim" else None
    if reason:
        print(f"robot-bridge run: {reason}", file=sys.stderr)
    return bringup.node_set(options)


def _say(text: str) -> None:
    print(f"robot-bridge run: {text}", flush=True)


def _error(text: str) -> None:
    print(f"robot-bridge run: error: {text}", file=sys.stderr, flush=True)


def _announce_ready(nodes: list, args: argparse.Namespace, options: bringup.Options, stop) -> None:
    """The ready line, once every node serves or at --ready-timeout (never after a stop request)."""
    from ...ros import readiness

    states = readiness.wait(nodes, float(getattr(args, "ready_timeout", READY_TIMEOUT)), stop)
    if not stop.is_set():
        print(readiness.ready_line([n.get_fully_qualified_name() for n in nodes], states,
                                   f"{options.mode} mode, {options.robot_file}", READY), flush=True)


def main(args: argparse.Namespace) -> int:
    import copy

    from ..stop import REQUESTED

    options = options_from_args(args)
    specs = _specs(args)
    os.environ.update(bringup.dds_environment())      # before the first participant is created
    from rclpy.executors import MultiThreadedExecutor

    from ...ros.runner import spin_until_stopped, stoppable_rclpy

    with stoppable_rclpy(stop=REQUESTED) as stop:
        nodes, processes, executor = [], [], None
        robot = None if stop.is_set() else _read_robot_once(specs)
        try:
            for spec in specs:
                if os.environ.get(PAUSE_ENV) == spec.name and not stop.is_set():
                    _say(f"paused before {spec.name} ({PAUSE_ENV})")
                    stop.wait(60)
                if stop.is_set():
                    break
                if not spec.factory:
                    processes.append(_external(spec))
                    continue
                try:
                    nodes.append(create_node(spec, robot=copy.deepcopy(robot) if robot is not None else None))
                except Exception as exc:     # e.g. a parameter of the wrong type in a YAML file
                    _error(f"cannot start {spec.name}: {type(exc).__name__}: {exc}")
                    return EXIT_START_FAILED
            failed = [n for n in nodes if getattr(n, "load_error", None)]
            for node in failed:
                _error(f"{node.get_fully_qualified_name()}: {node.load_error}")
            if failed and not args.keep_going:
                return EXIT_START_FAILED
            if not stop.is_set():
                executor = MultiThreadedExecutor(num_threads=len(nodes) + 1)
                for node in nodes:
                    executor.add_node(node)
            names = ", ".join(n.get_fully_qualified_name() for n in nodes)
            if not stop.is_set():            # a Ctrl-C during start-up: never ready, straight to stopped
                if failed:
                    _say(f"running with {len(failed)} of {len(nodes)} nodes without a robot (--keep-going): "
                         f"{names}")
                else:                        # ready once every node serves (or at the bound), while spinning
                    waiter = threading.Thread(target=_announce_ready, name="robot-bridge run: ready",
                                              args=(nodes, args, options, stop), daemon=True)
                    waiter.start()
                spin_until_stopped(executor, stop, _error)
        finally:
            if executor is not None:
                _wait_for_running_callbacks(executor)
                executor.shutdown(timeout_sec=SHUTDOWN_TIMEOUT)
            for node in nodes:
                node.destroy_node()
            for process in filter(None, processes):
                process.terminate()
                process.wait(timeout=10)
    _say("stopped")
    return 0
