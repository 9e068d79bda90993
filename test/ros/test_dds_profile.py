"""The shipped Fast DDS profile takes effect on the distribution the suite runs on.

A venv exports no ROS_DISTRO; Fast DDS 2.x (Jazzy) reads only ``FASTRTPS_DEFAULT_PROFILES_FILE`` and 3.x
(Kilted) ``FASTDDS_DEFAULT_PROFILES_FILE``.  Independent truth: the shared-memory segment a participant maps
is the profile's ``segment_size`` only when Fast DDS read the profile (its built-in default is far smaller).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("rclpy")

from robot_bridge import bringup  # noqa: E402
from robot_bridge.ros import rcl_layout  # noqa: E402

CHILD = r"""
import os, rclpy
rclpy.init()
node = rclpy.create_node("dds_profile_probe")
sizes = []
with open(f"/proc/{os.getpid()}/maps") as maps:
    for line in maps:
        if "/dev/shm/" in line:
            start, end = line.split()[0].split("-")
            sizes.append(int(end, 16) - int(start, 16))
print(max(sizes, default=0))
node.destroy_node()
rclpy.shutdown()
"""


def _segment_size(profile) -> int:
    found = [e.text for e in ET.parse(profile).getroot().iter() if e.tag.endswith("segment_size")]
    assert found, f"{profile} names no SHM segment_size"
    return int(found[0])


def _largest_shm_mapping(extra: dict) -> int:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE", "ROS_DISTRO")}
    env.update(extra)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def test_the_shipped_profile_is_read_by_the_installed_fast_dds():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    if os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        pytest.skip("the profile is for rmw_fastrtps_cpp")
    profile = bringup.config_file(bringup.FASTDDS_PROFILE)
    segment = _segment_size(profile)
    clean = {k: v for k, v in os.environ.items() if k != "ROS_DISTRO"}       # as in a venv
    clean.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    clean.pop("FASTRTPS_DEFAULT_PROFILES_FILE", None)
    extra = bringup.dds_environment(clean)
    without = _largest_shm_mapping({})
    assert without < segment, "without a profile Fast DDS maps a smaller SHM segment (the measure works)"
    with_profile = _largest_shm_mapping(extra)
    assert with_profile >= segment, (
        f"Fast DDS {rcl_layout.fastdds_version()} did not read the profile given as {sorted(extra)}: "
        f"largest SHM mapping {with_profile} < segment_size {segment}")
