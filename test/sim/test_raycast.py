"""Ray/primitive and ray/mesh intersection against hand-derived distances."""

import numpy as np
import pytest
import trimesh

from robot_bridge.sim import raycast


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_box_entry_exit_and_miss():
    o = np.array([[-3.0, 0, 0], [0, 0, 0], [-3.0, 2.0, 0], [-3.0, 0.5, 0.5], [2.0, 0, 0]])
    d = unit([[1, 0, 0], [0, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]])
    t, n = raycast.intersect_box(o, d, [1.0, 0.5, 2.0])
    # entry at x=-1; from inside exits at y=+0.5; misses (y beyond); on the face edge; box behind
    assert t[0] == pytest.approx(2.0) and n[0] == pytest.approx([-1, 0, 0])
    assert t[1] == pytest.approx(0.5) and n[1] == pytest.approx([0, 1, 0])
    assert np.isinf(t[2]) and np.isinf(t[4])
    assert t[3] == pytest.approx(2.0)


def test_box_oblique():
    o = np.array([[0.0, -5.0, 0.0]])
    d = unit([[0.1, 1.0, 0.05]])
    t, _ = raycast.intersect_box(o, d, [1.0, 1.0, 1.0])
    # hits the y = -1 face (at x = 0.4, z = 0.2): travel 4 along y
    assert t[0] == pytest.approx(4.0 * np.linalg.norm([0.1, 1.0, 0.05]), abs=1e-12)


def test_sphere():
    o = np.array([[0.0, 0, -5], [0, 0, 0], [0, 3, -5]])
    d = unit([[0, 0, 1], [1, 1, 0], [0, 0, 1]])
    t, n = raycast.intersect_sphere(o, d, 2.0)
    assert t[0] == pytest.approx(3.0) and n[0] == pytest.approx([0, 0, -1])
    assert t[1] == pytest.approx(2.0)
    assert np.isinf(t[2])


def test_cylinder_side_cap_inside():
    o = np.array([[-5.0, 0, 0], [0, 0, 5], [0, 0, 0], [0.0, 0.0, 0.0], [-5.0, 0, 0.9]])
    d = unit([[1, 0, 0], [0, 0, -1], [0, 0, 1], [1, 0, 0], [1, 0, 0]])
    t, n = raycast.intersect_cylinder(o, d, radius=0.5, length=2.0)
    assert t[0] == pytest.approx(4.5) and n[0] == pytest.approx([-1, 0, 0])
    assert t[1] == pytest.approx(4.0) and n[1] == pytest.approx([0, 0, 1])
    assert t[2] == pytest.approx(1.0)
    assert t[3] == pytest.approx(0.5)
    assert t[4] == pytest.approx(4.5)
    # a ray passing above the top cap misses
    t2, _ = raycast.intersect_cylinder(np.array([[-5.0, 0, 1.5]]), unit([[1, 0, 0]]), 0.5, 2.0)
    assert np.isinf(t2[0])


@pytest.mark.parametrize("backend", raycast.BACKENDS)
def test_mesh_backends_agree_with_analytic_box(backend):
    try:
        raycast.resolve_backend(backend)
    except ImportError:
        pytest.skip(f"{backend} backend not installed")
    box = trimesh.creation.box(extents=[2.0, 1.0, 4.0])
    mesh = raycast.TriangleMesh(box.vertices, box.faces, backend=backend)
    assert mesh.backend == backend
    rng = np.random.default_rng(3)
    o = rng.uniform([-6, -1, -3], [-6, 1, 3], (400, 3))
    d = unit(rng.normal([1, 0, 0], 0.05, (400, 3)))
    t_mesh, n_mesh = mesh.intersect(o, d)
    t_box, n_box = raycast.intersect_box(o, d, [1.0, 0.5, 2.0])
    # Rays grazing an edge may go either way in float32 backends; all others agree to 1e-9 m.
    clear = np.abs(np.isfinite(t_mesh).astype(int) - np.isfinite(t_box).astype(int)) == 0
    assert clear.mean() > 0.98
    both = clear & np.isfinite(t_box)
    assert both.sum() > 100
    assert np.allclose(t_mesh[both], t_box[both], atol=1e-9)
    assert np.allclose(n_mesh[both], n_box[both], atol=1e-9)


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="unknown ray casting backend"):
        raycast.resolve_backend("optix")
