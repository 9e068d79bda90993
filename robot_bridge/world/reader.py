"""The one reader of world documents that come from peers (world_node's ``~/objects``), for every node that
reads them (controller_node's sim, sensor_bridge's sim, planner_node).

Any process on the DDS domain may publish such a document, so what it names is not trusted:

- the document: at most ``MAX_DOCUMENT_BYTES``, parsed by the hardened lxml parser
  (:mod:`robot_bridge.formats.xmlsafe`), at most ``MAX_DOCUMENT_BODIES`` ``<KinBody>`` elements (more:
  refused), names and paths of bounded length; a reader's ``max_bodies`` first bodies are used, the rest
  left out and counted;
- a body file (and a class SRDF) is read only when its path, taken lexically (absolute, ``os.path.normpath``:
  ``..`` collapsed without asking the file system), lies under a folder trusted at launch
  (:func:`trusted_roots`: the node's launch-time robot file's folder and package, its search path,
  ``objects_roots``, ``$OPENRAVE_DATA``, ``$ROBOT_BRIDGE_ALLOWED_ROOTS``, this package's data).  A path
  outside them is refused without any system call on it, with one message whatever the path is
  (``body 'x': file outside the trusted roots``).  Under a root the path is walked one component at a time
  from the root's descriptor with ``O_NOFOLLOW`` (a symbolic link anywhere below the root is refused) and
  must end at a regular file; whatever fails there gives one message too (``body 'x': file: no regular
  file at this path under the trusted roots``), never the OS error.  Only files that pass reach
  :func:`robot_bridge.formats.load` (its includes confined to the same roots); its errors name that
  file, which lies in the launch-time folders;
- read files are kept (at most ``max_files``, least recently used dropped) keyed by path, device, inode,
  size and mtime: a body that only moves is the same model, a file changed on disk is read anew, a file
  that failed is not read again until it changes; a body's mesh files are read with it (one over the
  mesh work budget, ``MAX_MESH_WORK``, refuses the body with that typed reason);
- one document's body files are read within ``time_limit`` seconds: bodies still unread then are left out
  (the files read so far stay cached, the next document goes on from there).

:class:`LatestWorker` runs the reading off the threads that must stay responsive (control loop, executor):
one thread, a queue of one, the newest document wins.  No rclpy here.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from ..errors import DescriptionError, SchemaError, UnsafeInputError
from .document import PlacedBody

MAX_DOCUMENT_BYTES = 8 << 20        # one document (10000 bodies with long paths fit)
MAX_DOCUMENT_BODIES = 10000         # <KinBody> elements (world_node's max_bodies range): more are refused
MAX_BODIES = 1000                   # default of a reader: bodies used, the rest left out
MAX_FILES = 256                     # distinct (file, srdf) read and kept
MAX_NAME = 256                      # characters of a body name
MAX_PATH = 4096                     # characters of a path (PATH_MAX)
TIME_LIMIT = 10.0                   # s: one document's body files
SOURCE = "<world_node/objects>"

OUTSIDE = "file outside the trusted roots"        # body 'x': file outside the trusted roots
NOT_THERE = "no regular file at this path under the trusted roots"


def package_data() -> Path:
    """This package's data folder (the embedded world's bodies and mapping): always trusted."""
    from ..formats.resources import package_data as data

    return data()


def trusted_roots(files: Iterable[str] = (), folders: Iterable[str] = ()) -> list[str]:
    """The folders body files of peers' documents may lie in, from launch-time values: each of ``files``'
    folder (widened to its ROS package), ``folders`` (search path, objects_roots), ``$OPENRAVE_DATA``,
    ``$ROBOT_BRIDGE_ALLOWED_ROOTS`` and :func:`package_data`; each resolved once, here, at launch (the
    ``body_roots`` of :class:`robot_bridge.formats.resources.ResourceResolver`)."""
    from ..formats.resources import ResourceResolver

    return ResourceResolver(files, list(folders)).body_roots


def shown(name: str) -> str:
    """A peer's body name as a message shows it: repr, cut to 80 characters."""
    return repr(name[:80]) + ("..." if len(name) > 80 else "")


