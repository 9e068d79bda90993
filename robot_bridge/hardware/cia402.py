"""CiA 402 constants shared by the driver and the simulated drive (state names as canopen's State402)."""

from __future__ import annotations

from pathlib import Path

from .base import FaultKind

DEFAULT_EDS = Path(__file__).resolve().parents[2] / "config" / "cia402_drive.eds"
PROFILE_POSITION = 1
DEVICE_PROFILE = 402                       # low 16 bits of 0x1000

# controlword (0x6040) bits beyond the state-machine commands
CW_NEW_SETPOINT = 1 << 4
CW_CHANGE_IMMEDIATELY = 1 << 5
CW_RELATIVE = 1 << 6
CW_FAULT_RESET = 1 << 7
CW_HALT = 1 << 8

# statusword (0x6041) values per state (bits 0-3, 5, 6) and extra bits
SW_STATE = {
    "NOT READY TO SWITCH ON": 0x0000, "SWITCH ON DISABLED": 0x0040, "READY TO SWITCH ON": 0x0021,
    "SWITCHED ON": 0x0023, "OPERATION ENABLED": 0x0027, "QUICK STOP ACTIVE": 0x0007,
    "FAULT REACTION ACTIVE": 0x000F, "FAULT": 0x0008,
}
SW_VOLTAGE_ENABLED = 1 << 4
SW_REMOTE = 1 << 9
SW_TARGET_REACHED = 1 << 10
SW_SETPOINT_ACK = 1 << 12
SW_FOLLOWING_ERROR = 1 << 13

# error codes (0x603F / EMCY) per fault kind
ERROR_CODES = {
    FaultKind.FOLLOWING_ERROR: 0x8611,          # CiA 402: following error
    FaultKind.COMMUNICATION_TIMEOUT: 0x8130,    # CiA 301: life guard / heartbeat error
    FaultKind.EMERGENCY_STOP: 0x5441,           # drive enable input (safe torque off) open
    FaultKind.POSITION_LIMIT: 0x8612,           # CiA 402: reference limit
    FaultKind.DRIVE: 0x1000,                    # generic error
}


def fault_kind(error_code: int) -> FaultKind:
    for kind, code in ERROR_CODES.items():
        if code == error_code:
            return kind
    return FaultKind.DRIVE
