"""Serve a mesh cache read-only over HTTP, so viewers on other hosts load the meshes a
robot_description names (rviz's resource_retriever fetches ``http://`` URIs).

Only files the mesh cache wrote are served (:func:`~robot_bridge.formats.mesh_cache.recorded`: the device
and inode recorded when it wrote them), regular files directly in the cache directory whose names are
cache names (``<sha256>.stl|dae|obj``) with exactly one link, to GET and HEAD; anything else -- listings,
sub-paths, ``..``, other names, symbolic links, hard links (``ln /etc/passwd cache/<sha256>.stl``), files
someone else put or replaced, FIFOs, devices -- is 404.  Files are opened without following links
(``O_NOFOLLOW`` relative to the directory) and streamed with ``sendfile``, never read into memory.

The default address is loopback (``127.0.0.1``): only viewers on this host can fetch.  A viewer on
another host needs the address it reaches this one at (``host``), or ``0.0.0.0`` / ``::`` for every
interface -- an explicit choice, since every host that can reach the port can then read the cache.

Bounded: at most ``max_connections`` connections are served at once (a thread each; above it a
connection gets 503 and is closed), the request line and headers must arrive within ``header_timeout``
and within :data:`MAX_HEADER_BYTES`, a connection making no progress for ``header_timeout`` is dropped,
and every connection is closed ``request_timeout`` after it was accepted.  A client that goes away is one
line in the log, never a traceback.  The server runs in a daemon thread (stdlib ``http.server``) and
stops with :meth:`MeshServer.stop`.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.client import LineTooLong
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import unquote, urlsplit

from .formats.mesh_cache import CACHE_NAME, recorded

CONTENT_TYPES = {".stl": "model/stl", ".dae": "model/vnd.collada+xml", ".obj": "model/obj"}
MAX_CONNECTIONS = 64
HEADER_TIMEOUT = 10.0        # s: request line and headers; also the longest a transfer may stall
REQUEST_TIMEOUT = 120.0      # s: a whole connection, body included
MAX_HEADER_BYTES = 16 * 1024
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7f)}


@dataclass
class _Connection:
    accepted: float
    deadline: float
    expired: bool = False


class _BoundedReader:
    """The request's input: at most ``limit`` bytes in all (GET and HEAD have no body)."""

    def __init__(self, raw, limit: int):
        self._raw, self._left = raw, limit

    def readline(self, size: int = -1) -> bytes:
        if self._left <= 0:
            raise LineTooLong(f"request headers over {MAX_HEADER_BYTES} bytes")
        line = self._raw.readline(self._left if size < 0 else min(size, self._left))
        self._left -= len(line)
        return line

    def close(self) -> None:
        self._raw.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256         # a burst of connections waits in the kernel, not in threads

    def __init__(self, address, directory: Path, log: Optional[Callable[[str], None]],
                 max_connections: int, header_timeout: float, request_timeout: float,
                 trusted: Callable[[Path], Optional[tuple[int, int]]] = recorded):
        self.directory = directory
        self.trusted = trusted
        self.log = log
        self.max_connections, self.header_timeout = max_connections, header_timeout
        self.request_timeout = request_timeout
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}
        self._refused = 0
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)

    def say(self, line: str) -> None:
        if self.log is not None:
            self.log(line.translate(_CONTROL))

    def process_request(self, request, client_address) -> None:
        now = time.monotonic()
        with self._lock:
            busy = len(self._open) >= self.max_connections
            if busy:
                self._refused += 1
                first = self._refused == 1
            else:
                self._open[request] = _Connection(now, now + self.header_timeout)
        if not busy:
            super().process_request(request, client_address)     # a thread of its own
            return
        try:                      # read what the client sent, so that closing does not reset the 503
            request.recv(MAX_HEADER_BYTES, socket.MSG_DONTWAIT)
            request.send(_BUSY, socket.MSG_DONTWAIT)
        except OSError:
            pass
        self.shutdown_request(request)
        if first:
            self.say(f"{self.max_connections} connections open: refusing more")

    def shutdown_request(self, request) -> None:
        with self._lock:
            known = self._open.pop(request, None) is not None
            super().shutdown_request(request)
            refused = self._refused if known and len(self._open) < self.max_connections else 0
            if refused:
                self._refused = 0
        if refused:
            self.say(f"{refused} connections refused at the limit of {self.max_connections}")

    def begin_request(self, request) -> bool:
        """Headers read: the connection's deadline becomes the request's (False: already expired)."""
        with self._lock:
            connection = self._open.get(request)
            if connection is None or connection.expired:
                return False
            connection.deadline = connection.accepted + self.request_timeout
            return True

    def service_actions(self) -> None:
        """Between polls of the accept loop: close connections past their deadline (a trickling client
        resets the per-read timeout, not this)."""
        now, expired = time.monotonic(), []
        with self._lock:
            for request, connection in self._open.items():
                if not connection.expired and now >= connection.deadline:
                    connection.expired = True
                    expired.append(request)
                    try:
                        request.shutdown(socket.SHUT_RDWR)      # the handler's read or send ends
                    except OSError:
                        pass
        for request in expired:
            self.say(f"{_peer(request)}: dropped, over its time limit")

    def close_all(self) -> None:
        with self._lock:
            for request, connection in self._open.items():
                connection.expired = True
                try:
                    request.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def handle_error(self, request, client_address) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            self.say(f"{client_address[0]}: client went away ({type(error).__name__}: {error})")
        else:
            self.say(f"{client_address[0]}: error serving the request ({type(error).__name__}: {error})")

    def open_mesh(self, name: str) -> Optional[int]:
        """Descriptor of the regular file ``name`` directly in the directory, not through a link."""
        if not CACHE_NAME.match(name):
            return None
        try:
            directory = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=directory)
        except OSError:
            return None
        finally:
            os.close(directory)
        try:
            info = os.fstat(fd)
            path = self.directory / name
            if (stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and _real_path(fd) == str(path)
                    and self.trusted(path) == (info.st_dev, info.st_ino)):    # the file the cache wrote
                return fd
        except OSError:
            pass
        os.close(fd)
        return None


