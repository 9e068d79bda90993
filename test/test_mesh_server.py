"""The mesh HTTP server serves the cache and nothing else, within limits: no link or non-file in the
cache is served, held and trickling connections are dropped at their timeout with the thread count back
to its base, concurrent downloads are streamed (memory flat) and a client that goes away is one log line.

The load tests run the server in a child process, so that its threads and memory are its own."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import resource
import select
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import robot_bridge
from robot_bridge.formats.mesh_cache import MeshCache
from robot_bridge.mesh_server import MAX_CONNECTIONS, MeshServer
from fixtures.waiting import wait_until

MB = 1024 * 1024
CHILD = r"""
import json, pathlib, sys
from robot_bridge.formats.mesh_cache import MeshCache
from robot_bridge.mesh_server import MeshServer
cache = MeshCache(sys.argv[1])           # as a restarted node: the files of an earlier run are taken over
for p in pathlib.Path(sys.argv[1]).iterdir():
    cache.get(p.stem, p.suffix)
server = MeshServer(sys.argv[1], "127.0.0.1", 0, log=lambda line: print(line, file=sys.stderr, flush=True),
                    **json.loads(sys.argv[2]))
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""


def cache_name(data: bytes, suffix: str = ".stl") -> str:
    return hashlib.sha256(data).hexdigest() + suffix


def cached(directory: Path, data: bytes, suffix: str = ".stl") -> Path:
    """``data`` written into the cache as the description node writes it (recorded: served)."""
    return MeshCache(directory).put(hashlib.sha256(data).hexdigest(), data, suffix)


