"""formats.validate lists the model's transforms twice, with and without their labels (issue 33: building
the labels cost a fifth of a PR2 validation, and only a warning needs them): both lists agree."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import SchemaError
from robot_bridge.formats.validate import _labelled_transforms, _transforms, validate
from robot_bridge.model import (AttachedSensor, Box, Geometry, Inertial, Joint, Link, Manipulator,
                                Robot)


def _robot() -> Robot:
    robot = Robot("r")
    shared = Geometry(Box(np.ones(3)))
    robot.links["a"] = Link("a", visuals=[shared, Geometry(Box(np.ones(3)))], collisions=[shared],
                            inertial=Inertial(1.0))
    robot.links["b"] = Link("b", collisions=[Geometry(Box(np.ones(3)))])
    robot.joints["j"] = Joint("j", "revolute", "a", "b")
    robot.sensors["s"] = AttachedSensor("s", "b")
    robot.manipulators["m"] = Manipulator("m", "a", "b")
    return robot


def test_transforms_are_the_labelled_ones_in_the_same_order():
    robot = _robot()
    labelled = _labelled_transforms(robot)
    assert [id(t) for t in _transforms(robot)] == [id(t) for t, _, _ in labelled]
    assert {what.split()[0] for _, what, _ in labelled} == {"robot", "joint", "link", "sensor", "manipulator"}


def test_a_repaired_rotation_is_named_by_its_first_label():
    robot = _robot()
    shared = robot.links["a"].visuals[0].origin
    c, s = np.cos(0.3), np.sin(0.3)
    shared[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    shared[0, 0] += 1e-5                                    # off orthonormal: repaired with a warning
    robot.sensors["s"].origin[:3, :3] = [[c, 0.0, s], [0.0, 1.0, 0.0], [-s + 1e-5, 0.0, c]]
    validate(robot)
    warned = [w for w in robot.warnings if "orthonormalized" in w]
    assert len(warned) == 2
    assert warned[0].startswith("link 'a' visual origin: ") and warned[1].startswith("sensor 's' origin: ")
    assert np.allclose(shared[:3, :3] @ shared[:3, :3].T, np.eye(3), atol=1e-14)


@pytest.mark.parametrize("where, change", [
    ("joint", lambda t: t.__setitem__((0, 3), np.nan)),          # identity rotation, NaN translation
    ("joint", lambda t: t.__setitem__((3, 0), 0.5)),             # identity rotation, not a last row
    ("joint", lambda t: t.__setitem__((slice(0, 3), slice(0, 3)), 2 * np.eye(3))),   # scaled
    ("visual", lambda t: t.__setitem__((1, 3), np.inf)),
    ("inertial", lambda t: t.__setitem__((2, 3), np.nan)),
])
def test_what_the_orthonormalisation_found_valid_is_still_checked(where, change):
    """validate skips its second rigidity and finiteness pass only when the orthonormalisation saw every
    transform rigid and finite: each broken transform is still refused, naming its element."""
    robot = _robot()
    target = {"joint": robot.joints["j"].origin, "visual": robot.links["a"].visuals[1].origin,
              "inertial": robot.links["a"].inertial.origin}[where]
    change(target)
    with pytest.raises(SchemaError) as info:
        validate(robot)
    named = {"joint": "joint[@name='j']/origin", "visual": "link[@name='a']/visual",
             "inertial": "link[@name='a']/inertial"}
    assert info.value.element.startswith(named[where])
