"""world_node with real rclpy: description_node and world_node run as their own processes, this test process
is the detector (publishes /joint_states and Detection3DArray) and the observer (/tf, markers, objects).

Everything waits on conditions and checks message contents and stamps, never wall-clock sleeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("vision_msgs.msg")

from visualization_msgs.msg import Marker  # noqa: E402

from robot_bridge.formats import load  # noqa: E402
from robot_bridge.kinematics.fk import forward_kinematics  # noqa: E402
from robot_bridge.model.transform import make  # noqa: E402

from fixtures.world_bridge import (CAMERA_LOCAL, DATA, MAPPING, TIMEOUT, WORLD, call_reload,  # noqa: E402
                                   check_nodes, expected_camera_pose, module_bridge, reset_world, wait_until)


@pytest.fixture(scope="module")
def running_bridge(tmp_path_factory, module_detector_node):
    """The module's bridge, started once (``bridge`` resets it for each test)."""
    yield from module_bridge(tmp_path_factory.mktemp("world") / "objects.yaml", MAPPING, module_detector_node)


@pytest.fixture
def bridge(running_bridge):
    """The module's bridge as a fresh one (``reset_world``); after the test, ``check_nodes``."""
    reset_world(running_bridge, MAPPING)
    yield running_bridge
    check_nodes(running_bridge)


def test_detected_can_appears_on_tf_markers_and_objects_through_the_arm(bridge, tmp_path):
    obs = bridge
    camera = expected_camera_pose()
    assert not np.allclose(camera, forward_kinematics(load(WORLD))["link7"])     # the arm is not at zero

    def publish():
        obs.publish_joints()
        obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"))

    assert wait_until(lambda: obs.last_tf("can_0") is not None, publish), "can_0 never appeared on /tf"
    np.testing.assert_allclose(obs.last_tf("can_0")[3], camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)

    assert wait_until(lambda: any(m.ns == "can_0" and m.action == Marker.ADD for m in obs.markers))
    (marker,) = [m for m in obs.markers if m.ns == "can_0" and m.action == Marker.ADD][-1:]
    assert marker.type == Marker.CYLINDER and marker.header.frame_id == "can_0" and marker.frame_locked
    assert marker.scale.x == pytest.approx(0.07) and marker.scale.z == pytest.approx(0.12)
    assert marker.pose.position.z == pytest.approx(0.06)

    assert wait_until(lambda: "can_0" in obs.latest_objects())
    entry = obs.latest_objects()["can_0"]
    assert entry["class"] == "can" and Path(entry["file"]) == DATA / "objects" / "can.kinbody.xml"
    with obs.lock:
        xml = next(x for x in reversed(obs.objects) if 'name="can_0"' in x)
    (tmp_path / "objects.env.xml").write_text(xml)
    env = load(tmp_path / "objects.env.xml", allowed_roots=[tmp_path, DATA])
    bodies = {env.name: env, **env.environment}
    assert list(bodies) == ["can_0"]
    np.testing.assert_allclose(bodies["can_0"].placement, camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)


