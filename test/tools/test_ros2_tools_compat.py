"""tools/ros2_tools_compat.py: the Kilted-era ros2cli from ../shared/ros2-tools adapted to Jazzy's rclpy
(whose ``rclpy.init`` is not a context manager), on the installed copy only, once.  The tools themselves are
exercised by test/launch/test_ros2_launch.py (``ros2 service call``) in each venv."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UPSTREAM_CALL = REPO / ".." / "shared" / "ros2-tools" / "ros2cli" / "ros2service" / "ros2service" / "verb" \
    / "call.py"


def load_tool():
    path = REPO / "tools" / "ros2_tools_compat.py"
    spec = importlib.util.spec_from_file_location("ros2_tools_compat", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def call_py(tmp_path) -> Path:
    if not UPSTREAM_CALL.is_file():
        pytest.skip(f"no ros2-tools sources at {UPSTREAM_CALL.parent}")
    return Path(shutil.copy(UPSTREAM_CALL, tmp_path / "call.py"))


def test_service_call_gets_an_init_that_shuts_down_once_and_only_once(call_py):
    tool = load_tool()
    (patch,) = [p for p in tool.PATCHES if p.module == "ros2service.verb.call"]
    assert tool.apply(patch, call_py)
    text = call_py.read_text()
    assert "with rclpy.init():" not in text and "with _rclpy_init():" in text
    compile(text, str(call_py), "exec")
    # the shim behaves like Kilted's InitContextManager: init on entry, shutdown on exit (also on error)
    calls = []

    class FakeRclpy:
        def init(self, *args, **kwargs):
            calls.append("init")

        def try_shutdown(self):
            calls.append("shutdown")

    scope = {"rclpy": FakeRclpy()}
    exec(patch.shim, scope)
    with pytest.raises(RuntimeError):
        with scope["_rclpy_init"]():
            calls.append("body")
            raise RuntimeError("service failed")
    assert calls == ["init", "body", "shutdown"]
    # a second setup run changes nothing
    assert not tool.apply(patch, call_py)
    assert call_py.read_text() == text


def test_changed_upstream_text_stops_the_setup_naming_the_file(call_py):
    tool = load_tool()
    (patch,) = [p for p in tool.PATCHES if p.module == "ros2service.verb.call"]
    call_py.write_text(call_py.read_text().replace("with rclpy.init():", "rclpy.init()"))
    with pytest.raises(SystemExit, match="call.py"):
        tool.apply(patch, call_py)


def test_only_an_rclpy_without_an_init_context_manager_is_adapted():
    rclpy = pytest.importorskip("rclpy")
    tool = load_tool()
    assert tool.rclpy_init_is_not_a_context_manager() == (not hasattr(rclpy, "InitContextManager"))
