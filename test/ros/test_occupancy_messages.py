"""Issue 44: the occupancy map's messages, without a node: the /planning_scene diff carrying the map goes
through CDR as a real moveit_msgs/PlanningScene (octomap_msgs/Octomap inside) and OctoMap reads the received
bytes to the map's occupied cells; depth images and point clouds decode as their layouts say."""

from __future__ import annotations

import numpy as np
import pytest

octomap = pytest.importorskip("octomap", reason="octomap-python is not installed: pip install octomap-python")
pytest.importorskip("rclpy")
pytest.importorskip("moveit_msgs.msg")
pytest.importorskip("octomap_msgs.msg")

from builtin_interfaces.msg import Time  # noqa: E402
from moveit_msgs.msg import PlanningScene  # noqa: E402
from octomap_msgs.msg import Octomap  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import PointCloud2, PointField  # noqa: E402

from robot_bridge.ros.conversions import image_msg  # noqa: E402
from robot_bridge.ros.occupancy import camera_info_topic, cloud_points, image_array, planning_scene_diff  # noqa: E402
from robot_bridge.world.occupancy import OccupancyError, OccupancyMap, binary_node_count, occupied_keys  # noqa: E402


def octomap_of(msg: Octomap):
    """OctoMap's own reader on the message's bytes (octomap_msgs' binaryMsgToMap: readBinaryData), the
    header written here: the node count from the 2-bit child fields, the resolution from the message."""
    data = np.asarray(msg.data, dtype=np.int8).astype(np.uint8).tobytes()
    tree = octomap.OcTree(msg.resolution)
    header = (f"# Octomap OcTree binary file\nid {msg.id}\nsize {binary_node_count(data)}\n"
              f"res {msg.resolution}\ndata\n").encode()
    assert tree.readBinary(header + data)
    assert tree.size() == binary_node_count(data)
    return tree


def test_the_planning_scene_diff_carries_the_map_octomap_reads_back():
    occupancy = OccupancyMap()
    rng = np.random.default_rng(4)
    points = rng.uniform([0.5, -0.3, 0.2], [1.5, 0.3, 0.9], size=(400, 3))
    occupancy.insert_points(points, np.eye(4))
    scene = planning_scene_diff(occupancy.to_message_fields(), "world", Time(sec=12, nanosec=5))
    received = deserialize_message(serialize_message(scene), PlanningScene)
    assert received.is_diff and received.world.octomap.header.frame_id == "world"
    msg = received.world.octomap.octomap
    assert isinstance(msg, Octomap) and msg.binary and msg.id == "OcTree" and msg.resolution == 0.02
    assert msg.header.stamp.sec == 12 and received.world.octomap.origin.orientation.w == 1.0
    cells = occupied_keys(octomap_of(msg))
    expected = np.unique(np.floor(points / 0.02).astype(np.int64) + 32768, axis=0)
    assert len(cells) == len(expected) and np.array_equal(cells, occupancy.occupied_keys())
    assert np.array_equal(cells, expected)


def test_depth_images_and_point_clouds_decode_as_their_layouts_say():
    depth = np.arange(12, dtype=np.float32).reshape(3, 4)
    msg = image_msg(depth, "32FC1", "cam", Time())
    assert np.array_equal(image_array(msg), depth)
    big = image_msg(depth.astype(">f4"), "32FC1", "cam", Time())        # big-endian bytes, flagged so
    big.is_bigendian = 1
    assert np.array_equal(image_array(big), depth)
    mm = image_msg(np.array([[1000, 0], [65535, 7]], dtype=np.uint16), "16UC1", "cam", Time())
    assert image_array(mm).tolist() == [[1000, 0], [65535, 7]]
    with pytest.raises(OccupancyError, match="encoding"):
        image_array(image_msg(np.zeros((2, 2), np.uint8), "mono8", "cam", Time()))
    short = image_msg(depth, "32FC1", "cam", Time())
    short.data = short.data[:-4]
    with pytest.raises(OccupancyError, match="depth image"):
        image_array(short)

    pts = np.array([[1.0, 2.0, 3.0], [np.nan, 0.0, 0.0], [-1.5, 0.25, 8.0]], dtype=np.float32)
    cloud = PointCloud2(height=1, width=3, point_step=16, row_step=48, is_dense=False)
    cloud.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                    for i, n in enumerate("xyz")]
    padded = np.zeros((3, 4), np.float32)
    padded[:, :3] = pts
    cloud.data = padded.tobytes()
    out = cloud_points(cloud)
    assert np.array_equal(out[[0, 2]], pts[[0, 2]]) and np.isnan(out[1, 0])
    cloud.fields[2].datatype = PointField.FLOAT64
    with pytest.raises(OccupancyError, match="point cloud"):
        cloud_points(cloud)
    assert camera_info_topic("/wrist_camera/depth/image_raw") == "/wrist_camera/depth/camera_info"


def test_the_map_is_sent_when_it_changed_and_once_more_after_a_subscriber_matched():
    """OccupancyFeed.publish (the node's timer): nothing new, nothing sent; ``resend`` (set when world_node's
    planning scene publisher republishes for a matched subscriber) sends the unchanged map once."""
    from rclpy.clock import Clock

    from robot_bridge.ros.occupancy import OccupancyFeed

    class Node:
        def get_clock(self):
            return Clock()

    sent: list = []
    feed = object.__new__(OccupancyFeed)                 # its state without subscriptions (no rclpy node)
    feed.node, feed.world_frame, feed.resend, feed._published = Node(), "world", False, -1
    feed.scene_pub = type("Pub", (), {"publish": lambda self, msg: sent.append(msg)})()
    feed.map = OccupancyMap()
    feed.resend = True
    feed.publish()
    assert len(sent) == 1                               # the first map (empty) goes out
    feed.publish()
    assert len(sent) == 1
    feed.map.insert_points(np.array([[1.0, 0.0, 0.0]]), np.eye(4))
    feed.publish()
    feed.publish()
    assert len(sent) == 2 and len(sent[-1].world.octomap.octomap.data)
    feed.resend = True
    feed.publish()
    feed.publish()
    data = [bytes(m.world.octomap.octomap.data) for m in sent]
    assert len(sent) == 3 and data[2] == data[1]
