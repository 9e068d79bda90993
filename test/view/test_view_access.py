"""Who may open the live view's WebSocket and who may move joints through it (issue 41): real viser servers
on free ports of 127.0.0.1 (one read-only, one with control allowed, started once for the module), spoken
to with the ``websockets`` client as a browser page (own Origin) or another site (foreign Origin) would."""

from __future__ import annotations

import http.client
import struct

import pytest

pytest.importorskip("viser")
pytest.importorskip("websockets")

from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from fixtures.viser_client import CAMERA, open_ws, send, slider_update, wait_until  # noqa: E402
from robot_bridge.view.access import MAX_CONNECTIONS, ViewAccess  # noqa: E402
from robot_bridge.view.page import ViewPage, hold_others  # noqa: E402
from robot_bridge.view.scene import robot_scene  # noqa: E402
from robot_bridge.view.screenshot import free_port  # noqa: E402
from robot_bridge.view.tf_cdr import LatestTF  # noqa: E402

ARM2 = """<robot name="arm2"><link name="base"/><link name="l1"/><link name="l2"/>
<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
<limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/>
<axis xyz="0 0 1"/><limit lower="-2" upper="2" velocity="1" effort="1"/></joint></robot>"""


class Served:
    """A page with the arm's sliders; what it logged and the goals it asked for."""

    def __init__(self, allow_control: bool):
        self.logs: list[str] = []
        self.goals: list[dict] = []
        self.access = ViewAccess("127.0.0.1", allow_control, report=self.logs.append)
        self.page = ViewPage("127.0.0.1", free_port(), access=self.access, report=self.logs.append,
                             on_joint_goal=lambda goal: self.goals.append(goal) or "sent")
        scene = robot_scene(ARM2)
        self.page.set_robot(scene, scene.sliders)
        self.port = self.page.port
        self.now = 0.0

    def tick(self) -> None:
        """One page update far enough after the last that a due goal is sent."""
        self.now += 10.0
        self.page.tick(LatestTF(), now=self.now)

    def panel(self, ws, granted: bool):
        """The panel the page built for a client that just sent its camera message."""
        before = set(self.page._panels)
        send(ws, CAMERA)
        return wait_until(lambda: next((p for cid, p in list(self.page._panels.items())
                                        if cid not in before and p.granted == granted and p.sliders), None))


@pytest.fixture(scope="module")
def readonly():
    served = Served(allow_control=False)
    yield served
    served.page.close()


@pytest.fixture(scope="module")
def control():
    served = Served(allow_control=True)
    yield served
    served.page.close()


def refused(port, **kwargs) -> int:
    with pytest.raises(InvalidStatus) as err:
        open_ws(port, **kwargs).close()
    return err.value.response.status_code


def test_a_websocket_from_another_origin_is_refused_403(control):
    port = control.port
    for origin in ("http://evil.example.com", f"http://evil.example.com:{port}",      # another site;
                   f"http://rebound.example:{port}",                                  # DNS rebinding;
                   f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}", "null"):
        assert refused(port, origin=origin) == 403, origin
    assert any("'http://evil.example.com' was refused (403)" in line for line in control.logs)
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):   # the page's own
        open_ws(port, origin=origin).close()


def test_without_origin_only_the_token_opens(control, readonly):
    assert refused(control.port, origin=None) == 403
    assert refused(control.port, origin=None, token="not-the-token") == 403
    open_ws(control.port, origin=None, token=control.access.token).close()
    assert readonly.access.token is None and refused(readonly.port, origin=None) == 403


def test_origin_rules_of_each_served_address():
    wild = ViewAccess("0.0.0.0")
    wild.port = 8080
    assert wild.origin_allowed("http://10.1.2.3:8080", "10.1.2.3:8080")        # the address it was sent to
    assert not wild.origin_allowed("http://10.1.2.9:8080", "10.1.2.3:8080")    # another host's page
    assert not wild.origin_allowed("http://rebound.example:8080", "rebound.example:8080")
    assert wild.origin_allowed("http://localhost:8080", "localhost:8080")
    lan = ViewAccess("192.168.5.7")
    lan.port = 9000
    assert lan.origin_allowed("http://192.168.5.7:9000") and not lan.origin_allowed("http://127.0.0.1:9000")
    v6 = ViewAccess("::1")
    v6.port = 8080
    assert v6.origin_allowed("http://[::1]:8080") and v6.origin_allowed("http://127.0.0.1:8080")