def get(url: str, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def proc_status(pid: int, field: str) -> int:
    """A number field of /proc/<pid>/status (Threads; VmHWM in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@contextlib.contextmanager
def child_server(directory: Path, log: Path, **options):
    """A MeshServer in a child process importing the same robot_bridge; yields (pid, port)."""
    root = str(Path(robot_bridge.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    with open(log, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(directory), json.dumps(options)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
    try:
        port = int(proc.stdout.readline() or 0)
        assert port, f"the server did not start: {log.read_text()}"
        yield proc.pid, port
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_only_regular_files_in_the_cache_are_served_never_a_planted_link(tmp_path):
    cache, outside = tmp_path / "cache", tmp_path / "private"
    cache.mkdir()
    outside.mkdir()
    mesh = b"solid m\nendsolid m\n"
    cached(cache, mesh)
    secret = outside / "key.stl"
    secret.write_bytes(b"secret")
    planted = {"link out of the cache": secret, "link to /etc/passwd": Path("/etc/passwd"),
               "link to a served file": cache / cache_name(mesh)}
    names = {}
    for i, (what, target) in enumerate(planted.items()):
        names[what] = cache_name(f"planted {i}".encode())
        (cache / names[what]).symlink_to(target)
    names["FIFO"] = cache_name(b"fifo", ".dae")
    os.mkfifo(cache / names["FIFO"])                    # opening it for reading would block
    names["directory"] = cache_name(b"directory", ".obj")
    (cache / names["directory"]).mkdir()
    server = MeshServer(cache, "127.0.0.1")
    try:
        for what, name in names.items():
            for method in ("GET", "HEAD"):
                status, body = get(f"{server.base_url}/{name}", method)
                assert (status, body) == (404, b""), f"{what} ({method} {name})"
        assert get(f"{server.base_url}/{cache_name(mesh)}") == (200, mesh)
        with urllib.request.urlopen(urllib.request.Request(f"{server.base_url}/{cache_name(mesh)}",
                                                           method="HEAD"), timeout=10) as reply:
            assert reply.status == 200 and reply.headers["Content-Length"] == str(len(mesh))
            assert reply.read() == b""
    finally:
        server.stop()


def test_only_what_the_cache_wrote_is_served_not_a_hard_link_or_a_replaced_file(tmp_path):
    """Issue 41: ``ln /etc/passwd cache/<64 hex>.stl`` was served (200, /etc/passwd's contents)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    mesh = b"solid m\nendsolid m\n"
    served = cached(cache, mesh)
    names = {"hard link to /etc/passwd": cache_name(b"passwd")}
    try:
        os.link("/etc/passwd", cache / names["hard link to /etc/passwd"])
    except OSError:                    # fs.protected_hardlinks: a file of our own stands in for it
        secret = tmp_path / "secret"
        secret.write_bytes(b"secret")
        os.link(secret, cache / names["hard link to /etc/passwd"])
    names["hard link to a served file"] = cache_name(b"second name")
    os.link(served, cache / names["hard link to a served file"])
    names["file the cache did not write"] = cache_name(b"planted")
    (cache / names["file the cache did not write"]).write_bytes(b"planted")
    other = cached(cache, b"other mesh")
    names["file replaced after it was written"] = other.name
    replacement = cache / "replacement"
    replacement.write_bytes(b"replaced")
    os.replace(replacement, other)
    server = MeshServer(cache)
    try:
        assert server._server.server_address[0] == "127.0.0.1"       # loopback unless told otherwise
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        for what, name in names.items():
            assert get(f"{server.base_url}/{name}") == (404, b""), what
        os.unlink(cache / names["hard link to a served file"])          # one link again: served
        assert get(f"{server.base_url}/{served.name}") == (200, mesh)
        # the cache refuses them too: a hard link or another file is never returned as cached
        for what in ("hard link to /etc/passwd", "file replaced after it was written"):
            name = Path(names[what])
            assert MeshCache(cache).get(name.stem, name.suffix) is None, what
    finally:
        server.stop()


def test_held_partial_requests_are_dropped_at_the_timeout_and_threads_return_to_base(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    mesh = b"solid m\nendsolid m\n"
    cached(cache, mesh)
    partial = f"GET /{cache_name(mesh)} HTTP/1.1\r\nHost: bridge\r\n".encode()     # no blank line: held
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)      # 1,000 sockets here, as many there
    wanted = 2048 if hard == resource.RLIM_INFINITY else min(2048, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    with child_server(cache, tmp_path / "server.log", header_timeout=1.0, request_timeout=5.0) as (pid, port):
        base, held = proc_status(pid, "Threads"), []
        for _ in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            with contextlib.suppress(OSError):        # refused above the limit: may already be closed
                s.sendall(partial)
            held.append(s)
            threads = proc_status(pid, "Threads")
            assert threads <= base + MAX_CONNECTIONS, f"{threads} threads in the server, {base} before"
        selector = selectors.DefaultSelector()
        for s in held:
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
        still_open, deadline = set(held), time.monotonic() + 30.0     # generous: the timeout is 1 s
        while still_open and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                try:
                    data = key.fileobj.recv(4096)     # a 503 for those above the limit, then the end
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(key.fileobj)
                    still_open.discard(key.fileobj)
        selector.close()
        for s in held:
            s.close()
        assert not still_open, f"{len(still_open)} of 1000 held connections open 30 s after the last"
        wait_until(lambda: proc_status(pid, "Threads") <= base, 30.0,
                   lambda: f"{proc_status(pid, 'Threads')} threads in the server, {base} before")
        assert get(f"http://127.0.0.1:{port}/{cache_name(mesh)}") == (200, mesh)     # still serving


def test_a_trickling_request_is_dropped_at_the_header_timeout(tmp_path):
    """A byte every 0.2 s keeps resetting a per-read timeout; the header deadline still ends it."""
    server = MeshServer(tmp_path, "127.0.0.1", header_timeout=1.0, request_timeout=60.0)
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        start, dropped = time.monotonic(), False
        with s:
            s.sendall(b"GET /")
            while not dropped and time.monotonic() - start < 20.0:
                try:
                    s.sendall(b"a")
                    readable, _, _ = select.select([s], [], [], 0.2)
                    dropped = bool(readable) and s.recv(4096) == b""
                except OSError:
                    dropped = True
        assert dropped, "a trickling request was served 20 s with a 1 s header timeout"
        assert time.monotonic() - start < 15.0
    finally:
        server.stop()


def test_request_headers_are_bounded(tmp_path):
    mesh = b"solid m\nendsolid m\n"
    cached(tmp_path, mesh)
    server = MeshServer(tmp_path, "127.0.0.1")
    try:
        headers = "".join(f"X-Filler-{i}: {'x' * 1000}\r\n" for i in range(40))        # 40 kB
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(f"GET /{cache_name(mesh)} HTTP/1.0\r\n{headers}\r\n".encode())
            assert s.makefile("rb").readline().split()[1] == b"431"
    finally:
        server.stop()


def test_a_client_that_goes_away_is_one_log_line_not_a_traceback(tmp_path, capfd):
    data = random.Random(29).randbytes(10 * MB)
    cached(tmp_path, data)
    lines: list[str] = []
    server = MeshServer(tmp_path, "127.0.0.1", log=lines.append)
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(f"GET /{cache_name(data)} HTTP/1.0\r\n\r\n".encode())
        assert s.recv(65536)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))    # reset, mid-file
        s.close()
        wait_until(lambda: any("went away" in line for line in lines), 30.0,
                   lambda: f"'went away' in {lines}")
    finally:
        server.stop()
    assert sum("went away" in line for line in lines) == 1, lines
    assert "Traceback" not in capfd.readouterr().err


def test_200_concurrent_downloads_of_a_10_mb_mesh_are_streamed(tmp_path):
    """The server's peak RSS (VmHWM) grows less than 50 MB; every client gets the file or a 503."""
    cache = tmp_path / "cache"
    cache.mkdir()
    data = random.Random(29).randbytes(10 * MB)
    name, digest = cache_name(data), hashlib.sha256(data).hexdigest()
    cached(cache, data)
    log = tmp_path / "server.log"
    results: list[str | None] = [None] * 200
    # a stalled transfer's timeout above what a loaded host may take to start 200 clients
    with child_server(cache, log, header_timeout=60.0) as (pid, port):
        assert get(f"http://127.0.0.1:{port}/{name}") == (200, data)
        before = proc_status(pid, "VmHWM")
        together = threading.Barrier(len(results), timeout=60.0)    # every client holds its response

        def client(i: int) -> None:
            status, s = b"reset", None
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=60.0)
                s.sendall(f"GET /{name} HTTP/1.0\r\n\r\n".encode())
                reply = s.makefile("rb")
                status = reply.readline().split(b" ")[1]
                while reply.readline() not in (b"\r\n", b""):
                    pass
            except (OSError, IndexError):
                pass
            finally:
                together.wait()
            if status == b"200":
                body = hashlib.sha256()
                with contextlib.suppress(OSError):
                    while chunk := reply.read(256 * 1024):
                        body.update(chunk)
                results[i] = "file" if body.hexdigest() == digest else "cut short"
            else:
                results[i] = "busy" if status in (b"503", b"reset") else status.decode()
            if s is not None:
                s.close()

        clients = [threading.Thread(target=client, args=(i,)) for i in range(len(results))]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=120.0)
        after = proc_status(pid, "VmHWM")
    counts = {r: results.count(r) for r in set(results)}
    assert (after - before) * 1024 < 50 * MB, f"peak RSS {before // 1024} MB before, {after // 1024} MB after"
    assert set(counts) <= {"file", "busy"} and counts.get("file", 0) >= 1, counts
    assert "Traceback" not in log.read_text()
