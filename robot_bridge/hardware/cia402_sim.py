"""A simulated CiA 402 servo drive: canopen's LocalNode with the shipped object dictionary.

It answers SDOs, takes its PDO mapping from its object dictionary when NMT starts it, produces
heartbeats (0x1017), runs the CiA 402 state machine on controlword writes (SDO or RPDO), moves in
profile-position mode with a :class:`TrapezoidalAxis` and publishes statusword / actual values in
its TPDOs.  Faults can be injected (EMCY + error code + FAULT state).
"""

from __future__ import annotations

import math
import threading
import time

import canopen

from .base import FaultKind
from .cia402 import (CW_FAULT_RESET, CW_HALT, CW_NEW_SETPOINT, CW_RELATIVE, DEFAULT_EDS,
                     ERROR_CODES, PROFILE_POSITION, SW_REMOTE, SW_SETPOINT_ACK, SW_STATE, SW_TARGET_REACHED,
                     SW_VOLTAGE_ENABLED)
from .trajectory import TrapezoidalAxis

_ENABLED_STATES = ("OPERATION ENABLED", "QUICK STOP ACTIVE", "FAULT REACTION ACTIVE")


class Cia402DriveSim:
    """One simulated drive on ``network`` (positions in radians outside, counts on the bus)."""

    def __init__(self, network: canopen.Network, node_id: int, eds=DEFAULT_EDS, *, position: float = 0.0,
                 velocity: float = 1.0, acceleration: float = 2.0, lower: float = -math.inf,
                 upper: float = math.inf, counts_per_radian: float = 1e6, period: float = 0.005):
        self.network = network
        self.node = canopen.LocalNode(node_id, str(eds))
        self.cpr = float(counts_per_radian)
        self.axis = TrapezoidalAxis(position, velocity=velocity, acceleration=acceleration, lower=lower,
                                    upper=upper)
        self.period = period
        self.state = "NOT READY TO SWITCH ON"
        self.controlword = 0
        self.halted = False
        self.halt_started: tuple[float, float] | None = None   # (position, velocity) when the last halt came
        self.setpoint_ack = False
        self.error_code = 0
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nmt_state = None
        self._tpdo_sent: dict[int, tuple[bytes, float]] = {}
        self.node.add_write_callback(self._on_write)

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        self.network.add_node(self.node)
        self.network.subscribe(0, self._on_nmt)          # after the NMT slave: sees its new state
        self.state = "SWITCH ON DISABLED"                  # transition 1, automatic
        self._publish()
        self.node.nmt.state = "PRE-OPERATIONAL"
        self.network.send_message(0x700 + self.node.id, [0])  # boot-up
        self._thread = threading.Thread(target=self._run, name=f"cia402-sim-{self.node.id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self.node.nmt.stop_heartbeat()
        self.network.unsubscribe(0, self._on_nmt)
        self.node.remove_network()

    def silence(self) -> None:
        """Simulate a cut cable: no more heartbeats or PDOs."""
        with self.lock:
            self.node.nmt.stop_heartbeat()
            self._stop.set()

    def inject_fault(self, kind: FaultKind = FaultKind.FOLLOWING_ERROR) -> None:
        with self.lock:
            if self.state in ("FAULT", "FAULT REACTION ACTIVE"):
                return
            self.error_code = ERROR_CODES[kind]
            self.node.set_data(0x603F, 0, self.error_code.to_bytes(2, "little"))
            self.node.set_data(0x1001, 0, bytes([0x01]))
            self.node.emcy.send(self.error_code, 0x01)
            if self.state in _ENABLED_STATES:
                self.state = "FAULT REACTION ACTIVE"
                self.axis.stop(self._od(0x6085) / self.cpr)
            else:
                self.state = "FAULT"
            self._publish()

    # -- object dictionary access ----------------------------------------------------
    def _od(self, index: int, subindex: int = 0):
        return self.node.sdo[index].raw if subindex == 0 else self.node.sdo[index][subindex].raw

    def _store(self, index: int, value: int) -> None:
        od = self.node.object_dictionary[index]
        self.node.data_store.setdefault(index, {})[0] = od.encode_raw(value)

    # -- protocol ------------------------------------------------------------------------
    def _on_nmt(self, can_id, data, timestamp) -> None:
        state = self.node.nmt.state
        if state == "OPERATIONAL" and self._nmt_state != "OPERATIONAL":
            with self.lock:                               # apply the PDO mapping the master wrote
                self.node.tpdo.read()
                self.node.rpdo.read()
                for rpdo in self.node.rpdo.map.values():
                    if rpdo.enabled and self._on_rpdo not in rpdo.callbacks:
                        rpdo.add_callback(self._on_rpdo)
                self._tpdo_sent.clear()
        self._nmt_state = state

    def _on_rpdo(self, pdo_map) -> None:
        if self.node.nmt.state != "OPERATIONAL":
            return
        for var in pdo_map:                               # same path as an SDO download
            self.node.set_data(var.index, var.subindex, var.get_data())

    def _on_write(self, index, subindex, od, data) -> None:
        if index == 0x6040:
            with self.lock:
                self._on_controlword(int.from_bytes(data, "little"))

    def _on_controlword(self, cw: int) -> None:
        previous, self.controlword = self.controlword, cw
        s = self.state
        low = cw & 0x8F
        if s == "FAULT":
            if cw & CW_FAULT_RESET and not previous & CW_FAULT_RESET:
                self.error_code = 0
                self._store(0x603F, 0)
                self._store(0x1001, 0)
                self.node.emcy.reset()
                self.state = "SWITCH ON DISABLED"
        elif s == "FAULT REACTION ACTIVE":
            pass
        elif not cw & 0x02:                               # disable voltage
            self.state = "SWITCH ON DISABLED"
        elif cw & 0x06 == 0x02:                           # quick stop
            if s == "OPERATION ENABLED":
                self.state = "QUICK STOP ACTIVE"
                self.axis.stop(self._od(0x6085) / self.cpr)
            elif s != "QUICK STOP ACTIVE":
                self.state = "SWITCH ON DISABLED"
        elif low & 0x87 == 0x06:                          # shutdown
            if s in ("SWITCH ON DISABLED", "SWITCHED ON", "OPERATION ENABLED"):
                self.state = "READY TO SWITCH ON"
        elif low & 0x8F == 0x07:                          # switch on / disable operation
            if s in ("READY TO SWITCH ON", "OPERATION ENABLED"):
                self.state = "SWITCHED ON"
        elif low & 0x8F == 0x0F:                          # enable operation
            if s in ("SWITCHED ON", "QUICK STOP ACTIVE"):
                self.state = "OPERATION ENABLED"
                self.axis.hold()
            if self.state == "OPERATION ENABLED":
                self._profile_position(cw, previous)
        if self.state not in _ENABLED_STATES:
            self.axis.hold()                              # brake in
        self._publish()

    def _profile_position(self, cw: int, previous: int) -> None:
        if self._od(0x6060) != PROFILE_POSITION:
            return
        # a new set-point (rising edge of bit 4) always applies immediately, as with bit 5 set
        if cw & CW_NEW_SETPOINT and not previous & CW_NEW_SETPOINT:
            target = self._od(0x607A) / self.cpr
            if cw & CW_RELATIVE:
                target += self.axis.target
            self.axis.set_target(target, self._od(0x6081) / self.cpr, self._od(0x6083) / self.cpr)
            self.setpoint_ack = True
            self.halted = False
        elif not cw & CW_NEW_SETPOINT:
            self.setpoint_ack = False
        if cw & CW_HALT and not self.halted:
            self.halted = True
            self.halt_started = (self.axis.position, self.axis.velocity)
            self.axis.stop(self._od(0x6084) / self.cpr)
        elif not cw & CW_HALT and self.halted:
            self.halted = False
            self.axis.set_target(self.axis.target)

    # -- simulation -------------------------------------------------------------------------
    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.period):
            now = time.monotonic()
            with self.lock:
                if self.state in _ENABLED_STATES:
                    self.axis.step(now - last)
                    if self.axis.velocity == 0.0 and self.state == "FAULT REACTION ACTIVE":
                        self.state = "FAULT"
                    elif self.axis.velocity == 0.0 and self.state == "QUICK STOP ACTIVE":
                        self.state = "SWITCH ON DISABLED"     # quick stop option code 2
                    if self.state not in _ENABLED_STATES:
                        self.axis.hold()
                self._publish()
            last = now

    def _statusword(self) -> int:
        sw = SW_STATE[self.state] | SW_REMOTE
        if self.state not in ("NOT READY TO SWITCH ON", "SWITCH ON DISABLED", "FAULT"):
            sw |= SW_VOLTAGE_ENABLED
        if self.state == "OPERATION ENABLED" and self.axis.at_rest:
            sw |= SW_TARGET_REACHED
        if self.setpoint_ack:
            sw |= SW_SETPOINT_ACK
        return sw

    def _publish(self) -> None:
        """Actual values into the object dictionary, then TPDOs: on change, and on their event timer."""
        self._store(0x6041, self._statusword())
        self._store(0x6061, self._od(0x6060))
        self._store(0x6064, round(self.axis.position * self.cpr))
        self._store(0x606C, round(self.axis.velocity * self.cpr))
        if self.node.nmt.state != "OPERATIONAL":
            return
        now = time.monotonic()
        for number, tpdo in self.node.tpdo.map.items():
            if not tpdo.enabled:
                continue
            for var in tpdo:
                var.set_data(self.node.get_data(var.index, var.subindex))
            data = bytes(tpdo.data)
            sent, when = self._tpdo_sent.get(number, (None, 0.0))
            timer = (tpdo.event_timer or 0) / 1000.0
            if data != sent or (timer and now - when >= timer):
                tpdo.transmit()
                self._tpdo_sent[number] = (data, now)
