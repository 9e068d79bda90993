"""``robot-bridge inspect`` / ``check`` verbs, called through their module interface."""

from __future__ import annotations

import argparse

from robot_bridge.cli.verbs import check, inspect


def run(verb, argv):
    parser = argparse.ArgumentParser()
    verb.add_arguments(parser)
    return verb.main(parser.parse_args(argv))


def test_inspect_prints_tree_limits_manipulators(fixtures, capsys):
    assert run(inspect, [str(fixtures / "openrave" / "3dofrobot.robot.xml")]) == 0
    out = capsys.readouterr().out
    assert "robot 3DOFRobot: 6 links, 5 joints, 5 DOF" in out
    assert "via j1 [revolute, 1 DOF] limits [-0.977384, 0.279253] rad ([-56, 16] deg)" in out
    # tree nesting: Arm2 is three levels below Base
    assert "\n        - Arm2\n" in out
    assert "arm: base Base -> effector Arm2, tool xyz 0.125 0 0, direction 1 0 0, gripper j1 j2" in out


def test_inspect_sensors_with_search_path(corpus, openrave_data, capsys):
    env = corpus / "openrave" / "src" / "data" / "testwamcamera.env.xml"
    assert run(inspect, [str(env), "--search-path", str(openrave_data)]) == 0
    out = capsys.readouterr().out
    assert "camera: camera (BaseCamera) on wam4" in out and "laser: laser (BaseLaser2D) on wam1" in out
    assert "via JF1mimic [revolute, 1 DOF, passive, mimic]" in out


def test_check_ok_and_failures(tmp_path, fixtures, capsys):
    assert run(check, [str(fixtures / "openrave" / "3dofrobot.robot.xml")]) == 0
    assert "ok (6 links, 5 joints, 5 DOF" in capsys.readouterr().out
    bad = tmp_path / "bad.kinbody.xml"
    bad.write_text('<KinBody name="k">\n<Body name="a"><translation>1 nan? 0</translation></Body></KinBody>')
    assert run(check, [str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.kinbody.xml:2" in err and "nan?" in err
    missing = tmp_path / "r.robot.xml"
    missing.write_text('<Robot name="r"><KinBody file="gone.kinbody.xml"/></Robot>')
    assert run(check, [str(missing)]) == 2
    assert "gone.kinbody.xml" in capsys.readouterr().err
