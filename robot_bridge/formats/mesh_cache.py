"""A content-addressed cache of meshes converted for URDF viewers (rviz, pinocchio, ...).

A file is named by the SHA-256 of what it was made from (the source file's bytes plus the bytes of
the files it includes, or an inline mesh's arrays) and of :data:`FORMAT_VERSION`: the same source
always maps to the same file, so a restart or reload finds it and converts nothing.  Writes are
atomic (temporary file + rename), so concurrent writers and readers never see half a mesh.  The
cache is bounded (least recently used files are removed past ``max_bytes``, never those the
current description names) and safe to delete at any time: a missing file is converted again.

What is served is only what this cache wrote: :meth:`MeshCache.put` records each file's device and
inode in this process (:func:`recorded`), and :class:`~robot_bridge.mesh_server.MeshServer` serves a
name only when the file it opens (without following links) is that inode with one link.  A file an
earlier run wrote is taken over by :meth:`MeshCache.get` (then recorded) only when it is a regular file
with one link, owned by this user and writable by no one else; anything else in the cache directory --
a hard link to ``/etc/passwd``, another user's file, a replaced file -- is neither returned nor served
(and is replaced when the mesh is converted again).

Default location: ``$ROS_HOME/robot_bridge/mesh_cache`` when ``ROS_HOME`` is set, else
``$XDG_CACHE_HOME/robot_bridge/meshes`` (``~/.cache/robot_bridge/meshes``).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from ..errors import DescriptionError, UnsafeInputError
from .meshes import read_mesh_bytes

FORMAT_VERSION = b"robot_bridge mesh cache 3\0"       # 3: Inventor/VRML colour parts (count in the header)
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
CACHE_NAME = re.compile(r"[0-9a-f]{64}\.(stl|dae|obj)\Z")
_INCLUDE = re.compile(rb'\b(?:File|Inline)\s*\{[^}]*?\b(?:name|url)\s+(?:\[\s*)?"([^"]+)"')
_MAX_INCLUDES = 64


_RECORDED: dict[str, tuple[int, int]] = {}     # cache file -> (st_dev, st_ino) this process wrote or vetted
_RECORDED_LOCK = threading.Lock()


def _record(path: Path, info: os.stat_result) -> None:
    with _RECORDED_LOCK:
        _RECORDED[str(path)] = (info.st_dev, info.st_ino)


def recorded(path: str | os.PathLike) -> Optional[tuple[int, int]]:
    """(device, inode) of the cache file at ``path`` as this process wrote (or vetted) it, else None."""
    with _RECORDED_LOCK:
        return _RECORDED.get(str(path))


def foreign(info: os.stat_result) -> Optional[str]:
    """Why an opened cache file is not one this user's cache wrote, or None: not a regular file, more
    than one link (a hard link to another file), another owner, writable by group or others."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_nlink != 1:
        return f"{info.st_nlink} links (a hard link)"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by group or others"
    return None


def _open_nofollow(path: Path) -> Optional[int]:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None


def default_cache_dir() -> Path:
    if os.environ.get("ROS_HOME"):
        return Path(os.environ["ROS_HOME"]).expanduser() / "robot_bridge" / "mesh_cache"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "robot_bridge" / "meshes"


def file_key(path: str | os.PathLike) -> str:
    """Key of a mesh file: its bytes and those of the Inventor/VRML files it includes (File/Inline)."""
    h = hashlib.sha256(FORMAT_VERSION)
    pending, seen = [Path(path).resolve()], set()
    while pending and len(seen) < _MAX_INCLUDES:
        p = pending.pop(0)
        if p in seen:
            continue
        seen.add(p)
        try:
            data = read_mesh_bytes(p)           # bounded: the conversion then reports the refusal
        except DescriptionError:
            h.update(b"\0missing\0" + str(p).encode())
            continue
        h.update(len(data).to_bytes(8, "little") + data)
        if data[:16].startswith((b"#Inventor", b"#VRML")):
            pending += [p.parent / m.decode("utf-8", "replace") for m in _INCLUDE.findall(data)]
    return h.hexdigest()


