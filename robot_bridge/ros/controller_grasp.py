"""controller_node's simulated grasps (sim.grasp_objects): the environment or world_node body the closing
fingers meet stops them (the simulated hardware's obstacle), a body they stall on is attached at world_node
(an AttachedCollisionObject on ~/attach) and let go when they open.  A mixin of
:class:`robot_bridge.nodes.controller.ControllerNode`."""

from __future__ import annotations

import math

import numpy as np

from .controller_state import Gripper


class SimGrasp:
    def _place_obstacle(self, grip: Gripper, reference: np.ndarray, target: float, max_effort: float) -> None:
        """Sim: the environment body the closing fingers would touch stops them (sim.grasp_objects)."""
        if not hasattr(self.hardware, "set_obstacle"):
            return
        contact = None
        closing = (target - reference[grip.index]) * grip.closing > 0.0
        bodies = self.robot is not None and (self.robot.environment or self._world_objects)
        if closing and self._param("sim.grasp_objects") and bodies:
            from ..sim.grasp import contact as first_contact
            if self._scene is None:
                self._build_scene()
            positions = dict(zip(self.joints, map(float, self.control.sample.position)))
            found = first_contact(self._scene, positions, grip.joint, target)
            if found is not None:
                contact, grip.touching = found
        elif not closing and grip.holding:
            self._publish_attach(grip, False)          # opening: the held body is let go
            grip.holding = ""
        if contact is None:
            grip.touching = ""
        effort = max_effort if max_effort > 0.0 else math.inf
        self.hardware.set_obstacle(grip.joint, contact, effort)
        if contact is not None:
            self.get_logger().info(f"{grip.name}: fingers meet {grip.touching} at {grip.joint}={contact:.6f}")

    def _movable(self, name: str) -> bool:
        """A body the fingers may carry away: not made of static links only (OpenRAVE type="static": a
        table the fingers pressed on stays a table)."""
        body = self.robot.environment.get(name) if self.robot is not None else None
        if body is None:
            body = self._world_objects.get(name, (None, None))[0]
        return body is not None and not all(link.static for link in body.links.values())

    def _publish_attach(self, grip: Gripper, add: bool) -> None:
        """Sim: tell world_node that ``grip`` holds (add) or let go of its body: an AttachedCollisionObject
        on the gripper joint's parent link, touching it and every link below it (the fingers)."""
        if self.attach_pub is None or self.robot is None or grip.joint not in self.robot.joints:
            return
        from moveit_msgs.msg import AttachedCollisionObject, CollisionObject

        link = self.robot.joints[grip.joint].parent
        touch, todo = [], [link]
        while todo:
            current = todo.pop()
            touch.append(current)
            todo += [j.child for j in self.robot.child_joints(current)]
        prefix = str(self._param("frame_prefix"))
        msg = AttachedCollisionObject(link_name=prefix + link,
                                      touch_links=[prefix + t for t in touch] if add else [])
        msg.object.id = grip.holding
        msg.object.header.frame_id = prefix + link
        msg.object.header.stamp = self.get_clock().now().to_msg()
        msg.object.operation = CollisionObject.ADD if add else CollisionObject.REMOVE
        self.attach_pub.publish(msg)
        self.get_logger().info(f"{grip.name}: {'holds' if add else 'lets go of'} {grip.holding}")

    def _placed_robot(self):
        """The robot where it stands in the world (robot_bridge.model.placement: its file's placement, else
        robot_pose), where the world's bodies are."""
        from ..model.placement import placed

        try:
            return placed(self.robot, list(self._param("robot_pose") or ()))
        except ValueError as exc:
            self.get_logger().error(f"robot_pose ignored: {exc}")
            return self.robot

    def _build_scene(self) -> None:
        from ..sim.scene import Scene

        self._scene = Scene(self._placed_robot())
        if self._world_objects:
            self._scene.set_objects(self._world_objects)

    def _apply_objects(self, text: str) -> None:
        """Sim: world_node's detected bodies, which the closing fingers also stop on (on the objects worker:
        body files are read there, never on the control or goal threads)."""
        from ..errors import DescriptionError

        try:
            read = self.objects_reader.objects(text)
        except DescriptionError as exc:
            self.get_logger().warning(f"objects document ignored: {exc}", throttle_duration_sec=5.0)
            return
        if read.problems:
            self.get_logger().warning(f"objects document: {read.summary()}", throttle_duration_sec=5.0)
        objects = {name: value for name, value in read.objects.items()
                   if self.robot is None or name not in self.robot.environment}
        if self.objects_worker.stopped:
            return
        with self.lock:
            self._world_objects = objects
            if self._scene is not None:
                try:
                    self._scene.set_objects(objects)
                except ValueError as exc:
                    self.get_logger().warning(f"objects document ignored: {exc}", throttle_duration_sec=5.0)
