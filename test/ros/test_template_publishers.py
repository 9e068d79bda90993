"""TemplatePublishers: the templates of one tick filled from its rows and published in one compiled call
send what each CdrTemplate would, and what rclpy serializes for the same messages, compiled or not."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from robot_bridge.ros import template_publishers
from robot_bridge.ros.cdr_template import CdrTemplate
from robot_bridge.ros.template_publishers import TemplatePublishers, state_source, state_views
from fixtures.waiting import wait_until


def _entries(n: int, node, topic: str):
    """A JointState of the actual rows of n joints (source[3n:6n]), and one of the errors of the first two
    joints in reverse with a frame_id of odd length (another layout, another arena offset)."""
    names = [f"joint_{i}" for i in range(n)]
    whole = CdrTemplate(lambda slot, stamp: JointState(header=Header(stamp=stamp()), name=names,
                                                       position=slot(n), velocity=slot(n), effort=slot(n)))
    pair = CdrTemplate(lambda slot, stamp: JointState(header=Header(stamp=stamp(), frame_id="odd"),
                                                      name=names[1::-1], position=slot(2)))
    return [(node.create_publisher(JointState, f"{topic}/whole", 10), whole, np.arange(3 * n, 6 * n)),
            (node.create_publisher(JointState, f"{topic}/pair", 10), pair, np.array([7 * n + 1, 7 * n]))]


def _rows(n: int, seed: int):
    rng = np.random.default_rng(seed)
    desired, actual = tuple(rng.normal(size=(3, n))), tuple(rng.normal(size=(3, n)))
    still = np.zeros(n)
    still.flags.writeable = False                   # read-only rows, as a resting controller passes them
    return (desired[0], still, still), actual, rng.normal(size=n)


@pytest.mark.parametrize("compiled", [True, False])
def test_every_template_is_published_with_the_tick_numbers_and_stamp(ros_process, monkeypatch,
                                                                     compiled):
    if not compiled:
        monkeypatch.setattr(template_publishers, "_compiled", [None])       # numba missing
    n, topic = 5, f"/templates_{uuid.uuid4().hex[:8]}"
    side, probe = ros_process("side").node("side"), ros_process("probe").node("probe")
    entries = _entries(n, side, topic)
    publishers = TemplatePublishers(entries)
    assert publishers.compiled is compiled
    received, lock = {"whole": [], "pair": []}, threading.Lock()
    for name in received:
        def on_message(data, name=name):
            with lock:
                received[name].append(bytes(data))
        probe.create_subscription(JointState, f"{topic}/{name}", on_message, 10, raw=True)
    desired, actual, effort = _rows(n, 7)
    stamp_ns = 1_700_000_000 * 10 ** 9 + 999_999_999

    def sent_both():
        publishers.publish_state(desired, actual, effort, stamp_ns)
        with lock:
            return all(received.values())
    wait_until(sent_both, 20.0, "both templates published")
    source = publishers.publish_state(desired, actual, effort, stamp_ns)
    error = np.subtract(desired, actual)
    assert np.array_equal(source, np.concatenate([*desired, *actual, effort, *error]))
    # independent truth: rclpy's own serialization of the messages built field by field
    stamp = Time(sec=1_700_000_000, nanosec=999_999_999)
    assert deserialize_message(received["whole"][-1], JointState) == JointState(
        header=Header(stamp=stamp), name=[f"joint_{i}" for i in range(n)], position=list(actual[0]),
        velocity=list(actual[1]), effort=list(actual[2]))
    assert deserialize_message(received["pair"][-1], JointState) == JointState(
        header=Header(stamp=stamp, frame_id="odd"), name=["joint_1", "joint_0"],
        position=[desired[0][1] - actual[0][1], desired[0][0] - actual[0][0]])
    # the same bytes as each template filled on its own
    expected = [template.fill(source[gather], 1_700_000_000, 999_999_999) for _, template, gather in entries]
    assert received["whole"][-1] == expected[0] and received["pair"][-1] == expected[1]
    if compiled:
        assert publishers.messages() == expected


def test_compiled_stamps_negative_times_and_refuses_rows_of_other_lengths(ros_process):
    side = ros_process("side").node("side")
    publishers = TemplatePublishers(_entries(2, side, f"/templates_{uuid.uuid4().hex[:8]}"))
    if not publishers.compiled:
        pytest.skip("numba or rcl through ctypes missing: nothing compiled to check")
    desired, actual, effort = _rows(2, 3)
    publishers.publish_state(desired, actual, effort, -5 * 10 ** 9 + 7)
    stamps = [deserialize_message(m, JointState).header.stamp for m in publishers.messages()]
    assert stamps == [Time(sec=-5, nanosec=7)] * 2
    publishers.publish_state(desired, actual, effort, -1)             # before the epoch by 1 ns
    assert deserialize_message(publishers.messages()[0], JointState).header.stamp == \
        Time(sec=-1, nanosec=999_999_999)
    lists = publishers.publish_state([list(row) for row in desired], [list(row) for row in actual],
                                     list(effort), 0).copy()    # a hardware's lists: converted, same numbers
    assert np.array_equal(lists, publishers.publish_state(desired, actual, effort, 0))
    with pytest.raises(ValueError, match="other lengths"):
        publishers.publish_state(desired, (actual[0][:1], *actual[1:]), effort, 0)


def test_numpy_source_matches_the_layout():
    desired, actual, effort = _rows(3, 1)
    source = state_source(desired, actual, effort)
    assert np.array_equal(source[:9], np.concatenate(desired))
    assert np.array_equal(source[9:18], np.concatenate(actual))
    assert np.array_equal(source[18:21], effort)
    assert np.array_equal(source[21:], np.concatenate(desired) - np.concatenate(actual))
    views = state_views(source, 3)
    for view, rows in zip(views, (desired, actual, effort, np.subtract(desired, actual))):
        assert np.array_equal(view, rows)


def test_a_compile_failure_publishes_from_python(ros_process, monkeypatch, caplog):
    def broken():
        raise RuntimeError("no LLVM here")
    monkeypatch.setattr(template_publishers, "_compiled", [])
    monkeypatch.setattr(template_publishers, "_int64_call_intrinsic", broken)
    side = ros_process("side").node("side")
    entries = _entries(3, side, f"/templates_{uuid.uuid4().hex[:8]}")
    publishers = TemplatePublishers(entries)
    assert not publishers.compiled
    assert "compiled state publishing unavailable (no LLVM here)" in caplog.text
    desired, actual, effort = _rows(3, 5)
    source = publishers.publish_state(desired, actual, effort, 3 * 10 ** 9 + 4)
    assert np.array_equal(source, state_source(desired, actual, effort))
    # the Python path filled each template's own buffer: what it published
    whole = deserialize_message(entries[0][1].fill(source[entries[0][2]], 3, 4), JointState)
    assert list(whole.position) == list(actual[0]) and whole.header.stamp == Time(sec=3, nanosec=4)


@pytest.mark.parametrize("compiled", [True, False])
def test_close_waits_for_a_publish_under_way_and_no_publish_reaches_rcl_after_it(ros_process, monkeypatch,
                                                                                  compiled):
    """The teardown guard (issue 40): a publish through the raw handles is never under way when close()
    returns, and every publish after it raises instead of calling rcl."""
    if not compiled:
        monkeypatch.setattr(template_publishers, "_compiled", [None])
    side = ros_process("side").node("side")
    publishers = TemplatePublishers(_entries(2, side, f"/templates_{uuid.uuid4().hex[:8]}"))
    assert publishers.compiled is compiled
    calls, order = [], []
    inside, release = threading.Event(), threading.Event()
    publish = template_publishers.fast_relay.SerializedPublisher.publish

    def rcl_call(real):
        def call(*args):
            calls.append(1)
            if not inside.is_set():
                inside.set()
                assert release.wait(30)
            result = real(*args)
            order.append("published")
            return result
        return call
    if compiled:
        publishers._call = rcl_call(publishers._call)
    else:
        monkeypatch.setattr(template_publishers.fast_relay.SerializedPublisher, "publish", rcl_call(publish))
    rows = _rows(2, 11)
    ticker = threading.Thread(target=publishers.publish_state, args=(*rows, 0))
    ticker.start()
    assert inside.wait(30)
    closer = threading.Thread(target=lambda: (publishers.close(), order.append("closed")))
    closer.start()
    release.set()
    ticker.join(30)
    closer.join(30)
    assert not ticker.is_alive() and not closer.is_alive()
    assert order[-1] == "closed" and "published" in order and publishers.closed
    before = len(calls)
    with pytest.raises(template_publishers.PublishersClosed):
        publishers.publish_state(*rows, 0)
    assert len(calls) == before                          # rcl not called