def test_redetection_jitter_timeout_and_static(bridge):
    obs = bridge
    camera = expected_camera_pose()
    block_local = make(translation=(0.1, 0.0, 0.5))

    def first():
        obs.publish_joints()
        obs.detect(("can", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                   ("block", block_local, "wrist_camera_optical_frame"))

    assert wait_until(lambda: {"can_0", "block_0"} <= set(obs.latest_objects()), first)
    before = obs.latest_objects()["can_0"]

    # 2 mm away (below the 5 mm jitter), in one batch with a new ball: once the ball is there, the batch
    # was applied -- and the can neither moved nor doubled
    moved_2mm = make(translation=(0.002, 0.0, 0.0)) @ CAMERA_LOCAL
    ball_local = make(translation=(-0.1, 0.0, 0.6))
    assert wait_until(lambda: "ball_0" in obs.latest_objects(), lambda: obs.detect(
        ("can", moved_2mm, "wrist_camera_optical_frame"), ("ball", ball_local, "wrist_camera_optical_frame")))
    now = obs.latest_objects()
    assert "can_1" not in now and now["can_0"]["pose"] == before["pose"]
    with obs.lock:
        stamp = max(t[0] for t in obs.tf)
    assert wait_until(lambda: (obs.last_tf("can_0") or (0,))[0] > stamp)
    np.testing.assert_allclose(obs.last_tf("can_0")[3], camera @ CAMERA_LOCAL, rtol=0, atol=1e-9)

    # 8 mm away: the same body moves
    moved_8mm = make(translation=(0.0, 0.008, 0.0)) @ CAMERA_LOCAL
    assert wait_until(lambda: obs.latest_objects()["can_0"]["pose"] != before["pose"],
                      lambda: obs.detect(("can", moved_8mm, "wrist_camera_optical_frame")))
    assert set(obs.latest_objects()) == {"can_0", "ball_0", "block_0"}
    assert wait_until(lambda: np.allclose(obs.last_tf("can_0")[3], camera @ moved_8mm, rtol=0, atol=1e-9))
    last_seen = obs.latest_objects()["can_0"]["last_seen"]

    # detections stop: can and ball go after the timeout; the static block stays
    assert wait_until(lambda: "can_0" not in obs.latest_objects()), "can_0 was never removed"
    with obs.lock:
        removal = next(d for d in obs.objects_yaml if not any(o["name"] == "can_0" for o in d["objects"])
                       and d["stamp"] > last_seen)
    assert removal["stamp"] - last_seen >= TIMEOUT
    assert wait_until(lambda: any(m.ns == "can_0" and m.action == Marker.DELETE for m in obs.markers))
    assert wait_until(lambda: "ball_0" not in obs.latest_objects())
    assert "block_0" in obs.latest_objects() and removal["stamp"] - last_seen > 0.2   # block timeout 0.2 s
    # /tf after the removal: the block keeps coming, the can does not
    assert wait_until(lambda: sum(1 for t in list(obs.tf)
                                  if t[2] == "block_0" and t[0] > removal["stamp"]) >= 3)
    with obs.lock:
        assert not [t for t in obs.tf if t[2] == "can_0" and t[0] > removal["stamp"]]
    assert not any(m.ns == "block_0" and m.action == Marker.DELETE for m in obs.markers)


def test_bad_detections_are_dropped_and_the_node_keeps_serving(bridge):
    obs = bridge
    nan_pose = CAMERA_LOCAL.copy()
    nan_pose[0, 3] = np.nan

    def publish():
        obs.publish_joints()
        obs.detect(("mug", CAMERA_LOCAL, "wrist_camera_optical_frame"),
                   ("can", CAMERA_LOCAL, "no_such_frame"),
                   ("ball", nan_pose, "wrist_camera_optical_frame"),
                   ("block", CAMERA_LOCAL, "wrist_camera_optical_frame"))

    assert wait_until(lambda: "block_0" in obs.latest_objects(), publish)
    assert set(obs.latest_objects()) == {"block_0"}
    with obs.lock:
        assert all(np.isfinite(t[3]).all() for t in obs.tf)

    # a mapping that no longer loads: ~/reload fails, the previous mapping stays in service
    obs.mapping_file.write_text("classes: [unclosed\n")
    success, message = call_reload(obs.node)
    assert not success and "YAML" in message
    assert wait_until(lambda: "ball_0" in obs.latest_objects(), lambda: obs.detect(
        ("ball", CAMERA_LOCAL, "wrist_camera_optical_frame")))
    # the same through the parameter: the set is refused with the reason, the mapping stays
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    setter = obs.node.create_client(SetParameters, "/world_node/set_parameters")
    assert setter.wait_for_service(timeout_sec=30)
    value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(obs.mapping_file))
    request = SetParameters.Request(parameters=[Parameter(name="objects_file", value=value)])
    future = setter.call_async(request)
    assert wait_until(future.done)
    (result,) = future.result().results
    assert not result.successful and "YAML" in result.reason
    assert wait_until(lambda: "can_0" in obs.latest_objects(), lambda: obs.detect(
        ("can", CAMERA_LOCAL, "wrist_camera_optical_frame")))

    # world_node's log of this test (read as it runs: the node keeps serving the module's other tests)
    said = ["unknown class 'mug'", "'no_such_frame'", "non-finite",
            "reload failed, keeping the previous mapping"]
    world = obs.procs["world"]
    output = lambda: world.output(obs.node_since["world"])      # noqa: E731
    assert wait_until(lambda: all(s in output() for s in said), timeout=30.0), output()
