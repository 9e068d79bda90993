"""CiA 402 drives over CANopen (python-can + canopen), one node per joint, profile-position mode.

``open()``: connect the bus, per node NMT pre-operational, check the device profile (0x1000), set
the heartbeat producer (0x1017), map PDOs by SDO (RPDO1: controlword + target position + mode;
TPDO1: statusword + position actual; TPDO2: velocity actual + torque actual + mode display), write the profile
velocity / accelerations and software limits from the joint limits, select profile-position mode,
NMT start.  Heartbeats are supervised: a node silent for ``heartbeat_timeout`` is reported as a
communication-timeout fault.  EMCY messages are recorded as the node's fault.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

import numpy as np

import canopen
from canopen.profiles.p402 import BaseNode402

from .base import FaultKind, Hardware, HardwareError, JointLimits, JointSample, ModuleState, ModuleStatus
from .cia402 import (CW_CHANGE_IMMEDIATELY, CW_HALT, CW_NEW_SETPOINT, DEFAULT_EDS, DEVICE_PROFILE,
                     PROFILE_POSITION, SW_TARGET_REACHED, fault_kind)

CW_ENABLE_OPERATION = 0x000F
CW_QUICK_STOP = 0x0002


class _Drive:
    def __init__(self, joint: str, limits: JointLimits, node: BaseNode402):
        self.joint = joint
        self.limits = limits
        self.node = node
        self.last_heartbeat = 0.0
        self.error_code = 0
        self.comm_lost = False
        self.halting = False
        self.last_velocity = 0.0
        self.slow_profile = False


class CanopenHardware(Hardware):
    def __init__(self, joint_names: Sequence[str], limits: Sequence[JointLimits], node_ids: Sequence[int], *,
                 interface: str = "socketcan", channel: str = "can0", bitrate: int = 500000,
                 eds: str = str(DEFAULT_EDS), counts_per_radian: float = 1e6, heartbeat_ms: int = 50,
                 heartbeat_timeout: float = 0.5, pdo_event_ms: int = 20, sdo_timeout: float = 1.0):
        super().__init__(joint_names, limits)
        if len(node_ids) != len(self.joint_names):
            raise ValueError(f"{len(node_ids)} node ids for {len(self.joint_names)} joints")
        self.node_ids = [int(n) for n in node_ids]
        self.bus_options = {"interface": interface, "channel": channel, "bitrate": int(bitrate)}
        self.eds = str(eds)
        self.cpr = float(counts_per_radian)
        self.heartbeat_ms = int(heartbeat_ms)
        self.heartbeat_timeout = float(heartbeat_timeout)
        self.pdo_event_ms = int(pdo_event_ms)
        # python-canopen waits 0.3 s for an SDO answer: a drive answers within milliseconds, but a loaded host
        # can leave this process's bus thread unscheduled longer than that (a CI run's set-up failed so)
        self.sdo_timeout = float(sdo_timeout)
        self.network: canopen.Network | None = None
        self.drives: list[_Drive] = []
        self._last_read = time.monotonic()
        self.lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------
    def open(self) -> None:
        if self.network is not None:
            return
        network = canopen.Network()
        try:
            network.connect(**self.bus_options)
        except Exception as exc:  # OSError (no such device, no SocketCAN), python-can interface errors
            o = self.bus_options
            raise HardwareError(f"cannot open the CAN bus (interface {o['interface']}, channel "
                                f"{o['channel']}): {type(exc).__name__}: {exc}") from exc
        self.network = network          # only an open bus counts as open (a second open() would skip it)
        try:
            for joint, limits, node_id in zip(self.joint_names, self.limits, self.node_ids):
                self.drives.append(self._setup(joint, limits, node_id))
            for d in self.drives:
                d.node.nmt.state = "OPERATIONAL"
            for d in self.drives:
                d.node.tpdo[1].wait_for_reception(timeout=1.0)
        except Exception:
            self.close()
            raise

    def _setup(self, joint: str, limits: JointLimits, node_id: int) -> _Drive:
        node = BaseNode402(node_id, self.eds)
        node.sdo.RESPONSE_TIMEOUT = self.sdo_timeout
        self.network.add_node(node)
        drive = _Drive(joint, limits, node)
        node.nmt.add_heartbeat_callback(lambda _state, d=drive: self._on_heartbeat(d))
        node.emcy.add_callback(lambda err, d=drive: setattr(d, "error_code", err.code))
        node.nmt.state = "PRE-OPERATIONAL"
        try:
            profile = node.sdo[0x1000].raw & 0xFFFF
        except canopen.SdoCommunicationError as exc:
            raise HardwareError(f"{joint}: CANopen node {node_id} does not answer ({exc})") from exc
        if profile != DEVICE_PROFILE:
            raise HardwareError(f"{joint}: node {node_id} is not a CiA 402 drive (profile {profile})")
        node.sdo[0x1017].raw = self.heartbeat_ms
        node.tpdo.read()
        node.rpdo.read()
        self._map(node.rpdo[1], (0x6040, 0x607A, 0x6060), None)
        self._map(node.tpdo[1], (0x6041, 0x6064), self.pdo_event_ms)
        self._map(node.tpdo[2], (0x606C, 0x6077, 0x6061), self.pdo_event_ms)
        node.rpdo.save()
        node.tpdo.save()
        node.sdo[0x6081].raw = round(limits.velocity * self.cpr)
        node.sdo[0x6083].raw = round(limits.acceleration * self.cpr)
        node.sdo[0x6084].raw = round(limits.acceleration * self.cpr)
        node.sdo[0x6085].raw = round(limits.acceleration * self.cpr)
        if math.isfinite(limits.lower) and math.isfinite(limits.upper):
            node.sdo[0x607D][1].raw = round(limits.lower * self.cpr)
            node.sdo[0x607D][2].raw = round(limits.upper * self.cpr)
        node.sdo[0x6060].raw = PROFILE_POSITION
        node.setup_402_state_machine(read_pdos=False)
        node.rpdo_pointers[0x6060].raw = PROFILE_POSITION      # every RPDO1 carries the mode
        drive.error_code = node.sdo[0x603F].raw
        drive.last_heartbeat = time.monotonic()
        return drive

    @staticmethod
    def _map(pdo, indices, event_ms) -> None:
        pdo.clear()
        for index in indices:
            pdo.add_variable(index)
        pdo.trans_type = 255                                  # event driven
        pdo.event_timer = event_ms
        pdo.enabled = True

    def close(self) -> None:
        if self.network is None:
            return
        for d in self.drives:
            try:
                if not d.comm_lost:
                    d.node.state = "SWITCH ON DISABLED"
                d.node.nmt.state = "PRE-OPERATIONAL"
            except (canopen.SdoCommunicationError, RuntimeError, ValueError):
                pass                                          # best effort on the way out
        self.network.disconnect()
        self.network = None
        self.drives = []

    def enable(self, on: bool = True) -> None:
        self._require_open("enable")
        for d in self.drives:
            if on and self._state_name(d) in ("FAULT", "FAULT REACTION ACTIVE"):
                raise HardwareError(f"enable rejected: {d.joint} faulted ({self._fault_message(d)})")
        for d in self.drives:
            if on:
                d.node.rpdo_pointers[0x607A].raw = d.node.tpdo_values[0x6064]   # hold where it is
                d.halting = False
                self._change_state(d, "OPERATION ENABLED")
            else:
                self._change_state(d, "SWITCH ON DISABLED")

    def _change_state(self, d: _Drive, state: str) -> None:
        try:
            d.node.state = state
        except (RuntimeError, ValueError, canopen.SdoCommunicationError) as exc:
            raise HardwareError(f"{d.joint}: CiA 402 state change to {state} failed ({exc})") from exc

    # -- I/O ------------------------------------------------------------------------
    def read(self) -> JointSample:
        self._require_open("read")
        now = time.monotonic()
        dt = max(now - self._last_read, 1e-6)
        self._last_read = now
        position, velocity, effort, acceleration = [], [], [], []
        for d in self.drives:
            if now - d.last_heartbeat > self.heartbeat_timeout:
                d.comm_lost = True
            values = d.node.tpdo_values
            v = values.get(0x606C, 0) / self.cpr
            position.append(values.get(0x6064, 0) / self.cpr)
            velocity.append(v)
            rated = d.limits.effort if math.isfinite(d.limits.effort) else 0.0
            effort.append(values.get(0x6077, 0) / 1000.0 * rated)          # per mille of rated torque
            acceleration.append((v - d.last_velocity) / dt)
            d.last_velocity = v
        values = (np.array(x, dtype=float) for x in (position, velocity, effort, acceleration))
        return JointSample(*values, stamp=now)

    def command_position(self, positions: Sequence[float], velocities: Sequence[float] | None = None) -> None:
        """Profile-position set-points (``velocities`` feed-forward is not available in this mode)."""
        targets = self._vector(positions, "position command")
        self._require_operational("position command")
        for d in self.drives:
            if d.slow_profile:                              # undo a velocity command's profile speed
                d.node.sdo[0x6081].raw = round(d.limits.velocity * self.cpr)
                d.slow_profile = False
        self._send_targets(targets)

    def _send_targets(self, targets) -> None:
        for d, target in zip(self.drives, targets):
            lim = d.limits
            d.halting = False
            d.node.rpdo_pointers[0x607A].raw = round(min(max(target, lim.lower), lim.upper) * self.cpr)
            base = CW_ENABLE_OPERATION | CW_CHANGE_IMMEDIATELY
            d.node.controlword = base                          # bit 4 low, then its rising edge
            d.node.controlword = base | CW_NEW_SETPOINT

    def command_velocity(self, velocities: Sequence[float]) -> None:
        """Profile-position emulation: move toward the range end at |v| (profile velocity by SDO)."""
        speeds = self._vector(velocities, "velocity command")
        self._require_operational("velocity command")
        targets = []
        for d, v in zip(self.drives, speeds):
            speed = min(abs(v), d.limits.velocity)
            d.node.sdo[0x6081].raw = max(1, round(speed * self.cpr))
            end = d.limits.upper if v > 0 else d.limits.lower
            here = d.node.tpdo_values[0x6064] / self.cpr
            if not math.isfinite(end):
                end = here + math.copysign(1e3, v)
            targets.append(end if speed > 0.0 else here)
            d.slow_profile = True
        self._send_targets(targets)

    def halt(self) -> None:
        self._require_open("halt")
        for d in self.drives:
            if self._state_name(d) == "OPERATION ENABLED":
                d.halting = True
                d.node.controlword = CW_ENABLE_OPERATION | CW_HALT

    def quick_stop(self) -> None:
        """CiA 402 quick stop: decelerate with 0x6085, then switch-on-disabled (brakes in)."""
        self._require_open("quick stop")
        for d in self.drives:
            d.node.controlword = CW_QUICK_STOP

    def recover(self) -> None:
        self._require_open("recover")
        now = time.monotonic()
        for d in self.drives:
            if d.comm_lost and now - d.last_heartbeat > self.heartbeat_timeout:
                raise HardwareError(f"recover failed: {d.joint} (node {d.node.id}) still silent")
            d.comm_lost = False
            if self._state_name(d) in ("FAULT", "FAULT REACTION ACTIVE"):
                d.node.controlword = 0                       # bit 7 low, then its rising edge resets
                self._change_state(d, "SWITCH ON DISABLED")
                d.error_code = 0
        self.enable(True)

    def status(self) -> list[ModuleStatus]:
        out = []
        for joint, node_id in zip(self.joint_names, self.node_ids):
            drive = next((d for d in self.drives if d.joint == joint), None)
            if drive is None:
                out.append(ModuleStatus(joint, ModuleState.OFFLINE, f"canopen:{node_id}", brake=True,
                                        message="not open"))
                continue
            out.append(self._module_status(drive))
        return out

    # -- helpers --------------------------------------------------------------------------
    def _on_heartbeat(self, d: _Drive) -> None:
        d.last_heartbeat = time.monotonic()

    def _state_name(self, d: _Drive) -> str:
        return d.node.state

    def _fault_message(self, d: _Drive) -> str:
        if d.comm_lost:
            return f"communication timeout: no heartbeat for more than {self.heartbeat_timeout} s"
        return f"{fault_kind(d.error_code).value.replace('_', ' ')} (error code 0x{d.error_code:04X})"

    def _module_status(self, d: _Drive) -> ModuleStatus:
        name = self._state_name(d)
        sw = d.node.tpdo_values.get(0x6041, 0)
        details = {"cia402_state": name, "statusword": f"0x{sw:04X}", "node_id": str(d.node.id)}
        hw = f"canopen:{d.node.id}"
        if d.comm_lost or name in ("FAULT", "FAULT REACTION ACTIVE"):
            kind = FaultKind.COMMUNICATION_TIMEOUT if d.comm_lost else fault_kind(d.error_code)
            return ModuleStatus(d.joint, ModuleState.FAULT, hw, brake=name != "FAULT REACTION ACTIVE",
                                fault=kind, message=self._fault_message(d), error_code=d.error_code,
                                details=details)
        if name == "OPERATION ENABLED":
            stopping = d.halting and not sw & SW_TARGET_REACHED
            state = ModuleState.STOPPING if stopping else ModuleState.ENABLED
            return ModuleStatus(d.joint, state, hw, brake=False, message=state.value, details=details)
        if name == "QUICK STOP ACTIVE":
            return ModuleStatus(d.joint, ModuleState.STOPPING, hw, brake=False, message="quick stop",
                                details=details)
        return ModuleStatus(d.joint, ModuleState.DISABLED, hw, brake=True, message=name.lower(),
                            details=details)

    def _require_open(self, what: str) -> None:
        if self.network is None:
            raise HardwareError(f"{what} rejected: CAN bus not open")
