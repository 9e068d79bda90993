"""robot_bridge bringup: description node, sensor bridge and controller (and rviz2 on request).

    ros2 launch robot_bridge bridge.launch.py robot:=/path/to/robot.xml mode:=sim rviz:=true

The node set is defined once in ``robot_bridge.bringup`` (``robot-bridge run`` starts the same nodes
without ros2 launch); this file only declares the arguments and turns each NodeSpec into a Node action.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robot_bridge import bringup


def node_actions(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in bringup.ARGUMENTS}
    return [
        Node(package=spec.package, executable=spec.executable, name=spec.name,
             namespace=spec.namespace, parameters=[spec.parameters],
             remappings=list(spec.remappings), arguments=list(spec.arguments), output="screen")
        for spec in bringup.node_set(bringup.Options.from_strings(values))
    ]


def generate_launch_description():
    # large messages (camera images) through shared memory, unless a Fast DDS profile is already chosen
    environment = [SetEnvironmentVariable(name, value) for name, value in bringup.dds_environment().items()]
    arguments = [DeclareLaunchArgument(name, default_value=default, description=description)
                 for name, default, description in bringup.ARGUMENTS]
    return LaunchDescription(environment + arguments + [OpaqueFunction(function=node_actions)])
