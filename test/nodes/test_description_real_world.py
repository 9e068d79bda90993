"""description_node on the real-world class fixtures (test/fixtures/realworld): renamed duplicate
joints and links, formulas beyond fparser, VRML-only geometry and extra sensor types all run; /tf from
random /joint_states equals our FK link for link, under the same (renamed) names as the URDF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from lxml import etree  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from robot_bridge.formats import load  # noqa: E402

from fixtures.description_node import check_tf_equals_fk  # noqa: E402

REALWORLD = Path(__file__).resolve().parents[1] / "fixtures" / "realworld"
FIXTURES = ["collada/openrave_dummies.dae", "collada/catia_formulas.dae", "vrml/vrml_bot.robot.xml",
            "openrave/sensor_bot.robot.xml"]


@pytest.fixture(scope="module", autouse=True)
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


@pytest.mark.parametrize("relpath", FIXTURES)
def test_fixture_runs_in_the_description_node(harness_factory, relpath):
    path = REALWORLD / relpath
    robot = load(path)
    h = harness_factory(description_file=str(path), publish_frequency=0.0)
    urdf = etree.fromstring(h.latched(String, "/robot_description").data.encode())
    assert {j.get("name") for j in urdf.iter("joint")} >= set(robot.joints)
    assert {link.get("name") for link in urdf.iter("link")} >= set(robot.links)
    if relpath.startswith("vrml/"):         # the VRML meshes reach rviz converted, not dropped
        uris = [m.get("filename") for m in urdf.iter("mesh")]
        assert len(uris) == 4 and all(u.startswith("file://") and u.endswith(".stl") for u in uris), uris
        assert all(Path(u[len("file://"):]).is_file() for u in uris)
    check_tf_equals_fk(h, robot, np.random.default_rng(16))
