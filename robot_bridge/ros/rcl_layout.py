"""Which ROS 2 this process binds, and whether ``fast_relay`` may call its rcl through ctypes.

``fast_relay`` (and the compiled drains and template publishers built on it) passes rcl structs it
declares itself (``rcutils_uint8_array_t`` with its ``rcutils_allocator_t``) and reads them from compiled
code by offset.  A different layout would be a crash, not an error, so before the first rcl call
:func:`check` requires both

- an rcl whose major version is one the layouts were written and tested for (``WRITTEN_FOR``), and
- a probe through rcutils' own functions: ``rcutils_uint8_array_init`` fills the struct as declared here
  (capacity, length, allocator) and ``rcutils_uint8_array_fini`` frees it.

Otherwise the fast path stands down (``FastPathUnavailable`` with the reason) and the callers keep the
executor path.  Test hook: ``ROBOT_BRIDGE_TEST_RCL_LAYOUT=shifted`` probes with a deliberately wrong
struct (every field one word later), as a changed rcl would look.
"""

from __future__ import annotations

import ctypes
import os
import re
from importlib import metadata
from typing import Optional

# rcl major version -> the ROS 2 distribution it ships in, for every rcl the fast path was written for
# and CI runs (Jazzy: rcl 9.2, Kilted: rcl 10.1).
WRITTEN_FOR = {9: "jazzy", 10: "kilted"}
# rclpy major version -> distribution (naming only)
RCLPY_DISTROS = {3: "humble", 7: "jazzy", 9: "kilted"}
TEST_HOOK = "ROBOT_BRIDGE_TEST_RCL_LAYOUT"
PROBE_CAPACITY = 4099
PROBE_STATE = 0x5EED_0000


def _package_version(wheel: str, ament_name: str) -> Optional[str]:
    """The version of a ROS 2 package: its PyPI wheel's, else its package.xml in the ament index."""
    try:
        return metadata.version(wheel)
    except metadata.PackageNotFoundError:
        pass
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        try:
            with open(os.path.join(prefix, "share", ament_name, "package.xml"), encoding="utf-8") as f:
                found = re.search(r"<version>\s*([^<\s]+)\s*</version>", f.read(65536))
        except OSError:
            continue
        if found:
            return found.group(1)
    return None


def rcl_version() -> Optional[str]:
    return _package_version("ros-rcl", "rcl")


def rclpy_version() -> Optional[str]:
    return _package_version("ros-rclpy", "rclpy")


def fastdds_version() -> Optional[str]:
    """The version of the Fast DDS this process loads: ``fastdds`` 3.x (Kilted and later) or ``fastrtps``
    2.x (Humble, Jazzy), as a wheel or in the ament index."""
    return _package_version("ros-fastdds", "fastdds") or _package_version("ros-fastrtps", "fastrtps")


def _major(version: Optional[str]) -> Optional[int]:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def distro() -> str:
    """The ROS 2 distribution of the rclpy this process imports ("jazzy", "kilted", ...)."""
    name = RCLPY_DISTROS.get(_major(rclpy_version()))
    return name or os.environ.get("ROS_DISTRO") or "unknown"


def fastdds_major() -> Optional[int]:
    return _major(fastdds_version())


def version_problem(version: Optional[str]) -> Optional[str]:
    """Why an rcl of ``version`` is not one the fast path was written for; None when it is."""
    if _major(version) in WRITTEN_FOR:
        return None
    known = ", ".join(f"{major}.x ({name})" for major, name in sorted(WRITTEN_FOR.items()))
    return (f"rcl {version or 'of unknown version'} is not one the fast path's layouts were written for "
            f"({known})")


def probe_problem(rcutils, message_type, allocator_type, shifted: bool = False) -> Optional[str]:
    """Fill a ``message_type`` (fast_relay's ``rcutils_uint8_array_t``) through rcutils' functions and
    read it back; the mismatch found, or None.  ``shifted``: probe with every field one word later."""
    default_allocator = rcutils.rcutils_get_default_allocator
    default_allocator.restype, default_allocator.argtypes = allocator_type, []
    init, fini = rcutils.rcutils_uint8_array_init, rcutils.rcutils_uint8_array_fini
    init.restype, init.argtypes = ctypes.c_int32, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fini.restype, fini.argtypes = ctypes.c_int32, [ctypes.c_void_p]
    allocator = default_allocator()
    allocator.state = PROBE_STATE             # copied into the array, never used by the default allocator
    raw = ctypes.create_string_buffer(ctypes.sizeof(message_type) + 8)
    storage = message_type.from_buffer(raw)
    seen = message_type.from_buffer(raw, 8) if shifted else storage
    ret = init(ctypes.byref(storage), PROBE_CAPACITY, ctypes.byref(allocator))
    if ret != 0:
        return f"rcutils_uint8_array_init failed ({ret})"
    try:
        expected = (PROBE_CAPACITY, 0, allocator.state)
        got = (seen.buffer_capacity, seen.buffer_length, seen.allocator.state)
        if got != expected or not seen.buffer:
            return (f"rcutils_uint8_array_t reads back (capacity, length, allocator state) {got}, "
                    f"not {expected}: its layout differs from the one declared")
        if not _same_function(seen.allocator.deallocate, allocator.deallocate):
            return "rcutils_uint8_array_t's allocator reads back different functions: its layout differs"
    finally:
        fini(ctypes.byref(storage))
    return None


def _same_function(a, b) -> bool:
    return ctypes.cast(a, ctypes.c_void_p).value == ctypes.cast(b, ctypes.c_void_p).value


def check(rcutils, message_type, allocator_type) -> Optional[str]:
    """Why the fast path must not bind this rcl (version, then the probe); None when it may."""
    return (version_problem(rcl_version())
            or probe_problem(rcutils, message_type, allocator_type,
                             shifted=os.environ.get(TEST_HOOK) == "shifted"))
