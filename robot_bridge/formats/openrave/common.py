"""Shared helpers of the OpenRAVE XML reader: tags, numbers, transforms, errors, file lookup."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ...errors import MissingFileError, NotRegularFileError, SchemaError
from ...model import transform as tf
from ..limits import ReadBudget, kind_of
from ..paths import AllowedRoots
from ..xmlsafe import element_path, local_name


def tag(el) -> str:
    """Lower-cased local tag name (OpenRAVE element names are case-insensitive)."""
    return local_name(el).lower()


def attrs(el) -> dict[str, str]:
    """Attributes with lower-cased names (values keep their case)."""
    return {k.rsplit("}", 1)[-1].lower(): v for k, v in el.attrib.items()}


def children(el):
    """Element children (comments and PIs skipped)."""
    return [c for c in el if isinstance(c.tag, str)]


def text(el) -> str:
    return (el.text or "").strip()


def is_true(value: str) -> bool:
    """OpenRAVE booleans: anything but "false" (any case) and "0" is true."""
    return not (value.strip().lower() == "false" or value.strip() == "0")


@dataclass
class Context:
    """Where the element being read comes from (for errors and file lookup)."""

    file: Path
    search_path: list[Path]
    stack: tuple[Path, ...] = ()                  # include chain (cycle detection)
    modelsdir: Optional[str] = None               # <modelsdir> of the enclosing KinBody
    default_mass: Optional[object] = None         # KinBody-level <mass> element
    roots: Optional[AllowedRoots] = None          # allowed-roots policy of the whole load
    repairs: list = field(default_factory=list)   # warnings about values fixed on read (whole load)
    budget: ReadBudget = field(default_factory=ReadBudget)   # bytes of all files read (whole load)

    @property
    def directory(self) -> Path:
        return self.file.parent

    def error(self, cls, message: str, el=None):
        return cls(message, file=str(self.file), line=getattr(el, "sourceline", None),
                   element=element_path(el) if el is not None else None)

    def child(self, file: Path) -> "Context":
        return Context(file=file, search_path=self.search_path, stack=self.stack + (file,), roots=self.roots,
                       repairs=self.repairs, budget=self.budget)


@dataclass
class Notes:
    """Warnings and opaque extras gathered while reading one body."""

    warnings: list[str] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def unknown_element(self, el, where: str, ctx: Context) -> None:
        key = f"{where}/{tag(el)}"
        if key not in self.unknown:
            self.unknown.add(key)
            self.warn(f"{ctx.file.name}:{el.sourceline}: <{local_name(el)}> in <{where}> is not supported "
                      "(kept as an opaque extra)" if where in ("environment", "robot", "kinbody")
                      else f"{ctx.file.name}:{el.sourceline}: <{local_name(el)}> in <{where}> is ignored")


def floats(el, ctx: Context, count: Optional[int] = None, minimum: Optional[int] = None) -> list[float]:
    """Numbers in an element's text; ``count`` exact or ``minimum`` required (extra ones ignored)."""
    words = text(el).split()
    try:
        values = [float(w) for w in words]
    except ValueError:
        bad = next(w for w in words if not _is_float(w))
        raise ctx.error(SchemaError, f"expected numbers, got {bad!r}", el) from None
    if not all(math.isfinite(v) for v in values):
        raise ctx.error(SchemaError, "numbers must be finite", el)
    need = count if count is not None else minimum
    if need is not None and len(values) < need:
        raise ctx.error(SchemaError, f"expected {need} numbers, got {len(values)}", el)
    return values[:count] if count is not None else values


def _is_float(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


TRANSFORM_TAGS = ("translation", "rotationaxis", "rotationmat", "quat")


def apply_transform_tag(t: np.ndarray, el, ctx: Context) -> bool:
    """Apply one OpenRAVE transform tag to ``t`` in place; False if ``el`` is not one.

    ``<translation>`` adds to the translation; every rotation is pre-multiplied
    onto the rotation only (the translation is never rotated).
    """
    name = tag(el)
    if name == "translation":
        t[:3, 3] += floats(el, ctx, 3)
        return True
    if name == "rotationaxis":
        ax, ay, az, deg = floats(el, ctx, 4)
        if ax == ay == az == 0.0:
            raise ctx.error(SchemaError, "rotation axis must not be zero", el)
        try:
            rot = tf.rotation_axis_angle((ax, ay, az), math.radians(deg))
        except ValueError as exc:                  # an infinite axis or angle
            raise ctx.error(SchemaError, f"rotationaxis: {exc}", el) from None
    elif name == "rotationmat":
        rot = np.array(floats(el, ctx, 9)).reshape(3, 3)       # row-major
        if not np.allclose(rot @ rot.T, np.eye(3), atol=1e-3):
            raise ctx.error(SchemaError, "rotationmat is not a rotation matrix", el)
        u, _, vt = np.linalg.svd(rot)                            # re-orthonormalise rounded values
        off = float(np.max(np.abs(rot - u @ vt)))
        rot = u @ vt
        if off > 1e-6:
            message = (f"{ctx.file.name}:{el.sourceline} {element_path(el)}: rotationmat is not orthonormal "
                       f"(off by {off:.2g}); orthonormalized")
            if message not in ctx.repairs:
                ctx.repairs.append(message)
    elif name == "quat":
        q = floats(el, ctx, 4)                                   # w x y z
        if not any(q):
            raise ctx.error(SchemaError, "quaternion must not be zero", el)
        rot = tf.from_quat_wxyz(q)
    else:
        return False
    t[:3, :3] = rot @ t[:3, :3]
    return True


def find_file(name: str, ctx: Context, extra_dirs: tuple[Path, ...] = (), el=None) -> Optional[Path]:
    """OpenRAVE file lookup: absolute path, ``extra_dirs``, the including file's folder,
    then each data search-path folder.  None when not found; UnsafeInputError when every
    candidate lies outside the allowed roots (``ctx.roots``)."""
    if ctx.roots is not None:
        return ctx.roots.find(name, (*extra_dirs, ctx.directory, *ctx.search_path), file=str(ctx.file),
                              line=getattr(el, "sourceline", None),
                              element=element_path(el) if el is not None else None)
    p = Path(name).expanduser()
    if p.is_absolute():
        return p if p.is_file() else None
    for folder in (*extra_dirs, ctx.directory, *ctx.search_path):
        candidate = folder / p
        if candidate.is_file():
            return candidate.resolve()
    return None


def _special_file(name: str, ctx: Context) -> Optional[tuple[Path, str]]:
    """A candidate for ``name`` (inside the allowed roots) that exists but is a device, FIFO or socket."""
    p = Path(name).expanduser()
    folders = () if p.is_absolute() else (ctx.directory, *ctx.search_path)
    for candidate in [folder / p for folder in folders] or [p]:
        if ctx.roots is not None and not ctx.roots.contains(candidate):
            continue
        try:
            mode = candidate.stat().st_mode
        except (OSError, ValueError):
            continue
        kind = kind_of(mode)
        if kind is not None and kind != "a directory":
            return candidate, kind
    return None


def require_file(name: str, ctx: Context, el) -> Path:
    found = find_file(name, ctx, el=el)
    if found is None:
        special = _special_file(name, ctx)
        if special is not None:
            raise ctx.error(NotRegularFileError, f"included file {name!r} is not a regular file "
                            f"({special[1]}: {special[0]})", el)
        where = ", ".join(str(d) for d in (ctx.directory, *ctx.search_path))
        raise ctx.error(MissingFileError, f"included file {name!r} not found (looked in {where})", el)
    return found
