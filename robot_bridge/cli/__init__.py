"""The ``robot-bridge`` command line (ros2cli-style verbs, see ``robot_bridge.cli.verbs``)."""
