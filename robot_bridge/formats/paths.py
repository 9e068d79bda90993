"""Allowed-roots policy for every file a description refers to (includes, meshes, sensor files).

A reader builds one :class:`AllowedRoots` per top-level load with :func:`roots_for` and routes
each lookup through :meth:`AllowedRoots.find` / :meth:`AllowedRoots.check`.  Default roots: the
described file's folder tree (widened to its ROS package, the nearest folder above it holding a
``package.xml``, so ``urdf/x.urdf`` may use ``meshes/``) plus the search path.
``allowed_roots=[...]`` (a reader option) or ``$ROBOT_BRIDGE_ALLOWED_ROOTS`` (os.pathsep-separated)
replaces them.

Candidates are resolved (symlinks followed, ``..`` collapsed) *before* anything is probed, so a
reference that leads outside the roots is never stat'ed or opened: it is refused with
:class:`~robot_bridge.errors.UnsafeInputError` naming the file and the reference.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..errors import MissingFileError, UnsafeInputError

ENV_ALLOWED_ROOTS = "ROBOT_BRIDGE_ALLOWED_ROOTS"


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


class AllowedRoots:
    """The folders (and everything below them) a description may read from."""

    def __init__(self, roots: Iterable[str | os.PathLike], package_shares: bool = False):
        """``package_shares``: the share folder of every installed (ament-indexed) package is inside too
        (:func:`in_package_share`), as the user's environment installed it."""
        out: list[Path] = []
        for r in roots:
            real = _real(r)
            if real not in out:
                out.append(real)
        self.roots: tuple[Path, ...] = tuple(out)
        self.package_shares = package_shares

    def __repr__(self) -> str:
        shares = ", package_shares=True" if self.package_shares else ""
        return f"AllowedRoots({[str(r) for r in self.roots]}{shares})"

    def widened(self, *roots: str | os.PathLike) -> "AllowedRoots":
        """These roots plus ``roots`` (same package_shares rule)."""
        return AllowedRoots([*self.roots, *roots], package_shares=self.package_shares)

    def contains(self, path: str | os.PathLike) -> bool:
        real = _real(path)
        return any(real == r or real.is_relative_to(r) for r in self.roots) or \
            (self.package_shares and in_package_share(real))

    def _refuse(self, reference: str, real: Path, file, line, element) -> UnsafeInputError:
        where = ", ".join(str(r) for r in self.roots) or "none"
        return UnsafeInputError(f"reference {reference!r} resolves to {real}, outside the allowed roots "
                                f"({where})", file=file, line=line, element=element)

    def check(self, path: str | os.PathLike, *, reference: Optional[str] = None, file=None,
              line: Optional[int] = None, element: Optional[str] = None) -> Path:
        """The resolved ``path`` if it lies inside the roots, else UnsafeInputError."""
        real = _real(path)
        if not self.contains(real):
            raise self._refuse(reference if reference is not None else os.fspath(path), real, file, line,
                               element)
        return real

    def find(self, reference: str, folders: Sequence[str | os.PathLike] = (), *, file=None,
             line: Optional[int] = None, element: Optional[str] = None) -> Optional[Path]:
        """First existing file for ``reference`` (absolute, or relative to each of ``folders`` in
        order) inside the roots; None when there is none.  See :meth:`first`."""
        p = Path(os.path.expanduser(reference))
        candidates = [p] if p.is_absolute() else [Path(f) / p for f in folders]
        return self.first(candidates, reference, file=file, line=line, element=element)

    def first(self, candidates: Iterable[str | os.PathLike], reference: str, *, file=None,
              line: Optional[int] = None, element: Optional[str] = None) -> Optional[Path]:
        """First existing file among ``candidates`` inside the roots, None when there is none.
        Candidates outside the roots are skipped unprobed; if every candidate was outside, the
        reference is refused (UnsafeInputError)."""
        escaped: list[Path] = []
        inside = 0
        for candidate in candidates:
            real = _real(candidate)
            if not self.contains(real):
                escaped.append(real)
                continue
            inside += 1
            try:
                if real.is_file():
                    return real
            except OSError as exc:       # too long, a loop, ...: a typed error naming the reference
                raise MissingFileError(f"reference {_clip(reference)!r}: the OS refuses the path "
                                       f"{_clip(str(real))!r} ({exc.strerror})",
                                       file=file, line=line, element=element) from None
        if escaped and not inside:
            raise self._refuse(reference, escaped[0], file, line, element)
        return None


PACKAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def ament_prefixes() -> list[Path]:
    """The install prefixes whose ament index names packages: each ``$AMENT_PREFIX_PATH`` entry (ROS's, the
    user's workspaces), then this Python environment's own prefixes holding an ament index (the venv's
    ``sys.prefix``, and the ``cmeel.prefix`` of its site-packages where wheels such as example-robot-data
    install their packages), which an unactivated venv leaves off ``$AMENT_PREFIX_PATH``."""
    import sysconfig

    out: list[Path] = []
    env = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    own = [Path(sys.prefix), Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix"]
    for prefix in env + [p for p in own if (p / "share" / "ament_index").is_dir()]:
        if prefix not in out:
            out.append(prefix)
    return out


def package_share(package: str) -> Optional[Path]:
    """The share folder of ``package`` as robot_state_publisher and rviz resolve ``package://`` (the ament
    index of each :func:`ament_prefixes` prefix, then ``$ROS_PACKAGE_PATH/<package>`` holding a
    package.xml); None where this host has no such package.  Such a folder is a trusted root: the user's
    environment installed it."""
    if not PACKAGE_NAME.fullmatch(package) or package in (".", ".."):
        return None
    for prefix in ament_prefixes():
        share = Path(prefix) / "share"
        if (share / "ament_index" / "resource_index" / "packages" / package).is_file() and \
                (share / package).is_dir():
            return share / package
    for root in (p for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p):
        if (Path(root) / package / "package.xml").is_file():
            return Path(root) / package
    return None


def in_package_share(path: str | os.PathLike) -> bool:
    """Whether ``path`` lies in the share folder of an ament-indexed package of :func:`ament_prefixes`
    (``<prefix>/share/<package>/...``, the package in that prefix's index) or in a package of
    ``$ROS_PACKAGE_PATH`` (a folder holding a package.xml): where :func:`package_share` finds packages."""
    real = _real(path)
    for prefix in ament_prefixes():
        share = _real(Path(prefix) / "share")
        if real.is_relative_to(share) and real != share:
            package = real.relative_to(share).parts[0]
            if package != "ament_index" and \
                    (share / "ament_index" / "resource_index" / "packages" / package).is_file():
                return True
    for root in (p for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p):
        base = _real(root)
        if real.is_relative_to(base) and real != base and \
                (base / real.relative_to(base).parts[0] / "package.xml").is_file():
            return True
    return False


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def roots_for(description: str | os.PathLike, search_path: Iterable[str | os.PathLike] = (),
              allowed_roots: Optional[Iterable[str | os.PathLike] | str] = None) -> AllowedRoots:
    """The policy for one load of ``description``: ``allowed_roots`` (a list or an os.pathsep
    string), else ``$ROBOT_BRIDGE_ALLOWED_ROOTS``, else its folder plus ``search_path``."""
    if allowed_roots is None:
        allowed_roots = os.environ.get(ENV_ALLOWED_ROOTS) or None
    if isinstance(allowed_roots, (str, os.PathLike)):
        allowed_roots = [r for r in os.fspath(allowed_roots).split(os.pathsep) if r]
    if allowed_roots is not None:
        return AllowedRoots(allowed_roots)
    folder = _real(description).parent
    package = next((d for d in (folder, *folder.parents) if (d / "package.xml").is_file()), None)
    return AllowedRoots([folder, *([package] if package else []), *search_path])


def launch_roots(files: Iterable[str | os.PathLike] = (),
                 folders: Iterable[str | os.PathLike] = ()) -> AllowedRoots:
    """The folders trusted at launch: each launch-time file's folder (widened to its ROS package, as the
    readers do), the launch-time search path ``folders``, ``$OPENRAVE_DATA`` and
    ``$ROBOT_BRIDGE_ALLOWED_ROOTS`` (run-time path parameters and peers' documents name files under them)."""
    from . import normalize_search_path

    roots: list = [r for r in os.environ.get(ENV_ALLOWED_ROOTS, "").split(os.pathsep) if r]
    for file in files:
        if file:
            folder = _real(file).parent
            package = next((d for d in (folder, *folder.parents) if (d / "package.xml").is_file()), None)
            roots += [folder] + ([package] if package else [])
    roots += normalize_search_path([os.fspath(f) for f in folders if f])
    return AllowedRoots(roots)
