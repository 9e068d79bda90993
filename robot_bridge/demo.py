"""``make demo``: the bridge in sim mode on the embedded default, driven by a small master client.

Starts ``robot-bridge run --mode sim --objects <embedded objects.yaml>`` in a subprocess (its log goes to
``<out>/bridge.log``) on a private ROS domain limited to this machine, then, as a master planning process
would: waits for robot_description, moves the arm along a trajectory on ``controller_node/joint_trajectory``;
then, as a detector would, reports a ball in front of the base laser (vision_msgs/Detection3DArray in the
laser's frame) and waits until world_node has made it a body (on /tf, in ``world_node/objects``) and the
simulated laser sees it; reads a laser scan and a camera frame, prints a report and draws the robot in its
world, the detected ball included, with the laser hits (``<out>/demo.png``; the camera frame goes to
``<out>/wrist_camera.png``).  Stops the bridge with SIGINT and exits 0 when every step worked.

    python -m robot_bridge.demo [--out demo_out] [--timeout 60]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from . import bringup

CONTROLLER = "controller_node"
LASER, CAMERA = "base_laser", "wrist_camera"
# Two waypoints (seconds from start, joint values): swing left with the gripper half open, then the
# SRDF 'home' pose turned towards the can with the gripper open.  Slow enough for every velocity limit.
WAYPOINTS = [
    (2.5, {"j1": 0.6, "j2": 0.3, "j3": 0.0, "j4": 0.8, "j5": 0.0, "j6": 0.6, "j7": 0.5,
           "finger_joint": 0.02}),
    (5.0, {"j1": 0.2, "j2": 0.4, "j3": 0.0, "j4": 1.2, "j5": 0.0, "j6": 0.9, "j7": 0.0,
           "finger_joint": 0.04}),
]
# The detected object: a ball (class of the embedded objects.yaml) in the base laser's plane, 0.5 m ahead and
# 0.3 m to the left of the laser; its frame is its centre, radius 0.05 m.
DETECTED_CLASS, DETECTED_NAME = "ball", "ball_0"
DETECTED_AT = (0.5, 0.3, 0.0)          # in the base_laser frame
DETECTED_RADIUS = 0.05
DETECTION_PERIOD = 0.1             # s between Detection3DArray messages while the demo runs
SETTLE_TIME = 0.5                  # s after the trajectory's end before the final error is read,
SETTLE_MAX = 5.0                   # s more at most while it is not yet within
TOLERANCE = 1e-3                   # rad (m for the finger): the controller's tracking goal
BRIDGE_STOP_TIMEOUT = 15.0         # s


class DemoError(RuntimeError):
    """A demo step that did not complete."""


@dataclass
class Observations:
    description: str = ""
    description_after: float = 0.0
    tf_static_frames: set = field(default_factory=set)
    tf_frames: set = field(default_factory=set)
    joint_state: object = None
    scans: list = field(default_factory=list)
    images: list = field(default_factory=list)
    objects_xml: str = ""
    object_tf: dict = field(default_factory=dict)        # child frame -> 4x4 in world
    object_markers: set = field(default_factory=set)     # marker namespaces of world_node


class MasterClient:
    """The master side: one node in a private context, spun from this thread."""

    def __init__(self, namespace: str = ""):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import Image, JointState, LaserScan
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage
        from trajectory_msgs.msg import JointTrajectory
        from vision_msgs.msg import Detection3DArray
        from visualization_msgs.msg import MarkerArray

        from .ros import qos

        self.context = rclpy.Context()
        self.context.init()
        self.node = rclpy.create_node("demo_master", context=self.context, namespace=namespace or None)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.seen = Observations()
        self.start = time.monotonic()
        n = self.node
        n.create_subscription(String, "robot_description", self._on_description, qos.description_qos())
        n.create_subscription(TFMessage, "/tf_static", lambda m: self._on_tf(m, self.seen.tf_static_frames),
                              qos.tf_static_listener_qos())
        n.create_subscription(TFMessage, "/tf", lambda m: self._on_tf(m, self.seen.tf_frames), qos.tf_qos())
        n.create_subscription(JointState, "joint_states", self._on_joint_state, qos.sensor_data_qos())
        reliable = QoSProfile(depth=2)
        n.create_subscription(LaserScan, f"{LASER}/scan", self.seen.scans.append, reliable)
        n.create_subscription(Image, f"{CAMERA}/image_raw", self.seen.images.append, reliable)
        self.trajectory_pub = n.create_publisher(JointTrajectory, f"{CONTROLLER}/joint_trajectory", 10)
        n.create_subscription(String, "world_node/objects", self._on_objects, qos.description_qos())
        n.create_subscription(MarkerArray, "world_node/markers", self._on_markers, qos.description_qos())
        self.detections_pub = n.create_publisher(Detection3DArray, "detections", 10)
        self.detecting = False
        n.create_timer(DETECTION_PERIOD, self._detect)

    # -- callbacks -------------------------------------------------------------------
    def _on_description(self, msg) -> None:
        if not self.seen.description:
            self.seen.description_after = time.monotonic() - self.start
        self.seen.description = msg.data

    def _on_tf(self, msg, frames: set) -> None:
        from .ros.tf import matrix

        for t in msg.transforms:
            frames.update((t.header.frame_id, t.child_frame_id))
            if t.child_frame_id == DETECTED_NAME:
                self.seen.object_tf[t.child_frame_id] = matrix(t)

    def _on_objects(self, msg) -> None:
        self.seen.objects_xml = msg.data

    def _on_markers(self, msg) -> None:
        from visualization_msgs.msg import Marker

        for m in msg.markers:
            if m.action == Marker.ADD:
                self.seen.object_markers.add(m.ns)
            elif m.action == Marker.DELETE:
                self.seen.object_markers.discard(m.ns)

    def _detect(self) -> None:
        """The detector: the ball, where it stands, in the base laser's frame."""
        if not self.detecting:
            return
        from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

        msg = Detection3DArray()
        msg.header.frame_id = LASER
        msg.header.stamp = self.node.get_clock().now().to_msg()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = DETECTED_CLASS, 0.95
        hyp.pose.pose.position.x, hyp.pose.pose.position.y, hyp.pose.pose.position.z = DETECTED_AT
        hyp.pose.pose.orientation.w = 1.0
        msg.detections.append(Detection3D(results=[hyp]))
        self.detections_pub.publish(msg)

    def _on_joint_state(self, msg) -> None:
        self.seen.joint_state = msg

    # -- steps -----------------------------------------------------------------------
    def wait_for(self, what: str, predicate, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise DemoError(f"no {what} within {timeout:.0f} s")
            self.executor.spin_once(timeout_sec=0.05)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.05)

    def send_trajectory(self, joint_names: list[str]):
        from trajectory_msgs.msg import JointTrajectory

        from .ros.conversions import trajectory_point

        msg = JointTrajectory(joint_names=joint_names)        # stamp 0: start now
        current = dict(zip(self.seen.joint_state.name, self.seen.joint_state.position))
        for t, values in WAYPOINTS:
            msg.points.append(trajectory_point([values.get(j, current[j]) for j in joint_names],
                                               time_from_start=t))
        self.trajectory_pub.publish(msg)
        return np.array(msg.points[-1].positions)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2)
        self.node.destroy_node()
        self.context.try_shutdown()


