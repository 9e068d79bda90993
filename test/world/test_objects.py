"""The rclpy-free world model of detected objects: mapping file, tracking rules, documents, TF buffer."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.errors import DescriptionError, SchemaError
from robot_bridge.formats import load
from robot_bridge.model.transform import from_rpy, make
from robot_bridge.world import Detection, WorldObjects, load_mapping, read_xml, to_xml, to_yaml
from robot_bridge.world.mapping import with_options

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data"
MAPPING = DATA / "objects.yaml"


def pose(xyz, rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    return make(from_rpy(rpy), xyz)


@pytest.fixture(scope="module")
def mapping():
    return load_mapping(MAPPING)


def test_embedded_mapping_names_the_default_worlds_objects(mapping):
    assert sorted(mapping.classes) == ["ball", "block", "can"]
    can = mapping.classes["can"]
    assert Path(can.file) == DATA / "objects" / "can.kinbody.xml"
    assert can.timeout == 2.0 and can.jitter == 0.005 and not can.static
    # the can body is the default world's can: same cylinder, same place relative to its frame
    world = load(DATA / "default.env.xml")
    ours = can.body.links["can"].collisions[0]
    theirs = world.environment["can"].links["can"].collisions[0]
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours.origin, theirs.origin, atol=1e-12)


def test_first_detection_adds_a_named_body(mapping):
    world = WorldObjects(mapping)
    changes = world.update([Detection("can", pose((1, 0, 0.7)))], now=10.0)
    assert changes.added == ["can_0"] and bool(changes)
    obj = world.get("can_0")
    np.testing.assert_array_equal(obj.pose, pose((1, 0, 0.7)))
    assert obj.class_id == "can" and obj.file == mapping.classes["can"].file and obj.first_seen == 10.0


def test_redetection_within_jitter_keeps_the_pose_above_moves_it(mapping):
    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 0, 0.7)))], 0.0)
    version = world.version
    changes = world.update([Detection("can", pose((1.002, 0, 0.7)))], 0.5)      # 2 mm < 5 mm jitter
    assert not changes and changes.added == [] and len(world) == 1
    assert world.version == version
    np.testing.assert_array_equal(world.get("can_0").pose, pose((1, 0, 0.7)))
    assert world.get("can_0").last_seen == 0.5 and world.get("can_0").detections == 2
    changes = world.update([Detection("can", pose((1.008, 0, 0.7)))], 0.6)      # 8 mm: moves
    assert changes.moved == ["can_0"] and len(world) == 1
    np.testing.assert_array_equal(world.get("can_0").pose, pose((1.008, 0, 0.7)))
    changes = world.update([Detection("can", pose((1.008, 0, 0.7), (0, 0, 0.05)))], 0.7)   # 0.05 rad turn
    assert changes.moved == ["can_0"]


def test_jitter_threshold_comes_from_the_class(mapping):
    world = WorldObjects(with_options(mapping, "can", jitter=0.001))
    world.update([Detection("can", pose((1, 0, 0.7)))], 0.0)
    assert world.update([Detection("can", pose((1.002, 0, 0.7)))], 0.1).moved == ["can_0"]


def test_several_instances_matched_by_nearest_pose(mapping):
    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 0, 0.7))), Detection("can", pose((1, 0.5, 0.7)))], 0.0)
    assert [o.name for o in world.snapshot()] == ["can_0", "can_1"]
    # the same two cans, listed the other way round and moved 1 cm each: no new body, each follows its own
    changes = world.update([Detection("can", pose((1.01, 0.5, 0.7))), Detection("can", pose((1.01, 0, 0.7)))],
                           1.0)
    assert changes.added == [] and sorted(changes.moved) == ["can_0", "can_1"]
    assert world.get("can_0").pose[1, 3] == 0.0 and world.get("can_1").pose[1, 3] == 0.5
    # a third can far from both is a new body; a block near can_0 is a block, not can_0
    changes = world.update([Detection("can", pose((0, 0, 0))), Detection("block", pose((1.01, 0, 0.7)))], 2.0)
    assert sorted(changes.added) == ["block_0", "can_2"]


def test_detector_id_wins_over_nearest_pose(mapping):
    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 0, 0.7)), id="a"), Detection("can", pose((1, 0.1, 0.7)), id="b")],
                 0.0)
    # the detector says track "b" is now where "a" was (they swapped): ids decide, not distance
    changes = world.update([Detection("can", pose((1, 0, 0.7)), id="b")], 1.0)
    assert changes.moved == ["can_1"] and changes.added == []
    assert world.get("can_0").last_seen == 0.0 and world.get("can_1").last_seen == 1.0


def test_max_instances_refuses_more_bodies(mapping):
    world = WorldObjects(with_options(mapping, "ball", max_instances=1))
    changes = world.update([Detection("ball", pose((0, 0, 0))), Detection("ball", pose((3, 0, 0)))], 0.0)
    assert changes.added == ["ball_0"] and changes.over_bodies == 1
    assert changes.limited == ["1 new bodies refused: ball: already 1 bodies (max_instances)"]


def test_timeout_removes_static_stays_and_names_are_reused(mapping):
    m = with_options(mapping, "block", static=True)
    world = WorldObjects(m)
    world.update([Detection("can", pose((1, 0, 0.7))), Detection("block", pose((0.5, 0, 0.7)))], 0.0)
    assert world.next_expiry() == 2.0
    assert not world.expire(1.9)
    assert world.expire(2.1).removed == ["can_0"]
    assert [o.name for o in world.snapshot()] == ["block_0"]
    assert world.expire(1000.0).removed == [] and world.next_expiry() is None
    assert world.update([Detection("can", pose((2, 0, 0.7)))], 3.0).added == ["can_0"]


def test_bad_input_never_reaches_the_world(mapping):
    world = WorldObjects(mapping)
    nan = pose((1, 0, 0.7))
    nan[0, 3] = np.nan
    sheared = pose((1, 0, 0.7))
    sheared[0, 1] = 0.5
    changes = world.update([Detection("mug", pose((0, 0, 0))), Detection("mug", pose((1, 0, 0))),
                            Detection("can", nan), Detection("can", sheared)], 0.0)
    assert changes.unknown == ["mug"] and len(changes.rejected) == 2 and not changes
    assert "non-finite" in changes.rejected[0] and "rigid" in changes.rejected[1]
    assert len(world) == 0 and world.version == 0


def test_new_mapping_drops_bodies_of_removed_classes(mapping, tmp_path):
    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 0, 0.7))), Detection("ball", pose((0.5, 0, 0.7)))], 0.0)
    (tmp_path / "m.yaml").write_text(f"classes:\n  can: {{file: {DATA / 'objects' / 'can.kinbody.xml'}, "
                                     "static: true}\n")
    changes = world.set_mapping(load_mapping(tmp_path / "m.yaml"))
    assert changes.removed == ["ball_0"] and world.get("can_0").static


def test_updates_from_many_threads_are_consistent(mapping):
    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 0, 0.7)))], 0.0)

    def detect(k):
        for i in range(200):
            world.update([Detection("can", pose((1 + 0.01 * (i % 2), 0, 0.7)))], float(i))
            world.snapshot()
            world.expire(float(i))

    threads = [threading.Thread(target=detect, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [o.name for o in world.snapshot()] == ["can_0"]
    assert world.get("can_0").detections == 801


@pytest.mark.parametrize("text, expected", [
    ("classes: []", "classes"),
    ("classes:\n  can: {}\n", "'file'"),
    ("classes:\n  can: {file: objects/can.kinbody.xml, timeout: -1}\n", "timeout"),
    ("classes:\n  can: {file: objects/can.kinbody.xml, static: maybe}\n", "static"),
    ("classes:\n  can: {file: objects/can.kinbody.xml, colour: red}\n", "colour"),
    ("defaults: {jitter: .nan}\nclasses:\n  can: objects/can.kinbody.xml\n", "jitter"),
    ("classes:\n  can: {file: objects/missing.kinbody.xml}\n", "missing.kinbody.xml"),
    ("classes: [unclosed\n", "YAML"),
    ("other: 1\nclasses:\n  can: objects/can.kinbody.xml\n", "other"),
])
def test_bad_mapping_files_fail_with_the_file_and_the_key(tmp_path, text, expected):
    (tmp_path / "objects").symlink_to(DATA / "objects")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(DescriptionError) as err:
        load_mapping(path)
    assert str(path) in str(err.value) and expected in str(err.value)


def test_class_srdf_gives_its_bodies_hpp_handles(mapping):
    """Issue 30: the objects file gives a class an hpp SRDF; its detections carry it into the documents."""
    ball = mapping.classes["ball"]
    assert Path(ball.srdf) == DATA / "ball.srdf"
    handle = ball.body.semantics.handles["side_grasp"]
    assert handle.link == "ball" and handle.mask == [True] * 5 + [False] and handle.clearance == 0.05
    # the handle frame at the centre, its z axis (the approach) along the body's +x
    np.testing.assert_allclose(handle.pose[:3, 3], [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(handle.pose[:3, 2], [1, 0, 0], atol=1e-12)
    assert mapping.classes["can"].srdf == "" and mapping.classes["can"].body.semantics is None
    world = WorldObjects(mapping)
    world.update([Detection("ball", pose((1, 0, 0.8))), Detection("can", pose((1, 1, 0.8)))], 0.0)
    placed = {b.name: b for b in read_xml(to_xml(world.snapshot()))}
    assert placed["ball_0"].srdf == ball.srdf and placed["can_0"].srdf == ""


@pytest.mark.parametrize("srdf, expected", [
    ("<robot name='b'/>", "names no <handle>"),
    ("<robot name='b'><handle name='h'><position>0 0 0 1 0 0 0</position><link name='nope'/></handle>"
     "</robot>", "link 'nope'"),
    ("<robot name='b'><handle name='h'><link name='ball'/></handle></robot>", "position"),
])
def test_bad_class_srdf_fails_with_the_class(tmp_path, srdf, expected):
    (tmp_path / "objects").symlink_to(DATA / "objects")
    (tmp_path / "b.srdf").write_text(srdf)
    path = tmp_path / "m.yaml"
    path.write_text("classes:\n  ball: {file: objects/ball.kinbody.xml, srdf: b.srdf}\n")
    with pytest.raises(DescriptionError) as err:
        load_mapping(path)
    assert str(path) in str(err.value) and "classes.ball.srdf" in str(err.value)
    assert expected in str(err.value)


def test_numeric_class_ids_are_the_detections_strings(tmp_path):
    (tmp_path / "m.yaml").write_text(f"classes:\n  44: {DATA / 'objects' / 'can.kinbody.xml'}\n")
    world = WorldObjects(load_mapping(tmp_path / "m.yaml"))
    assert world.update([Detection("44", pose((1, 0, 0)))], 0.0).added == ["44_0"]


def test_mapping_with_a_broken_body_file_fails(tmp_path):
    (tmp_path / "broken.kinbody.xml").write_text("<KinBody><Body name='x'><Geom type='box'>")
    (tmp_path / "m.yaml").write_text("classes:\n  x: broken.kinbody.xml\n")
    with pytest.raises(SchemaError, match="classes.x.file"):
        load_mapping(tmp_path / "m.yaml")


def test_environment_xml_round_trips_through_formats_load(mapping, tmp_path):
    world = WorldObjects(mapping)
    p_can = pose((0.81, 0.16, 0.74), (0.1, -0.2, 0.3))
    p_ball = pose((1.1, 0.3, 0.79))
    world.update([Detection("can", p_can), Detection("ball", p_ball)], 0.0)
    text = to_xml(world.snapshot(), stamp=1.5)
    placed = {b.name: b for b in read_xml(text)}
    np.testing.assert_array_equal(placed["can_0"].pose, p_can)
    assert placed["ball_0"].class_id == "ball"
    (tmp_path / "objects.env.xml").write_text(text)
    env = load(tmp_path / "objects.env.xml", allowed_roots=[tmp_path, DATA])
    bodies = {env.name: env, **env.environment}
    assert sorted(bodies) == ["ball_0", "can_0"]
    np.testing.assert_allclose(bodies["can_0"].placement, p_can, atol=1e-12)
    np.testing.assert_allclose(bodies["ball_0"].placement, p_ball, atol=1e-12)
    assert bodies["can_0"].links["can"].collisions[0].shape == mapping.classes["can"].body.links["can"] \
        .collisions[0].shape


def test_yaml_document_lists_name_class_file_and_pose(mapping):
    import yaml

    world = WorldObjects(mapping)
    world.update([Detection("can", pose((1, 2, 3)))], 0.0)
    doc = yaml.safe_load(to_yaml(world.snapshot(), "world", 2.0))
    (obj,) = doc["objects"]
    assert doc["frame"] == "world" and obj["name"] == "can_0" and obj["class"] == "can"
    assert obj["translation"] == [1.0, 2.0, 3.0] and obj["quaternion_xyzw"] == [0.0, 0.0, 0.0, 1.0]


def test_read_xml_refuses_bad_documents():
    with pytest.raises(DescriptionError):
        read_xml("<Environment><KinBody name='a'/></Environment>")
    with pytest.raises(DescriptionError):
        read_xml("<Environment><KinBody name='a' file='x'><translation>1 nan 0</translation></KinBody>"
                 "</Environment>")
    assert read_xml("<Environment frame='world'/>") == []


def test_held_body_is_not_moved_by_detections_nor_expires_and_stays_where_released(mapping):
    world = WorldObjects(mapping)
    world.update([Detection("ball", pose((1.1, 0.3, 0.79)))], now=0.0)
    assert world.hold("ball_0") and world.is_held("ball_0") and not world.hold("nothing")
    # seen near the gripper while carried: refreshed, not moved, no second ball
    changes = world.update([Detection("ball", pose((1.1, 0.3, 0.9)))], now=1.0)
    assert not changes.moved and not changes.added and len(world) == 1
    assert np.allclose(world.get("ball_0").pose, pose((1.1, 0.3, 0.79)))
    assert not world.expire(now=100.0) and len(world) == 1
    changes = world.release("ball_0", pose((0.5, -0.2, 0.8)), now=100.0)
    assert changes.moved == ["ball_0"] and not world.is_held("ball_0")
    assert np.allclose(world.get("ball_0").pose, pose((0.5, -0.2, 0.8)))
    timeout = mapping.get("ball").timeout
    assert not world.expire(now=100.0 + 0.5 * timeout)
    assert world.expire(now=100.0 + 1.5 * timeout).removed == ["ball_0"]
    assert not world.release("ball_0", pose((0.0, 0.0, 0.0)), now=200.0)