def test_a_page_without_control_moves_nothing_and_it_is_logged_once(readonly, control):
    for served in (readonly, control):                 # not allowed at all; allowed, but no token
        with open_ws(served.port) as ws:
            panel = served.panel(ws, granted=False)
            assert panel is not None, "no sliders for the page"
            assert all(h.disabled for h in panel.sliders.values())
            before = list(served.logs)
            for k in range(50):
                send(ws, slider_update(panel.sliders["j1"]._impl.uuid, 0.3 + k * 0.001))
            granted = [p for p in list(served.page._panels.values()) if p.granted]
            for p in granted:                          # another page's slider: not this page's to move
                send(ws, slider_update(p.sliders["j1"]._impl.uuid, 0.3))
            wait_until(lambda: served.logs != before, 10)
            served.tick()
            assert served.goals == [] and served.page.targets.targets == {}
            ignored = [line for line in served.logs if "slider moved on a page without control" in line]
            assert len(ignored) == 1, ignored


def test_the_page_with_the_token_moves_only_the_moved_joint(control):
    with open_ws(control.port) as plain, open_ws(control.port, origin=None, token=control.access.token) as ws:
        assert control.panel(plain, granted=False) is not None
        panel = control.panel(ws, granted=True)
        assert panel is not None, "the page with the token got no control"
        assert not any(h.disabled for h in panel.sliders.values())
        send(ws, slider_update(panel.sliders["j1"]._impl.uuid, 0.3))
        assert wait_until(lambda: control.page.targets.targets), "the slider's move never arrived"
        control.tick()
        assert control.goals == [{"j1": 0.3}]
    # the controller's goal: every joint it drives, the others held where they are
    assert hold_others(["j1", "j2", "j3"], {"j1": 0.3}, {"j1": 0.0, "j2": 0.4, "j3": -1.0}) == (
        {"j1": 0.3, "j2": 0.4, "j3": -1.0}, [])
    assert hold_others(["j1", "j2"], {"j1": 0.3}, {}) == ({"j1": 0.3}, ["j2"])


def test_the_token_url_sets_the_cookie_the_page_websocket_presents(control):
    def get(path):
        conn = http.client.HTTPConnection("127.0.0.1", control.port, timeout=30)
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        conn.close()
        return response

    assert get("/").getheader("Set-Cookie") is None
    assert get("/?token=wrong").getheader("Set-Cookie") is None
    cookie = get(f"/?token={control.access.token}").getheader("Set-Cookie")
    assert cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    with open_ws(control.port, headers={"Cookie": cookie.split(";")[0]}) as ws:
        assert control.panel(ws, granted=True) is not None


def test_connections_are_bounded_and_an_oversize_message_is_refused_unread():
    served = Served(allow_control=False)          # its own server: no connection of another test counts
    try:
        sockets = [open_ws(served.port) for _ in range(MAX_CONNECTIONS)]
        assert refused(served.port) == 503
        assert any("8 WebSockets are open" in line for line in served.logs)
        # each announces a 40 MB message and sends 1 KiB of it: closed (1009) at the frame header, nothing
        # of it buffered
        header = bytes([0x82, 0x80 | 127]) + struct.pack("!Q", 40_000_000) + b"\x01\x02\x03\x04"
        for ws in sockets:
            ws.socket.sendall(header + bytes(1024))
        for ws in sockets:
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
            ws.close()
        # the closed ones no longer count: a new page connects (once the server has seen them go)
        assert wait_until(lambda: _opens(served.port), 30), "no connection after the others closed"
    finally:
        served.page.close()


def _opens(port) -> bool:
    try:
        open_ws(port).close()
        return True
    except InvalidStatus:
        return False


def test_in_chromium_only_the_token_url_grants_control(control):
    """Debian's chromium (skipped without it): the page's own WebSocket opens (its Origin), and presents the
    token only when the page was opened with the token URL (the cookie that URL set)."""
    from robot_bridge.view.screenshot import Browser, find_browser

    path, why = find_browser()
    if path is None:
        pytest.skip(why)
    browser = Browser(path)
    try:
        for url, granted in ((f"http://127.0.0.1:{control.port}/", False), (control.access.url(), True)):
            before = set(control.page._panels)
            browser.open(url)
            panel = wait_until(lambda: next((p for cid, p in list(control.page._panels.items())
                                             if cid not in before and p.sliders), None), 120)
            assert panel is not None, f"{url}: the page never connected"
            assert panel.granted == granted, url
    finally:
        browser.close()
