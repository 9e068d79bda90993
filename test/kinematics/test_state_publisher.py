"""StatePublisher: /tf_static and /tf content computed without rclpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_bridge.kinematics import frames
from robot_bridge.kinematics.fk import forward_kinematics
from robot_bridge.kinematics.state_publisher import RateGate, StatePublisher
from robot_bridge.model import (
    AttachedSensor,
    Gripper,
    Handle,
    Joint,
    Link,
    Manipulator,
    Mimic,
    Robot,
    Semantics,
)
from robot_bridge.model.transform import from_rpy, make, rotation_axis_angle, translation


def _robot() -> Robot:
    r = Robot("toy")
    for name in ("base", "l1", "l2", "l3", "l4", "finger", "frozen"):
        r.links[name] = Link(name)
    r.joints["j1"] = Joint("j1", "revolute", "base", "l1", origin=translation([0, 0, 0.5]),
                           axes=[np.array([0.0, 0.0, 1.0])], lower=-3, upper=3)
    r.joints["ball"] = Joint("ball", "spherical", "l1", "l2",
                             origin=make(from_rpy([0.1, 0.2, 0.3]), [0.3, 0, 0]),
                             child_offset=translation([0, 0.1, 0]))
    r.joints["slide"] = Joint("slide", "prismatic", "l2", "l3", origin=translation([0, 0, 0.2]),
                              axes=[np.array([0.0, 0.6, 0.8])], lower=0, upper=1)
    r.joints["weld"] = Joint("weld", "fixed", "l3", "l4", origin=make(from_rpy([0, 0, 1.0]), [0.05, 0, 0]))
    r.joints["fj"] = Joint("fj", "revolute", "l1", "finger", origin=translation([0.1, 0, 0]),
                           axes=[np.array([1.0, 0.0, 0.0])], passive=True,
                           mimic=[Mimic("atan2(sin(j1), 2) + slide^2")])
    r.joints["pj"] = Joint("pj", "revolute", "l1", "frozen", origin=translation([0, 0.1, 0]),
                           axes=[np.array([0.0, 1.0, 0.0])], passive=True, initial=[0.3])
    r.manipulators["arm"] = Manipulator("arm", "base", "l4", tool=translation([0, 0, 0.12]))
    r.sensors["cam"] = AttachedSensor("cam", "l3", origin=translation([0, 0.02, 0]), type="camera")
    r.sensors["scan"] = AttachedSensor("scan", "base", origin=translation([0.2, 0, 0.1]), type="laser")
    r.semantics = Semantics(handles={"h": Handle("h", "l4", pose=translation([0, 0, 0.3]))},
                            grippers={"g": Gripper("g", "l4", pose=translation([0, 0, 0.1]))})
    return r


def _compose(static, moving):
    """Pose of every frame relative to the tree root, from parent->child edges."""
    edges = {t.child: (t.parent, t.matrix) for t in static}
    for parent, child, m in zip(moving.parents, moving.children, moving.matrices(), strict=True):
        edges[child] = (parent, m)

    def pose(frame):
        if frame not in edges:
            return np.eye(4)
        parent, m = edges[frame]
        return pose(parent) @ m
    return {f: pose(f) for f in edges}


def test_tf_equals_forward_kinematics_for_every_link():
    pytest.importorskip("robot_bridge.kinematics.expr")
    robot = _robot()
    sp = StatePublisher(robot)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = {"j1": rng.uniform(-3, 3), "ball_axis0": rng.uniform(-1, 1), "ball_axis1": rng.uniform(-1, 1),
             "ball_axis2": rng.uniform(-1, 1), "slide": rng.uniform(0, 1)}
        moving, unknown = sp.update(list(q) + ["not_a_joint"], list(q.values()) + [1.0])
        assert unknown == ["not_a_joint"]
        # every moving joint was named or is a mimic
        assert set(moving.children) == {"l1", "ball_link0", "ball_link1", "ball_frame", "l3", "finger"}
        poses = _compose(sp.static_transforms(), moving)
        truth = forward_kinematics(robot, {"j1": q["j1"], "slide": q["slide"],
                                           "ball": [q["ball_axis0"], q["ball_axis1"], q["ball_axis2"]]})
        for link in robot.links:
            np.testing.assert_allclose(poses.get(link, np.eye(4)), truth[link], atol=1e-12)
        # nonlinear mimic, by hand
        angle = math.atan2(math.sin(q["j1"]), 2) + q["slide"] ** 2
        expected = truth["l1"] @ translation([0.1, 0, 0]) @ make(rotation_axis_angle([1, 0, 0], angle))
        np.testing.assert_allclose(poses["finger"], expected, atol=1e-12)


def test_hand_derived_planar_arm():
    r = Robot("planar")
    for n in ("a", "b", "c"):
        r.links[n] = Link(n)
    r.joints["q1"] = Joint("q1", "revolute", "a", "b", axes=[np.array([0, 0, 1.0])])
    r.joints["q2"] = Joint("q2", "revolute", "b", "c", origin=translation([1.0, 0, 0]),
                           axes=[np.array([0, 0, 1.0])])
    sp = StatePublisher(r, prefix="p/")
    moving, _ = sp.update(["q1", "q2"], [math.pi / 2, math.pi / 2])
    assert moving.parents == ["p/a", "p/b"] and moving.children == ["p/b", "p/c"]
    np.testing.assert_allclose(moving.translations, [[0, 0, 0], [1, 0, 0]], atol=1e-15)
    s = math.sqrt(0.5)
    np.testing.assert_allclose(moving.quaternions, [[0, 0, s, s], [0, 0, s, s]], atol=1e-15)
    poses = _compose(sp.static_transforms(), moving)
    np.testing.assert_allclose(poses["p/c"][:3, 3], [0, 1, 0], atol=1e-15)   # elbow up at (0,1)


def test_static_frames_and_prefix():
    pytest.importorskip("robot_bridge.kinematics.expr")
    sp = StatePublisher(_robot(), prefix="r1/")
    static = {(t.parent, t.child): t.matrix for t in sp.static_transforms()}
    assert ("r1/l3", "r1/l4") in static                                   # fixed joint
    assert ("r1/l1", "r1/frozen") in static                               # frozen passive joint
    np.testing.assert_allclose(static[("r1/l1", "r1/frozen")],
                               translation([0, 0.1, 0]) @ make(rotation_axis_angle([0, 1, 0], 0.3)))
    assert ("r1/ball_frame", "r1/l2") in static                           # child offset
    np.testing.assert_allclose(static[("r1/l4", frames.tool_frame("arm", "r1/"))], translation([0, 0, 0.12]))
    assert static[("r1/l3", "r1/cam")][1, 3] == pytest.approx(0.02)
    np.testing.assert_allclose(static[("r1/cam", "r1/cam_optical_frame")], np.eye(4))
    assert ("r1/base", "r1/scan") in static
    assert (("r1/scan", "r1/scan_optical_frame") in static) is False      # lasers have no optical frame
    assert static[("r1/l4", "r1/handle_h")][2, 3] == pytest.approx(0.3)
    assert static[("r1/l4", "r1/gripper_g")][2, 3] == pytest.approx(0.1)
    # no moving joint leaks into the static set, and every child appears once
    children = [t.child for t in sp.static_transforms()]
    assert len(children) == len(set(children))
    assert not set(children) & set(sp.children)


def test_environment_bodies_under_world():
    r = Robot("bot")
    r.links["base"] = Link("base")
    r.placement = translation([1, 2, 0])
    table = Robot("table", is_robot=False)
    table.links["top"] = Link("top")
    table.links["leg"] = Link("leg")
    table.joints["w"] = Joint("w", "fixed", "top", "leg", origin=translation([0, 0, -0.4]))
    table.placement = translation([3, 0, 0.7])
    r.environment["table"] = table
    static = {(t.parent, t.child): t.matrix for t in StatePublisher(r).static_transforms()}
    np.testing.assert_allclose(static[("world", "base")], translation([1, 2, 0]))
    np.testing.assert_allclose(static[("world", "table_top")], translation([3, 0, 0.7]))
    np.testing.assert_allclose(static[("world", "table_leg")], translation([3, 0, 0.3]))


def test_rate_gate_follows_robot_state_publisher():
    gate = RateGate(10.0)                           # 100 ms
    assert gate.admit(["a"], 1_000_000_000)
    assert not gate.admit(["a"], 1_050_000_000)
    assert gate.admit(["a"], 1_100_000_000)
    assert gate.admit(["b"], 1_110_000_000)         # first time seen: publish
    assert not gate.admit(["a", "b"], 1_150_000_000)
    assert gate.admit(["a"], 500_000_000)           # stamp went backwards: reset
    every = RateGate(0.0)
    assert all(every.admit(["a"], 1) for _ in range(3))
    ignoring = RateGate(10.0, ignore_timestamp=True)
    assert all(ignoring.admit(["a"], 1) for _ in range(3))
    with pytest.raises(ValueError):
        RateGate(-1.0)


def test_default_joint_state_uses_initial_values():
    r = Robot("x")
    r.links["a"] = Link("a")
    r.links["b"] = Link("b")
    r.joints["u"] = Joint("u", "universal", "a", "b", initial=[0.1, 0.2])
    names, positions = StatePublisher(r).default_joint_state()
    assert names == ["u_axis0", "u_axis1"]
    assert positions == [0.1, 0.2]
