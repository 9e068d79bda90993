"""ROS 2 adapters shared by the nodes: QoS profiles and message conversions.

This package (with ``robot_bridge.nodes``) is the only place that imports rclpy.
"""
