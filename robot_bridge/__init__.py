"""robot_bridge: OpenRAVE XML / COLLADA / URDF / SRDF robots as ROS 2 citizens.

The core (model, formats, kinematics, sim, hardware) never imports rclpy;
``robot_bridge.nodes`` and ``robot_bridge.ros`` are the ROS 2 adapters.
"""

__version__ = "0.1.0"
