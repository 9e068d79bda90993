"""Mesh readers are bounded by the work a file asks for, not by its node count: elements processed
(tokens, array values, every visit's values -- a USE'd node's again at each use -- corners and triangles)
are counted against ``MAX_MESH_WORK`` before the work is done, and a file over it is a WorkBudgetError
naming the file and the budget.  The tests judge the refusal and the work counter, never wall time
(pytest-timeout is the hang guard: issue 41's file took ~45 min on the old reader)."""

from __future__ import annotations

import numpy as np
import pytest

from pathlib import Path

from fixtures.inventor import amplified_iv, iv_binary
from robot_bridge import errors as E
from robot_bridge.formats import load, meshes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HEAD = "#Inventor V2.1 ascii\nSeparator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, 0 1 0 ] }\n"


def _amplified(tmp_path, indices: int = 300_000, uses: int = 9_000):
    """Issue 41's file (:func:`fixtures.inventor.amplified_iv`)."""
    return amplified_iv(tmp_path / "amplified.iv", indices, uses)


def test_def_use_amplification_is_refused_at_the_work_budget(tmp_path):
    path = _amplified(tmp_path)
    assert path.stat().st_size < 1_000_000
    budget = meshes.MeshBudget()
    with pytest.raises(E.WorkBudgetError) as caught:
        meshes.read_inventor(path, budget)
    err = caught.value
    assert err.file == str(path) and str(path) in str(err)
    assert err.budget == "MAX_MESH_WORK" and "MAX_MESH_WORK" in str(err)
    assert isinstance(err, E.UnsafeInputError)                 # callers' safety refusals catch it too
    # stopped at the budget: the work done is within it, and only a few dozen of the 9,001 visits ran
    assert err.work == budget.work <= meshes.MAX_MESH_WORK
    assert budget.work > meshes.MAX_MESH_WORK - 300_002          # the next visit would have passed it
    assert meshes.MAX_INVENTOR_VISITS - budget.visits < 100
    # the public loader refuses it the same way
    with pytest.raises(E.WorkBudgetError, match="amplified.iv.*MAX_MESH_WORK"):
        meshes.load_triangles(path)


def test_a_file_with_more_tokens_than_the_budget_is_refused_before_tokenizing(tmp_path):
    path = tmp_path / "tokens.iv"
    path.write_text(HEAD + "  Info { string [ " + "a " * 5_000 + "] }\n}\n")
    budget = meshes.MeshBudget(work=1_000)
    with pytest.raises(E.WorkBudgetError, match="tokens.iv.*MAX_MESH_WORK") as caught:
        meshes.read_inventor(path, budget)
    assert budget.work == 0 == caught.value.work             # refused from a byte count, nothing tokenized
    assert meshes.read_inventor(path)[1].shape == (0, 3)    # the default budget reads it


def test_work_counts_each_use_of_a_node_by_its_size(tmp_path):
    """A USE costs its node's values again: 10 uses of a 4,000-index face set cost ~10 x 4,000."""
    def work(uses: int) -> int:
        path = tmp_path / f"uses{uses}.iv"
        path.write_text(HEAD + "  DEF F IndexedFaceSet { coordIndex [ " + "0 1 2 -1 " * 1_000 + "] }\n"
                        + "  USE F\n" * uses + "}\n")
        budget = meshes.MeshBudget()
        vertices, triangles = meshes.read_inventor(path, budget)
        assert len(triangles) == 1_000 * (uses + 1)
        return budget.work

    extra = work(10) - work(0)
    # 10 x (4,000 values, 3,000 corners, 1,000 triangles, the USE parsed)
    assert 10 * (8_000 + meshes.NODE_WORK) <= extra <= 10 * (8_000 + meshes.NODE_WORK) + 100


