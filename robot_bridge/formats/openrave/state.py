"""Parse-time state of one OpenRAVE body (links, joints, manipulators...) before the tree is built."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ...model import AttachedSensor, Geometry, Inertial, Manipulator, Mimic

# OpenRAVE joint defaults (kinbody.h JointInfo / xmlreaders-core.cpp JointXMLReader)
OPENRAVE_DOF = {"hinge": 1, "slider": 1, "universal": 2, "hinge2": 2, "spherical": 3}
DEFAULT_LIMITS = {"hinge": math.pi, "universal": math.pi, "hinge2": math.pi, "slider": 10.0,
                  "spherical": 100.0}
DEFAULT_MAXVEL = 10.0             # upstream JointInfo (kinbodyjoint.cpp): maxvel 10, maxaccel 50
DEFAULT_MAXACCEL = 50.0
DEFAULT_MAXTORQUE = 1e5           # upstream: 0 = "dynamics unknown"; a URDF effort of 0 reads "cannot move"
DEFAULT_RESOLUTION = 0.02


@dataclass
class LinkState:
    name: str
    T: np.ndarray = field(default_factory=lambda: np.eye(4))     # pose in the body (parse) frame
    static: bool = False
    visuals: list[Geometry] = field(default_factory=list)
    collisions: list[Geometry] = field(default_factory=list)
    inertial: Optional[Inertial] = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class JointState:
    """A joint as OpenRAVE freezes it at ``</joint>``: the two bodies' poses then, and the
    anchor/axes in the parse frame.  ``body0`` is the first ``<body>``."""

    name: str
    type: str                              # OpenRAVE type: hinge slider universal hinge2 spherical
    body0: LinkState
    body1: LinkState
    T0: np.ndarray                         # body0 pose when the joint was read
    T1: np.ndarray                         # body1 pose when the joint was read
    anchor: np.ndarray                     # parse frame
    axes: list[np.ndarray]                 # parse frame, unit
    lower: np.ndarray
    upper: np.ndarray
    explicit_limits: bool = False
    velocity: Optional[np.ndarray] = None
    acceleration: Optional[np.ndarray] = None
    effort: Optional[np.ndarray] = None
    weight: Optional[np.ndarray] = None
    resolution: Optional[np.ndarray] = None
    initial: Optional[np.ndarray] = None
    offset: Optional[np.ndarray] = None
    circular: bool = False
    passive: bool = False
    pose_at_initial: bool = True           # XML bodies are drawn at q = initial; merged COLLADA at q = 0
    mimic: list[Optional[Mimic]] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    line: Optional[int] = None
    file: Optional[str] = None

    @property
    def dof(self) -> int:
        return OPENRAVE_DOF[self.type]


@dataclass
class BodyState:
    """Everything read for one KinBody/Robot (including included files)."""

    name: Optional[str] = None
    is_robot: bool = False
    links: list[LinkState] = field(default_factory=list)
    joints: list[JointState] = field(default_factory=list)
    manipulators: list[Manipulator] = field(default_factory=list)
    sensors: list[AttachedSensor] = field(default_factory=list)
    sensor_links: dict[int, LinkState] = field(default_factory=dict)     # id(sensor) -> its link
    adjacent: list[tuple[str, str]] = field(default_factory=list)
    jointvalues: Optional[list[float]] = None
    extras: dict[str, Any] = field(default_factory=dict)
    source: Optional[str] = None

    _index: dict = field(default_factory=dict, repr=False, compare=False)   # name -> first link of it
    _indexed: int = field(default=0, repr=False, compare=False)             # links[:_indexed] are in it

    def link(self, name: str) -> Optional[LinkState]:
        """The first link called ``name`` (None if none): a dict lookup, kept up to date with ``links``
        (appended links are indexed on the next call; who renames links calls :meth:`renamed_links`), so
        resolving every reference of a file stays linear in its size."""
        links = self.links
        if self._indexed > len(links):
            self.renamed_links()
        for link in links[self._indexed:]:
            self._index.setdefault(link.name, link)
        self._indexed = len(links)
        hit = self._index.get(name)
        if hit is not None and hit.name != name:         # renamed without telling: index them again
            self.renamed_links()
            return self.link(name)
        return hit

    def renamed_links(self) -> None:
        """Forget the name index (after links were renamed, e.g. by a ``prefix``)."""
        self._index, self._indexed = {}, 0

    def link_nocase(self, name: str) -> Optional[LinkState]:
        """``<body>`` references inside ``<joint>`` are case-insensitive upstream."""
        exact = self.link(name)
        if exact is not None:
            return exact
        low = name.lower()
        for link in self.links:
            if link.name.lower() == low:
                return link
        return None


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def rename_variables(formula: str, names: dict[str, str]) -> str:
    """Rewrite whole identifiers of a formula through ``names`` (Robot prefix on mimic equations)."""
    return _IDENT.sub(lambda m: names.get(m.group(0), m.group(0)), formula)


def rename_mimic(mimic: Optional[Mimic], names: dict[str, str]) -> Optional[Mimic]:
    if mimic is None:
        return None
    return Mimic(position=rename_variables(mimic.position, names),
                 velocity={names.get(k, k): rename_variables(v, names) for k, v in mimic.velocity.items()},
                 acceleration={names.get(k, k): rename_variables(v, names)
                               for k, v in mimic.acceleration.items()})
