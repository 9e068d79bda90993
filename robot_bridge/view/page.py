"""The page: a viser server (three.js in the browser, scene and GUI over one WebSocket).

Everything here is plain data in, scene updates out; :meth:`ViewPage.tick` is called at the page rate
(default 30 Hz) and poses every frame node from the latest TF (latest pose wins: however fast /tf is, the
browser gets at most one pose per frame and tick, and only for frames that moved).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..model.transform import to_quat_wxyz
from .access import ViewAccess
from .scene import JointSlider, RobotScene, primitive_part
from .status import TopicStatus
from .tf_cdr import LatestTF

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
CAMERA_POSITION = (1.6, -1.6, 1.3)      # the browser's initial camera, in the fixed frame (z up)
CAMERA_LOOK_AT = (0.0, 0.0, 0.45)
CAMERA_FOV = math.radians(75.0)          # vertical, viser's default
STATUS_PERIOD = 0.5                  # s between updates of the topic table
POSE_EPSILON = 1e-5                  # m / quaternion component: a frame that moved less is not resent
SCAN_RGB = (255, 40, 40)
PATH_RGB = (255, 170, 0)
IMU_RGB = (40, 220, 40)
IMU_METRES_PER_MS2 = 0.03            # arrow length per m/s^2 of linear acceleration
MAX_SCAN_POINTS = 100_000
MAX_MARKERS = 10_000
SLIDER_PERIOD = 0.5                  # s between slider updates from /joint_states (a slider update costs ms)
GOAL_PERIOD = 0.25                   # s between joint goals while a slider is dragged
TARGET_TOLERANCE = 1e-3              # rad / m: a joint this close to its slider's target has reached it


@dataclass
class MarkerShape:
    """A visualization_msgs/Marker the page draws (CUBE, SPHERE, CYLINDER, MESH_RESOURCE, TRIANGLE_LIST)."""

    key: tuple[str, int]               # (ns, id)
    frame: str
    kind: str                          # box | sphere | cylinder | mesh | triangles
    pose: np.ndarray                   # 4x4 in frame
    scale: np.ndarray                  # 3
    rgba: tuple[float, float, float, float]
    mesh_path: str = ""                # kind mesh: a local file
    triangles: Optional[np.ndarray] = None     # kind triangles: (3k, 3) corners


def scan_points(ranges, angle_min: float, angle_increment: float, range_min: float, range_max: float
                ) -> np.ndarray:
    """(n, 3) points in the scan frame of the finite ranges within [range_min, range_max]."""
    r = np.asarray(ranges, dtype=float)[:MAX_SCAN_POINTS]
    a = angle_min + angle_increment * np.arange(len(r))
    ok = np.isfinite(r) & (r >= range_min) & (r <= range_max)
    return np.stack([r[ok] * np.cos(a[ok]), r[ok] * np.sin(a[ok]), np.zeros(int(ok.sum()))], axis=1)


def depth_to_rgb(depth: np.ndarray, max_range: float = 0.0) -> np.ndarray:
    """A depth image (metres; NaN/inf/0 unknown) as grey levels, near bright; unknown black."""
    d = np.asarray(depth, dtype=float)
    ok = np.isfinite(d) & (d > 0)
    far = max_range or (float(d[ok].max()) if ok.any() else 1.0)
    grey = np.zeros(d.shape, dtype=np.uint8)
    grey[ok] = (255 * (1.0 - np.clip(d[ok] / far, 0.0, 1.0)) * 0.85 + 38).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=2)


def _rgb255(rgba) -> tuple[int, int, int]:
    return tuple(int(round(min(max(c, 0.0), 1.0) * 255)) for c in rgba[:3])


def _pose_args(m: np.ndarray) -> dict:
    return {"wxyz": tuple(float(v) for v in to_quat_wxyz(m[:3, :3])),
            "position": tuple(float(v) for v in m[:3, 3])}


@dataclass
class _Framed:
    """A scene frame node posed from TF each tick."""

    tf_frame: str
    handle: object
    sent: Optional[np.ndarray] = None
    children: list = field(default_factory=list)


class JointTargets:
    """The joints a person moved on the page and where to: a slider shows its target (not where the joint
    is) until the joint gets there or a goal for it ends; goals go out at most every ``period`` s while a
    slider is dragged (each newer goal replaces the one in flight)."""

    def __init__(self, period: float = GOAL_PERIOD, tolerance: float = TARGET_TOLERANCE):
        self.period, self.tolerance = period, tolerance
        self.targets: dict[str, float] = {}
        self._pending = False
        self._due = 0.0

    def moved(self, name: str, value: float) -> None:
        self.targets[name] = float(value)
        self._pending = True

    def goal_due(self, now: float) -> Optional[dict[str, float]]:
        """Every target, when one changed since the last goal and the last goal is ``period`` s old."""
        if not self._pending or now < self._due:
            return None
        self._pending, self._due = False, now + self.period
        return dict(self.targets)

    def shown(self, positions: dict[str, float]) -> dict[str, float]:
        return {**positions, **self.targets}

    def reached(self, positions: dict[str, float]) -> None:
        if not self._pending:
            for name in [n for n, t in self.targets.items()
                         if n in positions and abs(positions[n] - t) <= self.tolerance]:
                del self.targets[name]

    def ended(self, goal: dict[str, float]) -> None:
        """A goal ended (reached, refused or replaced): its joints show where they are again, unless moved
        since."""
        for name, value in goal.items():
            if self.targets.get(name) == value and not self._pending:
                del self.targets[name]


@dataclass
class _DrawnBody:
    name: str
    frame: str
    serial: int
    rgba: tuple
    handle: object                   # the body's pose in its frame node


@dataclass
class _Panel:
    """One connected page's joint sliders (viser client-scoped GUI: only that page sees and sends them)."""

    client: object
    granted: bool
    folder: object = None
    sliders: dict = field(default_factory=dict)
    result: object = None