def test_a_small_face_on_many_points_costs_its_corners_not_the_points(tmp_path):
    """A 3-corner FaceSet USE'd 5,000 times on 50,000 points: each use transforms the points it uses."""
    points = ", ".join(f"{i} 0 {i % 7}" for i in range(50_000))
    path = tmp_path / "points.iv"
    path.write_text("#Inventor V2.1 ascii\nSeparator {\n  Coordinate3 { point [ " + points + " ] }\n"
                    "  DEF F FaceSet { numVertices [ 3 ] }\n" + "  USE F\n" * 5_000 + "}\n")
    budget = meshes.MeshBudget()
    vertices, triangles = meshes.read_inventor(path, budget)
    assert triangles.shape == (5_001, 3) and len(vertices) == 3 * 5_001
    np.testing.assert_array_equal(vertices[triangles[-1]], [[0, 0, 0], [1, 0, 1], [2, 0, 2]])
    assert budget.work < 700_000              # tokens + 5,001 x (a few values + corners + the USE parsed)


def test_binary_inventor_arrays_are_work(tmp_path):
    path = tmp_path / "binary.iv"
    path.write_bytes(iv_binary("Separator", 0, 0, 1, "Coordinate3", 0, 1, "point", 3000,
                                *([0.0] * 9000), 0))
    budget = meshes.MeshBudget(work=5_000)
    with pytest.raises(E.WorkBudgetError, match="binary.iv.*MAX_MESH_WORK"):
        meshes.read_inventor(path, budget)
    assert budget.work <= 5_000


def test_collada_instance_node_amplification_is_refused(tmp_path):
    """Six levels of nodes each instancing the next ten times under a link: 10^6 nodes from a few KB."""
    levels = "".join(f'<node id="a{i}">' + f'<instance_node url="#a{i + 1}"/>' * 10 + "</node>"
                     for i in range(6)) + '<node id="a6"/>'
    text = (FIXTURES / "collada" / "interface_type.dae").read_text()
    text = text.replace("<library_visual_scenes>",
                        f"<library_nodes>{levels}</library_nodes><library_visual_scenes>")
    text = text.replace('<rotate sid="j3_axis">0 0 1 0</rotate>', '<rotate sid="j3_axis">0 0 1 0</rotate>'
                        '<instance_node url="#a0"/>')
    path = tmp_path / "nodes.dae"
    path.write_text(text)
    with pytest.raises(E.WorkBudgetError, match="nodes.dae.*MAX_VISUAL_NODES") as caught:
        load(str(path))
    assert caught.value.budget == "MAX_VISUAL_NODES" and caught.value.work <= 100_000
    load(str(FIXTURES / "collada" / "interface_type.dae"))           # the file without them reads


def test_gltf_instances_of_one_mesh_count_at_each_instance(tmp_path, monkeypatch):
    """A glTF scene of one mesh placed by 300 nodes is 300 copies in the mesh it becomes: counted first."""
    import trimesh

    ball = trimesh.creation.icosphere(subdivisions=4)                 # 5,120 faces, 2,562 vertices
    scene = trimesh.Scene()
    for i in range(300):
        scene.add_geometry(ball, geom_name="ball", node_name=f"n{i}",
                           transform=trimesh.transformations.translation_matrix([i, 0, 0]))
    path = tmp_path / "instances.glb"
    path.write_bytes(scene.export(file_type="glb"))
    assert len(meshes.load_triangles(path)[1]) == 300 * 5_120        # within the default budget
    monkeypatch.setattr(meshes, "MAX_MESH_WORK", 1_000_000)
    with pytest.raises(E.WorkBudgetError, match=r"instances.glb.*MAX_MESH_WORK.*instance"):
        meshes.load_triangles(path)


def test_text_mesh_formats_are_counted_before_trimesh_reads_them(tmp_path, monkeypatch):
    path = tmp_path / "long.obj"
    path.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n" + "f 1 2 3\n" * 20_000)
    assert len(meshes.load_triangles(path)[1]) == 20_000
    monkeypatch.setattr(meshes, "MAX_MESH_WORK", 50_000)
    with pytest.raises(E.WorkBudgetError, match=r"long.obj.*MAX_MESH_WORK.*elements \(obj\)"):
        meshes.load_triangles(path)
