"""``make demo``: the bridge in sim mode on the embedded default, driven by a small master client.

Starts ``robot-bridge run --mode sim --objects <embedded objects.yaml>`` in a subprocess (its log goes to
``<out>/bridge.log``) on a private ROS domain limited to this machine (an exported ROS_DOMAIN_ID is used),
then, as a master would (seed 000, "autonomous manipulation with vision feedback"): waits for
robot_description; as a detector, reports a ball on the table (vision_msgs/Detection3DArray); waits until
world_node has made it a body (on /tf and in ``world_node/objects``, with its class's hpp handle
``side_grasp`` from ball.srdf); asks planner_node to pick it up by that handle (moveit_msgs Pickup on
``/pickup``: planned around the table and the other objects, run through the controller's
FollowJointTrajectory, the fingers closed through GripperCommand until they stop on the ball, the ball
attached and lifted); waits until world_node carries the ball under the gripper on /tf; reads a laser scan
and a camera frame; prints a report (also written to ``<out>/report.txt``, its numbers to
``<out>/demo.json``) and draws the robot holding the ball with the planned path of the gripper and the laser
hits (``<out>/demo.png``; the camera frame goes to ``<out>/wrist_camera.png``).  Stops the bridge with
SIGINT and exits 0 when every step worked.

    python -m robot_bridge.demo [--out demo_out] [--timeout 60]
"""

from __future__ import annotations

import argparse
import json
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

LASER, CAMERA = "base_laser", "wrist_camera"
# The detected object: a ball (class of the embedded objects.yaml, graspable by its class handle) on the
# table's near edge, within the arm's reach, the table, the can and the block of the world around it.
DETECTED_CLASS, DETECTED_NAME, TRACK_ID = "ball", "ball_0", "demo-ball"
DETECTED_AT = (0.66, 0.0, 0.79)        # world frame: centre, radius 0.05 m, resting on the table top (0.74)
HANDLE = "side_grasp"                  # ball.srdf
GRIPPER_LINK = "gripper_base"          # the SRDF gripper "hand"'s link
LIFT = 0.10                            # m the pickup lifts the ball (post_grasp_retreat, world +z)
DETECTION_PERIOD = 0.1                 # s between Detection3DArray messages while the demo runs
# The sim modules lag behind a trajectory when the control loop is starved (a loaded machine): a longer
# settling time after its end before the goal tolerance judges it (as the node tests give the controller).
BRIDGE_PARAMETERS = {"controller_node": {"ros__parameters": {"constraints": {"goal_time": 3.0}}}}
PICKUP_TIMEOUT = 120.0                 # s for the whole pickup (planning and motion on loaded cores)
BRIDGE_STOP_TIMEOUT = 15.0             # s


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
    ball_tf: list = field(default_factory=list)          # (parent frame, 4x4) of every ball_0 transform
    object_markers: set = field(default_factory=set)     # marker namespaces of world_node
    phases: list = field(default_factory=list)           # Pickup feedback states


