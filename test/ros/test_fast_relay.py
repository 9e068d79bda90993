"""SerializedRelay over real rclpy: taken on the middleware's signal, edited in place, republished."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest
from rclpy.serialization import serialize_message
from std_msgs.msg import String

from robot_bridge.ros import fast_relay
from robot_bridge.ros.fast_relay import DetachedCallbackGroup, SerializedRelay, _eventfd_callback_supported
from fixtures.waiting import wait_until

STRING_AT = 8           # CDR: 4-byte encapsulation, uint32 length, then the characters


def relay_pair(ros_process):
    topic = f"/fast_{uuid.uuid4().hex[:8]}"
    side = ros_process("relay").node("relay")
    probe = ros_process("probe").node("probe")
    taken_by_executor = []
    subscription = side.create_subscription(String, f"{topic}/in", taken_by_executor.append, 10, raw=True,
                                            callback_group=DetachedCallbackGroup())
    publisher = side.create_publisher(String, f"{topic}/out", 10)
    received, lock = [], threading.Lock()

    def on_message(msg):
        with lock:
            received.append(msg.data)

    probe.create_subscription(String, f"{topic}/out", on_message, 10)
    driver = probe.create_publisher(String, f"{topic}/in", 10)
    return side, subscription, publisher, driver, received, taken_by_executor


def upper_case(view, offset):
    """Handler: upper-case the string in place; drop strings starting with 'drop'; fail on 'boom'."""
    text = bytes(view[offset + STRING_AT:-1])
    if text.startswith(b"boom"):
        raise RuntimeError("boom")
    if text.startswith(b"drop"):
        return None
    view[offset + STRING_AT:len(view) - 1] = text.upper()
    return offset


@pytest.mark.parametrize("wake", ["auto", "wait_set"])
def test_relay_edits_drops_reports_and_stops(ros_process, wake):
    side, subscription, publisher, driver, received, taken_by_executor = relay_pair(ros_process)
    errors, published = [], []
    relay = SerializedRelay(subscription, publisher, upper_case, context=side.context,
                            headroom=16, on_error=errors.append, on_published=lambda: published.append(1),
                            wake=wake)
    expected = "eventfd" if wake == "auto" and _eventfd_callback_supported() else "wait set"
    assert relay.wake.name == expected
    try:
        sent = iter(range(10**6))

        def publish_until(predicate, what):
            def step():
                if not predicate():
                    driver.publish(String(data=f"hello {next(sent)}"))
                return predicate()
            return wait_until(step, 20.0, what)

        publish_until(lambda: received, "anything relayed")        # discovery done, relay flowing
        for text in ("drop me", "boom", "a" * 200_000, "last"):          # 200 kB: the buffer grows
            driver.publish(String(data=text))
        wait_until(lambda: received and received[-1] == "LAST", 20.0, "LAST relayed")
        assert all(t.startswith("HELLO ") for t in received[:-2])
        assert received[-2] == "A" * 200_000 and "DROP ME" not in received
        assert len(errors) == 1 and "boom" in errors[0]
        assert taken_by_executor == []                                   # the executor never took one
        # one count per publish: the receiver gets every relayed message from its first (HELLO k) on; the
        # relay may have published hello 0..k-1 before the receiver was matched (a loaded host's discovery)
        first = int(received[0].split()[1])
        wait_until(lambda: 0 <= len(published) - len(received) <= first, 20.0,
                   lambda: f"one count per publish ({len(published)} counts, {len(received)} received, "
                           f"first HELLO {first})")
    finally:
        relay.close()
        relay.close()                                                    # idempotent
    before = len(received)
    driver.publish(String(data="after close"))
    with pytest.raises(AssertionError):                                # nothing relayed after close
        wait_until(lambda: len(received) > before, 0.5, "a message after close")


def test_relay_without_publisher_only_takes(ros_process):
    side, subscription, _publisher, driver, received, taken_by_executor = relay_pair(ros_process)
    taken, published = [], []

    def record(view, offset):
        taken.append(bytes(view[offset + STRING_AT:-1]).decode())
        return offset                              # would be published, if there were a publisher

    relay = SerializedRelay(subscription, None, record, context=side.context, headroom=0,
                            on_error=pytest.fail, on_published=lambda: published.append(1))
    try:
        sent = iter(range(10**6))
        wait_until(lambda: taken or driver.publish(String(data=f"m{next(sent)}")), 20.0, "a message taken")
        assert all(t.startswith("m") for t in taken)
        assert received == [] and published == [] and taken_by_executor == []
    finally:
        relay.close()


# -- a compiled drain --------------------------------------------------------------------------------
_next_message = _publish_output = None       # fast_relay.compiled_io(), set by _compiled_drain()


def _count_lower_case(take_fn, publish_fn, read_fn, ints, words, output, control,  # pragma: no cover
                      generation, msg, headroom):
    """Drain: a string starting with a lower-case letter is counted and answered with the fixed output;
    anything else is left to the Python handler."""
    while True:
        got = _next_message(take_fn, read_fn, ints, words, control, generation)
        if got != fast_relay.MESSAGE_TAKEN:
            return got
        first = msg[headroom + STRING_AT]
        if first < 97 or first > 122:
            return fast_relay.DRAIN_PENDING
        control[fast_relay.HANDLED] += 1
        if not _publish_output(publish_fn, ints, control):
            return fast_relay.DRAIN_PUBLISH_ERROR


def _compiled_drain():
    global _next_message, _publish_output
    numba = pytest.importorskip("numba")
    if not _eventfd_callback_supported():
        pytest.skip("drains run on the eventfd wake only")
    _next_message, _publish_output = fast_relay.compiled_io()
    return numba.njit(cache=True, nogil=True)(_count_lower_case)


def test_drain_relays_without_python_and_hands_back_what_it_cannot(ros_process):
    compiled = _compiled_drain()
    side, subscription, publisher, driver, received, taken_by_executor = relay_pair(ros_process)
    answer = np.frombuffer(serialize_message(String(data="DRAINED")), np.uint8).copy()
    results, python_saw = [], []

    def drain(io, buffer, headroom):
        io.set_output(answer.ctypes.data, len(answer))
        result = compiled(*io.prefix(io.generation, buffer, headroom))
        results.append(result)
        return result

    def handler(view, offset):
        python_saw.append(bytes(view[offset + STRING_AT:offset + STRING_AT + 4]))
        return upper_case(view, offset)

    errors = []
    relay = SerializedRelay(subscription, publisher, handler, context=side.context, headroom=16,
                            on_error=errors.append, drain=drain)
    assert relay.io is not None
    try:
        sent = iter(range(10**6))
        wait_until(lambda: received or driver.publish(String(data=f"Hello {next(sent)}")), 20.0,
                   "a message relayed")
        before = len(python_saw)
        for text in ("one", "Two", "three", "a" * 200_000, "four"):        # 200 kB: the buffer grows
            driver.publish(String(data=text))
        wait_until(lambda: len(received) >= 5 and received[-1] == "DRAINED"
                        and "TWO" in received[-5:], 20.0, "DRAINED after TWO")
        assert received[-5:] == ["DRAINED", "TWO", "DRAINED", "A" * 200_000, "DRAINED"]
        # Python saw the upper-case one and the grown buffer's, the drain the rest (late warm-up
        # "Hello"s, published before these, may still have reached Python after ``before``)
        assert [t for t in python_saw[before:] if not t.startswith(b"Hell")] == [b"Two\0", b"aaaa"]
        assert relay.io.handled == relay.io.published == 3
        yields = results.count(fast_relay.DRAIN_YIELD)
        relay.io.invalidate()                              # the handler's state changed: started anew
        driver.publish(String(data="five"))
        wait_until(lambda: relay.io.handled == 4, 20.0, "4 messages handed back")
        assert results.count(fast_relay.DRAIN_YIELD) == yields + 1
        assert errors == [] and taken_by_executor == []
    finally:
        relay.close()                                      # the drain sleeps in read(): woken and stopped
    assert not relay._thread.is_alive()
    assert results[-1] == fast_relay.DRAIN_STOPPED


@pytest.mark.parametrize("through", ["rcl", "rclpy"])
def test_serialized_publisher_publishes_a_buffer_as_is(ros_process, through):
    side, _subscription, publisher, _driver, received, _taken = relay_pair(ros_process)
    out = fast_relay.SerializedPublisher(publisher)
    if through == "rclpy":
        out._libs = None                      # rcl not reachable through ctypes: Publisher.publish(bytes)
    buffer = np.frombuffer(serialize_message(String(data="as serialized")), np.uint8).copy()
    wait_until(lambda: received or out.publish(buffer, buffer.ctypes.data), 20.0, "the buffer received")
    assert set(received) == {"as serialized"}
