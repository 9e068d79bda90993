"""CLI messages an operator acts on: check's error prefix, a directory given as robot, convert's -o."""

from __future__ import annotations

from robot_bridge.cli.main import main


def test_check_errors_carry_the_documented_prefix(tmp_path, capsys):
    bad = tmp_path / "bad.kinbody.xml"
    bad.write_text('<KinBody name="k">\n<Body name="a"><translation>1 nan? 0</translation></Body></KinBody>')
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("robot-bridge check: error: ") and err.count("\n") == 1


def test_a_directory_as_robot_says_so(tmp_path, capsys):
    for verb in (["check"], ["inspect"], ["convert", "-o", str(tmp_path / "o.urdf")]):
        assert main([verb[0], str(tmp_path), *verb[1:]]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path}: is a directory" in err and "not found" not in err, err


def test_convert_refuses_an_output_that_is_not_urdf(tmp_path, fixtures, capsys):
    robot = fixtures / "openrave" / "3dofrobot.robot.xml"
    for name in ("robot.srdf", "robot.xml", "robot"):
        assert main(["convert", str(robot), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("robot-bridge convert: error: -o ") and "*.urdf" in err
        assert not (tmp_path / name).exists()
    assert main(["convert", str(robot), "-o", str(tmp_path / "robot.URDF")]) == 0
