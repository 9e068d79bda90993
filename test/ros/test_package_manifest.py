"""package.xml / setup.py stay a valid, consistent ament_python package."""

from __future__ import annotations

import ast
from pathlib import Path

import robot_bridge
from robot_bridge.formats.xmlsafe import parse_file

REPO = Path(__file__).resolve().parents[2]
# pip requirement -> rosdep key (python.yaml in ros/rosdistro)
ROSDEP_KEY = {
    "lxml": "python3-lxml",
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "PyYAML": "python3-yaml",
    "matplotlib": "python3-matplotlib",
    "python-can": "python3-can",
    "trimesh": "python3-trimesh-pip",
    "canopen": "canopen-pip",
    "xacro": "xacro",                  # the ROS package; pip: the same module from PyPI
}
ROS_RUNTIME = {"rclpy", "std_msgs", "std_srvs", "sensor_msgs", "geometry_msgs", "tf2_msgs", "tf2_ros",
               "trajectory_msgs", "control_msgs", "visualization_msgs", "vision_msgs", "diagnostic_msgs",
               "nav_msgs", "launch", "launch_ros"}


def _setup_py_list(name: str) -> list[str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in setup.py")


def test_manifest_is_format_3_ament_python_with_the_package_version():
    root = parse_file(REPO / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "robot_bridge"
    assert root.findtext("version") == robot_bridge.__version__
    assert root.findtext("export/build_type") == "ament_python"
    assert (REPO / "resource" / "robot_bridge").is_file()


def test_every_python_dependency_has_its_rosdep_key():
    root = parse_file(REPO / "package.xml").getroot()
    exec_deps = {el.text for el in root.iter("exec_depend")}
    assert ROS_RUNTIME <= exec_deps, ROS_RUNTIME - exec_deps
    requirements = _setup_py_list("INSTALL_REQUIRES")
    assert set(requirements) == set(ROSDEP_KEY), "update ROSDEP_KEY and package.xml with setup.py"
    missing = {req: ROSDEP_KEY[req] for req in requirements if ROSDEP_KEY[req] not in exec_deps}
    assert not missing, f"package.xml lacks rosdep keys for {missing}"
