"""File fuzzing of ``formats.load`` and the mesh readers with mutated copies of real files.

The package's own robot files and meshes (test/fixtures, robot_bridge/data) and, when present, a
seeded sample of the corpus are mutated -- byte flips, truncation, duplicated and deleted lines,
numbers replaced by huge, negative, NaN or infinite values, count fields inflated -- and each copy is
read in a child process whose address space is limited (RLIMIT_AS).  Every case must load or be
refused with a typed error naming its file: no escaped exception, no reader bug behind a safety net,
no run over the CPU time bound, no allocation past the memory limit.

Seeded and bounded: ``ROBOT_BRIDGE_FUZZ_SEED`` (default 29), ``ROBOT_BRIDGE_FUZZ_CASES`` (default 300
per part) and ``ROBOT_BRIDGE_FUZZ_SECONDS`` (default 20 per part: CI stops a part there, reported);
raise the last two for a longer run.  The counts are written to the terminal and recorded as test
properties.
"""

from __future__ import annotations

import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "test" / "fixtures"
DATA = REPO / "robot_bridge" / "data"
WORKER = Path(__file__).with_name("file_fuzz_worker.py")

SEED = int(os.environ.get("ROBOT_BRIDGE_FUZZ_SEED", "29"))
CASES = int(os.environ.get("ROBOT_BRIDGE_FUZZ_CASES", "300"))
SECONDS = float(os.environ.get("ROBOT_BRIDGE_FUZZ_SECONDS", "20"))
MEMORY_LIMIT = 512 * 1024 * 1024           # bytes: RLIMIT_AS above the warm child's use, and the peak RSS
CPU_BOUND = 2.0                            # s of CPU per case
HANG = 60.0                                # s of wall time before a case counts as hung (2 loaded cores)

ROBOT_SUFFIXES = (".robot.xml", ".kinbody.xml", ".env.xml", ".dae", ".zae", ".urdf")
MESH_SUFFIXES = (".iv", ".wrl", ".vrml", ".stl", ".obj", ".off", ".ply")
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
BAD_NUMBERS = [b"1e308", b"-1e308", b"nan", b"NaN", b"inf", b"-inf", b"-1", b"-2", b"-99999999", b"99999999",
               b"2147483647", b"2147483648", b"4294967295", b"1e40", b"0", b"-0", b"1e-320", b"0.5"]
# Mutations that found bugs, replayed first in every run (source, text, replacement): regressions stay caught
# whatever the seed.
KNOWN = {
    "mesh": [("test/fixtures/urdf/two_quads_mm.iv", b"numVertices [ 4 ]", b"numVertices [ 99999999 ]"),
             ("test/fixtures/urdf/two_quads_mm.iv", b"rotation 0 0 1 1.5707963267948966", b"rotation 0 0 1"),
             ("test/fixtures/urdf/tri_vrml2.wrl", b"0 1 0 ] }", b"0 1 ] }"),
             ("test/fixtures/urdf/tri_vrml2.wrl", b"scale 2 2 2", b"scale 2 2")],
    "load": [("test/fixtures/openrave/3dofrobot.robot.xml", b"<rotationaxis>1 0 0 90<",
              b"<rotationaxis>1e-320 0 0 90<"),
             ("test/fixtures/realworld/collada/openrave_dummies.dae", b'stride="3"', b'stride="0.5"'),
             ("test/fixtures/realworld/collada/openrave_dummies.dae", b'offset="0"/>', b'offset="-1"/>')],
}
COUNT_FIELDS = re.compile(rb"(numVertices\s*\[?\s*|startIndex\s+|count=\"|element \w+ |<count>|"
                          rb"coordIndex\s*\[\s*|materialIndex\s*\[\s*|\A(?:OFF\s+)?)(\d+)")


def _files(root: Path, suffixes, max_bytes: int = 400_000) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(suffixes)
                  and p.stat().st_size <= max_bytes)


