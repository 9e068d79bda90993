"""Who may open the live view's WebSocket, and who may move the robot through it (rclpy-free).

- **Origin.** A browser names the page that opens a WebSocket in its ``Origin`` header; any web page the
  browser shows can open one to ``127.0.0.1:8080``.  A handshake is refused (HTTP 403) unless its Origin is
  the view's own page: ``http://HOST:PORT`` with the port served and HOST the address served (when serving on
  a loopback address: ``127.0.0.1``, ``localhost`` or ``[::1]``; on a wildcard address (``0.0.0.0``): this
  host's name, a loopback name, or the IP address the request was sent to, as its ``Host`` header says).  A
  page reached through any other name (DNS rebinding, another site) is refused.  A handshake without Origin
  (not a browser) is allowed only with the token.
- **Control.** Only with ``allow_control`` (off by default) is there a token (``secrets.token_urlsafe``, new
  at every start), printed in the page's URL as ``?token=...``, as Jupyter does.  Loading the page with it
  sets an HttpOnly, SameSite=Strict cookie the page's WebSocket then presents (the viser client does not pass
  the page's query on); other clients give it as ``?token=`` in the WebSocket's URL.  A connection that
  presented the token is *granted*: its page gets joint sliders that send goals; every other page gets
  disabled sliders, and whatever they send moves nothing.
- **Limits.** A WebSocket message over ``max_size`` (1 MiB) closes its connection (code 1009) before it is
  read; at most ``max_connections`` (8) WebSockets are open at once, the next is refused (HTTP 503).

viser has no option for a handshake hook or a message size, so :meth:`ViewAccess.serve` starts the viser
server with ``websockets.asyncio.server.serve`` (what viser calls) wrapped for the time of its start: our
``process_request`` runs before viser's for every request, and ``max_size`` replaces viser's 50 MiB.  If
viser ever starts its server another way, the wrapper is not called and the view refuses to start.
"""

from __future__ import annotations

import contextvars
import hmac
import http
import ipaddress
import secrets
import socket
import threading
import urllib.parse
from http.cookies import CookieError, SimpleCookie
from typing import Callable, Optional

MAX_MESSAGE = 1 << 20            # bytes: one WebSocket message from a page
MAX_CONNECTIONS = 8              # WebSockets open at once
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("", "0.0.0.0", "::")

_granted: contextvars.ContextVar[bool] = contextvars.ContextVar("robot_bridge_view_granted", default=False)
_serve_lock = threading.Lock()


