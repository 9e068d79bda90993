"""ament_python package robot_bridge (also a plain pip-installable package)."""

import os
import runpy
import xml.etree.ElementTree as ET
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "robot_bridge"
HERE = os.path.dirname(os.path.abspath(__file__))

# The one list of Python runtime dependencies (package.xml mirrors it as rosdep keys).
INSTALL_REQUIRES = [
    "lxml",
    "numpy",
    "scipy",
    "trimesh",
    "PyYAML",
    "matplotlib",
    "python-can",
    "canopen",
    "xacro",            # .xacro robot files (robot_bridge.formats.xacro_in)
]
# Optional fast ray casting for the simulated sensors (robot_bridge.sim.raycast falls back without them);
# numba: the camera's z-buffer (robot_bridge.sim.raster; without it the camera casts rays).
RAYCAST_REQUIRES = ["embreex", "rtree", "numba"]
# robot_bridge.planning: roboplan (C++ RRT-Connect, TOPP-RA on pinocchio + coal; it brings pin and coal);
# robot_bridge.world.occupancy: octomap-python (binds OctoMap: sensor points -> the map the planner avoids).
PLANNING_REQUIRES = ["roboplan>=0.7,<0.8", "octomap-python>=1.10,<2"]
# robot_bridge.view (robot-bridge view): viser serves the live 3D page (three.js) over a WebSocket.
VIEW_REQUIRES = ["viser>=1.0,<2"]
TEST_REQUIRES = [
    "pytest",
    "pytest-timeout",
    "pytest-xdist",  # `make test` runs test files on TEST_WORKERS processes
    "hypothesis",
    "ruff",
    "pin",  # pinocchio: independent forward-kinematics truth
    "cmeel-urdfdom",  # check_urdf
    "colcon-common-extensions",  # the colcon build test (a real ROS 2 install's build tool)
    "example-robot-data",  # the Panda of the planning tests and bench/plan_bench.py
    "ompl",  # bench/plan_bench.py's baseline (OMPL's RRTConnect with a Python validity checker)
    "psutil",  # the docs, ros2 and colcon tests stop whole process trees (without ../shared/ros2-tools too)
]


def _version() -> str:
    return ET.parse(os.path.join(HERE, "package.xml")).getroot().findtext("version").strip()


def _console_scripts() -> list[str]:
    """The node executables and the CLI, from robot_bridge/node_table.py (plain data: read by path, so
    neither robot_bridge nor rclpy is imported here)."""
    return runpy.run_path(os.path.join(HERE, PACKAGE, "node_table.py"))["CONSOLE_SCRIPTS"]


def _files(pattern: str) -> list[str]:
    return sorted(p for p in glob(pattern) if os.path.isfile(p))


setup(
    name=PACKAGE,
    version=_version(),
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["data/*", "data/objects/*"]},   # the embedded robot, world, SRDFs, objects
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", _files("launch/*.py")),
        ("share/" + PACKAGE + "/config", _files("config/*")),
    ],
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES, "raycast": RAYCAST_REQUIRES, "planning": PLANNING_REQUIRES,
                    "view": VIEW_REQUIRES},
    zip_safe=True,
    maintainer="robot_bridge maintainers",
    maintainer_email="robot_bridge@example.com",
    description="OpenRAVE XML / COLLADA / URDF / SRDF robots as ROS 2 citizens",
    license="Apache-2.0",
    entry_points={"console_scripts": _console_scripts()},
)
