"""Serve a mesh cache read-only over HTTP, so viewers on other hosts load the meshes a
robot_description names (rviz's resource_retriever fetches ``http://`` URIs).

Only files directly in the cache directory whose names are cache names (``<sha256>.stl|dae|obj``)
are served, to GET and HEAD; anything else -- listings, sub-paths, ``..``, other names -- is 404.
The server runs in a daemon thread (stdlib ``http.server``) and stops with :meth:`MeshServer.stop`.
"""

from __future__ import annotations

import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import unquote, urlsplit

from .formats.mesh_cache import CACHE_NAME

CONTENT_TYPES = {".stl": "model/stl", ".dae": "model/vnd.collada+xml", ".obj": "model/obj"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, directory: Path, log: Optional[Callable[[str], None]]):
        self.directory = directory
        self.log = log
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "robot_bridge-mesh-cache"
    sys_version = ""

    def do_GET(self) -> None:          # noqa: N802 (http.server's naming)
        self._serve(body=True)

    def do_HEAD(self) -> None:         # noqa: N802
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        name = unquote(urlsplit(self.path).path)
        name = name[1:] if name.startswith("/") else name
        data = None
        if CACHE_NAME.match(name):
            try:
                data = (self.server.directory / name).read_bytes()
            except OSError:
                data = None
        if data is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "public, max-age=31536000, immutable")   # content-addressed
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:   # noqa: A002 (http.server's signature)
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")


class MeshServer:
    """HTTP server of one cache directory.  ``host``: the address bound and written in URIs (empty:
    every interface, URIs carry this machine's host name); ``port`` 0 picks a free port."""

    def __init__(self, directory, host: str = "", port: int = 0,
                 log: Optional[Callable[[str], None]] = None):
        self.directory = Path(directory).resolve()
        self.host, self.requested_port = host, int(port)
        self._server = _Server((host or "0.0.0.0", int(port)), self.directory, log)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="mesh-http", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host = self.host or socket.gethostname()
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def url(self, path) -> str:
        """URL of a file in the served directory."""
        return f"{self.base_url}/{Path(path).name}"

    def matches(self, directory, host: str, port: int) -> bool:
        """Whether this server already serves ``directory`` as ``host``:``port`` asks."""
        return (Path(directory).resolve() == self.directory and host == self.host
                and int(port) in (0, self.port) and (int(port) != 0 or self.requested_port == 0))

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


__all__ = ["MeshServer"]
