"""Same robot in both OpenRAVE formats: barrettwam.robot.xml (wam7.kinbody.xml +
barretthand) against barrett-wam-sensors.zae, and pr2-beta-sim.robot.xml (an XML
robot that includes pr2-beta-static.zae and extends it).

Result (measured): all 16 common links match -- for every link L the offset
inv(T_xml_L(q)) @ T_zae_L(q) (poses relative to wam0) is the same at 20 random
configurations to < 1e-6 (the residue is the mimic coefficient 0.333333 in the
.zae vs 1/3 in the XML).  The offsets themselves are not identity: the two files
put some link frames at different points/orientations of the same body (e.g.
wam3's XML frame is 0.55 m along the elbow link from the .zae frame), which is a
frame-convention difference, not a kinematic one.  The XML robot also has an
extra rigid link ``handbase`` (joint ``dummyhand``) that the .zae merges away.

pr2-beta-sim.robot.xml: every link of the .zae is there with identical FK (the
merged COLLADA joints keep their q = 0 frames; only XML bodies are drawn at
``<initial>``).
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.formats import load
from robot_bridge.kinematics import forward_kinematics

pytest.importorskip("robot_bridge.formats.openrave_xml")


def _relative(poses, base):
    inv = np.linalg.inv(poses[base])
    return {name: inv @ pose for name, pose in poses.items()}


def test_barrett_wam_fk_matches_between_xml_and_zae(openrave_data):
    xml = load(openrave_data / "robots/barrettwam.robot.xml", search_path=[openrave_data])
    zae = load(openrave_data / "robots/barrett-wam-sensors.zae")
    common = sorted(set(xml.links) & set(zae.links))
    assert len(common) == 16 and set(xml.links) - set(zae.links) == {"handbase"}
    active = [j for j in zae.joints.values() if j.is_active]
    assert {j.name for j in active} <= set(xml.joints)
    rng = np.random.default_rng(4)
    offsets = None
    for _ in range(20):
        q = {j.name: rng.uniform(max(j.lower[0], -2.5), min(j.upper[0], 2.5)) for j in active}
        px, pz = _relative(forward_kinematics(xml, q), "wam0"), _relative(forward_kinematics(zae, q), "wam0")
        current = {name: np.linalg.inv(px[name]) @ pz[name] for name in common}
        if offsets is None:
            offsets = current
        for name in common:
            np.testing.assert_allclose(current[name], offsets[name], atol=2e-6, err_msg=name)
    # the arm's frames coincide in position up to the documented per-link shifts
    np.testing.assert_allclose(offsets["wam1"][:3, 3], 0.0, atol=1e-9)
    np.testing.assert_allclose(offsets["wam3"][:3, 3], [-0.045, 0.55, 0.0], atol=1e-9)


def test_pr2_beta_sim_xml_extends_the_zae(openrave_data):
    sim = load(openrave_data / "robots/pr2-beta-sim.robot.xml", search_path=[openrave_data])
    static = load(openrave_data / "robots/pr2-beta-static.zae")
    assert set(static.links) <= set(sim.links) and set(static.joints) <= set(sim.joints)
    assert set(static.manipulators) <= set(sim.manipulators)
    assert len(sim.sensors) > len(static.sensors)
    rng = np.random.default_rng(1)
    active = [j for j in static.joints.values() if j.is_active]
    q = {j.name: rng.uniform(max(j.lower[0], -1.0), min(j.upper[0], 1.0)) for j in active}
    ps, pz = forward_kinematics(sim, q), forward_kinematics(static, q)
    root = static.root
    differ = {name for name in static.links
              if not np.allclose(np.linalg.inv(ps[root]) @ ps[name], np.linalg.inv(pz[root]) @ pz[name],
                                 atol=1e-9)}
    assert not differ
