"""Detected objects in the simulation scene: added, moved and removed bodies change what the laser sees."""

from pathlib import Path

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.model.transform import make
from robot_bridge.sim import LaserModel, Scene

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data"
HALF = (0.05, 0.1, 0.3)          # the test box's half extents; its frame is its centre
AHEAD = 0.6                      # box centre this far along the laser's +x


def box_file(tmp_path) -> Path:
    path = tmp_path / "box.kinbody.xml"
    path.write_text(f"""<KinBody name="box"><Body name="box" type="dynamic">
  <Geom type="box"><extents>{HALF[0]} {HALF[1]} {HALF[2]}</extents></Geom></Body></KinBody>""")
    return path


def expected_box_ranges(angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(beams that hit the box's near face, their ranges): face at x = AHEAD - HALF[0] in the laser frame."""
    face = AHEAD - HALF[0]
    lateral = face * np.tan(angles)
    inside = np.abs(lateral) < HALF[1] - 1e-6
    return inside, face / np.cos(angles[inside])


@pytest.fixture
def world():
    robot = load(DATA / "default.env.xml")
    scene = Scene(robot)
    sensor = robot.sensors["base_laser"]
    return robot, scene, sensor, LaserModel.from_sensor(sensor)


def scan(robot, scene, sensor, model):
    return model.scan(scene, scene.sensor_pose(sensor), exclude=[(robot.name, sensor.link)])


def test_box_in_front_of_the_base_laser_gives_the_analytic_range_and_goes_away(world, tmp_path):
    robot, scene, sensor, model = world
    empty = scan(robot, scene, sensor, model)
    box = load(box_file(tmp_path))
    laser = scene.sensor_pose(sensor)
    inside, ranges = expected_box_ranges(model.angles)
    assert inside.sum() >= 20 and np.all(empty[inside] > ranges + 0.01)     # free space there before

    assert scene.set_objects({"box_0": (box, laser @ make(translation=(AHEAD, 0, 0)))}) == (["box_0"], [], [])
    seen = scan(robot, scene, sensor, model)
    assert np.max(np.abs(seen[inside] - ranges)) < 1e-6
    outside = ~inside
    lateral_clear = np.abs(AHEAD * np.tan(model.angles)) > HALF[1] + 0.1      # beams well clear of the box
    assert np.array_equal(seen[outside & lateral_clear], empty[outside & lateral_clear])

    # moved 0.2 m further away: the same body, the new range
    assert scene.set_objects({"box_0": (box, laser @ make(translation=(AHEAD + 0.2, 0, 0)))}) == \
        ([], ["box_0"], [])
    moved = scan(robot, scene, sensor, model)
    centre = model.count // 2
    assert model.angles[centre] == pytest.approx(0.0, abs=1e-12)
    assert abs(moved[centre] - (AHEAD + 0.2 - HALF[0])) < 1e-6

    assert scene.set_objects({}) == ([], [], ["box_0"])
    assert np.array_equal(scan(robot, scene, sensor, model), empty)
    assert "box_0" not in scene.bodies and not [s for s in scene.shapes if s.body == "box_0"]


def test_snapshots_keep_their_objects_while_the_scene_changes(world, tmp_path):
    robot, scene, sensor, model = world
    box = load(box_file(tmp_path))
    laser = scene.sensor_pose(sensor)
    scene.set_objects({"box_0": (box, laser @ make(translation=(AHEAD, 0, 0)))})
    frozen = scene.snapshot()
    scene.set_objects({"box_0": (box, laser @ make(translation=(AHEAD + 0.3, 0, 0)))})
    scene.set_objects({})
    centre = model.count // 2
    assert abs(scan(robot, frozen, sensor, model)[centre] - (AHEAD - HALF[0])) < 1e-6


def test_object_names_of_the_worlds_own_bodies_are_refused(world, tmp_path):
    _robot, scene, _sensor, _model = world
    with pytest.raises(ValueError, match="can"):
        scene.set_objects({"can": (load(box_file(tmp_path)), np.eye(4))})


def test_the_wrist_camera_sees_a_detected_object_and_not_after_its_removal(world, tmp_path):
    """Depth along the optical axis to the box's near face, 0.3 m in front of the camera; the box's colour."""
    from robot_bridge.sim import PinholeModel

    robot, scene, _sensor, _model = world
    camera = robot.sensors["wrist_camera"]
    model = PinholeModel.from_sensor(camera)
    pose = scene.sensor_pose(camera)
    exclude = [(robot.name, camera.link)]
    empty, _ = model.render(scene, pose, exclude, color=False)
    red = tmp_path / "red.kinbody.xml"
    red.write_text("""<KinBody name="red"><Body name="red" type="dynamic"><Geom type="box">
      <extents>0.05 0.05 0.05</extents><diffuseColor>1 0 0</diffuseColor></Geom></Body></KinBody>""")
    scene.set_objects({"red_0": (load(red), pose @ make(translation=(0, 0, 0.35)))})   # centre 0.35 m ahead
    depth, rgb = model.render(scene, pose, exclude)
    v, u = int(round(model.cy)), int(round(model.cx))
    assert abs(depth[v, u] - 0.30) < 1e-6 and not abs(empty[v, u] - 0.30) < 0.01
    assert rgb[v, u, 0] > 0 and rgb[v, u, 1] == rgb[v, u, 2] == 0
    scene.set_objects({})
    again, _ = model.render(scene, pose, exclude, color=False)
    np.testing.assert_array_equal(np.nan_to_num(again, nan=-1), np.nan_to_num(empty, nan=-1))
