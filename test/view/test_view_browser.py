"""The live view in a real headless browser (Debian's chromium over the DevTools protocol).

The bridge (description, sensor bridge, controller, world node: ``robot-bridge run --objects``) runs as its
own process; the view node runs in this process (so the test can read its TF and call the goal its sliders
send) and serves the page on a free port of 127.0.0.1.  Truth is independent of the page: where the robot
must appear is its links' TF positions projected through the page's initial camera; the ball's colour is its
body file's (world_node's ObjectColor); the scan's colour is the page's scan colour; the collision object's
colour and place are the test's own.  Skipped, with the reason, without a browser."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("viser")
pytest.importorskip("websockets")
pytest.importorskip("control_msgs.action")
pytest.importorskip("vision_msgs.msg")

from robot_bridge.view.screenshot import Browser, find_browser, free_port, save_png  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OBJECTS = REPO / "robot_bridge" / "data" / "objects.yaml"
WIDTH, HEIGHT = 1000, 700
PANEL_LEFT = 640                 # the GUI panel covers x >= this (viser's right-hand panel)
BALL_AT = (0.1, -1.0, 0.05)      # world frame; in view of the initial camera, clear of the arm and the world
GOAL = {"j2": 1.1, "j4": 1.2}
BOX_AT = (-0.5, -0.5, 0.05)      # world frame; the test's own collision object, clear of the arm and the ball


def wait_for(predicate, timeout: float = 90.0, period: float = 0.5):
    """Poll until ``predicate()`` is truthy (its value) or the deadline (None); the deadline only guards
    hangs: a loaded CI machine renders WebGL in software slowly."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value is not None and value is not False:
            return value
        time.sleep(period)
    return None


def project(points: np.ndarray) -> np.ndarray:
    """Pixel (x, y) of world points through the page's initial camera (pinhole, z up, vertical fov)."""
    from robot_bridge.view.page import CAMERA_FOV, CAMERA_LOOK_AT, CAMERA_POSITION

    eye, target = np.array(CAMERA_POSITION), np.array(CAMERA_LOOK_AT)
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, (0.0, 0.0, 1.0))
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    d = np.asarray(points, dtype=float) - eye
    z = d @ forward
    f = (HEIGHT / 2) / math.tan(CAMERA_FOV / 2)
    return np.stack([WIDTH / 2 + f * (d @ right) / z, HEIGHT / 2 - f * (d @ up) / z], axis=1)