def joint_error(joint_state, names: list[str], target: np.ndarray) -> np.ndarray:
    actual = dict(zip(joint_state.name, joint_state.position))
    return np.abs(np.array([actual[n] for n in names]) - target)


def run_client(timeout: float) -> dict:
    """The master's steps; returns the numbers of the report."""
    from .formats import xmlsafe

    client = MasterClient()
    try:
        seen = client.seen
        client.wait_for("robot_description", lambda: seen.description, timeout)
        urdf = xmlsafe.parse_bytes(seen.description.encode("utf-8")).getroot()
        client.wait_for("joint_states from the controller", lambda: seen.joint_state is not None, timeout)
        client.wait_for(f"{CONTROLLER}/joint_trajectory subscriber",
                        lambda: client.trajectory_pub.get_subscription_count() > 0, timeout)
        names = list(seen.joint_state.name)
        target = client.send_trajectory(names)
        end = time.monotonic() + WAYPOINTS[-1][0]
        client.spin_for(WAYPOINTS[-1][0] + SETTLE_TIME)
        # on a loaded machine the modules may still be finishing: give them a little longer
        deadline = time.monotonic() + SETTLE_MAX
        while joint_error(seen.joint_state, names, target).max() >= TOLERANCE and time.monotonic() < deadline:
            client.executor.spin_once(timeout_sec=0.05)
        read_after = time.monotonic() - end
        error = joint_error(seen.joint_state, names, target)      # the latest /joint_states
        final = dict(zip(seen.joint_state.name, seen.joint_state.position))
        # the detector reports the ball: world_node makes it a body, the simulated laser sees it
        client.detecting = True
        detected_after = time.monotonic()
        client.wait_for(f"{DETECTED_NAME} on /tf", lambda: DETECTED_NAME in seen.object_tf, timeout)
        client.wait_for(f"{DETECTED_NAME} in world_node/objects",
                        lambda: f'name="{DETECTED_NAME}"' in seen.objects_xml, timeout)
        detected_after = time.monotonic() - detected_after
        seen.scans.clear()
        seen.images.clear()
        expected = np.hypot(*DETECTED_AT[:2]) - DETECTED_RADIUS
        beam = float(np.arctan2(DETECTED_AT[1], DETECTED_AT[0]))

        def sees_ball() -> bool:
            if not seen.scans:
                return False
            scan = seen.scans[-1]
            i = int(round((beam - scan.angle_min) / scan.angle_increment))
            return abs(scan.ranges[i] - expected) < 0.03          # 5 mm noise on the simulated laser
        client.wait_for(f"{LASER}/scan seeing {DETECTED_NAME}", sees_ball, timeout)
        client.wait_for(f"{CAMERA}/image_raw", lambda: seen.images, timeout)
        client.spin_for(0.5)                 # a little more /tf
        return {"robot": urdf.get("name"), "links": len(urdf.findall("link")),
                "description_after": seen.description_after,
                "tf_static": sorted(seen.tf_static_frames), "tf": sorted(seen.tf_frames),
                "joints": names, "target": target, "error": error, "final": final, "read_after": read_after,
                "scan": seen.scans[-1], "image": seen.images[-1],
                "detected": {"pose": seen.object_tf[DETECTED_NAME], "objects_xml": seen.objects_xml,
                             "markers": DETECTED_NAME in seen.object_markers, "after": detected_after,
                             "beam": beam, "expected": expected}}
    finally:
        client.close()