class MasterClient:
    """The master side: one node in a private context, spun from this thread."""

    def __init__(self, namespace: str = ""):
        import rclpy
        from moveit_msgs.action import Pickup
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import Image, JointState, LaserScan
        from std_msgs.msg import String
        from tf2_msgs.msg import TFMessage
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
        n.create_subscription(String, "world_node/objects", self._on_objects, qos.description_qos())
        n.create_subscription(MarkerArray, "world_node/markers", self._on_markers, qos.description_qos())
        self.detections_pub = n.create_publisher(Detection3DArray, "detections", 10)
        self.pickup = ActionClient(n, Pickup, "pickup")
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
                self.seen.ball_tf.append((t.header.frame_id, matrix(t)))

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
        """The detector: the ball where it lies on the table (one track id, so a held ball stays itself)."""
        if not self.detecting:
            return
        from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

        msg = Detection3DArray()
        msg.header.frame_id = "world"
        msg.header.stamp = self.node.get_clock().now().to_msg()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = DETECTED_CLASS, 0.95
        hyp.pose.pose.position.x, hyp.pose.pose.position.y, hyp.pose.pose.position.z = DETECTED_AT
        hyp.pose.pose.orientation.w = 1.0
        msg.detections.append(Detection3D(id=TRACK_ID, results=[hyp]))
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

    def pick_up(self, timeout: float):
        """Pickup of the detected ball by its class handle (hpp's name <body>/<handle>), lifted LIFT."""
        from moveit_msgs.action import Pickup
        from moveit_msgs.msg import Grasp, MoveItErrorCodes

        if not self.pickup.wait_for_server(timeout_sec=timeout):
            raise DemoError(f"no planner_node pickup action within {timeout:.0f} s")
        grasp = Grasp(id=f"{DETECTED_NAME}/{HANDLE}")
        grasp.post_grasp_retreat.direction.header.frame_id = "world"
        grasp.post_grasp_retreat.direction.vector.z = 1.0
        grasp.post_grasp_retreat.desired_distance = LIFT
        goal = Pickup.Goal(target_name=DETECTED_NAME, group_name="arm", possible_grasps=[grasp],
                           allowed_planning_time=10.0)
        deadline = time.monotonic() + PICKUP_TIMEOUT
        while True:
            sent = self.pickup.send_goal_async(
                goal, feedback_callback=lambda f: self.seen.phases.append(f.feedback.state))
            self.wait_for("answer to the Pickup goal", sent.done, timeout)
            future = sent.result().get_result_async()
            self.wait_for("Pickup result", future.done, max(1.0, deadline - time.monotonic()))
            result = future.result().result
            code = result.error_code
            # planner_node may not have its robot_description or the ball yet: ask again
            waiting = code.val == MoveItErrorCodes.FAILURE and "no robot_description" in code.message or \
                code.val == MoveItErrorCodes.INVALID_OBJECT_NAME and "no body" in code.message
            if not waiting or time.monotonic() > deadline - 10.0:
                break
            self.spin_for(0.5)
        if code.val != MoveItErrorCodes.SUCCESS:
            raise DemoError(f"Pickup of {DETECTED_NAME} failed (code {code.val}): {code.message}")
        return result

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2)
        from .ros.actions import destroy_actions

        destroy_actions(self.node)
        self.node.destroy_node()
        self.context.try_shutdown()


def run_client(timeout: float) -> dict:
    """The master's steps; returns the numbers of the report."""
    from .formats import xmlsafe

    client = MasterClient()
    try:
        seen = client.seen
        client.wait_for("robot_description", lambda: seen.description, timeout)
        urdf = xmlsafe.parse_bytes(seen.description.encode("utf-8")).getroot()
        client.wait_for("joint_states from the controller", lambda: seen.joint_state is not None, timeout)
        start = dict(zip(seen.joint_state.name, seen.joint_state.position))
        # the detector reports the ball: world_node makes it a body with its class's handle
        client.detecting = True
        detected_after = time.monotonic()
        client.wait_for(f"{DETECTED_NAME} on /tf", lambda: seen.ball_tf, timeout)
        client.wait_for(f"{DETECTED_NAME} in world_node/objects",
                        lambda: f'name="{DETECTED_NAME}"' in seen.objects_xml, timeout)
        detected_after = time.monotonic() - detected_after
        detected_pose = seen.ball_tf[-1][1]
        objects_xml = seen.objects_xml
        picked_after = time.monotonic()
        result = client.pick_up(timeout)
        picked_after = time.monotonic() - picked_after
        client.wait_for(f"{DETECTED_NAME} under {GRIPPER_LINK} on /tf",
                        lambda: seen.ball_tf[-1][0] == GRIPPER_LINK, timeout)
        seen.scans.clear()
        seen.images.clear()
        client.wait_for(f"{LASER}/scan", lambda: seen.scans, timeout)
        client.wait_for(f"{CAMERA}/image_raw", lambda: seen.images, timeout)
        client.spin_for(0.5)                 # a little more /tf and /joint_states: the arm at rest
        stages = [s.joint_trajectory for s in result.trajectory_stages]
        return {"robot": urdf.get("name"), "links": len(urdf.findall("link")),
                "description_after": seen.description_after,
                "tf_static": sorted(seen.tf_static_frames), "tf": sorted(seen.tf_frames),
                "start": start, "final": dict(zip(seen.joint_state.name, seen.joint_state.position)),
                "stages": [(list(t.joint_names), np.array([p.positions for p in t.points]),
                            np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                                      for p in t.points])) for t in stages],
                "stage_names": list(result.trajectory_descriptions), "planning_time": result.planning_time,
                "phases": list(dict.fromkeys(seen.phases)), "picked_after": picked_after,
                "ball_in_gripper": seen.ball_tf[-1][1],
                "scan": seen.scans[-1], "image": seen.images[-1],
                "detected": {"pose": detected_pose, "objects_xml": objects_xml,
                             "markers": DETECTED_NAME in seen.object_markers, "after": detected_after}}
    finally:
        client.close()


