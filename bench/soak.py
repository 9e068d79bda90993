"""Soak: 1 kHz /joint_states through description_node + a 30 Hz camera relay + a simulated laser,
all in one private rclpy context, for a configurable time.  Prints JSON:

- per reliable output topic (/tf, relayed image_raw and camera_info, simulated scan): messages the
  node published, messages a reliable subscriber received, ``lost`` = published - received
  (after a drain period);
- joint_states sent vs taken by the description node (best effort, reported only);
- RSS after warm-up and at the end, ``rss_growth_percent``;
- callback exceptions (must be 0: a node that raises would stop the executor).

Usage: .venv/bin/python bench/soak.py [--duration 60] [--joint-rate 1000] [--camera-rate 30]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
ROBOT = REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"
BATCH_HZ = 500.0          # joint_states go out in bursts of joint_rate / BATCH_HZ distinct stamps


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run(duration: float, joint_rate: float = 1000.0, camera_rate: float = 30.0, warmup: float | None = None,
        drain: float = 2.0) -> dict:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from rclpy.publisher import Publisher
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan
    from tf2_msgs.msg import TFMessage

    from robot_bridge.formats import load
    from robot_bridge.nodes.description import DescriptionNode
    from robot_bridge.nodes.sensor_bridge import SensorBridge
    from robot_bridge.ros import qos

    published: Counter = Counter()
    original_publish = Publisher.publish

    def counting_publish(self, msg):
        # only what a matched reader must get: the simulated laser publishes from its own thread from the
        # start, before the listener's subscription exists
        if self.get_subscription_count():
            published[self.topic_name] += 1
        return original_publish(self, msg)

    Publisher.publish = counting_publish
    robot = load(ROBOT)
    cam = robot.sensors["wrist_camera"]
    width, height = int(cam.params["width"]), int(cam.params["height"])
    fx, fy = float(cam.params.get("fx", width)), float(cam.params.get("fy", width))
    cx, cy = float(cam.params.get("cx", width / 2)), float(cam.params.get("cy", height / 2))
    joints = [j.name for j in robot.active_joints]
    ns = f"/soak{uuid.uuid4().hex[:6]}"

    context = rclpy.Context()
    context.init()
    try:
        description = DescriptionNode(context=context, namespace=ns, parameter_overrides=[
            Parameter("description_file", value=str(ROBOT)), Parameter("publish_frequency", value=0.0)])
        bridge = SensorBridge(robot=robot, context=context, namespace=ns, parameter_overrides=[
            Parameter("default_mode", value="off"), Parameter("seed", value=1),
            Parameter("sensors.wrist_camera.mode", value="relay"),
            Parameter("sensors.base_laser.mode", value="sim"),
            # the writers' KEEP_LAST history holds what the (lagging, loaded) reader has not acknowledged yet:
            # the simulated laser publishes from its own thread, no longer paced by this process's executor
            Parameter("output_depth", value=1000)])
        driver = rclpy.create_node("soak_driver", context=context, namespace=ns)
        listener = rclpy.create_node("soak_listener", context=context, namespace=ns)
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        received: Counter = Counter()
        exceptions: list[str] = []

        def count(topic):
            return lambda _msg: received.update([topic])

        tf_topic = "/tf"
        outputs = {tf_topic: TFMessage, f"{ns}/wrist_camera/image_raw": Image,
                   f"{ns}/wrist_camera/camera_info": CameraInfo, f"{ns}/base_laser/scan": LaserScan}
        for topic, msg_type in outputs.items():
            if topic != tf_topic:
                listener.create_subscription(msg_type, topic, count(topic), reliable, raw=True)
        # /tf (1 kHz, published from the node's own thread) is counted off the executor, on the same kind
        # of thread: a Python executor callback sharing this process cannot keep up with it under load
        from robot_bridge.ros.fast_relay import DetachedCallbackGroup, SerializedRelay

        tf_sub = listener.create_subscription(TFMessage, tf_topic, lambda _msg: None, reliable, raw=True,
                                              callback_group=DetachedCallbackGroup())
        tf_counter = SerializedRelay(tf_sub, None, lambda _view, _offset: received.update([tf_topic]),
                                     context=context, headroom=0, on_error=exceptions.append, name="soak_tf")
        taken = description.counts          # counted on either transport (fast path or executor)

        js_pub = driver.create_publisher(JointState, f"{ns}/joint_states", qos.sensor_data_qos())
        img_pub = driver.create_publisher(Image, f"{ns}/driver/wrist_camera/image_raw", qos.sensor_data_qos())
        info_pub = driver.create_publisher(CameraInfo, f"{ns}/driver/wrist_camera/camera_info",
                                           qos.sensor_data_qos())
        frame = bytes(width * height * 3)
        per_batch = max(1, int(round(joint_rate / BATCH_HZ)))
        state = {"n": 0, "sending": True}
        sent = Counter()

        def send_joint_states():
            if not state["sending"]:
                return
            for _ in range(per_batch):
                state["n"] += 1
                t = state["n"] / joint_rate
                msg = JointState(name=joints, position=[0.5 * math.sin(t + i) for i in range(len(joints))])
                msg.header.stamp.sec, msg.header.stamp.nanosec = 1000 + state["n"] // 1000000, \
                    (state["n"] % 1000000) * 1000
                js_pub.publish(msg)
                sent["joint_states"] += 1

        def send_camera():
            if not state["sending"]:
                return
            stamp = driver.get_clock().now().to_msg()
            img = Image(height=height, width=width, encoding="rgb8", step=width * 3, data=frame)
            img.header.stamp, img.header.frame_id = stamp, "driver_cam"
            info = CameraInfo(height=height, width=width, distortion_model="plumb_bob", d=[0.0] * 5,
                              k=[fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0],
                              p=[fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0])
            info.header.stamp, info.header.frame_id = stamp, "driver_cam"
            img_pub.publish(img)
            info_pub.publish(info)
            sent["camera"] += 1

        def drive():      # own thread, paced by the clock: executor load cannot slow the input down
            next_js = next_cam = time.monotonic()
            while state["sending"]:
                now = time.monotonic()
                if now >= next_js:
                    send_joint_states()
                    next_js += 1.0 / BATCH_HZ
                if now >= next_cam:
                    send_camera()
                    next_cam += 1.0 / camera_rate
                time.sleep(max(0.0, min(next_js, next_cam) - time.monotonic()))

        sender = threading.Thread(target=drive, daemon=True)
        executor = SingleThreadedExecutor(context=context)
        for node in (description, bridge, driver, listener):
            executor.add_node(node)

        warmup = min(10.0, 0.2 * duration) if warmup is None else warmup
        start = time.monotonic()
        sender.start()
        rss_warm = None
        while True:
            now = time.monotonic() - start
            if rss_warm is None and now >= warmup:
                rss_warm = rss_bytes()
            if now >= duration:
                break
            try:
                executor.spin_once(timeout_sec=0.01)
            except Exception as exc:      # a node callback raised: counted, the soak goes on
                exceptions.append(f"{type(exc).__name__}: {exc}")
        rss_end = rss_bytes()
        state["sending"] = False
        sender.join()
        for node in (description, bridge, driver):       # publishing stops; what is in flight arrives
            executor.remove_node(node)
        for sim in bridge.sim_sensors.values():          # simulated sensors publish from threads of their own
            sim.stop()
        drain_end = time.monotonic() + drain
        while time.monotonic() < drain_end:
            executor.spin_once(timeout_sec=0.01)
        elapsed = time.monotonic() - start
        published[tf_topic] = description.counts["tf"]  # the fast path publishes without Publisher.publish
        for sensor, topic in bridge.fast_relays:      # published from the relay thread, not Publisher.publish
            published[f"{ns}/{sensor}/{topic}"] = bridge.relays[(sensor, topic)].relayed()
        topics = {t: {"published": published[t], "received": received[t], "lost": published[t] - received[t]}
                  for t in outputs}
        result = {
            "duration_s": round(elapsed - drain, 1), "joint_rate_hz": joint_rate,
            "camera_rate_hz": camera_rate,
            "joint_states_sent": sent["joint_states"], "joint_states_taken": taken["joint_states"],
            "joint_states_achieved_hz": round(sent["joint_states"] / (elapsed - drain), 1),
            "camera_frames_sent": sent["camera"], "reliable_topics": topics,
            "lost_reliable_total": sum(v["lost"] for v in topics.values()),
            "relay_dropped": {k: dict(v) for k, v in bridge.dropped.items()},
            "rss_warm_mb": round(rss_warm / 2**20, 1), "rss_end_mb": round(rss_end / 2**20, 1),
            "rss_growth_percent": round(100.0 * (rss_end - rss_warm) / rss_warm, 2),
            "callback_exceptions": exceptions[:5], "callback_exception_count": len(exceptions),
        }
        executor.shutdown()
        tf_counter.close()
        for node in (listener, driver, bridge, description):
            node.destroy_node()
        return result
    finally:
        Publisher.publish = original_publish
        context.try_shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--joint-rate", type=float, default=1000.0)
    parser.add_argument("--camera-rate", type=float, default=30.0)
    args = parser.parse_args()
    print(json.dumps(run(args.duration, args.joint_rate, args.camera_rate), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
