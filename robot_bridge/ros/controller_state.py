"""controller_node's state publishing: /joint_states, each controller's JointTrajectoryControllerState and
the goals' feedback of every sample (through serialized templates where they can be built), and
/diagnostics (the modules' states, refusals, bus and internal errors).  A mixin of
:class:`robot_bridge.nodes.controller.ControllerNode`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from builtin_interfaces.msg import Time as TimeMsg
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointTrajectoryControllerState
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState
from rclpy.action import ActionServer
from rclpy.task import Future
from std_msgs.msg import Header

from ..hardware.base import HardwareError, ModuleState
from .cdr_template import CdrTemplate, TemplateUnavailable
from .conversions import trajectory_point
from .stamps import stamp_fields
from .template_publishers import TemplatePublishers, state_source, state_views


class Rejected(ValueError):
    """A command refused, with the reason given to the caller."""


@dataclass
class TrajectoryController:
    """One FollowJointTrajectory server over some of the driven joints."""

    name: str
    joints: list[str]
    index: np.ndarray                   # into ControllerNode.joints
    prefix: str                         # "~/" or "~/<name>/"
    server: ActionServer | None = None
    state_pub: object = None


@dataclass
class Gripper:
    """One GripperCommand server for a manipulator's driving gripper joint."""

    name: str
    joint: str
    index: int
    prefix: str
    closing: float = -1.0               # sign of the joint's closing direction
    server: ActionServer | None = None
    touching: str = ""                  # sim: the body the closing fingers meet (this goal)
    holding: str = ""                   # sim: the body they stalled on, attached at world_node


@dataclass
class ActiveGoal:
    handle: object
    future: Future
    controller: object
    feedback: bool = True
    extra: dict = field(default_factory=dict)


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, (Rejected, HardwareError)) else f"{type(exc).__name__}: {exc}"


