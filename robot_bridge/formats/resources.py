"""One resource resolver for the whole bridge: where a node finds the files a description names.

Every node that resolves mesh or body files builds one :class:`ResourceResolver` from its launch-time
parameters (``description_file``, ``srdf_file``, ``search_path``, ``objects_roots``, ``mesh_cache_dir``), so
description_node, planner_node, world_node and the sensor bridge trust the same folders:

- the launch-time files' folders widened to their ROS package, the search path, ``$OPENRAVE_DATA`` and
  ``$ROBOT_BRIDGE_ALLOWED_ROOTS`` (:func:`robot_bridge.formats.paths.launch_roots`), this package's data;
- the share folder of every installed package (``package://`` as robot_state_publisher resolves it: the
  ament index of ``$AMENT_PREFIX_PATH`` and of the venv's own prefixes, :func:`~robot_bridge.formats.paths.
  ament_prefixes`);
- for meshes, the mesh cache folder description_node writes converted meshes to.

A mesh description_node found there, and published as a ``file://`` URI, is found by the planner too; a
peer's description naming a file anywhere else is still left out unread (docs/security.md).  No rclpy here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

from .paths import AllowedRoots, launch_roots


def package_data() -> Path:
    """This package's data folder (the embedded world's bodies and meshes): always trusted."""
    return Path(os.path.realpath(Path(__file__).resolve().parent.parent / "data"))


class ResourceResolver:
    def __init__(self, files: Iterable[str] = (), search_path: Sequence[str] = (), roots: Iterable[str] = (),
                 mesh_cache_dir: str = "", trusted: Optional[Iterable[str]] = None):
        """``files``: the launch-time robot files (description_file, srdf_file); ``search_path``: the nodes'
        search path; ``roots``: more trusted folders (objects_roots); ``mesh_cache_dir``: description_node's
        (empty: its default folder).  ``trusted``: exactly these folders instead of the launch-time ones
        (tests, embedders); installed packages' shares and the mesh cache stay trusted for meshes."""
        from .mesh_cache import default_cache_dir

        self.search_path = [os.fspath(p) for p in search_path if p]
        files = [os.fspath(f) for f in files if f]
        # a received description is read as if it were description_file: relative URIs and its own
        # package:// package from that file's folder, as description_node reads the file itself
        self.base_dir: Optional[str] = os.path.dirname(os.path.realpath(files[0])) if files else None
        if trusted is None:
            base = [str(r) for r in launch_roots(files,
                                                 [*self.search_path, *(r for r in roots if r)]).roots]
        else:
            base = [os.fspath(r) for r in trusted]
        data = str(package_data())
        self.body_roots: list[str] = base if data in base or trusted is not None else base + [data]
        cache = Path(mesh_cache_dir).expanduser() if mesh_cache_dir else default_cache_dir()
        self.mesh_cache = str(cache)
        self.mesh_roots = AllowedRoots([*self.body_roots, cache], package_shares=True)

    @classmethod
    def from_parameters(cls, get, files: Sequence[str] = ("description_file", "srdf_file"),
                        roots: Sequence[str] = ("objects_roots",)) -> "ResourceResolver":
        """The resolver of a node's parameters (``get(name)``; names the node lacks are skipped): the same
        for every node given the same values."""
        def value(name):
            try:
                return get(name)
            except Exception:         # a node without this parameter (e.g. planner_node's srdf_file)
                return None

        return cls([value(f) or "" for f in files], list(value("search_path") or []),
                   [r for name in roots for r in (value(name) or [])], value("mesh_cache_dir") or "")

    def __repr__(self) -> str:
        return f"ResourceResolver({self.mesh_roots!r}, search_path={self.search_path})"

    def contains(self, path: str | os.PathLike) -> bool:
        """Whether a mesh at ``path`` may be read (under the trusted roots, an installed package's share or
        the mesh cache)."""
        return self.mesh_roots.contains(path)

    def resolve(self, uri: str, base_dir: Optional[str | os.PathLike] = None) -> Optional[str]:
        """The file of a mesh ``uri`` (``package://``, ``file://``, relative to ``base_dir`` (default:
        description_file's folder) or the search path, absolute) under the trusted roots; None when there
        is none.  UnsafeInputError when every candidate lies outside them."""
        from . import normalize_search_path
        from .urdf import resolve_uri

        base = base_dir or self.base_dir
        return resolve_uri(uri, Path(base) if base else Path.cwd(),
                           normalize_search_path(self.search_path), self.mesh_roots)

    def untrusted_meshes(self, robot) -> list[str]:
        """The mesh files of ``robot`` (read by a node's own reader) a node building this resolver from the
        same parameters would leave out: none, unless a root was given to that reader only."""
        from ..model import Mesh

        return list(dict.fromkeys(g.shape.path for link in robot.links.values()
                                  for g in (*link.collisions, *link.visuals)
                                  if isinstance(g.shape, Mesh) and g.shape.path
                                  and not self.contains(g.shape.path)))
