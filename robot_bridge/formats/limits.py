"""Size limits of every file the readers take, in one place, and the checked reads that enforce them.

A file is checked before any byte of it is read: ``os.stat`` first (a directory, device, FIFO or
socket is refused without being opened), then a descriptor opened with ``O_NONBLOCK`` (a FIFO that
appears in between never blocks) whose ``fstat`` must again show a regular file within the limit,
and at most ``limit + 1`` bytes are read (a file that grows while read is refused, never read whole).

Limits (bytes; readers look them up here at call time, so tests may lower them):

- ``MAX_XML_BYTES``: one XML document -- a URDF, SRDF, OpenRAVE XML file (each include counts on its
  own too), COLLADA ``.dae``, the root document inside a ``.zae`` (uncompressed), a saved
  robot_description.
- ``MAX_INCLUDE_TOTAL_BYTES``: an OpenRAVE description and every file it includes (KinBody/Robot,
  sensor, environment and COLLADA includes), summed over the whole load.
- ``MAX_ZAE_ARCHIVE_BYTES``: a ``.zae`` archive on disk; ``MAX_ZAE_TOTAL_BYTES``: its members'
  declared uncompressed sizes together; ``MAX_ZAE_RATIO``: uncompressed/compressed per member;
  ``MAX_ZAE_ENTRIES``: members.
- ``MAX_OBJECTS_YAML_BYTES``: world_node's ``objects_file``; ``MAX_OBJECT_BODIES_TOTAL_BYTES``: the
  body files it names together (each is a description, under the limits above).
- ``MAX_PACKAGE_XML_BYTES``: a ``package.xml`` read to resolve a ``package://`` URI.
"""

from __future__ import annotations

import os
import stat
from typing import Optional

from ..errors import MissingFileError, NotRegularFileError, UnsafeInputError

MIB = 1 << 20
MAX_XML_BYTES = 64 * MIB
MAX_INCLUDE_TOTAL_BYTES = 128 * MIB
MAX_ZAE_ARCHIVE_BYTES = 256 * MIB
MAX_ZAE_TOTAL_BYTES = 256 * MIB
MAX_ZAE_RATIO = 200.0
MAX_ZAE_ENTRIES = 10000
MAX_OBJECTS_YAML_BYTES = 1 * MIB
MAX_OBJECT_BODIES_TOTAL_BYTES = 128 * MIB
MAX_PACKAGE_XML_BYTES = 1 * MIB

_CHUNK = 1 << 20
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO, a named pipe"),
          (stat.S_ISSOCK, "a socket"))


def _name(path) -> str:
    return os.fsdecode(path)[:300]


def _size_text(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB and n % (MIB // 16) == 0 else f"{n} bytes"


def kind_of(mode: int) -> Optional[str]:
    """What a non-regular file is ("a directory", "a FIFO, a named pipe", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def _not_regular(path, kind: str, what: str) -> NotRegularFileError:
    article = "an" if what[:1] in "aeiouAEIOUX" else "a"
    if kind == "a directory":
        return NotRegularFileError(f"is a directory, not {article} {what}", file=_name(path))
    return NotRegularFileError(f"not a regular file ({kind}); expected {article} {what}", file=_name(path))


def check_size(size: int, limit: Optional[int], what: str, file, limit_name: str = "") -> None:
    """UnsafeInputError when ``size`` exceeds ``limit`` (None: no limit)."""
    if limit is not None and size > limit:
        named = f" ({limit_name} in robot_bridge/formats/limits.py)" if limit_name else ""
        raise UnsafeInputError(f"{what} is {size} bytes, more than the {_size_text(limit)} allowed{named}",
                               file=_name(file))


def check_regular_file(path, limit: Optional[int] = None, what: str = "robot file",
                       limit_name: str = "") -> int:
    """Size of the regular file at ``path``, found by ``stat`` alone (nothing is opened).

    MissingFileError when it does not exist; NotRegularFileError for a directory, device, FIFO or
    socket; UnsafeInputError when larger than ``limit``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MissingFileError(f"{what} not found", file=_name(path)) from None
    except OSError as exc:
        raise MissingFileError(f"the OS refuses this path ({exc.strerror})", file=_name(path)) from None
    except ValueError as exc:                     # embedded NUL byte
        raise MissingFileError(f"not a usable path ({exc})", file=_name(path)) from None
    kind = kind_of(st.st_mode)
    if kind is not None:
        raise _not_regular(path, kind, what)
    check_size(st.st_size, limit, what, path, limit_name)
    return st.st_size


class ReadBudget:
    """Bytes one load may read across files (a description and its includes); refused above ``limit``."""

    def __init__(self, limit: Optional[int] = None, what: str = "the description and its includes",
                 limit_name: str = "MAX_INCLUDE_TOTAL_BYTES"):
        self.limit = MAX_INCLUDE_TOTAL_BYTES if limit is None else limit
        self.what = what
        self.limit_name = limit_name
        self.used = 0

    def charge(self, size: int, file) -> None:
        """Count ``size`` bytes of ``file`` (before reading them); UnsafeInputError naming ``file`` when
        the total would exceed the limit."""
        if self.used + size > self.limit:
            raise UnsafeInputError(
                f"reading this file ({size} bytes) takes {self.what} to {self.used + size} bytes, more than "
                f"the {_size_text(self.limit)} allowed ({self.limit_name} in robot_bridge/formats/limits.py)",
                file=_name(file))
        self.used += size


def _open_regular(path, what: str):
    """(fd, size) of ``path`` opened read-only without blocking; fstat must show a regular file."""
    check_regular_file(path, None, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise MissingFileError(f"{what} not found", file=_name(path)) from None
    except OSError as exc:
        raise MissingFileError(f"cannot open: {exc.strerror}", file=_name(path)) from None
    st = os.fstat(fd)
    kind = kind_of(st.st_mode)
    if kind is not None:
        os.close(fd)
        raise _not_regular(path, kind, what)
    return fd, st.st_size


def open_regular(path, limit: Optional[int], what: str = "file", limit_name: str = ""):
    """A binary file object on the regular file at ``path`` (opened without blocking), its size checked
    against ``limit`` first; for readers that seek (zip archives) rather than read the whole file."""
    fd, size = _open_regular(path, what)
    try:
        check_size(size, limit, what, path, limit_name)
    except UnsafeInputError:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def bounded_read(path, limit: int, what: str = "file", *, limit_name: str = "",
                 budget: Optional[ReadBudget] = None) -> bytes:
    """The bytes of the regular file at ``path``, refused before reading when larger than ``limit``
    (or than what ``budget`` has left); never more than ``limit`` bytes are read, even from a file
    that grows meanwhile.  Errors are DescriptionErrors naming ``path``."""
    fd, size = _open_regular(path, what)
    try:
        check_size(size, limit, what, path, limit_name)
        if budget is not None:
            budget.charge(size, path)
        chunks, total = [], 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            except OSError as exc:
                raise MissingFileError(f"cannot read: {exc.strerror}", file=_name(path)) from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise UnsafeInputError(f"{what} grew beyond the {_size_text(limit)} allowed while being read",
                                   file=_name(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(path, n: int, what: str = "file") -> bytes:
    """At most the first ``n`` bytes of the regular file at ``path`` (for sniffing formats)."""
    fd, _size = _open_regular(path, what)
    try:
        return os.read(fd, n)
    except OSError as exc:
        raise MissingFileError(f"cannot read: {exc.strerror}", file=_name(path)) from None
    finally:
        os.close(fd)