class ViewStartError(RuntimeError):
    """The view cannot serve with its checks in place."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _split_host(netloc: str) -> tuple[str, Optional[int]]:
    """(lower-case host without IPv6 brackets, port or None) of ``host[:port]``; ("", None) if malformed."""
    try:
        parts = urllib.parse.urlsplit("//" + netloc)
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", None


class ViewAccess:
    def __init__(self, host: str, allow_control: bool = False, max_size: int = MAX_MESSAGE,
                 max_connections: int = MAX_CONNECTIONS, report: Callable[[str], None] = lambda _t: None):
        self.host = host.strip().lower().strip("[]")
        self.allow_control = bool(allow_control)
        self.token = secrets.token_urlsafe(32) if allow_control else None
        self.max_size, self.max_connections = int(max_size), int(max_connections)
        self._report, self._said = report, set()
        self.port = 0                         # set once the server is bound (viser may take the next port)
        self.installed = False

    def report(self, text: str) -> None:
        """Each refusal once (at most 100 different ones): a client retrying is not a log line each time."""
        if text not in self._said and len(self._said) < 100:
            self._said.add(text)
            self._report(text)

    # -- what the page is ----------------------------------------------------------------------------
    @property
    def cookie_name(self) -> str:
        return f"robot_bridge_view_{self.port}"

    def url(self, host: Optional[str] = None) -> str:
        host = self.host if host is None else host
        netloc = f"[{host}]" if ":" in host else host
        query = f"?token={self.token}" if self.token else ""
        return f"http://{netloc}:{self.port}/{query}"

    def origin_allowed(self, origin: str, host_header: str = "") -> bool:
        """Whether a browser page at ``origin`` is this view's own page (module docstring)."""
        try:
            parts = urllib.parse.urlsplit(origin.strip())
            host, port = (parts.hostname or "").lower(), parts.port or 80
        except ValueError:
            return False
        if parts.scheme != "http" or port != self.port or not host:
            return False
        if self.host in WILDCARDS:
            reached, _ = _split_host(host_header)
            return host in LOOPBACK_NAMES or host == socket.gethostname().lower() or \
                (_is_ip(host) and host == reached)
        if _is_loopback(self.host):
            return host in LOOPBACK_NAMES or host == self.host
        return host == self.host

    def token_given(self, request) -> bool:
        """The request carries this start's token (``?token=`` or the page's cookie)."""
        if not self.token:
            return False
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.path).query)
        given = list(query.get("token", ()))
        cookie = SimpleCookie()
        for header in request.headers.get_all("Cookie"):
            try:
                cookie.load(header)
            except CookieError:
                continue
        if self.cookie_name in cookie:
            given.append(cookie[self.cookie_name].value)
        return any(hmac.compare_digest(g.encode(), self.token.encode()) for g in given[:4])

    @staticmethod
    def granted() -> bool:
        """Whether the WebSocket whose task (or a task it started) asks presented the token."""
        return _granted.get()

    # -- the handshake ---------------------------------------------------------------------------------
    def process_request(self, inner, connection, request):
        """websockets' ``process_request``: viser's first (it answers plain HTTP: the page's files), then,
        for a request that would open a WebSocket, the Origin, token and connection-count checks."""
        response = inner(connection, request) if inner is not None else None
        if response is not None:
            if response.status_code == http.HTTPStatus.OK and self.token_given(request):
                response.headers["Set-Cookie"] = (f"{self.cookie_name}={self.token}; Path=/; HttpOnly; "
                                                  "SameSite=Strict")
            return response
        origins = request.headers.get_all("Origin")
        token = self.token_given(request)
        if len(origins) > 1 or (origins and not self.origin_allowed(origins[0], request.headers.get("Host",
                                                                                                   ""))):
            shown = repr(origins[0][:100]) if origins else "several"
            self.report(f"live view: a WebSocket from origin {shown} was refused (403): not this page's "
                        "origin")
            return connection.respond(http.HTTPStatus.FORBIDDEN, "Origin not allowed\n")
        if not origins and not token:
            self.report("live view: a WebSocket without Origin (not a browser) and without the token was "
                        "refused (403)")
            return connection.respond(http.HTTPStatus.FORBIDDEN, "Origin missing and no token\n")
        if len(connection.server.connections) >= self.max_connections:
            self.report(f"live view: {self.max_connections} WebSockets are open: more are refused (503)")
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "Too many connections\n")
        _granted.set(token)               # this connection's task, and the tasks it starts, see it
        return None

    def serve(self, start: Callable[[], object]):
        """``start()`` (which creates the viser server) with websockets' ``serve`` wrapped (module
        docstring); raises :class:`ViewStartError` (the server stopped) if the wrapper was not called."""
        import websockets.asyncio.server as ws_server

        original = ws_server.serve
        access = self

        def gated_serve(handler, *args, **kwargs):
            inner = kwargs.get("process_request")
            kwargs["process_request"] = lambda connection, request: access.process_request(inner, connection,
                                                                                           request)
            kwargs["max_size"] = access.max_size
            port = args[1] if len(args) > 1 else kwargs.get("port")
            access.port = int(port or 0)          # the port tried (the bound one is set after the start)
            access.installed = True
            return original(handler, *args, **kwargs)

        with _serve_lock:
            ws_server.serve = gated_serve
            try:
                server = start()
            finally:
                ws_server.serve = original
        if not self.installed:
            stop = getattr(server, "stop", None)
            if stop is not None:
                stop()
            raise ViewStartError("viser did not start its server through websockets.asyncio.server.serve: "
                                 "the live view cannot check Origin, token and sizes, and does not serve")
        return server