def hold_others(joints: list[str], targets: dict[str, float], positions: dict[str, float]
                ) -> tuple[dict[str, float], list[str]]:
    """The goal of a controller that drives ``joints`` (and wants all of them in every goal): the moved
    joints at their targets, the others held where they are.  Returns (goal, joints without a position)."""
    goal, unknown = {}, []
    for j in joints:
        if j in targets:
            goal[j] = float(targets[j])
        elif j in positions:
            goal[j] = float(positions[j])
        else:
            unknown.append(j)
    return goal, unknown


class ViewPage:
    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, fixed_frame: str = "world",
                 on_joint_goal: Optional[Callable[[dict], str]] = None, label: str = "robot_bridge",
                 access: Optional[ViewAccess] = None, report: Callable[[str], None] = lambda _t: None):
        import viser

        self.access = access or ViewAccess(host)
        self.server = self.access.serve(lambda: viser.ViserServer(host=host, port=port, label=label,
                                                                  verbose=False))
        self.access.port = self.server.get_port()
        self.report = report
        self._refusal_said = False
        self.fixed_frame = fixed_frame
        self.on_joint_goal = on_joint_goal
        self._lock = threading.RLock()
        self._frames: dict[str, _Framed] = {}          # scene name -> framed node
        self._robot_nodes: list[str] = []
        self._markers: dict[tuple[str, int], str] = {}
        self._bodies: dict[str, _DrawnBody] = {}
        self._slider_specs: list[JointSlider] = []
        self._shown: dict[str, float] = {}             # joint -> what its sliders show
        self._panels: dict[int, _Panel] = {}           # client id -> its sliders
        self._images: dict[str, object] = {}
        self._serial = 0
        self.poses_sent = 0
        self._status_due = 0.0
        scene = self.server.scene
        scene.set_up_direction("+z")
        scene.add_grid("/grid", width=4.0, height=4.0, cell_size=0.25, plane="xy")
        self.server.initial_camera.position = CAMERA_POSITION
        self.server.initial_camera.look_at = CAMERA_LOOK_AT
        gui = self.server.gui
        self._title = gui.add_markdown("**robot_bridge live view**: waiting for `/robot_description`")
        with gui.add_folder("Topics"):
            self._status = gui.add_markdown("")
        self._notes = gui.add_markdown("")
        self.targets = JointTargets()
        self._sliders_due = 0.0
        self.server.on_client_connect(self._client_connected)
        self.server.on_client_disconnect(self._client_gone)

    # -- the pages connected -------------------------------------------------------------------------
    async def _client_connected(self, client) -> None:
        """A page connected (async: it runs in the connection's own task, where its grant is known); its
        sliders are built on a worker thread (they take the page lock)."""
        import asyncio

        granted = self.access.granted()
        await asyncio.get_running_loop().run_in_executor(None, self._add_panel, client, granted)

    def _add_panel(self, client, granted: bool) -> None:
        with self._lock:
            panel = self._panels[client.client_id] = _Panel(client, granted)
            self._build_panel(panel)

    def _client_gone(self, client) -> None:
        with self._lock:
            self._panels.pop(client.client_id, None)

    def granted_clients(self) -> list[int]:
        with self._lock:
            return [cid for cid, p in self._panels.items() if p.granted]

    # -- the robot ------------------------------------------------------------------------------------
    def set_robot(self, scene: RobotScene, sliders: list[JointSlider]) -> None:
        """Replace the drawn robot (a new robot_description) and the joint sliders."""
        with self._lock:
            for name in self._robot_nodes:
                self._frames.pop(name, None)
                self.server.scene.remove_by_name(name)
            self._robot_nodes = []
            by_link: dict[str, list] = {}
            for part in scene.parts:
                by_link.setdefault(part.link, []).append(part)
            for i, link in enumerate(scene.links):
                name = f"/robot/l{i}"
                handle = self.server.scene.add_frame(name, show_axes=False, visible=False)
                self._frames[name] = _Framed(link, handle)
                self._robot_nodes.append(name)
                for k, part in enumerate(by_link.get(link, ())):
                    self.server.scene.add_mesh_simple(
                        f"{name}/p{k}", part.vertices, part.faces, color=_rgb255(part.rgba),
                        opacity=None if part.rgba[3] >= 1.0 else float(part.rgba[3]), side="double")
            note = f" ({len(scene.notes)} visuals not drawn)" if scene.notes else ""
            self._title.content = (f"**robot_bridge live view**: `{scene.name}`, {len(scene.links)} links, "
                                   f"{scene.triangles} triangles{note}")
            self._notes.content = "\n\n".join(f"- {n}" for n in scene.notes[:20])
            self._set_sliders(sliders)

    def _set_sliders(self, sliders: list[JointSlider]) -> None:
        self._slider_specs = list(sliders)
        self._shown = {s.name: min(max(0.0, _range(s)[0]), _range(s)[1]) for s in sliders}
        self.targets = JointTargets()
        for panel in self._panels.values():
            self._build_panel(panel)

    def _build_panel(self, panel: _Panel) -> None:
        """A page's sliders: enabled on a page granted control, disabled (what the joints do) elsewhere."""
        if panel.folder is not None:
            panel.folder.remove()
        panel.folder, panel.sliders, panel.result = None, {}, None
        if not self._slider_specs:
            return
        gui = panel.client.gui
        if panel.granted:
            title, why = "Joints (move one: goal to the controller)", ""
        elif self.access.allow_control:
            title, why = "Joints (read-only)", "Moving joints: open the URL with the token the view printed."
        else:
            title, why = "Joints (read-only)", "Moving joints: start the view with `--allow-control`."
        panel.folder = gui.add_folder(title)
        with panel.folder:
            for s in self._slider_specs:
                lo, hi = _range(s)
                handle = panel.sliders[s.name] = gui.add_slider(
                    s.name, min=lo, max=hi, step=(hi - lo) / 1000.0, disabled=not panel.granted,
                    initial_value=min(max(self._shown.get(s.name, 0.0), lo), hi))
                handle.on_update(lambda event, name=s.name, p=panel: self._slider_moved(p, name, event))
            panel.result = gui.add_markdown(why)

    def _slider_moved(self, panel: _Panel, name: str, event) -> None:
        """A person moved a slider (the page's own updates, client None, are not goals); from a page without
        control it moves nothing (said once)."""
        if event.client is None:
            return
        if not panel.granted:
            if not self._refusal_said:
                self._refusal_said = True
                self.report("live view: a slider moved on a page without control was ignored (control: "
                            "--allow-control and the URL with its token); said once")
            return
        with self._lock:
            self.targets.moved(name, float(event.target.value))

    def slider_values(self) -> dict[str, float]:
        """What the sliders show (every page's alike, but for a slider a person is dragging)."""
        with self._lock:
            return dict(self._shown)

    def set_slider_values(self, values: dict[str, float]) -> None:
        with self._lock:
            ranges = {s.name: _range(s) for s in self._slider_specs}
            for name, value in values.items():
                if name not in ranges:
                    continue
                lo, hi = ranges[name]
                self._shown[name] = value = float(min(max(value, lo), hi))
                for panel in self._panels.values():
                    h = panel.sliders.get(name)
                    if h is not None and abs(value - h.value) >= h.step / 2:      # a move it can show
                        h.value = value

    def follow_joints(self, positions: dict[str, float], now: float) -> None:
        """Sliders show where the joints are (at most every SLIDER_PERIOD), a moved one its target."""
        with self._lock:
            self.targets.reached(positions)
            if now < self._sliders_due:
                return
            self._sliders_due = now + SLIDER_PERIOD
            self.set_slider_values(self.targets.shown(positions))

    def send_goal(self, values: Optional[dict[str, float]] = None) -> str:
        """Ask ``on_joint_goal`` to move the joints to the sliders' targets (or ``values``)."""
        goal = dict(self.targets.targets) if values is None else dict(values)
        text = self.on_joint_goal(goal) if self.on_joint_goal else "no controller connected"
        self.set_goal_result(text)
        return text

    def set_goal_result(self, text: str) -> None:
        with self._lock:
            for panel in self._panels.values():
                if panel.granted and panel.result is not None:
                    panel.result.content = text

    # -- frames posed from TF ----------------------------------------------------------------------------
    def _framed(self, name: str, tf_frame: str) -> _Framed:
        framed = self._frames.get(name)
        if framed is None or framed.tf_frame != tf_frame:
            handle = self.server.scene.add_frame(name, show_axes=False, visible=False)
            framed = self._frames[name] = _Framed(tf_frame, handle)
        return framed

    def tick(self, tf: LatestTF, status: Optional[TopicStatus] = None, now: float = 0.0) -> int:
        """Pose every frame node from the latest TF (and send a slider goal when one is due); returns how many
        poses were sent."""
        with self._lock:
            goal = self.targets.goal_due(now)
        if goal:
            self.send_goal(goal)
        with self._lock:
            framed_nodes = list(self._frames.values())
            poses = tf.poses(self.fixed_frame, {f.tf_frame for f in framed_nodes})
            n = len(framed_nodes)
            new = np.full((n, 4, 4), np.nan)
            old = np.full((n, 4, 4), np.nan)
            for i, framed in enumerate(framed_nodes):
                pose = poses.get(framed.tf_frame.lstrip("/"))
                if pose is not None:
                    new[i] = pose
                if framed.sent is not None:
                    old[i] = framed.sent
            # one comparison for every frame: moved, appeared (old NaN) or lost (new NaN)
            with np.errstate(invalid="ignore"):
                moved = ~(np.abs(new - old) <= POSE_EPSILON).all(axis=(1, 2)) if n else np.zeros(0, bool)
            sent = 0
            index = np.flatnonzero(moved)
            known = index[~np.isnan(new[index, 0, 0])]
            quats = {}
            if len(known):
                from scipy.spatial.transform import Rotation

                xyzw = Rotation.from_matrix(new[known, :3, :3]).as_quat()
                quats = dict(zip(known.tolist(), xyzw[:, [3, 0, 1, 2]]))
            with self.server.atomic():
                for i in index.tolist():
                    framed = framed_nodes[i]
                    if i not in quats:
                        if framed.sent is not None:
                            framed.handle.visible = False
                            framed.sent = None
                        continue
                    pose = new[i]
                    framed.handle.wxyz, framed.handle.position = tuple(quats[i]), tuple(pose[:3, 3])
                    if framed.sent is None:
                        framed.handle.visible = True
                    framed.sent = pose
                    sent += 1
                if status is not None and now >= self._status_due:
                    self._status_due = now + STATUS_PERIOD
                    report = status.report(now)
                    if report != self._status.content:
                        self._status.content = report
            self.poses_sent += sent
            return sent

    # -- sensors -----------------------------------------------------------------------------------------
    def set_scan(self, topic: str, frame: str, points: np.ndarray) -> None:
        with self._lock:
            name = "/sensors/" + _node_name(topic)
            self._framed(name, frame)
            self.server.scene.add_point_cloud(name + "/points", np.asarray(points, dtype=np.float32),
                                              colors=SCAN_RGB, point_size=0.02, point_shape="circle")

    def set_imu(self, topic: str, frame: str, acceleration) -> None:
        with self._lock:
            name = "/sensors/" + _node_name(topic)
            self._framed(name, frame)
            a = np.asarray(acceleration, dtype=float)
            if not np.isfinite(a).all():
                return
            tip = a * IMU_METRES_PER_MS2
            self.server.scene.add_arrows(name + "/arrow", np.array([[[0.0, 0.0, 0.0], tip]]), colors=IMU_RGB,
                                         shaft_radius=0.006, head_radius=0.015, head_length=0.04)

    def set_image(self, label: str, image: np.ndarray) -> None:
        with self._lock:
            handle = self._images.get(label)
            if handle is None:
                with self.server.gui.add_folder(label):
                    self._images[label] = self.server.gui.add_image(image, label=label, format="jpeg",
                                                                    jpeg_quality=80)
            else:
                handle.image = image

    def set_path(self, points: Optional[np.ndarray]) -> None:
        """The planned path (tool positions in the fixed frame) as a polyline; None removes it."""
        with self._lock:
            if points is None or len(points) < 2:
                self.server.scene.remove_by_name("/path")
                return
            p = np.asarray(points, dtype=np.float32)
            segments = np.stack([p[:-1], p[1:]], axis=1)
            self.server.scene.add_line_segments("/path", segments, colors=PATH_RGB, thickness=3.0,
                                                thickness_units="screen")

    # -- the planning scene's bodies ------------------------------------------------------------------
    def draw_bodies(self, scene, changed) -> None:
        """Redraw the bodies ``changed`` (ids) of a :class:`robot_bridge.view.planning_scene.PlanningScene`:
        a moved body only has its pose sent; a new frame, shape or colour re-sends its mesh; a gone id is
        removed."""
        with self._lock:
            for body_id in changed:
                body = scene.get(body_id)
                drawn = self._bodies.get(body_id)
                if body is None:
                    if drawn is not None:
                        self._remove_drawn(self._bodies.pop(body_id))
                    continue
                rgba = scene.color(body_id)
                if drawn is not None and (drawn.frame, drawn.serial, drawn.rgba) == (body.frame,
                                                                                     body.shape_serial, rgba):
                    pose = _pose_args(body.pose)
                    drawn.handle.wxyz, drawn.handle.position = pose["wxyz"], pose["position"]
                    continue
                self._serial += 1
                name = f"/scene/b{self._serial}"
                self._framed(name, body.frame)
                handle = self.server.scene.add_frame(name + "/o", show_axes=False, **_pose_args(body.pose))
                if body.parts:
                    offsets = np.cumsum([0] + [len(p.vertices) for p in body.parts[:-1]])
                    vertices = np.concatenate([p.vertices for p in body.parts]).astype(np.float32)
                    faces = np.concatenate([p.faces + o for p, o in zip(body.parts, offsets)])
                    faces = faces.astype(np.uint32)
                    self.server.scene.add_mesh_simple(name + "/o/mesh", vertices, faces, color=_rgb255(rgba),
                                                      opacity=None if rgba[3] >= 1.0 else float(rgba[3]),
                                                      side="double")
                self._bodies[body_id] = _DrawnBody(name, body.frame, body.shape_serial, rgba, handle)
                if drawn is not None:                  # the new one is drawn first: no gap on the page
                    self._remove_drawn(drawn)

    def _remove_drawn(self, drawn: _DrawnBody) -> None:
        self._frames.pop(drawn.name, None)
        self.server.scene.remove_by_name(drawn.name)

    # -- world bodies (markers) --------------------------------------------------------------------------
    def apply_markers(self, add: list[MarkerShape], delete: list[tuple[str, int]], delete_all: bool = False
                      ) -> None:
        with self._lock:
            if delete_all:
                delete = list(self._markers)
            for key in delete:
                name = self._markers.pop(key, None)
                if name is not None:
                    self._frames.pop(name, None)
                    self.server.scene.remove_by_name(name)
            for m in add:
                if m.key not in self._markers and len(self._markers) >= MAX_MARKERS:
                    continue
                name = self._markers.get(m.key)
                if name is None:
                    self._serial += 1
                    name = self._markers[m.key] = f"/world/m{self._serial}"
                else:
                    self.server.scene.remove_by_name(name)
                    self._frames.pop(name, None)
                self._framed(name, m.frame)
                _draw_marker(self.server.scene, name + "/shape", m)

    def close(self) -> None:
        self.server.stop()

    @property
    def port(self) -> int:
        return self.server.get_port()


