"""Test helpers that drive robot_bridge with the real ``ros2`` command, as separate processes.

``ros2`` is the venv's (installed by ``make setup`` from ../shared/ros2-tools) or, on a ROS 2 install, the one
on PATH.  Every process runs with this test run's ROS_DOMAIN_ID, localhost discovery and an
AMENT_PREFIX_PATH that finds robot_bridge, in a session of its own (so SIGINT reaches only it and a
process-group kill can never leave a child behind); every process started is stopped and checked gone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lxml import etree

NODES = ["/controller_node", "/description_node", "/sensor_bridge"]
SPIN = ["--no-daemon", "--spin-time", "3"]
# param verbs: wait up to 20 s for the node to be discovered (default 1 s misses it on a loaded machine)
PARAM = [*SPIN, "--timeout", "20"]
LATCHED = ["--qos-durability", "transient_local", "--qos-reliability", "reliable"]
VENV_ROS2 = Path(sys.prefix) / "bin" / "ros2"
SHARED_TOOLS = Path(__file__).resolve().parents[2].parent / "shared" / "ros2-tools"
STARTED = re.compile(r"\[INFO\] \[([\w.-]+)-\d+\]: process started with pid \[(\d+)\]")
FINISHED = re.compile(r"\[(INFO|ERROR)\] \[([\w.-]+)-\d+\]: process (has finished cleanly|has died) "
                      r"\[pid (\d+)(?:, exit code (-?\d+))?")


def ros2_executable() -> str:
    """The ros2 command, or skip the test with the reason."""
    if VENV_ROS2.is_file():
        return str(VENV_ROS2)
    if shutil.which("ros2"):
        return shutil.which("ros2")
    where = f"{SHARED_TOOLS} is absent" if not SHARED_TOOLS.is_dir() else "run make setup to install it"
    pytest.skip(f"the ros2 command is not installed in {sys.prefix} ({where}; make setup installs the real "
                "launch/ros2cli from ../shared/ros2-tools)")


def ros2_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    prefixes = [p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    if VENV_ROS2.is_file() and sys.prefix not in prefixes:
        prefixes.insert(0, sys.prefix)
    env.update(AMENT_PREFIX_PATH=os.pathsep.join(prefixes), PYTHONUNBUFFERED="1",
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", RCUTILS_COLORIZED_OUTPUT="0")
    env.setdefault("ROS_DOMAIN_ID", os.environ["ROS_DOMAIN_ID"])
    env.update(extra)
    return env


def ros2(*args: str, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
    """One ros2 verb, run to completion."""
    result = subprocess.run([ros2_executable(), *args], env=ros2_env(), capture_output=True, text=True,
                            timeout=timeout, start_new_session=True)
    if check and result.returncode != 0:
        raise AssertionError(f"ros2 {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


def stop_daemon() -> None:
    """The ros2 daemon of this domain, if a verb started one."""
    subprocess.run([ros2_executable(), "daemon", "stop"], env=ros2_env(), capture_output=True, timeout=60)


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(condition, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Ros2Process:
    """A long-running ros2 command (launch, run): output to a log file, stopped with SIGINT like Ctrl-C."""

    def __init__(self, args: list[str], log: Path, command: list[str] | None = None,
                 cwd: Path | None = None, **env: str):
        """``ros2 *args``, or ``command`` (which must exec the ros2 process, e.g. after sourcing a setup
        file)."""
        self.args, self.log_path = args, log
        self.log_file = open(log, "w", encoding="utf-8")
        self.process = subprocess.Popen(command or [ros2_executable(), *args], env=ros2_env(**env),
                                        cwd=cwd, stdout=self.log_file, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.stop_seconds: float | None = None

    @property
    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def started(self) -> dict[str, int]:
        """Launch's 'process started' lines: process name -> pid."""
        return {name: int(pid) for name, pid in STARTED.findall(self.log)}

    def finished(self) -> dict[int, int | None]:
        """Launch's 'process has finished cleanly / has died' lines: pid -> exit code (0 when clean)."""
        return {int(pid): 0 if how == "has finished cleanly" else int(code) if code else None
                for _, _, how, pid, code in FINISHED.findall(self.log)}

    def wait_for_log(self, pattern: str, timeout: float = 90.0) -> re.Match:
        def found():
            if self.process.poll() is not None:
                raise AssertionError(f"ros2 {' '.join(self.args)} exited {self.process.returncode}:\n"
                                     f"{self.log}")
            return re.search(pattern, self.log)
        return wait_until(found, timeout, what=f"{pattern!r} in the output of ros2 {' '.join(self.args)}")

    def interrupt(self, timeout: float = 30.0, group: bool = False) -> int:
        """SIGINT, then wait; the exit status.  To the ros2 process alone (ros2 launch must stop what it
        started), or with ``group`` to its whole process group as Ctrl-C in a terminal does (ros2 run only
        waits for its child, which gets the terminal's SIGINT too)."""
        start = time.monotonic()
        if self.process.poll() is None:
            if group:
                os.killpg(self.process.pid, signal.SIGINT)
            else:
                self.process.send_signal(signal.SIGINT)
        try:
            status = self.process.wait(timeout)
        finally:
            self.stop_seconds = time.monotonic() - start
        return status

    def close(self) -> list[int]:
        """Whatever happened: nothing of this session stays alive.  The started processes that were
        still alive after the interrupt (and had to be killed)."""
        if self.process.poll() is None:
            try:
                self.interrupt(30.0)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)         # leftovers of the session, if any
        except ProcessLookupError:
            pass
        left = [pid for pid in self.started().values() if alive(pid)]
        for pid in left:            # what launch started, wherever it runs: one stuck stop must not leave
            try:                    # nodes that disturb every later test
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(10)
        self.log_file.close()
        return left


def wait_for_nodes(expected: list[str], launch: Ros2Process, timeout: float = 120.0) -> list[str]:
    def listed():
        if launch.process.poll() is not None:
            raise AssertionError(f"ros2 launch exited {launch.process.returncode}:\n{launch.log}")
        names = ros2("node", "list", *SPIN).stdout.split()
        return names if set(expected) <= set(names) else None
    return wait_until(listed, timeout, interval=1.0, what=f"nodes {expected}")


def echo_once(topic: str, msg_type: str, field: str, *qos: str, timeout: float = 90.0) -> str:
    out = ros2("topic", "echo", "--once", *qos, "--no-daemon", "--field", field, topic, msg_type,
               timeout=timeout).stdout
    return out.rsplit("\n---", 1)[0].strip("\n")


def urdf_links(text: str) -> list[str]:
    root = etree.fromstring(text.encode(), etree.XMLParser(resolve_entities=False, no_network=True))
    return sorted(link.get("name") for link in root.findall("link"))


def assert_stopped_cleanly(launch: Ros2Process, nodes: int = 3) -> None:
    """SIGINT to ros2 launch: it exits 0, each node exited 0 within 10 s, no traceback, nothing left."""
    started = launch.started()
    assert len(started) == nodes, launch.log
    status = launch.interrupt(timeout=30)
    assert status == 0, launch.log
    assert launch.stop_seconds < 10.0, f"stopping took {launch.stop_seconds:.1f} s"
    assert not [pid for pid in started.values() if alive(pid)], launch.log
    assert launch.finished() == {pid: 0 for pid in started.values()}, launch.log
    assert "Traceback" not in launch.log, launch.log