def image_array(msg) -> np.ndarray:
    if msg.encoding == "rgb8":
        return np.frombuffer(bytes(msg.data), np.uint8).reshape(msg.height, msg.step)[:, :msg.width * 3] \
            .reshape(msg.height, msg.width, 3)
    if msg.encoding == "32FC1":
        return np.frombuffer(bytes(msg.data), np.float32).reshape(msg.height, msg.width)
    raise DemoError(f"unexpected image encoding {msg.encoding!r}")


def evaluate(result: dict) -> dict:
    """The numbers of the outcome, by the bridge's own forward kinematics of the embedded robot: the gripper
    frame's path along the planned stages, where it ended against the ball's handle, where the ball is."""
    from .formats import load, srdf
    from .sim import Scene
    from .world.document import read_xml

    robot = load(bringup.DEFAULT_ROBOT)
    srdf.attach_semantics(robot, srdf.read_srdf(str(bringup.DEFAULT_SRDF), robot))
    gripper = next(g for g in robot.semantics.grippers.values() if g.link == GRIPPER_LINK)
    scene = Scene(robot, backend="numpy")
    placed = {b.name: b for b in read_xml(result["detected"]["objects_xml"])}[DETECTED_NAME]
    handle = srdf.read_srdf(placed.srdf).handles[HANDLE]
    handle_world = placed.pose @ handle.pose
    positions = dict(result["start"])
    path = []
    for names, points, _times in result["stages"]:
        for values in points:
            positions.update(zip(names, values))
            scene.set_joint_positions(positions)
            path.append((scene.link_pose(GRIPPER_LINK) @ gripper.pose)[:3, 3])
    at_grasp = np.linalg.inv(handle_world)
    scene.set_joint_positions(positions)
    rel = at_grasp @ scene.link_pose(GRIPPER_LINK) @ gripper.pose
    final = {j: v for j, v in result["final"].items() if j in robot.joints}
    scene.set_joint_positions(final)
    gripper_now = scene.link_pose(GRIPPER_LINK) @ gripper.pose
    ball = scene.link_pose(GRIPPER_LINK) @ result["ball_in_gripper"]
    duration = sum(float(times[-1]) for _n, _p, times in result["stages"] if len(times))
    return {"robot": robot, "scene": scene, "final": final, "path": np.array(path), "ball": ball,
            "grasp_position_error": float(np.abs(rel[:3, 3]).max()),
            "grasp_axis_error": float(np.arccos(np.clip(rel[2, 2], -1.0, 1.0))),
            "ball_to_gripper": float(np.linalg.norm(ball[:3, 3] - gripper_now[:3, 3])),
            "lifted": float(ball[2, 3] - placed.pose[2, 3]), "detected_at": placed.pose[:3, 3],
            "finger": float(result["final"].get("finger_joint", float("nan"))), "duration": duration,
            "points": int(sum(len(p) for _n, p, _t in result["stages"]))}


def draw(result: dict, numbers: dict, out: Path) -> Path:
    """The robot at its final joint values holding the ball, the gripper's planned path, the scan's hits."""
    from matplotlib import pyplot as plt

    from .formats import load
    from .render import render, scan_points
    from .world.document import read_xml

    robot, scene = numbers["robot"], numbers["scene"]
    scene.set_joint_positions(numbers["final"])
    bodies = {b.name: (load(b.file), b.pose) for b in read_xml(result["detected"]["objects_xml"])}
    bodies[DETECTED_NAME] = (bodies[DETECTED_NAME][0], numbers["ball"])         # in the gripper
    scene.set_objects(bodies)
    scan, sensor = result["scan"], robot.sensors[LASER]
    hits = scan_points(scene, sensor, scan.ranges, scan.angle_min, scan.angle_increment)
    image = image_array(result["image"])
    plt.imsave(out / f"{CAMERA}.png", image if image.ndim == 3 else np.nan_to_num(image), cmap="viridis")
    return render(robot, out / "demo.png", numbers["final"], points=hits,
                  points_origin=scene.sensor_pose(sensor)[:3, 3], scene=scene, top_view=True,
                  path=numbers["path"], path_label="planned gripper path (reach, approach)",
                  title=f"robot_bridge demo: {robot.name} picked up {DETECTED_NAME} by its handle {HANDLE}, "
                        f"{len(hits)} laser hits")


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