def _range(s: JointSlider) -> tuple[float, float]:
    return (s.lower, s.upper) if s.upper > s.lower else (-math.pi, math.pi)


def _node_name(topic: str) -> str:
    return topic.strip("/").replace("/", "_") or "topic"


def _draw_marker(scene, name: str, m: MarkerShape) -> None:
    from ..model.geometry import Box, Cylinder, Sphere

    rgb = _rgb255(m.rgba)
    opacity = None if m.rgba[3] >= 1.0 else float(m.rgba[3])
    s = np.asarray(m.scale, dtype=float)
    if m.kind in ("box", "sphere", "cylinder"):
        shape = {"box": Box(s / 2.0), "sphere": Sphere(0.5), "cylinder": Cylinder(0.5, 1.0)}[m.kind]
        part = primitive_part("", shape, np.eye(4), m.rgba)
        vertices = part.vertices * (s if m.kind != "box" else 1.0)
        scene.add_mesh_simple(name, vertices, part.faces, color=rgb, opacity=opacity, side="double",
                              **_pose_args(m.pose))
    elif m.kind == "mesh":
        from ..formats.meshes import load_triangles

        vertices, faces = load_triangles(m.mesh_path, s)
        scene.add_mesh_simple(name, vertices.astype(np.float32), faces.astype(np.uint32), color=rgb,
                              opacity=opacity, side="double", **_pose_args(m.pose))
    elif m.kind == "triangles" and m.triangles is not None and len(m.triangles) >= 3:
        corners = np.asarray(m.triangles, dtype=np.float32)[: len(m.triangles) // 3 * 3]
        corners = corners * s.astype(np.float32)
        faces = np.arange(len(corners), dtype=np.uint32).reshape(-1, 3)
        scene.add_mesh_simple(name, corners, faces, color=rgb, opacity=opacity, side="double",
                              **_pose_args(m.pose))