def _generated_meshes(folder: Path) -> list[Path]:
    """One small mesh per trimesh format the loader reads (the package has none of its own)."""
    import trimesh

    box = trimesh.creation.box(extents=(1, 2, 3))
    out = []
    for kind in ("stl", "obj", "off", "ply"):
        path = folder / f"box.{kind}"
        data = box.export(file_type=kind, **({"encoding": "ascii"} if kind == "ply" else {}))
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        out.append(path)
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    """1-3 edits of the kinds a hostile author or a broken disk makes."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("flip", "truncate", "lines", "numbers", "numbers", "counts", "counts", "words"))
        if kind == "flip" and data:
            b = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            data = bytes(b)
        elif kind == "truncate" and data:
            data = data[:rng.randrange(len(data))]
        elif kind == "lines":
            lines = data.split(b"\n")
            i = rng.randrange(len(lines))
            j = min(len(lines), i + rng.randint(1, 6))
            if rng.random() < 0.5:
                lines[i:i] = lines[i:j] * rng.randint(1, 3)      # duplicated
            else:
                del lines[i:j]                                    # deleted
            data = b"\n".join(lines)
        elif kind == "numbers":
            spans = [m.span() for m in NUMBER.finditer(data)]
            for a, b in sorted(rng.sample(spans, min(len(spans), rng.randint(1, 5))), reverse=True):
                data = data[:a] + rng.choice(BAD_NUMBERS) + data[b:]
        elif kind == "counts":
            found = list(COUNT_FIELDS.finditer(data))
            if found:
                m = rng.choice(found)
                huge = rng.choice([b"99999999", b"2147483647", b"-1", b"4294967295", b"999999999999"])
                data = data[:m.start(2)] + huge + data[m.end(2):]
            elif len(data) >= 84:                  # binary: a big-endian or little-endian word made huge
                i = rng.choice([80, rng.randrange(0, len(data) - 4) & ~3])
                word = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x05\xf5\xe0\xff",
                                   b"\xff\xe0\xf5\x05"])
                data = data[:i] + word + data[i + 4:]
        elif kind == "words" and data:              # a token repeated: tags, fields, brackets
            i = rng.randrange(len(data))
            j = min(len(data), i + rng.randint(1, 24))
            data = data[:i] + data[i:j] * rng.randint(2, 40) + data[j:]
    return data


@dataclass
class Counts:
    run: int = 0
    loaded: int = 0
    refused: int = 0
    no_line: int = 0
    max_cpu: float = 0.0
    max_wall: float = 0.0
    max_rss_kb: int = 0
    max_vm_kb: int = 0
    base_kb: int = 0
    stopped_early: bool = False
    slow_originals: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def line(self, part: str) -> str:
        return (f"fuzz {part}: seed {SEED}, {self.run} cases run, {self.refused} refused with a typed error "
                f"({self.no_line} without a line), {self.loaded} loaded, {len(self.failures)} failures, "
                f"max CPU {self.max_cpu:.2f} s, max wall {self.max_wall:.2f} s, peak RSS "
                f"{self.max_rss_kb >> 10} MiB, peak address space {self.max_vm_kb >> 10} MiB (RLIMIT_AS: "
                f"{self.base_kb >> 10} MiB after warm-up + {MEMORY_LIMIT >> 20} MiB)"
                + (f"; stopped at the {SECONDS:g} s budget" if self.stopped_early else "")
                + (f"; not mutated, their own read is slow: {', '.join(self.slow_originals)}"
                   if self.slow_originals else ""))


class Worker:
    """The child process the cases run in (restarted after a hang or a crash)."""

    def __init__(self):
        self.proc = None

    def start(self) -> None:
        env = dict(os.environ, ROBOT_BRIDGE_FUZZ_ROOT=str(REPO), OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
        warm_up = [str(FIXTURES / "openrave/3dofrobot.robot.xml"), str(FIXTURES / "urdf/two_quads_mm.iv")]
        self.proc = subprocess.Popen([sys.executable, str(WORKER), str(MEMORY_LIMIT), *warm_up],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=str(REPO))

    def ask(self, case: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write((json.dumps(case) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    code = self.proc.wait()
                    self.proc = None
                    return {"result": "crashed", "detail": f"worker exited with {code}"}
                return json.loads(line)
        self.stop()
        return {"result": "hung", "detail": f"no answer within {HANG:g} s", "wall": HANG, "cpu": 0.0}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def run_cases(sources: list[tuple[str, Path, list[str]]], rng: random.Random, n: int, tmp: Path) -> Counts:
    """Each source (op, file, search path) read unmodified, then the :data:`KNOWN` mutations of it, then
    ``n`` mutated copies of seeded choices among them; a copy is written beside a copy of its source's
    folder-mates (so relative includes and meshes resolve) and read in the worker.  A source whose
    unmodified read takes more than half the CPU bound is left out of the mutations (named in the
    report): the bound is on what mutations cost."""
    counts, worker, start = Counts(), Worker(), time.monotonic()
    bases = {path: path.read_bytes() for _, path, _ in sources}
    try:
        slow = set()
        for op, source, search_path in sources:
            answer = _run_one(counts, worker, op, source, bases[source], search_path, "original", tmp)
            if answer.get("cpu", 0.0) > CPU_BOUND / 2:
                slow.add(source)
                counts.slow_originals.append(f"{source.name} ({answer['cpu']:.1f} s)")
        usable = [s for s in sources if s[1] not in slow]
        for op, source, search_path in sources:
            for name, old, new in KNOWN[op]:
                if source == REPO / name:
                    assert old in bases[source], (name, old)
                    data = bases[source].replace(old, new, 1)
                    _run_one(counts, worker, op, source, data, search_path, "known", tmp)
        for i in range(n if usable else 0):
            if time.monotonic() - start > SECONDS:
                counts.stopped_early = True
                break
            op, source, search_path = rng.choice(usable)
            _run_one(counts, worker, op, source, mutate(bases[source], rng), search_path, f"fuzz{i % 7}", tmp)
    finally:
        worker.stop()
    return counts


def _run_one(counts: Counts, worker: Worker, op: str, source: Path, data: bytes, search_path: list[str],
             tag: str, tmp: Path) -> dict:
    path = _home(source, tmp) / f"{tag}_{source.name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    answer = worker.ask({"op": op, "path": str(path), "search_path": search_path})
    counts.run += 1
    if answer.get("detail", "").startswith("MemoryError"):
        worker.stop()                     # it exits after one: the next case gets a fresh one
    counts.max_cpu = max(counts.max_cpu, answer.get("cpu", 0.0))
    counts.max_wall = max(counts.max_wall, answer.get("wall", 0.0))
    counts.max_rss_kb = max(counts.max_rss_kb, answer.get("maxrss_kb", 0))
    counts.max_vm_kb = max(counts.max_vm_kb, answer.get("vmpeak_kb", 0))
    counts.base_kb = max(counts.base_kb, answer.get("base_kb", 0))
    result = answer["result"]
    problem = None
    if result == "loaded":
        counts.loaded += 1
    elif result == "refused":
        counts.refused += 1
        counts.no_line += not answer["line"]
        if not answer["placed"] or "\n" in answer["detail"]:
            problem = "error without its file, or not one line"
    else:
        problem = result
    if answer.get("maxrss_kb", 0) << 10 > MEMORY_LIMIT:
        problem = f"peak RSS {answer['maxrss_kb'] >> 10} MiB"
    if answer.get("cpu", 0.0) > CPU_BOUND and tag != "original":       # originals: see run_cases
        problem = f"{answer['cpu']:.2f} s of CPU"
    if problem:
        keep = tmp / "failures" / f"{len(counts.failures)}_{path.name}"
        keep.parent.mkdir(exist_ok=True)
        shutil.copy(path, keep)
        counts.failures.append(f"{problem}: {op} {source.name} (kept as {keep}, address space "
                               f"{answer.get('vmpeak_kb', 0) >> 10} MiB): {answer['detail']}\n"
                               f"{answer.get('trace', '')}")
    return answer


def _report(request, record_property, part: str, counts: Counts) -> None:
    line = counts.line(part)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():       # shown whatever -s / -q
            reporter.write_line("\n" + line)
    else:
        print(line, file=sys.__stdout__)
    for name in ("run", "loaded", "refused", "no_line", "max_cpu", "max_wall", "max_rss_kb", "max_vm_kb"):
        record_property(f"fuzz_{part}_{name}", getattr(counts, name))
    record_property(f"fuzz_{part}_failures", len(counts.failures))


def _home(source: Path, tmp: Path) -> Path:
    """Where a mutated copy of ``source`` is written: its folder's copy for the package's own files."""
    try:
        return tmp / source.parent.relative_to(REPO)
    except ValueError:
        return tmp / "elsewhere" / source.parent.name


def _copy_folders(sources, tmp: Path) -> None:
    for folder in {s.parent for s in sources}:
        home = _home(folder / "x", tmp)
        if not home.exists():
            shutil.copytree(folder, home, ignore=shutil.ignore_patterns("*.py", "__pycache__"))


def _own_robot_files() -> list[Path]:
    return [p for p in _files(FIXTURES, ROBOT_SUFFIXES) + _files(DATA, ROBOT_SUFFIXES)
            if "fuzz" not in p.name]


def _own_meshes(tmp: Path) -> list[Path]:
    made = tmp / "generated"
    made.mkdir(exist_ok=True)
    return _files(FIXTURES, MESH_SUFFIXES) + _files(DATA, MESH_SUFFIXES) + _generated_meshes(made)


def _check(counts: Counts) -> None:
    assert counts.run > 0
    assert not counts.failures, f"{len(counts.failures)} failing cases:\n" + "\n".join(counts.failures[:8])


@pytest.mark.timeout(int(2 * SECONDS + 2 * HANG + 60))
def test_mutated_meshes(tmp_path, request, record_property):
    sources = _own_meshes(tmp_path)
    _copy_folders([s for s in sources if s.parent.name != "generated"], tmp_path)
    counts = run_cases([("mesh", s, []) for s in sources], random.Random(SEED), CASES, tmp_path)
    _report(request, record_property, "meshes", counts)
    _check(counts)


@pytest.mark.timeout(int(2 * SECONDS + 2 * HANG + 60))
def test_mutated_robot_files(tmp_path, request, record_property):
    sources = _own_robot_files()
    _copy_folders(sources, tmp_path)
    counts = run_cases([("load", s, []) for s in sources], random.Random(SEED + 1), CASES, tmp_path)
    _report(request, record_property, "robot files", counts)
    _check(counts)


@pytest.mark.timeout(int(2 * SECONDS + 2 * HANG + 60))
def test_mutated_corpus_files(corpus, tmp_path, request, record_property):
    """A seeded sample of the corpus's robots and meshes, read with the corpus's OpenRAVE data as search
    path (a mutated copy lives in a temporary folder, so its own folder is searched too)."""
    rng = random.Random(SEED + 2)
    openrave_data = corpus / "openrave" / "src"
    robots = rng.sample(_files(corpus, ROBOT_SUFFIXES, 200_000), k=24)
    mesh_files = rng.sample(_files(corpus, MESH_SUFFIXES, 200_000), k=16)
    sources = [("load", r, [str(r.parent), str(openrave_data)]) for r in robots]
    sources += [("mesh", m, []) for m in mesh_files]
    counts = run_cases(sources, rng, CASES, tmp_path)
    _report(request, record_property, "corpus", counts)
    _check(counts)
