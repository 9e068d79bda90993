"""Child process of test_fuzz_files.py: reads cases as JSON lines on stdin, answers one JSON line each.

Started as ``python file_fuzz_worker.py <bytes> <warm-up robot file> <warm-up mesh file>``: after the
readers are imported and have read the warm-up files once (numba's JIT and LLVM reserve a few hundred
MiB of address space on first use), RLIMIT_AS is set to the address space then in use plus ``bytes``,
so a case that allocates more than that fails here (MemoryError, reported as an escaped exception)
instead of taking the machine.  A case is
``{"op": "load" | "mesh", "path": ..., "search_path": [...]}``; the answer says how it ended
(loaded, refused with a typed error, internal: a reader bug behind load()'s safety net, escaped) and
its wall and CPU time, and the process's peak RSS so far.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback

sys.path.insert(0, os.environ.get("ROBOT_BRIDGE_FUZZ_ROOT", "."))

from robot_bridge.errors import DescriptionError  # noqa: E402
from robot_bridge.formats import load, meshes  # noqa: E402

limit = int(sys.argv[1])


def run(case: dict) -> tuple[str, str]:
    if case["op"] == "load":
        robot = load(case["path"], search_path=case.get("search_path") or None)
        return "loaded", f"{len(robot.links)} links"
    if meshes.is_inventor(case["path"]):         # what the URDF writer does to convert a mesh
        vertices, triangles, colours = meshes.read_inventor_coloured(case["path"])
        meshes.colour_parts(vertices, triangles, colours)
    else:
        vertices, triangles = meshes.load_triangles(case["path"])
    meshes.stl_bytes(vertices, triangles)
    return "loaded", f"{len(triangles)} triangles"


def _status_kb(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), 0)
    except OSError:
        return 0


def vm_peak_kb() -> int:
    """Peak address space of this process (what RLIMIT_AS bounds), from /proc."""
    return _status_kb("VmPeak")


def peak_rss_kb() -> int:
    """Peak resident memory of this process's own address space (VmHWM; ru_maxrss would also count the pytest
    process this one was forked from, whose size depends on the tests that ran before)."""
    return _status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def vm_size_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))


def main() -> None:
    load(sys.argv[2])
    meshes.stl_bytes(*meshes.read_inventor(sys.argv[3]))
    base = vm_size_kb() * 1024
    resource.setrlimit(resource.RLIMIT_AS, (base + limit, base + limit))
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                                  # anything a reader prints goes to stderr
    for line in sys.stdin:
        case = json.loads(line)
        wall, cpu = time.perf_counter(), time.process_time()
        answer = {}
        try:
            answer["result"], answer["detail"] = run(case)
        except DescriptionError as err:
            internal = getattr(err, "internal", None)
            answer["result"] = "internal" if internal is not None else "refused"
            answer["detail"] = str(err)
            answer["placed"] = bool(err.file)
            answer["line"] = err.line is not None
            if internal is not None:
                answer["trace"] = "".join(traceback.format_exception(internal))[-3000:]
        except BaseException as exc:  # noqa: BLE001 -- every escape is what the fuzz test reports
            answer["result"] = "escaped"
            answer["detail"] = f"{type(exc).__name__}: {exc}"[:500]
            if isinstance(exc, MemoryError):
                answer["detail"] = f"MemoryError (past the {limit >> 20} MiB address space limit)"
            answer["trace"] = traceback.format_exc()[-3000:]
        answer["wall"] = time.perf_counter() - wall
        answer["cpu"] = time.process_time() - cpu
        answer["maxrss_kb"] = peak_rss_kb()
        answer["vmpeak_kb"] = vm_peak_kb()
        answer["base_kb"] = base >> 10
        out.write(json.dumps(answer) + "\n")
        if answer["detail"].startswith("MemoryError"):
            return                                 # the heap may be damaged: the test starts a new worker


if __name__ == "__main__":
    main()
