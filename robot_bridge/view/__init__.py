"""The live browser view (``robot-bridge view``), rclpy-free.

- :mod:`.scene`: the robot of a robot_description (URDF text) as coloured triangle meshes per link;
- :mod:`.tf_cdr`: /tf and /tf_static as serialized TFMessages, latest pose per frame (older samples of
  the same frames are skipped without being decoded);
- :mod:`.status`: when each topic was last heard from, and which are stale;
- :mod:`.planning_scene`: MoveIt's planning scene as drawn (collision objects, attached bodies, colours);
- :mod:`.page`: the page itself (viser: three.js in the browser over a WebSocket), updated at its own rate;
- :mod:`.access`: who may open its WebSocket (Origin, limits) and move joints (``allow_control`` + token);
- :mod:`.images`: camera images as RGB arrays;
- :mod:`.screenshot`: the page in a headless chromium (the browser test, the bench, ``make demo``).

The ROS side (subscriptions, the joint-goal action client) is ``robot_bridge.nodes.view``.
"""