def hsv(image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rgb = image.astype(float) / 255.0
    mx, mn = rgb.max(axis=2), rgb.min(axis=2)
    delta = np.where(mx > mn, mx - mn, 1.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hue = np.where(mx == r, ((g - b) / delta) % 6,
                   np.where(mx == g, (b - r) / delta + 2, (r - g) / delta + 4))
    hue = np.where(mx > mn, hue * 60.0, 0.0)
    sat = np.where(mx > 0, (mx - mn) / np.where(mx > 0, mx, 1.0), 0.0)
    return hue, sat, mx


def robot_blue(image):       # the arm's links: URDF colour (0.2, 0.4, 0.8), hue 220
    h, s, v = hsv(image)
    return (abs(h - 220) < 20) & (s > 0.45) & (v > 0.25)


def ball_yellow(image):      # ball.kinbody.xml: diffuseColor 0.9 0.8 0.1, hue 53
    h, s, v = hsv(image)
    return (abs(h - 53) < 9) & (s > 0.5) & (v > 0.35)


def box_magenta(image):      # the test's ObjectColor (1, 0, 1), hue 300
    h, s, v = hsv(image)
    return (abs(h - 300) < 15) & (s > 0.5) & (v > 0.35)


def near(point, half: int = 50) -> np.ndarray:
    """Pixels within ``half`` of a world point's projection."""
    (x, y), = project(np.array([point]))
    out = np.zeros((HEIGHT, WIDTH), dtype=bool)
    out[max(0, int(y) - half):int(y) + half, max(0, int(x) - half):int(x) + half] = True
    return out


def scan_red(image):         # robot_bridge.view.page.SCAN_RGB (255, 40, 40), hue 0
    h, s, v = hsv(image)
    return ((h < 8) | (h > 352)) & (s > 0.6) & (v > 0.5)


def scene_part(mask):
    """The 3D scene: without viser's panel (right) and its axes gizmo (bottom left, a blue z arm)."""
    out = mask.copy()
    out[:, PANEL_LEFT:] = False
    out[HEIGHT - 80:, :80] = False
    return out


def appears_at(page, colour, point, publish, png, what: str, timeout: float = 90.0) -> np.ndarray:
    """Publishing (``publish()`` each round) until more than 100 pixels of ``colour`` are drawn near the
    world ``point``: that screenshot (saved as ``png``), its blob centred within 25 px of the point's
    projection."""
    zone = near(point)

    def drawn():
        publish()
        image = page.screenshot()
        mask = scene_part(colour(image)) & zone
        return (image, mask) if mask.sum() > 100 else None

    seen = wait_for(drawn, timeout)
    assert seen is not None, f"{what} never appeared"
    image, mask = seen
    save_png(image, png)
    (px, py), = project(np.array([point]))
    ys, xs = np.nonzero(mask)
    assert abs(xs.mean() - px) < 25 and abs(ys.mean() - py) < 25, (what, xs.mean(), ys.mean(), px, py)
    return image


def world_bodies(node) -> np.ndarray:
    """Pixels within the projected bounds of the world's bodies (world_node's environment: a blue block
    has the robot's hue): left out of the robot's checks."""
    out = np.zeros((HEIGHT, WIDTH), dtype=bool)
    for body in list(node.planning_scene.bodies.values()):
        frame = node.tf.poses("world", [body.frame]).get(body.frame.lstrip("/"))
        if frame is None or not body.parts:
            continue
        corners = np.concatenate([p.vertices for p in body.parts]).astype(float)
        px = project(corners @ (frame @ body.pose)[:3, :3].T + (frame @ body.pose)[:3, 3])
        x0, y0 = np.clip(px.min(axis=0) - 10, 0, None).astype(int)
        x1, y1 = (px.max(axis=0) + 10).astype(int)
        out[y0:max(y0, y1), x0:max(x0, x1)] = True
    return out


@pytest.fixture(scope="module")
def browser_path():
    path, why = find_browser()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture
def bridge(browser_path):
    proc = subprocess.Popen([sys.executable, "-m", "robot_bridge.cli.main", "run", "--objects", str(OBJECTS)],
                            cwd=REPO, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("robot-bridge run: ready"):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert ready.wait(180), "the bridge did not start:\n" + "".join(lines[-30:])
    yield lines
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=10)
    assert "Traceback" not in "".join(lines), "".join(lines[-40:])


@pytest.fixture
def view(bridge):
    import rclpy
    from fixtures.spinning import spun
    from rclpy.parameter import Parameter

    from robot_bridge.nodes.view import ViewNode

    context = rclpy.Context()
    context.init()
    node = ViewNode(context=context, parameter_overrides=[Parameter("port", value=free_port())])
    detector = rclpy.create_node("view_test_detector", context=context)
    with spun(context, node, detector):  # the spin ends before the nodes go (fixtures/spinning.py)
        yield node, detector


@pytest.fixture
def page(view, browser_path, tmp_path):
    browser = Browser(browser_path, WIDTH, HEIGHT)
    browser.open(view[0].url)
    yield browser
    browser.close()


@pytest.mark.timeout(900)
def test_the_page_draws_the_robot_moves_it_after_a_joint_goal_and_shows_a_ball_the_scan_and_a_body(view, page,
                                                                                                  tmp_path):
    from geometry_msgs.msg import Pose
    from vision_msgs.msg import Detection3D, Detection3DArray, ObjectHypothesisWithPose

    node, detector = view
    shots = tmp_path

    # the robot: its links' TF positions, through the page's camera, bound where its blue must be
    scene = wait_for(lambda: node._scene, 120)
    assert scene is not None and scene.name == "lwa3_gripper"
    arm = [link for link in scene.links if link.startswith("link")]

    def robot_region():
        poses = node.tf.poses("world", arm)
        if len(poses) < len(arm):
            return None
        px = project(np.array([p[:3, 3] for p in poses.values()]))
        return px[:, 0].min() - 60, px[:, 0].max() + 60, px[:, 1].min() - 60, px[:, 1].max() + 60

    region = wait_for(robot_region, 60)
    assert region is not None, "no TF for the arm's links"

    def drawn():
        image = page.screenshot()
        blue = scene_part(robot_blue(image)) & ~world_bodies(node)
        return image if blue.sum() > 300 else None

    before = wait_for(drawn, 180)
    assert before is not None, "the robot's blue never appeared on the page"
    save_png(before, shots / "robot.png")
    blue = scene_part(robot_blue(before)) & ~world_bodies(node)
    ys, xs = np.nonzero(blue)
    x0, x1, y0, y1 = region
    inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
    assert inside.mean() > 0.95, f"robot pixels outside the projected region {region}: {inside.mean():.2f}"
    assert x0 < xs.mean() < x1 and y0 < ys.mean() < y1

    # the scan: the simulated base laser's points are drawn in the page's scan colour.  The laser hits the
    # world's crate on its far side, which the camera sees through the crate's translucent faces: the world's
    # bodies are taken off the page first (a planning-scene REMOVE of every world body)
    from moveit_msgs.msg import CollisionObject

    from robot_bridge.ros.planning_scene import moveit_qos

    objects = detector.create_publisher(CollisionObject, "/collision_object", moveit_qos())
    assert wait_for(lambda: objects.publish(CollisionObject(operation=CollisionObject.REMOVE)) or
                    not node.planning_scene.bodies, 30), "the world's bodies were not removed"
    assert wait_for(lambda: scene_part(scan_red(page.screenshot())).sum() > 30, 60), "no scan points drawn"

    # a joint goal through FollowJointTrajectory (what "Send goal" calls): the arm moves on the page
    target = {**{s.name: 0.0 for s in scene.sliders}, **GOAL}
    answer = wait_for(lambda: (lambda t: t if "joints in" in t else None)(node.send_joint_goal(target)), 60)
    assert answer, "no controller took the goal"
    assert wait_for(lambda: all(abs(node._joint_positions.get(j, 9.0) - v) < 0.02 for j, v in GOAL.items()),
                    60), "the controller never reached the goal"

    def moved():
        image = page.screenshot()
        now_blue = scene_part(robot_blue(image)) & ~world_bodies(node)
        return image if (now_blue ^ blue).sum() > 1500 else None

    after = wait_for(moved, 60)
    assert after is not None, "the arm did not move on the page"
    save_png(after, shots / "moved.png")
    changed = np.nonzero((scene_part(robot_blue(after)) & ~world_bodies(node)) ^ blue)
    moved_poses = node.tf.poses("world", arm)
    px = project(np.array([p[:3, 3] for p in moved_poses.values()]))
    lo_x, hi_x = min(x0, px[:, 0].min() - 60), max(x1, px[:, 0].max() + 60)
    lo_y, hi_y = min(y0, px[:, 1].min() - 60), max(y1, px[:, 1].max() + 60)
    within = (changed[1] >= lo_x) & (changed[1] <= hi_x) & (changed[0] >= lo_y) & (changed[0] <= hi_y)
    assert within.mean() > 0.95, "the change is not where the arm is"

    # a detected ball appears, in its class colour, where it was detected
    assert (ball_yellow(after) & near(BALL_AT)).sum() < 20, "yellow there before the detection"
    publisher = detector.create_publisher(Detection3DArray, "/detections", 10)

    def detect():
        msg = Detection3DArray()
        msg.header.frame_id = "world"
        msg.header.stamp = detector.get_clock().now().to_msg()
        det = Detection3D()
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = "ball", 1.0
        hyp.pose.pose = Pose()
        hyp.pose.pose.position.x, hyp.pose.pose.position.y, hyp.pose.pose.position.z = BALL_AT
        hyp.pose.pose.orientation.w = 1.0
        det.results.append(hyp)
        msg.detections.append(det)
        publisher.publish(msg)

    image = appears_at(page, ball_yellow, BALL_AT, detect, shots / "ball.png", "the detected ball")

    # a collision object of the planning scene (/collision_object + its ObjectColor) appears where it was put
    from moveit_msgs.msg import ObjectColor, PlanningScene
    from shape_msgs.msg import SolidPrimitive

    from robot_bridge.ros.planning_scene import pose_msg

    assert (box_magenta(image) & near(BOX_AT)).sum() < 20, "magenta where the box will be, before it is added"
    colours = detector.create_publisher(PlanningScene, "/planning_scene", moveit_qos())
    box = CollisionObject(id="test_box", operation=CollisionObject.ADD,
                          primitives=[SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.12, 0.12, 0.1])],
                          primitive_poses=[pose_msg(np.eye(4))])
    box.header.frame_id = "world"
    box.pose.position.x, box.pose.position.y, box.pose.position.z = BOX_AT
    box.pose.orientation.w = 1.0
    colour = PlanningScene(is_diff=True, object_colors=[ObjectColor(id="test_box")])
    colour.object_colors[0].color.r = colour.object_colors[0].color.b = colour.object_colors[0].color.a = 1.0

    def add_box():
        objects.publish(box)
        colours.publish(colour)

    appears_at(page, box_magenta, BOX_AT, add_box, shots / "body.png", "the collision object")
