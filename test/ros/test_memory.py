"""Allocator tuning for large messages: image-sized buffers come from the heap, not fresh mmaps."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from robot_bridge.ros import memory

# Counts glibc's mmapped chunks (mallinfo2().hblks) while a 4 MiB buffer is alive.
PROBE = """
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
if sys.argv[1] == "tuned":
    from robot_bridge.ros.memory import tune_allocator_for_large_messages
    assert tune_allocator_for_large_messages()
before = mallinfo2().hblks
image = bytearray(4 << 20)
print(mallinfo2().hblks - before)
"""

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt/mallinfo2 are glibc's")


@glibc
@pytest.mark.parametrize("mode, mmapped", [("default", 1), ("tuned", 0)])
def test_image_sized_buffers_stay_on_the_heap_once_tuned(mode, mmapped):
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    assert int(out.stdout) == mmapped


@glibc
def test_thresholds_applied_once(monkeypatch):
    calls = []
    real = memory._mallopt
    monkeypatch.setattr(memory, "_tuned", None)
    monkeypatch.setattr(memory, "_mallopt", lambda param, value: calls.append(param) or real(param, value))
    assert memory.tune_allocator_for_large_messages() is True
    assert memory.tune_allocator_for_large_messages() is True
    assert calls == [memory.M_MMAP_THRESHOLD, memory.M_TRIM_THRESHOLD]
