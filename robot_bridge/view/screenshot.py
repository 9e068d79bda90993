"""Screenshots of the live view in a real headless browser: Debian's chromium driven over the Chrome
DevTools protocol (the ``websockets`` client viser brings).  Used by the browser test, the view bench and
``make demo`` (:func:`save_page`); :func:`find_browser` says why no browser can be had."""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-unsafe-swiftshader",            # WebGL on the software renderer (no GPU here)
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]


def find_browser() -> tuple[str | None, str]:
    """(path of chromium, "") or (None, why not)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, "no chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it)"


class Browser:
    def __init__(self, path: str, width: int = 1000, height: int = 700, timeout: float = 60.0):
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="view-browser-")
        self.proc = subprocess.Popen([path, *FLAGS, f"--user-data-dir={self.profile}",
                                      f"--window-size={width},{height}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        while True:
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (OSError, StopIteration):
                if time.monotonic() > deadline:
                    self.close()
                    raise
                time.sleep(0.2)
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 << 20, open_timeout=timeout)
        self._ids = itertools.count(1)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def call(self, method: str, timeout: float = 180.0, **params) -> dict:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str, timeout: float = 60.0) -> None:
        """Navigate and wait until the document has loaded."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate("document.readyState") == "complete":
                    return
            except RuntimeError:          # the new document is not attached yet
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{url} did not load within {timeout} s")

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def screenshot(self) -> np.ndarray:
        """The page as an (h, w, 3) uint8 RGB array."""
        from PIL import Image

        for attempt in range(20):
            try:
                data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
                break
            except RuntimeError:          # "Not attached to an active page" while the page settles
                if attempt == 19:
                    raise
                time.sleep(0.5)
        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def save_png(image: np.ndarray, path) -> None:
    from PIL import Image

    Image.fromarray(image).save(os.fspath(path))


def save_page(url: str, path, width: int = 1000, height: int = 700, ready=None, text: str = "",
              timeout: float = 90.0) -> str:
    """Open ``url`` in a headless chromium, wait until the page's text contains ``text`` (viser's GUI
    arrives over the WebSocket once connected) and ``ready(image)`` is true for a screenshot (default:
    something coloured is drawn in the scene), then save it as PNG at ``path``; returns "" or why nothing
    was saved (no browser) or what was not seen in time (the page is saved as it was)."""
    exe, why = find_browser()
    if exe is None:
        return why
    browser = Browser(exe, width, height)
    try:
        browser.open(url)
        ready = ready or _drawn
        deadline = time.monotonic() + timeout
        while text and text not in (browser.evaluate("document.body.innerText") or ""):
            if time.monotonic() > deadline:
                save_png(browser.screenshot(), path)
                return f"{text!r} not on the page within {timeout:.0f} s (saved as it was)"
            time.sleep(0.5)
        time.sleep(1.0)                    # the scene's first frames
        image = browser.screenshot()
        while not ready(image):
            if time.monotonic() > deadline:
                save_png(image, path)
                return f"the page did not look ready within {timeout:.0f} s (saved as it was)"
            time.sleep(0.5)
            image = browser.screenshot()
        save_png(image, path)
        return ""
    finally:
        browser.close()


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (for a view started next)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_view(port: int, args=(), **popen):
    """``robot-bridge view --port <port> <args>`` in a process of its own.  Returns (process, loaded,
    lines): ``loaded`` is set once the view has loaded the robot (its log line), ``lines`` its output so
    far.  ``popen``: more subprocess.Popen arguments (env, cwd)."""
    import sys
    import threading

    view = subprocess.Popen([sys.executable, "-m", "robot_bridge.cli.main", "view", "--port", str(port),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
    loaded = threading.Event()
    lines: list[str] = []

    def read():
        for line in view.stdout:
            lines.append(line)
            if "[view_node]: robot '" in line:
                loaded.set()

    threading.Thread(target=read, daemon=True).start()
    return view, loaded, lines


def save_view(path, timeout: float = 120.0, extra_args=()) -> str:
    """Start ``robot-bridge view`` on a free port of 127.0.0.1 (the bridge of this ROS environment), wait
    until it has loaded the robot and the page shows it, save the page as PNG at ``path``, stop the view.
    Returns one line: what was saved, or why not (no browser, the view did not load)."""
    started = time.monotonic()
    exe, why = find_browser()
    if exe is None:
        return f"view screenshot: skipped ({why})"
    port = free_port()
    view, loaded, lines = start_view(port, extra_args)
    try:
        if not loaded.wait(timeout):
            return "view screenshot: not saved (the view did not load the robot: " + \
                ("".join(lines[-3:]).strip() or "no output") + ")"
        why = save_page(f"http://127.0.0.1:{port}/", path, text=" links, ", timeout=timeout)
        return f"view screenshot: {path} ({time.monotonic() - started:.0f} s" + (f"; {why})" if why else ")")
    finally:
        if view.poll() is None:
            view.terminate()
            try:
                view.wait(timeout=15)
            except subprocess.TimeoutExpired:
                view.kill()
                view.wait()


def _drawn(image: np.ndarray) -> bool:
    """Some saturated colour in the scene part (below viser's notices, left of its panel, above the axes
    icon): something besides grid and sky."""
    h, w = image.shape[:2]
    scene = image[int(h * 0.25): int(h * 0.88), : int(w * 0.62)].astype(int)
    saturation = scene.max(axis=2) - scene.min(axis=2)
    return int((saturation > 80).sum()) > 500
