"""Process allocator tuning for large messages (images, point clouds).

glibc serves allocations of a few hundred KB with fresh ``mmap``s, or returns freed heap to the OS
as soon as its top exceeds the (dynamic) trim threshold.  Either way every received camera image
lands in memory the kernel must fault in page by page: measured on 640x480 rgb8, that is ~1.7 ms
of a 3.1 ms hop through Fast DDS shared memory.  Keeping such buffers on the heap (a fixed mmap
threshold above image sizes, a trim threshold that keeps a few of them) makes the copies plain
memcpys.  No-op where the C library has no ``mallopt`` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util

# <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024      # above 1920x1080 rgb8 (6.2 MB) and 32FC1 depth (8.3 MB)
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024      # freed heap kept for reuse before it goes back to the OS

_tuned: bool | None = None


def tune_allocator_for_large_messages() -> bool:
    """Apply the thresholds once per process; True when the C library took them."""
    global _tuned
    if _tuned is None:
        _tuned = _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and _mallopt(M_TRIM_THRESHOLD,
                                                                             TRIM_THRESHOLD_BYTES)
    return _tuned


def _mallopt(param: int, value: int) -> bool:
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(param, value) == 1
