"""``robot-bridge view``: the live browser view of a running bridge (see robot_bridge.nodes.view).

Serves http://127.0.0.1:8080/ by default: this host only, read-only.  ``--allow-control`` adds joint sliders
that send goals to the controller, on the page opened with the URL printed (it carries this start's secret
token).  ``--host 0.0.0.0`` (or one interface's address) serves it to other hosts: anyone who reaches the port
sees the robot, its world and its sensor data (camera images included); only the token moves it."""

from __future__ import annotations

import argparse
import sys

from ...view.page import DEFAULT_HOST, DEFAULT_PORT

HELP = "Serve a live 3D view of the running bridge (robot, world, sensors, joint sliders) to a browser."
READY = "robot-bridge view: serving"        # printed once the page is up (scripts wait for it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"interface to serve on (default {DEFAULT_HOST}: this host only; 0.0.0.0: "
                             "every interface: anyone who reaches the port sees the robot, world and camera "
                             "images)")
    parser.add_argument("--allow-control", action="store_true",
                        help="joint sliders that send goals to the controller, on the page opened with "
                             "the printed URL (it carries a secret token, new at every start); default: "
                             "read-only")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--fixed-frame", default="world", help="frame the scene is drawn in (default world)")
    parser.add_argument("--rate", type=float, default=30.0, help="page updates per second (default 30)")
    parser.add_argument("--namespace", default="", help="namespace of the bridge (robot_description, "
                                                        "joint_states and sensor topics)")
    parser.add_argument("--search-path", action="append", default=[], metavar="DIR",
                        help="directory searched for package:// meshes (repeatable)")


def parameter_overrides(args: argparse.Namespace) -> dict:
    out = {"host": args.host, "port": int(args.port), "fixed_frame": args.fixed_frame,
           "page_rate": float(args.rate), "allow_control": bool(args.allow_control)}
    if args.search_path:
        out["search_path"] = [str(p) for p in args.search_path]
    return out


def main(args: argparse.Namespace) -> int:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from ...nodes.view import ViewNode
    from ...ros.runner import spin_until_stopped, stoppable_rclpy
    from ..stop import REQUESTED

    with stoppable_rclpy(stop=REQUESTED) as stop:
        if stop.is_set():
            return 0
        overrides = [Parameter(k, value=v) for k, v in parameter_overrides(args).items()]
        namespace = "/" + args.namespace.strip("/") if args.namespace.strip("/") else None
        try:
            node = ViewNode(namespace=namespace, parameter_overrides=overrides, print_url=False)
        except OSError as exc:          # the port is taken, the address is not this host's
            print(f"robot-bridge view: error: cannot serve on {args.host}:{args.port}: {exc}",
                  file=sys.stderr)
            return 2
        print(f"{READY} {node.url}", flush=True)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            spin_until_stopped(executor, stop, lambda text: print(f"robot-bridge view: error: {text}",
                                                                  file=sys.stderr))
        finally:
            executor.shutdown()
            node.destroy_node()
    return 0
