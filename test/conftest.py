"""Shared test set-up: an isolated ROS 2 domain per test run, the corpus location, and the plugins every
folder uses: the rclpy fixtures (fixtures/ros_fixtures.py) and the layers (fixtures/layer_report.py).

This folder is on sys.path (pytest's rootdir conftest import), so tests import their helpers as
``fixtures.X`` from test/fixtures/; no test module imports another, nor edits sys.path (test_layout.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from fixtures import domains

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO / ".." / "shared" / "corpus").resolve()
FIXTURES = Path(__file__).resolve().parent / "fixtures"

pytest_plugins = ["fixtures.ros_fixtures", "fixtures.layer_report", "fixtures.scheduling"]

# One DDS domain per pytest process so parallel runs never see each other (fixtures/domains.py: unique on this
# machine; an exported ROS_DOMAIN_ID is kept, except by an xdist worker, which inherits its controller's), and
# discovery stays on this machine.
if "PYTEST_XDIST_WORKER" in os.environ or not os.environ.get("ROS_DOMAIN_ID"):
    os.environ["ROS_DOMAIN_ID"] = str(domains.claim())
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

# A suite started in the background of a script (`make test &`) inherits SIGINT ignored, and so would
# every process it starts: the Ctrl-C tests would then see nodes and `ros2 launch` ignore SIGINT.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config):
    """The ROS 2 distribution the suite runs on, named in every run's output (CI runs Kilted and Jazzy)."""
    from robot_bridge.ros import rcl_layout

    return (f"ROS 2 distro: {rcl_layout.distro()} (rclpy {rcl_layout.rclpy_version() or 'not found'}, "
            f"rcl {rcl_layout.rcl_version() or 'not found'})")


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared robot corpus; tests that need it skip cleanly when it is absent."""
    if not (CORPUS / "MANIFEST.md").is_file():
        pytest.skip(f"robot corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def openrave_data(corpus) -> Path:
    return corpus / "openrave" / "src"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


def pytest_runtest_logreport(report):
    """test/test_docs_commands.py's summary comes with a test's report (from an xdist worker too)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == "docs_commands_summary":
            _DOCS_SUMMARY[:] = list(value)


_DOCS_SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter, config):
    """test/test_docs_commands.py: how many documented commands ran, and why the others did not."""
    summary = _DOCS_SUMMARY
    if summary:
        terminalreporter.section("documented shell commands")
        for line in summary:
            terminalreporter.write_line(line)
