"""robot_bridge bringup: description node, sensor bridge and controller (and rviz2 on request; without
rviz2 installed, rviz:=true warns and starts the bridge alone).

    ros2 launch robot_bridge bridge.launch.py robot:=/path/to/robot.xml mode:=sim rviz:=true
    ros2 launch robot_bridge bridge.launch.py --show-args     # every argument (those of robot-bridge run)

The node set is defined once in ``robot_bridge.bringup`` (``robot-bridge run`` starts the same nodes
without ros2 launch); this file only declares the arguments and turns each NodeSpec into a Node action.
"""

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.logging import get_logger
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from robot_bridge import bringup


def installed(package: str) -> bool:
    try:
        get_package_prefix(package)
    except (PackageNotFoundError, OSError):      # OSError: no AMENT_PREFIX_PATH at all
        return False
    return True


def node_actions(context, *args, **kwargs):
    values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in bringup.ARGUMENTS}
    options = bringup.Options.from_strings(values)
    if not options.keep_going:              # as robot-bridge run without --keep-going: stop on a bad robot
        from robot_bridge.formats import load

        try:
            load(options.robot_file, search_path=options.search_paths or None, xacro_args=options.xacro_args)
        except Exception as exc:
            raise RuntimeError(f"keep_going:=false and {options.robot_file} does not load: "
                               f"{type(exc).__name__}: {exc}") from None
    actions = []
    reason = bringup.planner_unavailable() if options.planner and options.mode == "sim" else None
    if reason:
        get_logger("robot_bridge").warning(reason)
    for spec in bringup.node_set(options):
        if spec.optional and not installed(spec.package):     # rviz:=true without rviz2: the bridge alone
            apt = "ros-$ROS_DISTRO-" + spec.package.replace("_", "-")
            get_logger("robot_bridge").warning(
                f"{spec.package} is not installed (no '{spec.package}' in the ament index): starting the "
                f"bridge without it; install it (apt install {apt}) to get it")
            continue
        actions.append(Node(package=spec.package, executable=spec.executable, name=spec.name,
                            namespace=spec.namespace, parameters=[spec.parameters],
                            remappings=list(spec.remappings), arguments=list(spec.arguments),
                            output="screen"))
    return actions


def generate_launch_description():
    # large messages (camera images) through shared memory, unless a Fast DDS profile is already chosen
    environment = [SetEnvironmentVariable(name, value) for name, value in bringup.dds_environment().items()]
    arguments = [DeclareLaunchArgument(name, default_value=default, description=description)
                 for name, default, description in bringup.ARGUMENTS]
    return LaunchDescription(environment + arguments + [OpaqueFunction(function=node_actions)])