class BodyRefused(DescriptionError):
    """A body file (or SRDF) the reader does not open; its message says nothing about the path."""


def lexical_root(path: str, roots: Sequence[str]) -> Optional[tuple[str, list[str]]]:
    """(root, components below it) of ``path`` taken lexically, or None when it is not under one of
    ``roots``: relative, too long, NUL, or outside once normalized.  No system call."""
    if not path or len(path) > MAX_PATH or "\0" in path or not path.startswith("/"):
        return None
    norm = os.path.normpath(path)
    for root in sorted(roots, key=len, reverse=True):
        prefix = root if root.endswith("/") else root + "/"
        if norm.startswith(prefix) and len(norm) > len(prefix):
            parts = norm[len(prefix):].split("/")
            if all(p not in ("", ".", "..") for p in parts):
                return root, parts
    return None


_PATH_FLAG = getattr(os, "O_PATH", 0)          # Linux: descriptors that read nothing
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def open_under(root: str, parts: Sequence[str]) -> os.stat_result:
    """The stat of the regular file ``root/parts...``, reached from ``root``'s descriptor one component at
    a time without following any symbolic link (O_NOFOLLOW); OSError (or NotADirectoryError) otherwise."""
    dir_flags = (_PATH_FLAG or os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(root, (_PATH_FLAG or os.O_RDONLY) | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            below = os.open(part, dir_flags, dir_fd=fd)
            os.close(fd)
            fd = below
        last = os.open(parts[-1], (_PATH_FLAG or (os.O_RDONLY | os.O_NONBLOCK)) | os.O_NOFOLLOW | _CLOEXEC,
                       dir_fd=fd)
    finally:
        os.close(fd)
    try:
        st = os.fstat(last)
    finally:
        os.close(last)
    if not stat.S_ISREG(st.st_mode):
        raise IsADirectoryError("not a regular file")
    return st


@dataclass
class ObjectsRead:
    """What one document gives: name -> (body, 4x4 pose) of the bodies read, why others are not there."""

    objects: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    left_out: int = 0                    # bodies beyond max_bodies (counted, not looked at)
    bodies: int = 0                      # <KinBody> elements of the document

    def summary(self, limit: int = 3) -> str:
        """The problems as one line: the first ``limit`` distinct ones and how many more ('' for none)."""
        distinct = list(dict.fromkeys(self.problems))
        more = len(self.problems) - min(limit, len(distinct))
        return "; ".join(distinct[:limit]) + (f" (and {more} more)" if more > 0 else "")


def parse_document(text: str, source: str = SOURCE, max_bodies: int = MAX_BODIES
                   ) -> tuple[list[PlacedBody], int, int]:
    """(the first ``max_bodies`` bodies, how many more there are, all bodies) of a document; SchemaError /
    XMLSyntaxError / UnsafeInputError for a document over the bounds or not of world_node's form."""
    from ..formats.xmlsafe import parse_bytes

    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UnsafeInputError(f"document of {len(data)} bytes, more than the {MAX_DOCUMENT_BYTES} allowed "
                               "(MAX_DOCUMENT_BYTES)", file=source)
    root = parse_bytes(data, file=source).getroot()
    if root.tag != "Environment":
        raise SchemaError(f"root element <{str(root.tag)[:40]}>, expected <Environment>", file=source)
    count = sum(1 for _ in root.iterchildren("KinBody"))
    if count > MAX_DOCUMENT_BODIES:
        raise UnsafeInputError(f"{count} bodies, more than the {MAX_DOCUMENT_BODIES} allowed "
                               "(MAX_DOCUMENT_BODIES)", file=source)
    out = []
    for el in itertools.islice(root.iterchildren("KinBody"), max_bodies):
        out.append(_placed(el, source))
    return out, max(0, count - max_bodies), count


def _placed(el, source: str) -> PlacedBody:
    name, file = el.get("name"), el.get("file")
    if not name or not file:
        raise SchemaError("<KinBody> needs name= and file=", file=source, line=el.sourceline)
    for what, value in (("name", name), ("class", el.get("class", ""))):
        if len(value) > MAX_NAME:
            raise SchemaError(f"<KinBody> {what} of {len(value)} characters, at most {MAX_NAME}", file=source,
                              line=el.sourceline)
    for what, value in (("file", file), ("srdf", el.get("srdf", ""))):
        if len(value) > MAX_PATH:
            raise SchemaError(f"body {shown(name)}: {what} of {len(value)} characters, at most {MAX_PATH}",
                              file=source, line=el.sourceline)
    try:
        t = [float(v) for v in (el.findtext("translation") or "0 0 0").split()[:4]]
        r = [float(v) for v in (el.findtext("rotationmat") or "1 0 0 0 1 0 0 0 1").split()[:10]]
    except ValueError as exc:
        raise SchemaError(f"body {shown(name)}: {str(exc)[:100]}", file=source, line=el.sourceline) from None
    if len(t) != 3 or len(r) != 9:
        raise SchemaError(f"body {shown(name)}: expected 3 translation and 9 rotationmat values", file=source,
                          line=el.sourceline)
    pose = np.eye(4)
    pose[:3, :3] = np.reshape(r, (3, 3))
    pose[:3, 3] = t
    if not np.isfinite(pose).all():
        raise SchemaError(f"body {shown(name)}: non-finite pose", file=source, line=el.sourceline)
    return PlacedBody(name, el.get("class", ""), file, pose, el.get("srdf", ""))


class WorldReader:
    """Peers' world documents -> bodies, under the roots trusted at launch (see the module docstring).
    Thread-safe (one lock: one document at a time)."""

    def __init__(self, roots: Sequence[str | os.PathLike], search_path: Sequence[str] = (),
                 max_bodies: int = MAX_BODIES, max_files: int = MAX_FILES, time_limit: float = TIME_LIMIT,
                 source: str = SOURCE, clock: Callable[[], float] = time.monotonic):
        self.roots = tuple(os.path.normpath(os.fspath(r)) for r in roots)      # resolved by the caller
        self.search_path = list(search_path)
        self.max_bodies = int(max_bodies)
        self.max_files = int(max_files)
        self.time_limit = float(time_limit)
        self.source = source
        self.clock = clock
        self._lock = threading.Lock()
        self._cache: "OrderedDict[tuple, object]" = OrderedDict()   # key -> Robot, or the error it raised

    def __repr__(self) -> str:
        return f"WorldReader(roots={list(self.roots)})"

    # -- one file ------------------------------------------------------------------------------------
    def checked(self, path: str, name: str, what: str = "file") -> tuple:
        """(path, device, inode, size, mtime) of a body's ``path`` under the roots, else BodyRefused whose
        message names the body only."""
        where = lexical_root(path, self.roots)
        if where is None:
            raise BodyRefused(f"body {shown(name)}: {what} outside the trusted roots")
        root, parts = where
        try:
            st = open_under(root, parts)
        except (OSError, ValueError):
            raise BodyRefused(f"body {shown(name)}: {what}: {NOT_THERE}") from None
        return (os.path.join(root, *parts), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def body(self, path: str, srdf: str = "", name: str = "?"):
        """The Robot of a body file (with the SRDF's handles when given), read once per version of the
        files; BodyRefused or the reader's DescriptionError."""
        key = (self.checked(path, name), self.checked(srdf, name, "srdf") if srdf else None)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
        if found is None:
            found = self._load(key)
            with self._lock:
                self._cache[key] = found
                while len(self._cache) > self.max_files:
                    self._cache.popitem(last=False)
        if isinstance(found, DescriptionError):
            raise found
        return found

    def cached(self, path: str, srdf: str = "", name: str = "?") -> bool:
        key = (self.checked(path, name), self.checked(srdf, name, "srdf") if srdf else None)
        with self._lock:
            return key in self._cache

    def _load(self, key: tuple):
        from ..formats import load
        from .mapping import with_handles

        (file, *_), srdf = key
        try:
            body = load(file, search_path=self.search_path or None, allowed_roots=list(self.roots))
            _check_meshes(body)
            if srdf is not None:
                body = with_handles(body, srdf[0], f"body file {file}", self.source)
            return body
        except DescriptionError as exc:
            return exc
        except OSError as exc:            # a reader that let one through: its kind, not the OS's words
            return DescriptionError(f"cannot read ({type(exc).__name__})", file=file)

    # -- one document --------------------------------------------------------------------------------
    def objects(self, text: str, max_bodies: Optional[int] = None) -> ObjectsRead:
        """The bodies of one document, each read (or refused) as above.  Raises DescriptionError when the
        document itself is refused; a body that is not read is left out with its reason in ``problems``."""
        limit = self.max_bodies if max_bodies is None else int(max_bodies)
        placed, left_out, count = parse_document(text, self.source, limit)
        out = ObjectsRead(left_out=left_out, bodies=count)
        if left_out:
            out.problems.append(f"{count} bodies: the first {limit} used, {left_out} left out")
        deadline = self.clock() + self.time_limit
        files: set[tuple[str, str]] = set()
        late = 0
        for p in placed:
            if (p.file, p.srdf) not in files and len(files) >= self.max_files:
                out.problems.append(f"body {shown(p.name)}: more than {self.max_files} distinct body files "
                                    "in one document")
                continue
            files.add((p.file, p.srdf))
            try:
                if self.clock() > deadline and not self.cached(p.file, p.srdf, p.name):
                    late += 1
                    continue
                out.objects[p.name] = (self.body(p.file, p.srdf, p.name), p.pose)
            except DescriptionError as exc:
                problem = str(exc) if isinstance(exc, BodyRefused) else f"body {shown(p.name)}: {exc}"
                out.problems.append(problem)
        if late:
            out.problems.append(f"{late} bodies left out: their files were not read within "
                                f"{self.time_limit:g} s")
        return out


def _check_meshes(body) -> None:
    """Read every mesh file the body's scenes would read (collisions, else visuals) here, on the reader's
    thread: a file over the mesh work budget (:class:`~robot_bridge.errors.WorkBudgetError`, an
    UnsafeInputError) refuses the body, instead of stalling whoever builds a scene from it (the
    controller's, under its lock)."""
    from ..formats.meshes import mesh_arrays
    from ..model import Mesh

    for link in body.links.values():
        for geom in (link.collisions or link.visuals):
            if isinstance(geom.shape, Mesh) and geom.shape.path is not None:
                try:
                    mesh_arrays(geom.shape, scaled=False)
                except UnsafeInputError:
                    raise
                except DescriptionError:        # missing or malformed: the scenes warn and leave it out
                    pass


class LatestWorker:
    """One daemon thread handing the newest submitted item to ``handle``: an item submitted while another
    waits replaces it (a queue of one; ``replaced`` counts those); exceptions go to ``on_error``."""

    def __init__(self, handle: Callable[[object], None], name: str,
                 on_error: Callable[[BaseException], None] = lambda exc: None):
        self._handle, self._on_error = handle, on_error
        self._cond = threading.Condition()
        self._pending: list = []
        self._busy = False
        self._stopped = False
        self.replaced = 0
        self.handled = 0
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def submit(self, item) -> None:
        with self._cond:
            if self._pending:
                self.replaced += 1
            self._pending[:] = [item]
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                item = self._pending.pop()
                self._busy = True
            try:
                self._handle(item)
            except Exception as exc:  # reported by the owner; the thread keeps serving
                self._on_error(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self.handled += 1
                    self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is pending or running (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def stop(self, timeout: float = 1.0) -> None:
        """No new item is handled after this; waits up to ``timeout`` s for the one running (a daemon
        thread: a long read does not hold the process)."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped
