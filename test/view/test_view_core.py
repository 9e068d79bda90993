"""The view's rclpy-free parts: the robot scene of a URDF, scan points, depth images, topic staleness."""

from __future__ import annotations

import numpy as np
import pytest

from robot_bridge.errors import DescriptionError
from robot_bridge.view.page import depth_to_rgb, scan_points
from robot_bridge.view.scene import fetch_http, robot_scene
from robot_bridge.view.status import TopicStatus

URDF = """<robot name="r">
  <material name="blue"><color rgba="0.2 0.4 0.8 1"/></material>
  <link name="base"><visual><geometry><box size="0.2 0.4 0.6"/></geometry><material name="blue"/></visual>
  </link>
  <link name="arm"><visual><origin xyz="0 0 0.5"/><geometry><cylinder radius="0.05" length="1"/></geometry>
  </visual><visual><geometry><mesh filename="{mesh}"/></geometry></visual></link>
  <link name="finger"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="2" velocity="0.5" effort="1"/></joint>
  <joint name="j2" type="prismatic"><parent link="arm"/><child link="finger"/><origin xyz="0 0 1"/>
    <axis xyz="1 0 0"/><limit lower="0" upper="0.1" velocity="1" effort="1"/><mimic joint="j1"/></joint>
</robot>"""


def coloured_stl(path, rgb):
    import trimesh

    stl = trimesh.creation.box(extents=(1, 1, 1)).export(file_type="stl")
    head = (b"COLOR=" + bytes(int(c * 255) for c in rgb) + b"\xff").ljust(80, b"\0")
    path.write_bytes(head + stl[80:])


def test_scene_parts_carry_urdf_and_stl_header_colours_in_the_link_frame(tmp_path):
    mesh = tmp_path / "m.stl"
    coloured_stl(mesh, (1.0, 0.0, 0.0))
    scene = robot_scene(URDF.format(mesh=f"file://{mesh}"))
    assert scene.links == ["base", "arm", "finger"] and scene.root == "base"
    base, cylinder, stl = scene.parts
    assert base.rgba == (0.2, 0.4, 0.8, 1.0) and np.allclose(np.ptp(base.vertices, axis=0), (0.2, 0.4, 0.6))
    assert cylinder.rgba == (0.7, 0.7, 0.7, 1.0)                       # no material: grey
    assert np.isclose(cylinder.vertices[:, 2].min(), 0.0) and np.isclose(cylinder.vertices[:, 2].max(), 1.0)
    assert stl.rgba == (1.0, 0.0, 0.0, 1.0) and len(stl.faces) == 12
    assert [s.name for s in scene.sliders] == ["j1"]                    # j2 mimics j1
    assert (scene.sliders[0].lower, scene.sliders[0].upper, scene.sliders[0].velocity) == (-1.0, 2.0, 0.5)


def test_a_missing_mesh_is_a_note_not_an_error(tmp_path):
    scene = robot_scene(URDF.format(mesh=f"file://{tmp_path}/none.stl"))
    assert len(scene.parts) == 2
    assert len(scene.notes) == 1 and "arm" in scene.notes[0] and "none.stl" in scene.notes[0]


def test_http_meshes_are_fetched_through_the_given_fetcher_and_bounded(tmp_path):
    mesh = tmp_path / "m.stl"
    coloured_stl(mesh, (0.0, 1.0, 0.0))
    asked = []

    def fetch(uri):
        asked.append(uri)
        return mesh.read_bytes()

    scene = robot_scene(URDF.format(mesh="http://127.0.0.1:1/abc.stl"), fetch=fetch)
    assert asked == ["http://127.0.0.1:1/abc.stl"] and scene.parts[-1].rgba == (0.0, 1.0, 0.0, 1.0)
    with pytest.raises(DescriptionError, match="cannot fetch"):
        fetch_http("http://127.0.0.1:1/abc.stl", timeout=2.0)       # nothing listens on port 1
    over = robot_scene(URDF.format(mesh=f"file://{mesh}"), max_triangles=20)
    assert len(over.parts) == 1 and len(over.notes) == 2               # the box's 12 fit, not the others
    assert all("over 20 triangles" in n for n in over.notes)


