"""The TF buffer world_node resolves detection frames with: chains, static vs dynamic edges, time."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_bridge.kinematics.tf_buffer import TFBuffer
from robot_bridge.model.transform import from_rpy, inverse, make


def pose(xyz, rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    return make(from_rpy(rpy), xyz)


def test_chains_compose_through_the_common_ancestor():
    buf = TFBuffer()
    a, b, c = pose((1, 0, 0), (0, 0, 0.3)), pose((0, 1, 0), (0.2, 0, 0)), pose((0, 0, 1), (0, 0.4, 0))
    buf.set_transform("world", "base", a, static=True)
    buf.set_transform("base", "arm", b, stamp=1.0)
    buf.set_transform("base", "/cam", c, static=True)          # one leading slash is ignored, as tf2 does
    np.testing.assert_allclose(buf.lookup("world", "arm"), a @ b, atol=1e-15)
    np.testing.assert_allclose(buf.lookup("arm", "cam"), inverse(b) @ c, atol=1e-15)
    np.testing.assert_allclose(buf.lookup("cam", "world"), inverse(a @ c), atol=1e-15)
    buf.set_transform("other_root", "thing", a)
    with pytest.raises(LookupError, match="not connected"):
        buf.lookup("world", "thing")
    with pytest.raises(LookupError, match="does not exist"):
        buf.lookup("world", "nowhere")
    assert buf.can_transform("cam", "arm") and not buf.can_transform("cam", "thing")


def test_bad_samples_are_refused_and_static_edges_stay():
    buf = TFBuffer()
    buf.set_transform("world", "base", pose((1, 0, 0)), static=True)
    assert not buf.set_transform("world", "base", pose((5, 5, 5)), stamp=3.0)     # dynamic over static
    assert not buf.set_transform("base", "arm", np.full((4, 4), np.nan), stamp=2.0)
    assert not buf.set_transform("arm", "arm", np.eye(4)) and not buf.set_transform("", "arm", np.eye(4))
    np.testing.assert_array_equal(buf.lookup("world", "base"), pose((1, 0, 0)))


def test_lookup_at_a_time_interpolates_between_samples():
    buf = TFBuffer()
    r0, r1 = from_rpy((0, 0, 0.0)), from_rpy((0, 0, 0.8))
    buf.set_transform("world", "link", make(r0, (0, 0, 0)), stamp=10.0)
    buf.set_transform("world", "link", make(r1, (1, 2, 0)), stamp=11.0)
    mid = buf.lookup("world", "link", 10.25)
    np.testing.assert_allclose(mid[:3, 3], (0.25, 0.5, 0.0), atol=1e-15)
    angle = Rotation.from_matrix(mid[:3, :3]).as_rotvec()
    np.testing.assert_allclose(angle, (0, 0, 0.2), atol=1e-12)
    # outside the cached span: the nearest sample; no time: the latest
    np.testing.assert_allclose(buf.lookup("world", "link", 5.0), make(r0, (0, 0, 0)), atol=1e-15)
    np.testing.assert_allclose(buf.lookup("world", "link", 12.0), make(r1, (1, 2, 0)), atol=1e-15)
    np.testing.assert_allclose(buf.lookup("world", "link"), make(r1, (1, 2, 0)), atol=1e-15)


def test_samples_arrive_out_of_order_and_old_ones_expire():
    buf = TFBuffer(cache_time=1.0)
    buf.set_transform("world", "link", pose((2, 0, 0)), stamp=2.0)
    buf.set_transform("world", "link", pose((1, 0, 0)), stamp=1.5)         # late, but in the cache: kept
    np.testing.assert_allclose(buf.lookup("world", "link", 1.75), pose((1.5, 0, 0)), atol=1e-15)
    np.testing.assert_allclose(buf.lookup("world", "link"), pose((2, 0, 0)), atol=1e-15)
    buf.set_transform("world", "link", pose((4, 0, 0)), stamp=4.0)         # 1.5 and 2.0 fall out
    np.testing.assert_allclose(buf.lookup("world", "link", 1.75), pose((4, 0, 0)), atol=1e-15)
    # the clock jumps back further than the cache (a restarted simulation): the edge starts afresh
    buf.set_transform("world", "link", pose((7, 0, 0)), stamp=0.1)
    np.testing.assert_allclose(buf.lookup("world", "link"), pose((7, 0, 0)), atol=1e-15)
    # a new parent replaces the edge
    buf.set_transform("base", "link", pose((0, 1, 0)), stamp=0.2)
    assert not buf.can_transform("world", "link")


def test_latest_time_is_the_oldest_newest_sample_between_the_frames():
    buf = TFBuffer()
    buf.set_transform("world", "base", pose((1, 0, 0)), static=True)
    assert buf.latest_time("world", "base") == float("inf")                # static only: any time
    buf.set_transform("base", "j1", pose((0, 0, 1)), stamp=1.0)
    buf.set_transform("base", "j1", pose((0, 0, 2)), stamp=3.0)
    buf.set_transform("j1", "hand", pose((0, 1, 0)), stamp=2.5)
    buf.set_transform("j1", "cam", pose((1, 1, 0)), stamp=9.0)
    assert buf.latest_time("world", "hand") == 2.5
    assert buf.latest_time("hand", "world") == 2.5
    assert buf.latest_time("world", "j1") == 3.0
    assert buf.latest_time("hand", "cam") == 2.5            # base -> j1 is above their common ancestor j1
    buf.set_transform("j1", "hand", pose((0, 1, 0)), stamp=4.0)
    assert buf.latest_time("world", "hand") == 3.0
    with pytest.raises(LookupError, match="does not exist"):
        buf.latest_time("world", "nowhere")
    buf.set_transform("other_root", "thing", pose((0, 0, 0)))
    with pytest.raises(LookupError, match="not connected"):
        buf.latest_time("world", "thing")
