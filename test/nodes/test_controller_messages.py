"""Operator messages of controller_node: a refused or idle command says what to call."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "hardware"))
from lwa_fixture import Harness, lwa_robot  # noqa: E402

pytest.importorskip("rclpy")


def test_halt_and_home_on_disabled_modules_say_call_enable():
    h = Harness(lwa_robot())
    try:
        assert h.call("enable", False).success
        halt = h.call("halt")
        assert halt.success
        assert halt.message.startswith("nothing moving to halt: modules disabled, brakes engaged (lwa_")
        assert halt.message.endswith("): call ~/enable true")
        home = h.call("home")
        assert not home.success and "modules disabled" in home.message
        assert home.message.endswith("call ~/enable true")
        assert h.call("enable", True).success
        assert h.call("home").success
        assert h.call("halt").message == "halting"
    finally:
        h.close()
