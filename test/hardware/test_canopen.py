"""CanopenHardware against simulated CiA 402 drives on python-can's virtual bus (real protocol stack)."""

from __future__ import annotations

import itertools
import os
import time

import canopen
import pytest

from robot_bridge.hardware.base import FaultKind, HardwareError, JointLimits, ModuleState
from robot_bridge.hardware.canopen_driver import CanopenHardware
from robot_bridge.hardware.cia402 import DEFAULT_EDS, SW_STATE
from robot_bridge.hardware.cia402_sim import Cia402DriveSim
from fixtures.waiting import wait_until

LIMITS = [JointLimits(-2.0, 2.0, 1.0, 2.0, 50.0), JointLimits(-1.5, 1.5, 1.5, 3.0, 50.0)]
NODE_IDS = [5, 6]
_channels = itertools.count()


TIMEOUT = 15.0          # generous: two loaded cores; the checks use the drives' recorded state, not time


@pytest.fixture
def bus():
    """Drives on their own Network; the driver connects to the same virtual channel by name."""
    channel = f"rb-test-{os.getpid()}-{next(_channels)}"
    network = canopen.Network()
    network.connect(interface="virtual", channel=channel)
    drives = [Cia402DriveSim(network, node_id, position=0.1 * k, velocity=lim.velocity,
                             acceleration=lim.acceleration, lower=lim.lower, upper=lim.upper)
              for k, (node_id, lim) in enumerate(zip(NODE_IDS, LIMITS))]
    for d in drives:
        d.start()
    # heartbeats every 20 ms; 2 s of silence (not 0.3 s) before a fault, so a loaded machine's scheduling
    # gaps are not taken for a cut cable
    hardware = CanopenHardware(["j1", "j2"], LIMITS, NODE_IDS, interface="virtual", channel=channel,
                               heartbeat_ms=20, heartbeat_timeout=2.0)
    yield hardware, drives
    hardware.close()
    for d in drives:
        d.stop()
    network.disconnect()


def positions(hardware):
    return hardware.read().position


def test_open_configures_drive_over_sdo_and_pdo(bus):
    hardware, drives = bus
    hardware.open()
    node = drives[0].node
    # what the master wrote by SDO is in the drive's object dictionary
    assert node.sdo[0x1017].raw == 20
    assert node.sdo[0x6060].raw == 1                                  # profile position
    assert node.sdo[0x6081].raw == 1_000_000 and node.sdo[0x6083].raw == 2_000_000
    assert (node.sdo[0x607D][1].raw, node.sdo[0x607D][2].raw) == (-2_000_000, 2_000_000)
    tpdo1 = [node.sdo[0x1A00][i].raw for i in range(1, node.sdo[0x1A00][0].raw + 1)]
    assert tpdo1 == [0x60410010, 0x60640020]                          # statusword, position actual
    rpdo1 = [node.sdo[0x1600][i].raw for i in range(1, node.sdo[0x1600][0].raw + 1)]
    assert rpdo1 == [0x60400010, 0x607A0020, 0x60600008]
    assert drives[0].node.nmt.state == "OPERATIONAL"
    assert positions(hardware) == pytest.approx([0.0, 0.1])            # via TPDO1
    assert [s.state for s in hardware.status()] == [ModuleState.DISABLED] * 2
    assert drives[0].state == "SWITCH ON DISABLED"


def test_enable_move_fault_reset(bus):
    hardware, drives = bus
    hardware.open()
    hardware.enable(True)
    assert [d.state for d in drives] == ["OPERATION ENABLED"] * 2
    assert drives[0].node.sdo[0x6041].raw & 0x6F == SW_STATE["OPERATION ENABLED"]
    assert [s.state for s in hardware.status()] == [ModuleState.ENABLED] * 2
    assert positions(hardware) == pytest.approx([0.0, 0.1])            # enabling does not move

    hardware.command_position([1.5, -0.4])
    wait_until(lambda: positions(hardware) == pytest.approx([1.5, -0.4], abs=1e-6), TIMEOUT, "move")
    assert drives[0].axis.position == pytest.approx(1.5)
    hardware.command_position([5.0, 0.0])                             # beyond the limit: clipped
    wait_until(lambda: positions(hardware)[0] == pytest.approx(2.0, abs=1e-6), TIMEOUT, "limit")

    drives[1].inject_fault(FaultKind.FOLLOWING_ERROR)
    wait_until(lambda: hardware.status()[1].state is ModuleState.FAULT, TIMEOUT, "fault")
    status = hardware.status()[1]
    assert status.fault is FaultKind.FOLLOWING_ERROR and status.error_code == 0x8611   # from EMCY
    assert drives[1].node.sdo[0x603F].raw == 0x8611
    assert hardware.status()[0].state is ModuleState.ENABLED
    with pytest.raises(HardwareError, match="faulted"):
        hardware.command_position([0.0, 0.0])
    with pytest.raises(HardwareError, match="faulted"):
        hardware.enable(True)

    hardware.recover()                                                # fault reset -> enabled again
    assert drives[1].state == "OPERATION ENABLED" and drives[1].node.sdo[0x603F].raw == 0
    assert [s.state for s in hardware.status()] == [ModuleState.ENABLED] * 2
    hardware.command_position([1.5, 0.0])
    wait_until(lambda: positions(hardware) == pytest.approx([1.5, 0.0], abs=1e-6), TIMEOUT,
               "move after reset")

    hardware.enable(False)
    assert [d.state for d in drives] == ["SWITCH ON DISABLED"] * 2
    with pytest.raises(HardwareError, match="disabled"):
        hardware.command_position([0.1, 0.1])


