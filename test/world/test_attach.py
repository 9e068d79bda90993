"""world_node's attach / detach requests wait for the TF at their stamp (robot_bridge.world.attach)."""

import numpy as np

from robot_bridge.kinematics.tf_buffer import TFBuffer
from robot_bridge.model.transform import from_rpy, make
from robot_bridge.world.attach import AttachQueue


def pose(x: float) -> np.ndarray:
    return make(from_rpy((0.0, 0.0, 0.0)), (x, 0.0, 0.0))


def arm(*samples) -> TFBuffer:
    """world -> base (static) -> hand (dynamic: x = 1 + stamp / 10 at each given stamp)."""
    tf = TFBuffer()
    tf.set_transform("world", "base", pose(1.0), static=True)
    for t in samples:
        tf.set_transform("base", "hand", pose(t / 10.0), stamp=t)
    return tf


def test_a_request_stamped_after_the_latest_tf_waits_for_it_then_uses_the_tf_at_its_stamp():
    tf, queue = arm(1.0, 2.0, 3.0), AttachQueue()
    queue.push("hand", 3.5, "remove", now=100.0)          # released at 3.5; the node's /tf lags (3.0)
    assert queue.due(tf, "world", 100.1) == [] and len(queue) == 1
    tf.set_transform("base", "hand", pose(0.4), stamp=4.0)   # the TF catches up
    (due,) = queue.due(tf, "world", 100.2)
    assert due.payload == "remove" and due.time == 3.5 and not due.late and len(queue) == 0
    # the pose at the release, not the latest one: x = 1 + 0.35
    np.testing.assert_allclose(tf.lookup("world", "hand", due.time)[:3, 3], [1.35, 0.0, 0.0], atol=1e-12)


def test_a_request_the_tf_already_covers_is_done_at_once_and_unstamped_means_the_latest():
    tf, queue = arm(1.0, 2.0, 3.0), AttachQueue()
    queue.push("hand", 2.0, "add", now=0.0)
    queue.push("hand", 0.0, "remove", now=0.0)
    assert [(d.payload, d.time, d.late) for d in queue.due(tf, "world", 0.0)] == \
        [("add", 2.0, ""), ("remove", None, "")]


def test_requests_keep_their_order_behind_a_waiting_one():
    tf, queue = arm(1.0), AttachQueue()
    queue.push("hand", 1.5, "add", now=0.0)
    queue.push("hand", None, "remove", now=0.0)            # ready by itself, but after the ADD
    assert queue.due(tf, "world", 0.5) == []
    tf.set_transform("base", "hand", pose(0.2), stamp=2.0)
    assert [d.payload for d in queue.due(tf, "world", 0.6)] == ["add", "remove"]


def test_tf_that_makes_no_progress_for_the_patience_falls_back_to_the_latest():
    tf, queue = arm(1.0), AttachQueue(patience=2.0, max_wait=10.0)
    queue.push("hand", 5.0, "remove", now=10.0)
    assert queue.due(tf, "world", 11.0) == []
    tf.set_transform("base", "hand", pose(0.2), stamp=2.0)    # progress: the patience starts again
    assert queue.due(tf, "world", 11.9) == []
    assert queue.due(tf, "world", 13.8) == []
    (due,) = queue.due(tf, "world", 13.9)
    assert due.time is None and "no newer TF" in due.late and "'hand'" in due.late


def test_tf_that_keeps_coming_but_never_reaches_the_stamp_is_bounded_by_max_wait():
    tf, queue = arm(1.0), AttachQueue(patience=2.0, max_wait=10.0)
    queue.push("hand", 9.0, "add", now=0.0)
    for now in range(1, 10):
        tf.set_transform("base", "hand", pose(0.0), stamp=1.0 + now * 0.1)
        assert queue.due(tf, "world", float(now)) == []
    (due,) = queue.due(tf, "world", 10.0)
    assert due.time is None and "has not reached its stamp" in due.late


def test_a_stamp_of_another_clock_and_an_unknown_link():
    tf, queue = arm(1.0), AttachQueue(patience=2.0, max_wait=10.0)
    queue.push("hand", 1.7e9, "wall clock stamp, sim time TF", now=0.0)
    (due,) = queue.due(tf, "world", 0.0)
    assert due.time is None and "another clock" in due.late
    queue.push("nowhere", 1.0, "unknown link", now=0.0)
    assert queue.due(tf, "world", 1.0) == []
    (due,) = queue.due(tf, "world", 2.0)
    assert due.time is None and "no TF of 'nowhere'" in due.late


def test_the_queue_is_bounded_a_flood_is_refused_not_kept():
    tf, queue = arm(1.0), AttachQueue(max_items=3)
    assert all(queue.push("hand", 5.0 + i, i, now=0.0) for i in range(3))
    assert queue.push("hand", 9.0, "one too many", now=0.0) is False and len(queue) == 3
    tf.set_transform("base", "hand", pose(1.0), stamp=10.0)
    assert [d.payload for d in queue.due(tf, "world", 0.1)] == [0, 1, 2]
    assert queue.push("hand", 9.0, "room again", now=0.2)