def array_key(vertices: np.ndarray, triangles: np.ndarray, *extra: np.ndarray) -> str:
    """Key of an inline mesh (vertices, triangles and e.g. per-face colours)."""
    h = hashlib.sha256(FORMAT_VERSION + b"arrays\0")
    for a in (np.asarray(vertices, dtype="<f8"), np.asarray(triangles, dtype="<i8"), *extra):
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode() + a.tobytes())
    return h.hexdigest()


def part_key(key: str, index: int) -> str:
    """Key of the ``index``-th colour part of the mesh cached under ``key``."""
    return hashlib.sha256(f"{key}/part{index}".encode()).hexdigest()


class MeshCache:
    """One cache directory: ``get``/``put`` by key, ``adopt`` a ready file, ``prune`` to the bound."""

    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int = DEFAULT_MAX_BYTES):
        self.directory = Path(directory or default_cache_dir()).expanduser().resolve()
        self.max_bytes = int(max_bytes)

    def path(self, key: str, suffix: str = ".stl") -> Path:
        return self.directory / f"{key}{suffix}"

    def get(self, key: str, suffix: str = ".stl") -> Optional[Path]:
        """The cached file for ``key`` (its use time refreshed), or None: also when the file is not the one
        this process recorded, or -- not recorded yet, from an earlier run -- is not :func:`foreign`-free
        (then recorded).  Opened without following links; never a link's target is touched."""
        p = self.path(key, suffix)
        fd = _open_nofollow(p)
        if fd is None:
            return None
        try:
            info = os.fstat(fd)
            known = recorded(p)
            if known is not None and (known != (info.st_dev, info.st_ino) or info.st_nlink != 1):
                return None
            if known is None:
                if foreign(info) is not None:
                    return None
                _record(p, info)
            os.utime(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        return p

    def put(self, key: str, data: bytes, suffix: str = ".stl") -> Path:
        """Store ``data`` under ``key`` atomically; returns the file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.path(key, suffix)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), 0o644)
                info = os.fstat(f.fileno())
            os.replace(tmp, final)          # the same inode under its name: recorded as written
            _record(final, info)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return final

    def adopt(self, source: str | os.PathLike) -> Path:
        """A cache copy of a ready-to-load mesh file (so that it can be served with the converted ones)."""
        source = Path(source)
        if source.parent.resolve() == self.directory and CACHE_NAME.match(source.name):
            found = self.get(source.stem, source.suffix)
            if found is None:
                raise UnsafeInputError("a file in the mesh cache this cache did not write (or a link, or "
                                       "another user's): not served", file=str(source))
            return found
        key, suffix = file_key(source), source.suffix.lower()
        return self.get(key, suffix) or self.put(key, read_mesh_bytes(source), suffix)

    def contains(self, path: str | os.PathLike) -> bool:
        p = Path(path)
        return p.parent == self.directory and CACHE_NAME.match(p.name) is not None

    def prune(self, keep: Iterable[str | os.PathLike] = ()) -> list[Path]:
        """Remove least recently used cache files until the cache fits ``max_bytes``; returns them."""
        keep = {Path(k) for k in keep}
        try:
            entries = [(e.stat().st_mtime, e.stat().st_size, Path(e.path)) for e in os.scandir(self.directory)
                       if e.is_file() and CACHE_NAME.match(e.name)]
        except OSError:
            return []
        total = sum(size for _, size, _ in entries)
        removed = []
        for _, size, p in sorted(entries):
            if total <= self.max_bytes:
                break
            if p in keep:
                continue
            try:
                p.unlink()
            except OSError:
                continue
            total -= size
            removed.append(p)
        return removed


__all__ = ["MeshCache", "array_key", "default_cache_dir", "file_key", "foreign", "part_key", "recorded",
           "DEFAULT_MAX_BYTES"]
