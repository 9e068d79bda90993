"""One resource resolver (issue 43): what description_node finds, the planner finds.

A user's robot whose meshes description_node finds through ``package://`` -- the robot file's own package
(a workspace folder holding package.xml, not on $AMENT_PREFIX_PATH), or a package of a prefix on
$AMENT_PREFIX_PATH -- or through ``search_path``: description_node publishes its robot_description, and the
planner, built from the same parameters, models every one of those meshes from the same files.  Independent
truth: the mesh files the test wrote.  On the old code the planner looked a received ``package://`` URI up
from its current folder, so the own-package meshes were not found and the planner built its model without
them (the user's Panda: "the planner dropped the robot while description_node found its meshes")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trimesh

pytest.importorskip("roboplan", reason="the planning extra is not installed "
                    "(pip install 'robot_bridge[planning]')")

from robot_bridge.formats.mesh_cache import MeshCache  # noqa: E402
from robot_bridge.formats.urdf import MeshTarget  # noqa: E402
from robot_bridge.model import Mesh  # noqa: E402
from robot_bridge.planning.master import MasterModel  # noqa: E402

ARM = """<robot name="arm">
  <link name="base"><collision><geometry><mesh filename="{base}"/></geometry></collision></link>
  <link name="l1"><collision><origin xyz="0.2 0 0"/><geometry><mesh filename="{l1}"/></geometry></collision>
  </link>
  <link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="l1"/><child link="tip"/><origin xyz="0.4 0 0"/></joint>
</robot>
"""
SRDF = """<robot name="arm"><group name="arm"><chain base_link="base" tip_link="tip"/></group></robot>"""


def _mesh(path: Path, size) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    trimesh.creation.box(size).export(path)
    return path


def _package(root: Path, name: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.xml").write_text(f"<package><name>{name}</name></package>")
    return root


def _prefix(root: Path, name: str) -> Path:
    """An install prefix holding package ``name``, ament-indexed."""
    _package(root / "share" / name, name)
    index = root / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / name).write_text("")
    return root


def _setups(tmp_path: Path, monkeypatch, kind: str):
    """(robot file, search_path, the files its two meshes must resolve to) for one way of finding them."""
    monkeypatch.delenv("ROBOT_BRIDGE_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("ROS_PACKAGE_PATH", raising=False)
    robot = tmp_path / "ws" / "src" / "my_arm" / "urdf" / "arm.urdf"
    robot.parent.mkdir(parents=True)
    search: list[str] = []
    if kind == "own package":                    # the robot file's package, found by its package.xml
        pkg = _package(tmp_path / "ws" / "src" / "my_arm", "my_arm_description")
        files = [_mesh(pkg / "meshes" / "base.stl", (0.1, 0.1, 0.1)),
                 _mesh(pkg / "meshes" / "l1.stl", (0.4, 0.05, 0.05))]
        uris = ["package://my_arm_description/meshes/base.stl", "package://my_arm_description/meshes/l1.stl"]
    elif kind == "ament prefix":                 # an installed package on $AMENT_PREFIX_PATH
        prefix = _prefix(tmp_path / "install", "arm_meshes")
        share = prefix / "share" / "arm_meshes"
        files = [_mesh(share / "base.stl", (0.1, 0.1, 0.1)), _mesh(share / "l1.stl", (0.4, 0.05, 0.05))]
        uris = ["package://arm_meshes/base.stl", "package://arm_meshes/l1.stl"]
        monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join([str(prefix), os.environ.get(
            "AMENT_PREFIX_PATH", "")]).rstrip(os.pathsep))
    else:                                        # search_path: relative URIs, a package:// of a folder there
        assets = tmp_path / "assets"
        files = [_mesh(assets / "meshes" / "base.stl", (0.1, 0.1, 0.1)),
                 _mesh(assets / "arm_assets" / "l1.stl", (0.4, 0.05, 0.05))]
        uris = ["meshes/base.stl", "package://arm_assets/l1.stl"]
        search = [str(assets)]
    robot.write_text(ARM.format(base=uris[0], l1=uris[1]))
    return robot, search, [str(f.resolve()) for f in files]


def _mesh_paths(robot) -> list:
    return [g.shape.path for name in ("base", "l1") for g in robot.links[name].collisions
            if isinstance(g.shape, Mesh)]


@pytest.mark.parametrize("kind", ["own package", "ament prefix", "search_path"])
def test_the_planner_models_the_meshes_description_node_found(tmp_path, monkeypatch, kind):
    from robot_bridge.formats.resources import ResourceResolver
    from robot_bridge.nodes.description import load_model

    robot_file, search, files = _setups(tmp_path, monkeypatch, kind)
    # description_node: its robot_description from the file, the search path and a mesh cache
    published = load_model(str(robot_file), search_path=search,
                           meshes=MeshTarget(cache=MeshCache(tmp_path / "cache")))
    assert _mesh_paths(published.robot) == files, published.robot.warnings
    # planner_node: the same parameters (the planner has no srdf_file: skipped), the published text
    parameters = {"description_file": str(robot_file), "search_path": search, "objects_roots": [],
                  "mesh_cache_dir": str(tmp_path / "cache")}
    resolver = ResourceResolver.from_parameters(parameters.__getitem__)
    assert resolver.untrusted_meshes(published.robot) == []      # description_node's check: nothing to warn
    master = MasterModel(search, acceleration_limits={"j1": 2.0}, resolver=resolver, seed=1)
    assert master.set_description(published.urdf, SRDF) is None, master.problems
    assert master.planner is not None
    assert _mesh_paths(master.planner.robot) == files, master.planner.robot.warnings
    assert not [p for p in master.problems if "mesh" in p], master.problems


def test_a_peer_cannot_widen_the_resolver(tmp_path, monkeypatch):
    """The security rule kept: a received description naming a file outside the roots description_node
    was launched with (another package's folder not installed, /etc/passwd) is left out unread."""
    from robot_bridge.formats.resources import ResourceResolver

    robot_file, search, files = _setups(tmp_path, monkeypatch, "own package")
    stray = _package(tmp_path / "elsewhere" / "other_pkg", "other_pkg")
    _mesh(stray / "x.stl", (0.1, 0.1, 0.1))
    resolver = ResourceResolver([str(robot_file)], search)
    assert resolver.contains(files[0]) and not resolver.contains(stray / "x.stl")
    from robot_bridge.formats import load

    # description_node's check: a mesh its reader found through a root the others lack is named
    odd = robot_file.parent / "odd.urdf"
    odd.write_text(ARM.format(base="x.stl", l1="package://my_arm_description/meshes/l1.stl"))
    found_elsewhere = load(odd, search_path=[str(stray)])
    assert resolver.untrusted_meshes(found_elsewhere) == [str((stray / "x.stl").resolve())]
    text = ARM.format(base="file://" + str(stray / "x.stl"), l1="file:///etc/passwd")
    master = MasterModel(search, acceleration_limits={"j1": 2.0}, resolver=resolver, seed=1)
    assert master.set_description(text, SRDF) is None
    assert _mesh_paths(master.planner.robot) == []
    assert len([p for p in master.problems if "outside the trusted roots" in p]) == 2, master.problems
