"""Two nodes in two separate rclpy contexts (two DDS participants) exchange messages over Fast DDS."""

from __future__ import annotations

import threading
import uuid

from std_msgs.msg import String
from fixtures.waiting import wait_until


def test_messages_flow_between_two_nodes(ros_process):
    topic = f"/chatter_{uuid.uuid4().hex[:8]}"
    talker = ros_process("talker").node("talker")
    listener = ros_process("listener").node("listener")

    received = []
    lock = threading.Lock()

    def on_message(msg):
        with lock:
            received.append(msg.data)

    listener.create_subscription(String, topic, on_message, 10)
    publisher = talker.create_publisher(String, topic, 10)
    sent = iter(range(10**6))
    talker.create_timer(0.05, lambda: publisher.publish(String(data=f"hello {next(sent)}")))

    wait_until(lambda: len(received) >= 5, 20.0, lambda: f"received only {received}")
    with lock:
        numbers = [int(text.split()[1]) for text in received]
    assert all(text.startswith("hello ") for text in received)
    # Reliable, in-order delivery: strictly increasing and, once matched, without gaps.
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert publisher.get_subscription_count() == 1