def _real_path(fd: int) -> str:
    """The path the kernel has for an open file (Linux); "" where it cannot tell."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _peer(request) -> str:
    try:
        return str(request.getpeername()[0])
    except OSError:
        return "?"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "robot_bridge-mesh-cache"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.header_timeout       # per read or send: a stalled peer is dropped
        super().setup()
        self.rfile = _BoundedReader(self.rfile, MAX_HEADER_BYTES)

    def do_GET(self) -> None:          # noqa: N802 (http.server's naming)
        self._serve(body=True)

    def do_HEAD(self) -> None:         # noqa: N802
        self._serve(body=False)

    def _serve(self, body: bool) -> None:
        if not self.server.begin_request(self.connection):
            self.close_connection = True
            return
        name = unquote(urlsplit(self.path).path)
        name = name[1:] if name.startswith("/") else name
        fd = self.server.open_mesh(name)
        if fd is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        with os.fdopen(fd, "rb") as file:
            size = os.fstat(fd).st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream"))
            self.send_header("Content-Length", str(size))
            self.send_header("Cache-Control", "public, max-age=31536000, immutable")   # content-addressed
            self.end_headers()
            if body and size:
                self.connection.sendfile(file, 0, size)

    def log_message(self, format: str, *args) -> None:   # noqa: A002 (http.server's signature)
        self.server.say(f"{self.address_string()} {format % args}")


LOOPBACK = "127.0.0.1"
EVERY_INTERFACE = ("0.0.0.0", "::")


class MeshServer:
    """HTTP server of one cache directory.  ``host``: the address bound and written in URIs (empty:
    loopback, ``127.0.0.1``; ``0.0.0.0`` or ``::``: every interface, URIs carry this machine's host
    name); ``port`` 0 picks a free port.  ``trusted(path)``: the (device, inode) the cache wrote at
    ``path`` (default: :func:`~robot_bridge.formats.mesh_cache.recorded`, this process's writes).
    Limits: see the module's documentation."""

    def __init__(self, directory, host: str = "", port: int = 0,
                 log: Optional[Callable[[str], None]] = None, *, max_connections: int = MAX_CONNECTIONS,
                 header_timeout: float = HEADER_TIMEOUT, request_timeout: float = REQUEST_TIMEOUT,
                 trusted: Callable[[Path], Optional[tuple[int, int]]] = recorded):
        self.directory = Path(directory).resolve()
        self.host, self.requested_port = host, int(port)
        self._server = _Server((host or LOOPBACK, int(port)), self.directory, log,
                               int(max_connections), float(header_timeout), float(request_timeout), trusted)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="mesh-http", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host = socket.gethostname() if self.host in EVERY_INTERFACE else self.host or LOOPBACK
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
        self._server.close_all()           # connections being served end now, not at their timeout
        self._server.server_close()
        self._thread.join(timeout=5.0)


__all__ = ["MeshServer"]