class ControllerPublishing:
    states_published = 0            # control ticks published (robot-bridge run's readiness)

    # -- publishing --------------------------------------------------------------------------------
    def _publish_state(self) -> None:
        with self.lock:
            control = self.control
            sample = control.sample if control else None
            if sample is None or control.sample_time is None:
                return
            stamp = control.sample_time
            reference = control.reference(self._now())
            goals = [(g.handle, g.controller) for g in self.goals.values()] if self.goals else None
        with self._state_lock:
            self._publish_sample(sample, stamp, reference, goals)
            self.states_published += 1

    def _publish_sample(self, sample, stamp: int, reference, goals) -> None:
        """/joint_states, the controller states and the goals' feedback of one sample (under _state_lock)."""
        actual_rows = (sample.position, sample.velocity, sample.acceleration)
        templates = self._state_templates()
        if templates is not None:              # the messages' numbers written into serialized templates
            source = templates.publish_state(reference, actual_rows, sample.effort, stamp)
            if not goals:
                return
        else:
            source = state_source(reference, actual_rows, sample.effort, self._source)
            self._source = source
        desired, actual, effort, error = state_views(source, len(sample.position))
        sec, nanosec = stamp_fields(stamp)
        header = Header(stamp=TimeMsg(sec=sec, nanosec=nanosec))
        if templates is None:
            self.joint_state_pub.publish(JointState(
                header=header, name=self.joints, position=list(map(float, sample.position)),
                velocity=list(map(float, sample.velocity)), effort=list(map(float, sample.effort))))
            everything = np.arange(len(self.joints))
            self.state_pub.publish(_controller_state(header, self.joints, everything, desired, actual, effort,
                                                     error))
            for ctl in self.controllers:
                if ctl.state_pub is not None:
                    ctl.state_pub.publish(_controller_state(header, ctl.joints, ctl.index, desired, actual,
                                                            effort, error))
        for handle, ctl in goals or ():
            if isinstance(ctl, TrajectoryController) and handle.is_active:
                i = ctl.index
                handle.publish_feedback(FollowJointTrajectory.Feedback(
                    header=header, joint_names=ctl.joints,
                    desired=trajectory_point(*desired[:, i]),
                    actual=trajectory_point(*actual[:, i], effort[i]),
                    error=trajectory_point(*error[:, i])))
            elif isinstance(ctl, Gripper) and handle.is_active:
                handle.publish_feedback(GripperCommand.Feedback(
                    position=float(actual[0, ctl.index]), effort=float(effort[ctl.index])))

    def _state_templates(self):
        """The :class:`TemplatePublishers` of /joint_states and each controller state, built once per joint
        list; their doubles are gathered from a tick's source (``template_publishers``: desired, actual,
        effort, error).  None: publish messages."""
        if self._templates is not None and self._templates[0] is self.joints:   # replaced, never edited
            return self._templates[2]
        key = tuple(self.joints)
        n, built = len(key), []
        everything = np.arange(n)
        try:
            js_gather = np.concatenate([3 * n + everything, 4 * n + everything, 6 * n + everything])
            built.append((self.joint_state_pub, CdrTemplate(lambda slot, stamp: JointState(
                header=Header(stamp=stamp()), name=list(key), position=slot(n), velocity=slot(n),
                effort=slot(n))), js_gather))
            states = [(self.state_pub, key, everything)]
            states += [(c.state_pub, c.joints, c.index) for c in self.controllers if c.state_pub is not None]
            for publisher, joints, index in states:
                built.append((publisher, *_controller_state_template(joints, index, n)))
            publishers = TemplatePublishers(built)
        except TemplateUnavailable:
            publishers = None
        self._templates = (self.joints, key, publishers)
        return publishers

    def _publish_diagnostics(self) -> None:
        with self.lock:
            states = []
            if self.hardware is None and self.internal_error is None and not self.refusals:
                return
            try:
                states = self.hardware.status() if self.hardware is not None else []
            except Exception as exc:  # status itself needs the bus
                states, self.bus_error = [], self.bus_error or _reason(exc)
            sample = self.control.sample if self.control else None
            bus_error, internal_error = self.bus_error, self.internal_error
            refusals = dict(self.refusals)
            for source in self.refusals_once:
                self.refusals.pop(source, None)
            self.refusals_once.clear()
        name = self.get_fully_qualified_name()
        msg = DiagnosticArray(header=Header(stamp=self.get_clock().now().to_msg()))
        for source, reason in refusals.items():
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.WARN, name=f"{name}: {source}",
                                               message=reason[:500]))
        if internal_error is not None:
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{name}: controller",
                                               message=f"halted after an internal error: {internal_error}; "
                                                       "call ~/recover"))
        if bus_error is not None:
            msg.status.append(DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{name}: bus",
                                               message=f"hardware communication lost: {bus_error}"))
        for i, s in enumerate(states):
            level = {ModuleState.FAULT: DiagnosticStatus.ERROR, ModuleState.OFFLINE: DiagnosticStatus.STALE,
                     ModuleState.DISABLED: DiagnosticStatus.WARN}.get(s.state, DiagnosticStatus.OK)
            values = {"state": s.state.value, "brake": "engaged" if s.brake else "released",
                      "fault": s.fault.value if s.fault else "none", "error_code": f"0x{s.error_code:04X}"}
            if sample is not None:
                values.update(position=f"{sample.position[i]:.6f}", velocity=f"{sample.velocity[i]:.6f}")
            values.update(s.details)
            msg.status.append(DiagnosticStatus(
                level=level, name=f"{name}: {s.joint}", message=s.message,
                hardware_id=s.hardware_id,
                values=[KeyValue(key=k, value=str(v)) for k, v in values.items()]))
        self.diagnostics_pub.publish(msg)


def _controller_state(header, joints, index, desired, actual, effort, error):
    """JointTrajectoryControllerState of the joints ``index``: reference (desired), feedback (measured, with
    effort), error (reference - feedback); output is the position command, the reference."""
    return JointTrajectoryControllerState(
        header=header, joint_names=list(joints), reference=trajectory_point(*desired[:, index]),
        feedback=trajectory_point(*actual[:, index], effort[index]), error=trajectory_point(*error[:, index]),
        output=trajectory_point(desired[0, index]), speed_scaling_factor=1.0)


def _controller_state_template(joints, index, n: int):
    """(CdrTemplate, gather) of :func:`_controller_state` for the joints ``index`` of ``n`` (see
    ``template_publishers`` for the source layout)."""
    gather: list[int] = []

    def build(slot, stamp):
        def take(offsets):
            gather.extend(offsets)
            return slot(len(offsets))

        def rows(base):
            return [take([base + d * n + int(i) for i in index]) for d in range(3)]
        reference, feedback = rows(0), rows(3 * n)
        effort = take([6 * n + int(i) for i in index])
        error = rows(7 * n)
        output = take([int(i) for i in index])
        return JointTrajectoryControllerState(
            header=Header(stamp=stamp()), joint_names=list(joints), reference=trajectory_point(*reference),
            feedback=trajectory_point(*feedback, effort), error=trajectory_point(*error),
            output=trajectory_point(output), speed_scaling_factor=1.0)
    template = CdrTemplate(build)
    return template, np.array(gather, dtype=np.int64)