def image_array(msg) -> np.ndarray:
    if msg.encoding == "rgb8":
        return np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)[:, :msg.width * 3] \
            .reshape(msg.height, msg.width, 3)
    if msg.encoding == "32FC1":
        return np.frombuffer(bytes(msg.data), np.float32).reshape(msg.height, msg.width)
    raise DemoError(f"unexpected image encoding {msg.encoding!r}")


def draw(result: dict, out: Path) -> Path:
    """The robot at its final joint values in its world, with the scan's hits."""
    from matplotlib import pyplot as plt

    from .formats import load
    from .render import render, scan_points
    from .sim import Scene

    from .world.document import read_xml

    robot = load(bringup.DEFAULT_ROBOT)
    scene = Scene(robot, backend="numpy")
    final = {j: v for j, v in result["final"].items() if j in robot.joints}
    scene.set_joint_positions(final)
    scene.set_objects({b.name: (load(b.file), b.pose) for b in read_xml(result["detected"]["objects_xml"])})
    scan, sensor = result["scan"], robot.sensors[LASER]
    hits = scan_points(scene, sensor, scan.ranges, scan.angle_min, scan.angle_increment)
    image = image_array(result["image"])
    plt.imsave(out / f"{CAMERA}.png", image if image.ndim == 3 else np.nan_to_num(image), cmap="viridis")
    return render(robot, out / "demo.png", final, points=hits, points_origin=scene.sensor_pose(sensor)[:3, 3],
                  scene=scene, top_view=True, title=f"robot_bridge demo: {robot.name} after the trajectory, "
                                     f"detected {DETECTED_NAME}, {len(hits)} laser hits")