def test_a_bad_urdf_raises_its_description_error():
    with pytest.raises(DescriptionError):
        robot_scene("<robot name='r'><link name='a'/><joint name='j' type='revolute'/></robot>")


def test_tip_path_follows_the_joint_trajectory():
    scene = robot_scene(URDF.format(mesh="file:///nonexistent.stl"))
    tip, poses = scene.tip_path(["j1"], [[0.0], [np.pi / 2]])
    assert tip == "arm" and np.allclose(poses[1][:3, 0], (0, 1, 0))


def test_a_path_is_anchored_where_tf_places_the_robot():
    """A root named like the world frame is the world (issue 43): TF places its fixed child, so the planned
    path is drawn from there (the root's own TF pose would be the world's origin, not where the robot
    stands); any other root is its own anchor."""
    scene = robot_scene(URDF.format(mesh="file:///nonexistent.stl"))
    frame, root_in_frame = scene.anchor("world")
    assert frame == "base" and np.array_equal(root_in_frame, np.eye(4))
    world = URDF.replace('<link name="finger"/>', '<link name="finger"/><link name="world"/><joint name="w" '
                         'type="fixed"><parent link="world"/><child link="base"/><origin xyz="0.1 0.2 0.3"/>'
                         '</joint>').format(mesh="file:///nonexistent.stl")
    scene = robot_scene(world)
    frame, root_in_frame = scene.anchor("world")
    assert frame == "base"
    np.testing.assert_allclose(root_in_frame[:3, 3], (-0.1, -0.2, -0.3), atol=1e-12)
    assert scene.anchor("")[0] == "world"


def test_scan_points_keep_finite_ranges_in_limits():
    points = scan_points([1.0, np.inf, 0.05, 2.0, np.nan], -np.pi / 2, np.pi / 4, 0.1, 10.0)
    assert np.allclose(points, [(0, -1, 0), (np.sqrt(2), np.sqrt(2), 0)], atol=1e-12)


def test_depth_images_are_grey_near_bright_unknown_black():
    rgb = depth_to_rgb(np.array([[1.0, 2.0, np.nan, 0.0]]))
    grey = rgb[0, :, 0]
    assert grey[0] > grey[1] > 0 and grey[2] == 0 and grey[3] == 0 and np.all(rgb[..., 0] == rgb[..., 2])


def test_topics_turn_stale_after_their_limit_and_latched_ones_never():
    status = TopicStatus()
    status.watch("/scan", stale_after=2.0)
    status.watch("/robot_description", latched=True)
    assert status.state("/scan", 0.0) == "waiting"
    status.heard("/scan", 10.0)
    status.heard("/robot_description", 10.0)
    assert status.state("/scan", 11.9) == "live" and status.state("/scan", 12.1) == "stale"
    assert status.stale(100.0) == ["/scan"]
    assert "**STALE**" in status.report(100.0) and "/robot_description` live" in status.report(100.0)


def test_sliders_show_where_joints_are_except_a_moved_one_until_it_gets_there():
    from robot_bridge.view.page import JointTargets

    t = JointTargets(period=0.25, tolerance=1e-3)
    assert t.shown({"a": 0.1, "b": 0.2}) == {"a": 0.1, "b": 0.2} and t.goal_due(0.0) is None
    t.moved("a", 1.0)
    t.moved("a", 1.2)                                   # dragged: one goal with the latest value
    assert t.goal_due(0.0) == {"a": 1.2}
    assert t.shown({"a": 0.3, "b": 0.2}) == {"a": 1.2, "b": 0.2}
    t.moved("b", -0.5)
    assert t.goal_due(0.1) is None                      # at most one goal every period
    assert t.goal_due(0.25) == {"a": 1.2, "b": -0.5}   # every target: the new goal replaces the last
    assert t.goal_due(1.0) is None                      # nothing moved since
    t.reached({"a": 1.2004, "b": 0.0})
    assert t.shown({"a": 1.2004, "b": 0.0}) == {"a": 1.2004, "b": -0.5}
    t.ended({"b": -0.5})                                # its goal ended (e.g. refused): where it is again
    assert t.shown({"a": 1.2, "b": 0.0}) == {"a": 1.2, "b": 0.0}