def report(result: dict, numbers: dict, picture: Path) -> str:
    from .world.document import read_xml

    scan, image = result["scan"], result["image"]
    ranges = np.asarray(scan.ranges, dtype=float)
    finite = np.isfinite(ranges)
    closest = int(np.argmin(np.where(finite, ranges, np.inf))) if finite.any() else None
    frames = sorted(set(result["tf_static"]) | set(result["tf"]))
    d, n = result["detected"], numbers
    t, b = n["detected_at"], n["ball"][:3, 3]
    lines = [
        f"robot_description: {result['robot']}, {result['links']} URDF links "
        f"(received {result['description_after']:.1f} s after the client started)",
        f"TF frames seen: {len(frames)} ({len(result['tf_static'])} on /tf_static, "
        f"{len(result['tf'])} on /tf): " + ", ".join(frames),
        f"detected object: {DETECTED_NAME} ({DETECTED_CLASS}) at {t[0]:.3f} {t[1]:.3f} {t[2]:.3f} in world "
        f"({d['after']:.1f} s after the first detection); markers: {'yes' if d['markers'] else 'no'}; "
        f"world_node/objects: {', '.join(p.name for p in read_xml(d['objects_xml']))}",
        f"pickup: {DETECTED_NAME} by handle {HANDLE} in {result['picked_after']:.1f} s; planned in "
        f"{result['planning_time']:.3f} s; stages {', '.join(result['stage_names'])}: {n['points']} points "
        f"over {n['duration']:.2f} s; phases {' > '.join(result['phases'])}",
        f"grasp: gripper frame on the handle within {n['grasp_position_error'] * 1e3:.3f} mm, approach axis "
        f"within {n['grasp_axis_error']:.4f} rad; finger_joint {n['finger']:.4f} m (stopped on the ball)",
        f"holding: {DETECTED_NAME} under {GRIPPER_LINK} on /tf at {b[0]:.3f} {b[1]:.3f} {b[2]:.3f} in world, "
        f"lifted {n['lifted']:.3f} m, {n['ball_to_gripper'] * 1e3:.1f} mm from the gripper frame",
        f"laser {LASER}/scan: {len(ranges)} beams, {int(finite.sum())} hits, scan min range "
        + (f"{ranges[closest]:.3f} m at {np.degrees(scan.angle_min + closest * scan.angle_increment):.1f} deg"
           if closest is not None else "none (nothing in range)"),
        f"camera {CAMERA}/image_raw: {image.width}x{image.height} {image.encoding}, "
        f"frame_id {image.header.frame_id}",
        f"picture: {picture}",
    ]
    return "\n".join("  " + line for line in lines)


def save_numbers(numbers: dict, out: Path) -> Path:
    """The report's numbers as JSON (``<out>/demo.json``)."""
    keys = ("grasp_position_error", "grasp_axis_error", "ball_to_gripper", "lifted", "finger", "duration",
            "points")
    data = {k: numbers[k] for k in keys}
    data.update(ball=numbers["ball"][:3, 3].tolist(), detected_at=numbers["detected_at"].tolist(),
                path=numbers["path"].tolist(), handle=HANDLE, body=DETECTED_NAME)
    path = out / "demo.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


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
    params = out / "demo_params.yaml"
    params.write_text(json.dumps(BRIDGE_PARAMETERS), encoding="utf-8")         # JSON is YAML
    command = [sys.executable, "-m", "robot_bridge.cli.main", "run", "--mode", "sim",
               "--objects", str(objects), "--params-file", str(params)]
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
        from .view.screenshot import save_view
        view_line = save_view(out / "view.png")      # the live view of the demo scene, while the bridge runs
        status = stop(bridge)
    numbers = evaluate(result)
    picture = draw(result, numbers, out)
    text = report(result, numbers, picture)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    save_numbers(numbers, out)
    print(text)
    print("  " + draw_mesh_robot(out))
    print("  " + view_line)
    print(f"robot_bridge demo: bridge stopped (exit status {status}); "
          f"total {time.monotonic() - started:.1f} s")
    if status != 0:
        print(f"robot_bridge demo: FAILED: the bridge exited with status {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