MESH_ROBOT = "robots/barrettwam.robot.xml"       # Inventor meshes: converted for rviz by default


def openrave_data() -> Optional[Path]:
    """OpenRAVE's data folder: $OPENRAVE_DATA, else the developer corpus beside the repository."""
    candidates = [Path(p) for p in os.environ.get("OPENRAVE_DATA", "").split(os.pathsep) if p]
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "corpus" / "openrave" / "src")
    return next((c for c in candidates if (c / MESH_ROBOT).is_file()), None)


def draw_mesh_robot(out: Path) -> str:
    """What rviz shows of a mesh robot: the robot_description description_node publishes for
    barrettwam.robot.xml with default mesh handling, saved and drawn as ``render --urdf`` draws it."""
    from .formats.mesh_cache import MeshCache
    from .formats.urdf import read_published
    from .nodes.description import load_model, mesh_target
    from .render import render, visuals_only

    data = openrave_data()
    if data is None:
        return f"mesh robot: skipped ({MESH_ROBOT} not found: set OPENRAVE_DATA to OpenRAVE's data folder)"
    cache = MeshCache(out / "mesh_cache")
    loaded = load_model(str(data / MESH_ROBOT), search_path=[str(data)],
                        meshes=mesh_target("file", cache))
    saved = out / "barrettwam_robot_description.urdf"
    saved.write_text(loaded.urdf, encoding="utf-8")
    robot = visuals_only(read_published(saved))
    picture = render(robot, out / "barrettwam_rviz.png", title=f"{robot.name}: robot_description as rviz "
                     f"shows it ({len(loaded.report.mesh_files)} meshes from {cache.directory.name}/)")
    visuals = sum(len(link.visuals) for link in robot.links.values())
    report = loaded.report
    return (f"mesh robot: {MESH_ROBOT} -> robot_description with {visuals} visuals, "
            f"{len(report.meshes_converted)} meshes converted, {len(report.meshes_cached)} from the cache; "
            f"picture: {picture}")


def report(result: dict, picture: Path) -> str:
    scan, image = result["scan"], result["image"]
    ranges = np.asarray(scan.ranges, dtype=float)
    finite = np.isfinite(ranges)
    closest = int(np.argmin(np.where(finite, ranges, np.inf))) if finite.any() else None
    frames = sorted(set(result["tf_static"]) | set(result["tf"]))
    error = result["error"]
    worst = result["joints"][int(np.argmax(error))]
    lines = [
        f"robot_description: {result['robot']}, {result['links']} URDF links "
        f"(received {result['description_after']:.1f} s after the client started)",
        f"TF frames seen: {len(frames)} ({len(result['tf_static'])} on /tf_static, "
        f"{len(result['tf'])} on /tf): " + ", ".join(frames),
        f"trajectory: {len(result['joints'])} joints, {len(WAYPOINTS)} points over {WAYPOINTS[-1][0]:.1f} s; "
        f"final joint error {result['read_after']:.1f} s after its end: max {error.max():.2e} ({worst}), "
        f"mean {error.mean():.2e} (rad; m for prismatic joints)",
        f"laser {LASER}/scan: {len(ranges)} beams, {int(finite.sum())} hits, scan min range "
        + (f"{ranges[closest]:.3f} m at {np.degrees(scan.angle_min + closest * scan.angle_increment):.1f} deg"
           if closest is not None else "none (nothing in range)"),
        detected_line(result, ranges, scan),
        f"camera {CAMERA}/image_raw: {image.width}x{image.height} {image.encoding}, "
        f"frame_id {image.header.frame_id}",
        f"picture: {picture}",
    ]
    return "\n".join("  " + line for line in lines)


