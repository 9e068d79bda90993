"""``robot-bridge render --urdf``: the robot_description the description node publishes for
barrettwam.robot.xml (Inventor meshes, default mesh handling) is drawn -- as a URDF file and as saved by
``ros2 topic echo`` -- and its picture matches the model's: the robot's pixels (what differs from a
picture of the same box with nothing in it) cover the same image extent."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from robot_bridge.cli.main import main as cli
from robot_bridge.formats import meshes, urdf
from robot_bridge.formats.mesh_cache import MeshCache
from robot_bridge.model import Link, Mesh, Robot
from robot_bridge.render import render, scene_triangles, visuals_only
from robot_bridge.sim import Scene

pytest.importorskip("matplotlib")

EXTENT_TOL = 3            # px
VIEW = (25.0, -50.0)


@pytest.fixture(scope="module")
def published(openrave_data, tmp_path_factory):
    """(model, robot_description text) of barrettwam as description_node publishes it by default."""
    from robot_bridge.nodes.description import load_model, mesh_target

    cache = MeshCache(tmp_path_factory.mktemp("cache"))
    loaded = load_model(str(openrave_data / "robots" / "barrettwam.robot.xml"),
                        search_path=[str(openrave_data)],
                        meshes=mesh_target("file", cache))
    return loaded.robot, loaded.urdf


def _colours(g) -> int:
    """How many diffuse colours (faces without a Material: one more) a visual's Inventor file has; 1 for
    anything else or a visual whose model colour covers the whole mesh."""
    if not isinstance(g.shape, Mesh) or g.shape.path is None or g.material.diffuse is not None \
            or not meshes.is_inventor(g.shape.path):
        return 1
    _, _, colours = meshes.read_inventor_coloured(g.shape.path)
    return max(1, len(np.unique(np.nan_to_num(colours, nan=-1.0), axis=0)))


def _image(path) -> np.ndarray:
    from matplotlib import pyplot as plt

    return plt.imread(str(path))[..., :3]


def _extent(image: np.ndarray, empty: np.ndarray) -> tuple[np.ndarray, int]:
    mask = np.abs(image - empty).max(axis=2) > 0.1
    rows, cols = np.nonzero(mask)
    return np.array([rows.min(), rows.max(), cols.min(), cols.max()]), int(mask.sum())


def test_render_published_urdf_matches_model(published, tmp_path):
    pytest.importorskip("rclpy")
    model, text = published
    (tmp_path / "desc.urdf").write_text(text)
    # what `ros2 topic echo --once /robot_description > desc.yaml` writes
    (tmp_path / "desc.yaml").write_text(yaml.safe_dump({"data": text}, width=80) + "---\n")
    for name in ("desc.urdf", "desc.yaml"):
        assert cli(["render", "--urdf", str(tmp_path / name), "-o", str(tmp_path / f"{name}.png")]) == 0
    described = urdf.read_published(tmp_path / "desc.yaml")
    # a visual per model visual, and per further colour of an Inventor file (a URDF visual has one colour)
    assert sum(len(lk.visuals) for lk in described.links.values()) == \
        sum(_colours(g) for lk in model.links.values() for g in lk.visuals)

    # rviz draws the URDF in its root frame: the model likewise, without its placement in the world
    model = visuals_only(copy.deepcopy(model))
    model.placement = np.eye(4)
    model_scene = Scene(model, backend="numpy")
    tris = np.concatenate([t for _, t in scene_triangles(model_scene)]).reshape(-1, 3)
    bounds = (tris.min(0), tris.max(0))
    common = dict(view=VIEW, title="barrettwam", bounds=bounds)
    empty = _image(render(Robot("empty", links={"base": Link("base")}), tmp_path / "empty.png", **common))
    want, want_pixels = _extent(_image(render(model, tmp_path / "model.png", scene=model_scene, **common)),
                                empty)
    got, got_pixels = _extent(_image(render(visuals_only(described), tmp_path / "urdf.png", **common)), empty)
    assert want_pixels > 0.02 * empty.shape[0] * empty.shape[1]             # the robot is really drawn
    np.testing.assert_allclose(got, want, atol=EXTENT_TOL)
    assert abs(got_pixels - want_pixels) < 0.02 * want_pixels


def test_saved_description_that_is_neither_urdf_nor_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("just: [a, list]\n")
    assert cli(["render", "--urdf", str(bad), "-o", str(tmp_path / "x.png")]) != 0

