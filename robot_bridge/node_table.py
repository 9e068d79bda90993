"""The bridge's nodes, listed once (issue 40): name, executable, module and Node class, parameter schemas,
config/ file, docs page, and whether the node takes the robot file read once.

Plain data, standard library only: setup.py reads this file by path (runpy) for its console_scripts without
importing robot_bridge or rclpy.  Derived from it: the executables of robot_bridge.nodes (Ctrl-C as a stop
request), the generated parameter tables of the docs (robot_bridge.nodes.parameter_tables), the node specs and
READS_ROBOT of robot_bridge.bringup (which launch/bridge.launch.py and robot-bridge run start) and setup.py's
entry points.  test/test_node_table.py fails when any of them, a node module, config/ or the docs disagree.
"""

from __future__ import annotations

from typing import NamedTuple

PACKAGE = "robot_bridge"
CLI_SCRIPT = "robot-bridge = robot_bridge.cli.main:main"


class Schema(NamedTuple):
    """One parameter schema of a node: ``robot_bridge.ros.params.schema(...)`` assigned to ``attribute``."""

    key: str                # its table in the docs: <!-- parameters: KEY -->
    attribute: str          # the node module's attribute
    prefix: str = ""        # before each name in the table (per-sensor parameters: sensors.<name>.)


class NodeEntry(NamedTuple):
    name: str               # default node name: bringup's NodeSpec.name, <name>/ros__parameters in YAML
    executable: str         # console script, ros2 run robot_bridge <executable>
    module: str             # robot_bridge.nodes.<x>: main() is the executable
    node_class: str         # the Node class robot-bridge run instantiates in-process
    schemas: tuple          # Schema, ...
    config: str             # config/<file> bringup overlays with the launch arguments ("": none)
    docs: str               # its page, from the repository's top
    reads_robot: bool       # reads description_file with xacro_args and takes a Robot already read (robot=)

    @property
    def entry_point(self) -> str:
        return f"{self.module}:main"

    @property
    def factory(self) -> str:
        return f"{self.module}:{self.node_class}"


NODES = (   # in bringup's start order
    NodeEntry("description_node", "description_node", "robot_bridge.nodes.description", "DescriptionNode",
              (Schema("description_node", "PARAMETERS"),), "description.yaml", "docs/description_node.md",
              True),
    NodeEntry("sensor_bridge", "sensor_bridge_node", "robot_bridge.nodes.sensor_bridge", "SensorBridge",
              (Schema("sensor_bridge", "PARAMETERS"),
               Schema("sensor_bridge.sensors", "SENSOR_PARAMETERS", "sensors.<name>.")),
              "sensor_bridge.yaml", "docs/sensor_bridge_node.md", True),
    NodeEntry("controller_node", "controller_node", "robot_bridge.nodes.controller", "ControllerNode",
              (Schema("controller_node", "PARAMETERS"),), "controller.yaml", "docs/controller_node.md", True),
    NodeEntry("world_node", "world_node", "robot_bridge.nodes.world", "WorldNode",
              (Schema("world_node", "PARAMETERS"),), "world.yaml", "docs/world_node.md", False),
    NodeEntry("planner_node", "planner_node", "robot_bridge.nodes.planner", "PlannerNode",
              (Schema("planner_node", "PARAMETERS"),), "planner.yaml", "docs/planning.md", False),
    NodeEntry("view_node", "view_node", "robot_bridge.nodes.view", "ViewNode",
              (Schema("view_node", "PARAMETERS"),), "", "docs/view.md", False),
)
BY_NAME = {node.name: node for node in NODES}
EXECUTABLES = tuple(node.executable for node in NODES)
READS_ROBOT = tuple(node.name for node in NODES if node.reads_robot)
CONSOLE_SCRIPTS = [f"{node.executable} = {node.entry_point}" for node in NODES] + [CLI_SCRIPT]
