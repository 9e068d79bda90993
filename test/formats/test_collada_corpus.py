"""Every COLLADA file of the shared corpus: robots/kinbodies load, mesh-only files
are recognised with a clear message."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import UnsupportedFormatError
from robot_bridge.formats import collada

# MANIFEST "COLLADA mesh only" (7 in this copy of the corpus)
MESH_ONLY = [
    "hpp-environments/meshes/buggy/buggyBB.dae",
    "hpp-environments/meshes/buggy/buggy_rearwheel.dae",
    "hpp-environments/meshes/buggy/wheel_frontleft.dae",
    "hpp-environments/meshes/buggy/wheel_frontright.dae",
    "hpp-environments/meshes/hrp2/floor.dae",
    "hpp-environments/meshes/tests/baxter_simple/torso.dae",
    "hpp_tutorial/meshes/box.dae",
]

# path -> (links, joints, manipulators, attached sensors, is_robot); link/joint counts from MANIFEST
ROBOTS = {
    "openrave/src/data/jsk-plate.zae": (1, 0, 0, 0, False),
    "openrave/src/data/mug1.dae": (1, 0, 0, 0, False),
    "openrave/src/robots/barrett-wam-sensors.zae": (16, 15, 1, 2, True),
    "openrave/src/robots/kawada-hironx-parallelfingers.zae": (24, 23, 6, 0, True),
    "openrave/src/robots/kawada-hironx.zae": (24, 23, 6, 0, True),
    "openrave/src/robots/kuka-youbot.zae": (9, 8, 1, 0, True),
    "openrave/src/robots/man1.zae": (64, 63, 2, 0, True),
    "openrave/src/robots/mitsubishi-pa10.zae": (8, 7, 1, 0, True),
    "openrave/src/robots/neuronics-katana.zae": (9, 8, 2, 0, True),
    "openrave/src/robots/pr2-beta-static.zae": (88, 87, 8, 6, True),
    "openrave/src/robots/pumaarm.zae": (7, 6, 1, 0, True),
    "openrave/src/robots/pumagripper.zae": (3, 2, 1, 0, True),
    "openrave/src/robots/rotation_stage.zae": (4, 3, 1, 0, True),
    "openrave/src/robots/schunk-lwa3.zae": (8, 7, 1, 0, True),
    "openrave/src/robots/shadow-hand.zae": (23, 22, 1, 0, True),
    "openrave/test/ikfastrobots/fail1.dae": (7, 6, 1, 0, True),
    # 5 manipulator extras, 4 of them name the link 'kinmodel/nil_link' that does not exist
    "openrave/test/ikfastrobots/fail4.dae": (7, 6, 1, 0, True),
    "openrave/test/ikfastrobots/fail5_4d.zae": (5, 4, 2, 0, True),
    "openrave/test/ikfastrobots/testik0.zae": (7, 6, 2, 0, True),
    "openrave/test/testdata/box0.dae": (1, 0, 0, 0, False),
    "openrave/test/testdata/calibration_board.dae": (1, 0, 0, 0, False),
}


def test_corpus_lists_are_complete(corpus):
    found = {str(p.relative_to(corpus)) for ext in ("*.dae", "*.zae") for p in corpus.rglob(ext)}
    assert found == set(MESH_ONLY) | set(ROBOTS)


@pytest.mark.parametrize("rel", MESH_ONLY)
def test_mesh_only_documents_are_recognised(corpus, rel):
    with pytest.raises(UnsupportedFormatError, match="mesh-only COLLADA document") as info:
        collada.read(corpus / rel)
    assert rel.split("/")[-1] in str(info.value)


@pytest.mark.parametrize("rel", sorted(ROBOTS))
def test_corpus_robot_loads(corpus, rel):
    links, joints, manips, sensors, is_robot = ROBOTS[rel]
    robot = collada.read(corpus / rel, meshes=False)
    assert (len(robot.links), len(robot.joints), len(robot.manipulators), len(robot.sensors),
            robot.is_robot) == (links, joints, manips, sensors, is_robot)
    roots = [name for name in robot.links if robot.parent_joint(name) is None]
    assert len(roots) == 1
    for j in robot.joints.values():
        assert j.parent in robot.links and j.child in robot.links
        for axis in j.axes:
            assert np.isclose(np.linalg.norm(axis), 1.0)
        assert np.all(j.lower <= j.upper)
    for m in robot.manipulators.values():
        assert m.base in robot.links and m.effector in robot.links
        assert all(g in robot.joints for g in m.gripper_joints)
    for a, b in robot.collision_ignore:
        assert a in robot.links and b in robot.links
    # every visual-scene geometry found a link (nothing dropped silently)
    assert not [w for w in robot.warnings if "not under any link" in w]