def detected_line(result: dict, ranges: np.ndarray, scan) -> str:
    from .world.document import read_xml

    d = result["detected"]
    t = d["pose"][:3, 3]
    bodies = [b.name for b in read_xml(d["objects_xml"])]
    i = int(round((d["beam"] - scan.angle_min) / scan.angle_increment))
    return (f"detected object: {DETECTED_NAME} ({DETECTED_CLASS}) at {t[0]:.3f} {t[1]:.3f} {t[2]:.3f} in "
            f"world ({d['after']:.1f} s after the first detection); on /tf: yes; markers: "
            f"{'yes' if d['markers'] else 'no'}; world_node/objects: {', '.join(bodies)}; laser range "
            f"towards it {ranges[i]:.3f} m (sphere surface {d['expected']:.3f} m)")


def domain_id() -> int:
    """An exported ROS_DOMAIN_ID (0..232) when set, else a domain of its own, away from the test suite's
    1..100 and from a user's usual 0: 101..200."""
    given = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if given:
        if not given.isdigit() or int(given) > 232:
            raise SystemExit(f"robot_bridge demo: ROS_DOMAIN_ID={given!r}: expected 0..232")
        return int(given)
    return 101 + os.getpid() % 100


def stop(bridge: subprocess.Popen) -> int:
    if bridge.poll() is None:
        bridge.send_signal(signal.SIGINT)
        try:
            bridge.wait(timeout=BRIDGE_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            bridge.kill()
            bridge.wait()
            return -9
    return bridge.returncode


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="robot_bridge.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_out", help="output directory (default: demo_out)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds allowed for each wait")
    parser.add_argument("--domain-id", type=int, default=None,
                        help="ROS_DOMAIN_ID (default: an exported ROS_DOMAIN_ID, else 101..200 from the pid)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update({"ROS_DOMAIN_ID": str(domain_id() if args.domain_id is None else args.domain_id),
                       "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                       **bringup.dds_environment()})
    started = time.monotonic()
    objects = bringup.DATA_DIR / "objects.yaml"
    command = [sys.executable, "-m", "robot_bridge.cli.main", "run", "--mode", "sim",
               "--objects", str(objects)]
    print(f"robot_bridge demo: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}, bridge: robot-bridge run "
          f"--mode sim --objects {objects} (log: {out / 'bridge.log'})", flush=True)
    with open(out / "bridge.log", "w", encoding="utf-8") as log:
        bridge = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            result = run_client(args.timeout)
        except DemoError as exc:
            stop(bridge)
            print(f"robot_bridge demo: FAILED: {exc}; last lines of {out / 'bridge.log'}:", file=sys.stderr)
            print("".join((out / "bridge.log").read_text(encoding="utf-8").splitlines(True)[-20:]),
                  file=sys.stderr)
            return 1
        except BaseException:
            stop(bridge)
            raise
        status = stop(bridge)
    picture = draw(result, out)
    print(report(result, picture))
    print("  " + draw_mesh_robot(out))
    print(f"robot_bridge demo: bridge stopped (exit status {status}); "
          f"total {time.monotonic() - started:.1f} s")
    if status != 0:
        print(f"robot_bridge demo: FAILED: the bridge exited with status {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
