"""The bridge's ROS 2 nodes (the only rclpy code besides robot_bridge.ros).

Started as a node executable (``description_node``, ``ros2 run``/``ros2 launch``, ``python -m
robot_bridge.nodes.<node>``), a Ctrl-C from here on is a recorded stop request (robot_bridge.cli.stop),
not a KeyboardInterrupt traceback from the middle of an import: the node's main loop sees it.
"""

import os as _os
import sys as _sys

from ..node_table import EXECUTABLES     # every node executable, from the one table of nodes


def _started_as_executable() -> bool:
    if _sys.argv and _os.path.basename(_sys.argv[0]) in EXECUTABLES:
        return True
    argv = list(getattr(_sys, "orig_argv", ()))
    return "-m" in argv[:-1] and argv[argv.index("-m") + 1].startswith(__name__ + ".")


if _started_as_executable():
    from ..cli.stop import record_stop_requests

    record_stop_requests()
