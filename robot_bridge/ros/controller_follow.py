"""controller_node following the description node: when the description node switches its robot file (a reload
it accepted, seen on /parameter_events), the controller re-reads the robot and drives it if nothing moves
(no goal, no trajectory, simulated hardware); else it refuses commands with the reason until the description
node switches back or the controller restarts.  A mixin of
:class:`robot_bridge.nodes.controller.ControllerNode`."""

from __future__ import annotations

from rclpy.parameter import parameter_value_to_python

from ..control.operation import unsafe_to_switch
from ..model import Robot

FOLLOWED = ("description_file", "srdf_file", "search_path", "xacro_args")    # the description node's too


class FollowDescription:
    # -- following the description node --------------------------------------------------------
    def _description_node(self) -> str:
        return self.get_namespace().rstrip("/") + "/description_node"

    def _on_parameter_event(self, event) -> None:
        """The description node switched its robot (a reload it accepted): follow it when safe."""
        if not self.description["description_file"] or event.node != self._description_node():
            return
        changed = {p.name: parameter_value_to_python(p.value)
                   for p in event.changed_parameters if p.name in FOLLOWED}     # not its start-up values
        if not changed or (self.description_refusal is None and
                           all(self.description.get(k) == v for k, v in changed.items())):
            return
        self.follow_description({**self.description, **changed})

    def follow_description(self, description: dict) -> bool:
        """Re-read the robot of ``description`` and drive it, when nothing moves (no goal, no trajectory,
        hardware simulated); else refuse with the reason (logged, on /diagnostics) and refuse commands until
        the controller is restarted or the description node switches back.  True when followed."""
        name = description["description_file"]
        back = all(self.description.get(k) == v for k, v in description.items())
        try:
            with self.lock:
                reason = self._unsafe_to_switch()
            if back:
                reason = None
            elif reason is None:
                robot = self._read_robot(description)
                with self.lock:
                    reason = self._unsafe_to_switch()
                    if reason is None:
                        self._switch_robot(robot, description)
        except Exception as exc:  # a file that does not load here, joints the hardware cannot drive
            reason = f"{type(exc).__name__}: {exc}"
        if reason is None:
            self.description_refusal = None
            self._refused("description", None)
            if not back:
                self.get_logger().info(f"following the description node: robot {self.robot.name!r} from "
                                       f"{name}, joints {', '.join(self.joints)}")
            return True
        self.description_refusal = (f"the description node switched to {name}, not followed: {reason}; "
                                    "commands refused (switch it back, or restart the controller)")
        self.get_logger().error(self.description_refusal)
        self._refused("description", self.description_refusal)
        return False

    def _unsafe_to_switch(self) -> str | None:
        return unsafe_to_switch(len(self.goals), self.control, self._param("hardware"))

    def _switch_robot(self, robot: Robot, description: dict) -> None:
        """Under the lock, nothing moving: the old robot's servers and hardware go, the new robot's come
        (after a state tick publishing on them has finished: _state_lock)."""
        with self._state_lock:
            self._replace_robot(robot, description)

    def _replace_robot(self, robot: Robot, description: dict) -> None:
        if self._templates and self._templates[2] is not None:
            self._templates[2].close()          # their publishers go: no publish through their handles
        for server in [c.server for c in self.controllers] + [g.server for g in self.grippers]:
            if server is not None:
                server.destroy()
        for ctl in self.controllers:
            if ctl.state_pub is not None:
                self.destroy_publisher(ctl.state_pub)
        if self.hardware is not None:
            self.hardware.close()
        old = (self.robot, self.hardware, self.control, self.joints, self.limits)
        self.controllers, self.grippers, self._templates, self._source = [], [], None, None
        self.robot, self.hardware, self.control, self.last_states = robot, None, None, None
        try:
            self._setup()
            self._setup_controllers()
            self._state_templates()
        except Exception:
            self.robot, self.hardware, self.control, self.joints, self.limits = old
            self.hardware.open()
            self._setup_controllers()
            raise
        self.description = dict(description)
        if self._param("auto_init"):
            self.hardware.open()
            self.hardware.enable(True)
            self.control.hold_here()
        self.params.hold("joints", list(self.joints))
        self._hold_controllers()
