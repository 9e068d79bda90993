"""A robot whose only geometry is VRML 2.0: the simulation reads it through the one mesh loader."""

from pathlib import Path

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.model import Geometry, Link, Mesh, Robot
from robot_bridge.sim import LaserModel, Scene

VRML_BOT = Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "vrml" / "vrml_bot.robot.xml"


@pytest.mark.parametrize("pan_deg", [0.0, 10.0, -15.0])
def test_laser_reads_the_analytic_distance_to_a_vrml_link(pan_deg):
    robot = load(VRML_BOT)
    scene = Scene(robot, backend="numpy")
    assert scene.warnings == []
    assert [s.kind for s in scene.shapes] == ["mesh", "mesh"]
    laser = robot.sensors["front_laser"]
    model = LaserModel.from_sensor(laser)
    pan = np.radians(pan_deg)
    scene.set_joint_positions({"pan": pan})
    ranges = model.scan(scene, scene.sensor_pose(laser), exclude=[(robot.name, "base")]).astype(float)
    # The arm's near face is the plane x' = 0.45 of the arm frame (turned by pan about the world z through
    # the origin); the laser sits at (0.1, 0, 0.25), beam a along (cos a, sin a, 0):
    # cos(pan) (0.1 + r cos a) + sin(pan) r sin a = 0.45  =>  r = (0.45 - 0.1 cos pan) / cos(a - pan).
    a = model.angles
    expected = (0.45 - 0.1 * np.cos(pan)) / np.cos(a - pan)
    hit_x = 0.1 + expected * np.cos(a)
    hit_y = expected * np.sin(a)
    y_face = -np.sin(pan) * hit_x + np.cos(pan) * hit_y        # across the face, in the arm frame
    on_face = np.abs(y_face) < 0.2 - 1e-3
    assert on_face.sum() >= 30
    assert np.max(np.abs(ranges[on_face] - expected[on_face])) < 1e-6
    centre = model.count // 2
    if pan_deg == 0.0:
        assert ranges[centre] == pytest.approx(0.35, abs=1e-6)


def test_a_mesh_that_cannot_load_is_one_warning(tmp_path):
    broken = tmp_path / "broken.wrl"
    broken.write_text("#VRML V2.0 utf8\nShape { geometry IndexedFaceSet { coord Coordinate { point [ 0 0 0 ")
    links = {name: Link(name, collisions=[Geometry(Mesh(uri="broken.wrl", path=str(broken)))])
             for name in ("a", "b")}
    links["c"] = Link("c", collisions=[Geometry(Mesh(uri="gone.stl", path=None))])
    links["d"] = Link("d", collisions=[Geometry(Mesh(uri="dir", path=str(tmp_path)))])
    scene = Scene(Robot("r", links=links), backend="numpy")
    assert scene.shapes == []
    assert len(scene.warnings) == 3, scene.warnings               # once per mesh, not once per link
    assert "broken.wrl" in scene.warnings[0] and "unterminated" in scene.warnings[0]
    assert "'gone.stl' was not found" in scene.warnings[1]
    assert "directory" in scene.warnings[2]
