"""Load-speed benchmark: prints one JSON object.

- ``openrave_files_per_s``: every OpenRAVE XML file of the corpus loaded (search path
  corpus/openrave/src), files per second (failures counted in ``openrave_failures``);
- ``largest_openrave_robot_ms``: best-of-N time to load the OpenRAVE XML robot with the most links
  (today pr2 through a COLLADA include, so mostly COLLADA time);
- ``largest_xml_only_robot_ms``: the same for the largest robot without COLLADA includes;
- ``largest_zae_ms``: best-of-N time to load the largest .zae of the corpus (by bytes), with
  and without mesh data (``largest_zae_no_meshes_ms``).
- ``collada_generated``: generated COLLADA robots (test/fixtures/large_collada.py: thousands of
  joints, primitives sharing sources, formulas) at two sizes: best-of-N load time (wall and CPU)
  per MB, the ratio of times beside the ratio of sizes (linear: about equal), the geometry pass
  alone, and the same geometry through pycollada when it is importable (else ``"pycollada": "not
  installed"``), and a robot of 5 joints and 1,909 primitives on one shared source (the CATIA
  export of issue 33).

``python bench/load_bench.py collada_generated`` runs only the named measurements.

One function per measurement, each returning a dict merged into the output; add more
(e.g. the largest .zae load) to MEASUREMENTS.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CORPUS = (REPO / ".." / "shared" / "corpus").resolve()
OPENRAVE = CORPUS / "openrave"
DATA = OPENRAVE / "src"

sys.path.insert(0, str(REPO / "test"))
from fixtures import large_collada  # noqa: E402

from robot_bridge.formats import load  # noqa: E402


def _openrave_files() -> list[Path]:
    return sorted(OPENRAVE.rglob("*.xml"))


_LINKS: dict[Path, int] = {}      # file -> link count, filled by openrave_corpus_rate


def openrave_corpus_rate() -> dict:
    files = _openrave_files()
    failures = 0
    start = time.perf_counter()
    for f in files:
        try:
            _LINKS[f] = len(load(f, search_path=[DATA]).links)
        except Exception:  # noqa: BLE001 - counted, the corpus test asserts on them
            failures += 1
    elapsed = time.perf_counter() - start
    return {"openrave_files": len(files), "openrave_failures": failures,
            "openrave_files_per_s": round(len(files) / elapsed, 2)}


def largest_openrave_robot_ms(repeat: int = 3) -> dict:
    sizes = _LINKS or {f: len(load(f, search_path=[DATA]).links) for f in _openrave_files()}
    largest = max(sizes, key=sizes.get)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        load(largest, search_path=[DATA])
        best = min(best, time.perf_counter() - start)
    return {"largest_openrave_robot": str(largest.relative_to(OPENRAVE)),
            "largest_openrave_links": sizes[largest], "largest_openrave_robot_ms": round(best * 1000, 2)}


def largest_xml_only_robot_ms(repeat: int = 3) -> dict:
    """barrettwam-dual (35 links, 34 joints): the largest corpus robot with no COLLADA include."""
    path = DATA / "robots" / "barrettwam-dual.robot.xml"
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        load(path, search_path=[DATA])
        best = min(best, time.perf_counter() - start)
    return {"largest_xml_only_robot_ms": round(best * 1000, 2)}


def largest_zae_ms(repeat: int = 3) -> dict:
    path = max(CORPUS.rglob("*.zae"), key=lambda p: p.stat().st_size)
    out = {"largest_zae": str(path.relative_to(CORPUS)), "largest_zae_bytes": path.stat().st_size}
    for key, options in (("largest_zae_ms", {}), ("largest_zae_no_meshes_ms", {"meshes": False})):
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            load(path, **options)
            best = min(best, time.perf_counter() - start)
        out[key] = round(best * 1000, 2)
    return out


def _best(fn, repeat: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def _our_geometry(path: Path) -> int:
    """Every <geometry> of the file through our reader's geometry pass: triangle count."""
    from robot_bridge.formats.collada.document import Document
    from robot_bridge.formats.collada.geometry import read_geometry
    from robot_bridge.formats.xmlsafe import parse_file
    doc = Document(parse_file(path), str(path))
    return sum(len(g.shape.triangles) for el in doc.root.iter("geometry")
               for g in read_geometry(doc, el, {}, str(path), lambda _msg: None))


def _pycollada_geometry(path: Path) -> int:
    import collada as pycollada   # the COLLADA reader trimesh uses
    mesh = pycollada.Collada(str(path), ignore=[pycollada.common.DaeUnsupportedError,
                                                pycollada.common.DaeBrokenRefError])
    return sum(len(prim.triangleset().vertex_index) for geom in mesh.geometries for prim in geom.primitives)


def collada_generated(repeat: int = 3, sizes: tuple[int, int] = (250, 1000)) -> dict:
    """Generated COLLADA robots of ``sizes`` joints (and as many primitives on one shared source)."""
    import tempfile
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for joints in sizes:
            path = Path(tmp) / f"robot_{joints}.dae"
            size = large_collada.write(path, joints, shared_primitives=joints)
            load(path)                                            # warm (imports)
            seconds = _best(lambda: load(path), repeat)
            cpu = _best(lambda: load(path), repeat, time.process_time)    # what a loaded host cannot skew
            geometry = _best(lambda: _our_geometry(path), repeat)
            run = {"joints": joints, "bytes": size, "load_s": round(seconds, 3),
                   "load_s_per_mb": round(seconds / (size / 1e6), 3), "load_cpu_s": round(cpu, 3),
                   "load_cpu_s_per_mb": round(cpu / (size / 1e6), 3), "geometry_s": round(geometry, 3)}
            try:
                triangles = _pycollada_geometry(path)
            except ImportError:
                out["pycollada"] = "not installed"
            else:
                pyc = _best(lambda: _pycollada_geometry(path), repeat)
                run.update(pycollada_geometry_s=round(pyc, 3), geometry_vs_pycollada=round(geometry / pyc, 2),
                           triangles_agree=triangles == _our_geometry(path))
            runs.append(run)
        out["collada_generated"] = runs
        out["collada_size_ratio"] = round(runs[1]["bytes"] / runs[0]["bytes"], 2)
        out["collada_time_ratio"] = round(runs[1]["load_s"] / runs[0]["load_s"], 2)
        out["collada_cpu_time_ratio"] = round(runs[1]["load_cpu_s"] / runs[0]["load_cpu_s"], 2)
        # the CATIA export of issue 33 (5 joints, 1,909 primitives on shared sources) took 413 s
        path = Path(tmp) / "catia_like.dae"
        size = large_collada.write(path, 5, shared_primitives=1909)
        seconds = _best(lambda: load(path), repeat)
        out["collada_1909_primitives"] = {"bytes": size, "load_s": round(seconds, 3)}
    return out


MEASUREMENTS = [openrave_corpus_rate, largest_openrave_robot_ms, largest_xml_only_robot_ms, largest_zae_ms,
                collada_generated]


def main() -> int:
    chosen = [m for m in MEASUREMENTS if m.__name__ in sys.argv[1:]] or MEASUREMENTS
    if not OPENRAVE.is_dir() and chosen != [collada_generated]:
        print(json.dumps({"error": f"corpus not found at {CORPUS}"}))
        return 1
    result: dict = {}
    for measure in chosen:
        result.update(measure())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
