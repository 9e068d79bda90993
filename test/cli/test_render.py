"""robot_bridge.render and ``robot-bridge render``: geometry placed where hand-derived poses put it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from robot_bridge.cli.main import main as cli
from robot_bridge.formats import load
from robot_bridge.render import camtrans_view, parse_joint_values, scan_points, scene_triangles
from robot_bridge.sim import Scene

DATA = Path(__file__).resolve().parents[2] / "robot_bridge" / "data"
WORLD = DATA / "default.env.xml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def world():
    return load(WORLD)


def aabb(scene, body, link):
    tris = [t for shape, t in scene_triangles(scene) if (shape.body, shape.link) == (body, link)]
    points = np.concatenate(tris).reshape(-1, 3)
    return points.min(axis=0), points.max(axis=0)


def test_environment_bodies_are_where_the_file_puts_them(world):
    scene = Scene(world, backend="numpy")
    # table top: body at x=1.0, box half extents 0.4 0.6 0.02 at z=0.72
    lo, hi = aabb(scene, "table", "table")
    np.testing.assert_allclose(hi, [1.4, 0.6, 0.74], atol=1e-9)
    np.testing.assert_allclose(lo[:2], [0.6, -0.6], atol=1e-9)
    np.testing.assert_allclose(lo[2], 0.0, atol=1e-9)                  # the legs stand on the floor
    # ball: sphere r=0.05 at (1.1, 0.3, 0.79); icosphere vertices lie on the sphere
    lo, hi = aabb(scene, "ball", "ball")
    np.testing.assert_allclose((lo + hi) / 2, [1.1, 0.3, 0.79], atol=1e-9)
    assert np.all(hi - lo <= 0.1 + 1e-9) and np.all(hi - lo > 0.09)
    # can: upright cylinder r=0.035, h=0.12 standing on the table top at (0.8, 0.15, 0.74)
    lo, hi = aabb(scene, "can", "can")
    np.testing.assert_allclose([lo[2], hi[2]], [0.74, 0.86], atol=1e-9)
    np.testing.assert_allclose((lo[:2] + hi[:2]) / 2, [0.8, 0.15], atol=1e-9)


def test_links_follow_the_joints(world):
    scene = Scene(world, backend="numpy")
    # straight up: gripper box (half 0.03 0.06 0.02) centred 0.751 m above link2's origin (0, 0, 0.6)
    scene.set_joint_positions({})
    lo, hi = aabb(scene, "lwa3_gripper", "gripper_base")
    np.testing.assert_allclose(lo, [-0.03, -0.06, 0.6 + 0.751 - 0.02], atol=1e-9)
    np.testing.assert_allclose(hi, [0.03, 0.06, 0.6 + 0.751 + 0.02], atol=1e-9)
    # j2 = +90 deg about +y: the arm points along +x, the box's z extent becomes its x extent
    scene.set_joint_positions({"j2": math.pi / 2})
    lo, hi = aabb(scene, "lwa3_gripper", "gripper_base")
    np.testing.assert_allclose(lo, [0.751 - 0.02, -0.06, 0.6 - 0.03], atol=1e-9)
    np.testing.assert_allclose(hi, [0.751 + 0.02, 0.06, 0.6 + 0.03], atol=1e-9)


def test_scan_points_in_the_world(world):
    scene = Scene(world, backend="numpy")
    laser = world.sensors["base_laser"]        # at (0.28, 0, 0.2) on the base, beams in its xy plane
    points = scan_points(scene, laser, [1.0, float("inf"), 0.5], angle_min=0.0, angle_increment=math.pi / 4)
    np.testing.assert_allclose(points, [[1.28, 0.0, 0.2], [0.28 + 0.5 * math.cos(math.pi / 2),
                                                           0.5 * math.sin(math.pi / 2), 0.2]], atol=1e-12)


def test_camtrans_gives_the_view(world):
    elev, azim = camtrans_view(world, np.array([0.6, 0.0, 0.6]))    # <camtrans>2.6 -1.6 1.9</camtrans>
    assert elev == pytest.approx(math.degrees(math.atan2(1.3, math.hypot(2.0, -1.6))))
    assert azim == pytest.approx(math.degrees(math.atan2(-1.6, 2.0)))
    assert camtrans_view(load(DATA / "lwa3_gripper.robot.xml"), np.zeros(3)) is None


def test_parse_joint_values(world):
    assert parse_joint_values(["j1=0.5", " j2 =-1e-1"], world) == {"j1": [0.5], "j2": [-0.1]}
    for bad, message in (("j9=1", "no joint 'j9'"), ("j1", "expected name=value"), ("j1=a", "numbers"),
                         ("j1=1,2", "takes 1"), ("j1=nan", "finite")):
        with pytest.raises(ValueError, match=message):
            parse_joint_values([bad], world)


def test_cli_writes_a_png(tmp_path, capsys):
    out = tmp_path / "pictures" / "robot.png"
    assert cli(["render", str(WORLD), "-o", str(out), "--joints", "j2=0.4", "j4=1.2", "--top"]) == 0
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (2 * 7 * 110, 6 * 110)                 # two panels of 7 x 6 in at 110 dpi
    assert "lwa3_gripper, 11 links, 5 environment bodies" in capsys.readouterr().out


def test_cli_input_errors_exit_2(tmp_path, capsys):
    assert cli(["render", str(WORLD), "-o", str(tmp_path / "x.png"), "--joints", "elbow=1"]) == 2
    assert "no joint 'elbow'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    broken = tmp_path / "broken.robot.xml"
    broken.write_text("<Robot><KinBody>")
    assert cli(["render", str(broken), "-o", str(tmp_path / "y.png")]) == 2
    assert "broken.robot.xml" in capsys.readouterr().err


VRML_BOT = Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "vrml" / "vrml_bot.robot.xml"


def test_cli_draws_a_robot_whose_only_geometry_is_vrml(tmp_path, capsys):
    from matplotlib.image import imread

    out = tmp_path / "vrml.png"
    assert cli(["render", str(VRML_BOT), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    rgb = imread(out)[..., :3]
    # the arm (arm.wrl) is orange (0.8, 0.4, 0.1), the base (base.wrl) blue (0.2, 0.3, 0.6): shaded,
    # they are the only strongly orange / blue pixels (background, panes and labels are white, grey, black)
    orange = (rgb[..., 0] - rgb[..., 2] > 0.3) & (rgb[..., 1] < 0.75 * rgb[..., 0])
    blue = (rgb[..., 2] - rgb[..., 0] > 0.2) & (rgb[..., 1] < rgb[..., 2])
    assert orange.sum() > 2000 and blue.sum() > 500, (orange.sum(), blue.sum())


def test_cli_exits_2_when_nothing_can_be_drawn(tmp_path, capsys):
    (tmp_path / "bad.wrl").write_text("#VRML V2.0 utf8\n"
                                      "Shape { geometry IndexedFaceSet { coordIndex [ 0 1 2 ] } }\n")
    robot = tmp_path / "bad.robot.xml"
    robot.write_text('<Robot name="bad"><KinBody name="bad"><Body name="b">'
                     '<Geom type="trimesh"><data>bad.wrl</data></Geom></Body></KinBody></Robot>')
    out = tmp_path / "bad.png"
    assert cli(["render", str(robot), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "warning: mesh 'bad.wrl' cannot be loaded" in err and "out of range" in err
    reason = [line for line in err.splitlines() if line.startswith("robot-bridge render: error:")]
    assert len(reason) == 1 and "nothing to draw" in reason[0]
    assert not out.exists()