def test_halt_and_quick_stop(bus):
    hardware, drives = bus
    hardware.open()
    hardware.enable(True)
    hardware.command_position([2.0, 0.1])
    wait_until(lambda: drives[0].axis.velocity > 0.9, TIMEOUT, "cruise")
    hardware.halt()
    wait_until(lambda: drives[0].axis.velocity == 0.0, TIMEOUT, "halted")
    stopped = drives[0].axis.position
    # from where the drive was when the halt reached it (recorded by the drive, whatever the scheduling):
    # decelerating at the halt deceleration (0x6084 = the acceleration limit) it never travels more than
    # v0^2 / 2a, and not much less (the drive integrates in steps of its own, longer on a loaded machine)
    q0, v0 = drives[0].halt_started
    assert v0 > 0.9
    ideal = v0 ** 2 / (2 * LIMITS[0].acceleration)
    assert 0.5 * ideal <= stopped - q0 <= ideal + 1e-9
    assert stopped < 2.0
    assert drives[0].state == "OPERATION ENABLED"
    time.sleep(0.1)
    assert drives[0].axis.position == stopped                           # holds after halt
    assert drives[0].node.sdo[0x6041].raw & (1 << 10)                  # target reached (halted)

    hardware.command_position([-1.0, 0.1])                           # new set-point resumes
    wait_until(lambda: drives[0].axis.velocity < -0.5, TIMEOUT, "moving again")
    hardware.quick_stop()
    wait_until(lambda: drives[0].state == "SWITCH ON DISABLED", TIMEOUT, "quick stop complete")
    wait_until(lambda: hardware.status()[0].state is ModuleState.DISABLED, TIMEOUT,
               "the master sees it (TPDO)")
    assert hardware.status()[0].state is ModuleState.DISABLED and hardware.status()[0].brake


def test_sdo_requests_wait_the_configured_time_for_an_answer(bus):
    hardware, _drives = bus
    hardware.open()
    assert [d.node.sdo.RESPONSE_TIMEOUT for d in hardware.drives] == [1.0, 1.0]     # canopen's own: 0.3 s


def test_heartbeat_supervision(bus):
    hardware, drives = bus
    hardware.open()
    hardware.enable(True)
    hardware.read()
    assert hardware.status()[0].state is ModuleState.ENABLED
    drives[0].silence()
    wait_until(lambda: (hardware.read(), hardware.status()[0].state is ModuleState.FAULT)[1], TIMEOUT,
               "the silent drive reported faulted")
    status = hardware.status()[0]
    assert status.state is ModuleState.FAULT and status.fault is FaultKind.COMMUNICATION_TIMEOUT
    assert hardware.status()[1].state is ModuleState.ENABLED
    with pytest.raises(HardwareError, match="silent"):
        hardware.recover()


def test_wrong_device_profile_is_refused():
    channel = f"rb-test-{os.getpid()}-{next(_channels)}"
    network = canopen.Network()
    network.connect(interface="virtual", channel=channel)
    od = canopen.import_od(str(DEFAULT_EDS), 9)
    od[0x1000].default = 0x00000191                                   # CiA 401 I/O module
    node = canopen.LocalNode(9, od)
    network.add_node(node)
    hardware = CanopenHardware(["j"], LIMITS[:1], [9], interface="virtual", channel=channel)
    try:
        with pytest.raises(HardwareError, match="not a CiA 402 drive"):
            hardware.open()
        assert hardware.network is None
    finally:
        network.disconnect()


def test_absent_node_is_reported():
    channel = f"rb-test-{os.getpid()}-{next(_channels)}"
    hardware = CanopenHardware(["j"], LIMITS[:1], [12], interface="virtual", channel=channel)
    with pytest.raises(HardwareError, match="does not answer"):
        hardware.open()
