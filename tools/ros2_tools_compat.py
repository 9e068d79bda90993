"""Adapt the ROS 2 tools installed from ../shared/ros2-tools (launch, launch_ros, ros2cli: Kilted-era sources)
to the rclpy of the venv they were installed into.  Run by tools/setup_venv.sh with the venv's Python, after
ros2-tools/install.sh; a no-op where the rclpy needs nothing (Kilted), idempotent, and it edits only the
installed copies in the venv's site-packages (../shared stays untouched).

    VENV/bin/python tools/ros2_tools_compat.py

Each patch names the module, the exact text it replaces and why; a patch whose text is neither found nor
already replaced stops the setup with the file named, so a changed upstream is noticed instead of half-fixed.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MARKER = "# robot_bridge ros2_tools_compat"


def rclpy_init_is_not_a_context_manager() -> bool:
    """Jazzy's rclpy.init returns None; from Kilted on it returns an InitContextManager."""
    import rclpy

    return not hasattr(rclpy, "InitContextManager")


INIT_SHIM = f'''
import contextlib as _compat_contextlib  {MARKER}


@_compat_contextlib.contextmanager
def _rclpy_init(*args, **kwargs):  {MARKER}: Jazzy's rclpy.init is not a context manager
    rclpy.init(*args, **kwargs)
    try:
        yield
    finally:
        rclpy.try_shutdown()
'''


@dataclass(frozen=True)
class Patch:
    module: str                       # the installed module's dotted name
    needed: Callable[[], bool]
    old: str
    new: str
    after: str = ""                   # the shim is inserted after the first line that starts with this
    shim: str = ""


PATCHES = (
    Patch("ros2service.verb.call", rclpy_init_is_not_a_context_manager,
          old="    with rclpy.init():\n", new=f"    with _rclpy_init():  {MARKER}\n",
          after="import rclpy", shim=INIT_SHIM),
)


def module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise SystemExit(f"ros2_tools_compat: {name} is not installed in {sys.prefix}")
    return Path(spec.origin)


def apply(patch: Patch, path: Path) -> bool:
    """Apply ``patch`` to ``path``; False when it was applied before."""
    text = path.read_text(encoding="utf-8")
    if patch.new in text:
        return False
    if text.count(patch.old) != 1:
        raise SystemExit(f"ros2_tools_compat: {path}: the text to adapt ({patch.old.strip()!r}) is not found "
                         f"once; upstream changed, update tools/ros2_tools_compat.py")
    text = text.replace(patch.old, patch.new)
    if patch.shim:
        lines = text.splitlines(keepends=True)
        at = next((i for i, line in enumerate(lines) if line.startswith(patch.after)), None)
        if at is None:
            raise SystemExit(f"ros2_tools_compat: {path}: no line starting with {patch.after!r}")
        lines.insert(at + 1, patch.shim)
        text = "".join(lines)
    path.write_text(text, encoding="utf-8")
    return True


def main() -> int:
    for patch in PATCHES:
        if not patch.needed():
            continue
        path = module_file(patch.module)
        if apply(patch, path):
            print(f"ros2_tools_compat: adapted {patch.module} ({path}) to this rclpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
