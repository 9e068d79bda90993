"""Load-speed benchmark: prints one JSON object.

- ``openrave_files_per_s``: every OpenRAVE XML file of the corpus loaded (search path
  corpus/openrave/src), files per second (failures counted in ``openrave_failures``);
- ``largest_openrave_robot_ms``: best-of-N time to load the OpenRAVE XML robot with the most links
  (today pr2 through a COLLADA include, so mostly COLLADA time);
- ``largest_xml_only_robot_ms``: the same for the largest robot without COLLADA includes;
- ``largest_zae_ms``: best-of-N time to load the largest .zae of the corpus (by bytes), with
  and without mesh data (``largest_zae_no_meshes_ms``).
- ``collada_generated``: generated COLLADA robots (test/fixtures/large_collada.py: thousands of
  joints, primitives sharing sources, formulas) at two sizes (GENERATED_SIZES joints): load time per
  MB and the ratio of times beside the ratio of sizes, measured as ``generated`` (below; 9 rounds),
  the geometry pass alone (CPU time: reading, parsing, every <geometry>'s meshes), and the same
  geometry through pycollada when it is importable (else ``"pycollada": "not installed"``; the two
  interleaved, least of N each), and a robot of 5 joints and 1,909 primitives on one shared source
  (the CATIA export of issue 33).

- ``generated``: generated URDF and OpenRAVE XML robots (test/fixtures/large_files.py) at two sizes
  (GENERATED_SIZES joints): time per MB and the CPU-time ratio beside the size ratio (linear: about
  equal; goal: ``cpu_ratio_over_size_ratio`` within 1.2).  Both sizes are loaded interleaved, 15
  rounds, in a *steady process* (:func:`_steady_loads`: the process's own objects frozen out of the
  garbage collector's reach with ``gc.freeze()``, as in a node that loads its file after importing
  everything, and ``gc.collect()`` before each load, so every load starts from the same heap; the
  collector stays on during the load).  The headline is the median over the rounds of each round's
  ratio (the two loads of a round run one after the other, so a host's drifting load hits them
  alike); beside it the ratio of the least and of the median CPU times, lxml's parse of the same two
  files measured alike (``xml_parse_*``: what the host does to a linear task in this run; COLLADA's is
  not one, see :func:`_linearity`) and, as a
  diagnostic only, the ratio with the collector disabled during the load
  (``gc_disabled_cpu_ratio_over_size_ratio``); ``gc_collections`` counts the collections per
  generation inside each load (see :func:`_linearity`).
- ``urdf_peers``: the PR2 URDF of the corpus and the generated URDF through ``formats.load`` (with the
  model checks) and ``urdf.read`` (the reader alone) against ``yourdfpy.URDF.load`` (meshes not
  loaded; with and without its scene graph) and pinocchio's ``buildModelFromUrdf``, least CPU ms of N
  rounds, each round running every reader once (interleaved), with the ratios (goal: ``load`` within
  1.0x of yourdfpy).

Peers (pycollada, yourdfpy) are not dependencies: install them into a folder of their own and pass it,
``python -m pip install --target /tmp/peers pycollada yourdfpy`` then
``python bench/load_bench.py --peers /tmp/peers`` (appended to sys.path, so this environment's numpy and
lxml still win).  A peer that cannot be imported is skipped with the reason in the output.

``python bench/load_bench.py collada_generated urdf_peers`` runs only the named measurements.

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
from fixtures import large_collada, large_files  # noqa: E402

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


CPU = time.process_time
# joints of the two generated files of each format (``generated``, ``collada_generated``)
GENERATED_SIZES = (250, 1000)


def _best(fn, repeat: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def _best_of_each(fns, repeat: int, clock=time.perf_counter) -> list[float]:
    """Least time of each of ``fns`` over ``repeat`` rounds, each round running every one once, starting
    at the next one each round (none always runs right after the same other one, with its caches)."""
    best = [float("inf")] * len(fns)
    for r in range(repeat):
        for k in range(len(fns)):
            i = (r + k) % len(fns)
            start = clock()
            fns[i]()
            best[i] = min(best[i], clock() - start)
    return best


def _steady_loads(loads: list, repeat: int) -> list[dict]:
    """Time each of ``loads`` (the same reader on files of growing size) ``repeat`` times, interleaved
    (each round runs every one once, starting at the next one each round), in a *steady process*:

    - every load runs once first (imports, per-process caches);
    - then ``gc.collect()`` and ``gc.freeze()``: the objects of the process as it is (the imported
      modules, numpy, lxml, the bench) go to the permanent generation, as in a node that loads its file
      after importing everything it needs.  Without it, CPython's first full (generation 2) collection
      inside a load traverses that whole heap: a cost of the process (~15 ms here, once per 25 % growth
      of the long-lived objects), not of the file, which fell inside a 1,000-joint load and not inside a
      250-joint one and made their ratio swing (1.23x to 1.64x the size ratio between runs);
    - ``gc.collect()`` before each timed load, so each starts from the same heap.  The collector stays
      on during the load: every collection of the objects the load itself creates, and a full one once
      they are numerous enough, is counted in its time (``gc_collections``: per generation, the last
      round).

    Each row: least wall and CPU seconds, median CPU seconds, the collections, and the least CPU seconds
    with the collector disabled during the load (``cpu_s_gc_disabled``: a diagnostic of the reader's own
    work, never the headline: the collector's work on the objects a load creates is a real cost)."""
    import gc
    import statistics
    for fn in loads:
        fn()
    collections = [0, 0, 0]

    def count(phase, info):
        if phase == "stop":
            collections[info["generation"]] += 1

    gc.collect()
    gc.freeze()
    gc.callbacks.append(count)
    rows = [{"wall": [], "cpu": [], "nogc": [], "collections": None} for _ in loads]
    try:
        for r in range(repeat):
            for k in range(len(loads)):
                i = (r + k) % len(loads)
                for disabled in (False, True):
                    gc.collect()
                    collections[:] = [0, 0, 0]
                    if disabled:
                        gc.disable()
                    start, start_cpu = time.perf_counter(), CPU()
                    loads[i]()
                    wall, cpu = time.perf_counter() - start, CPU() - start_cpu
                    gc.enable()
                    if disabled:
                        rows[i]["nogc"].append(cpu)
                    else:
                        rows[i]["wall"].append(wall)
                        rows[i]["cpu"].append(cpu)
                        rows[i]["collections"] = list(collections)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()
    return [{"wall_s": min(r["wall"]), "cpu_s": min(r["cpu"]), "cpu_s_median": statistics.median(r["cpu"]),
             "cpu_s_rounds": r["cpu"], "cpu_s_gc_disabled": min(r["nogc"]),
             "gc_collections": r["collections"]} for r in rows]


def _parse_xml(path: Path) -> None:
    from robot_bridge.formats import xmlsafe
    xmlsafe.parse_bytes(path.read_bytes(), file=path)


def _linearity(runs: list[dict], measured: list[dict], parse: list[dict]) -> dict:
    """Rows of ``runs`` (joints, bytes) completed with ``measured`` (:func:`_steady_loads` of the loads),
    and the ratios of the larger to the smaller, each divided by the size ratio:

    - ``cpu_ratio_over_size_ratio`` (the headline): the median over the rounds of each round's ratio (a
      round's two loads run one right after the other, so the host's load, which drifts over a run, hits
      them alike);
    - ``least_cpu_ratio_over_size_ratio``: the ratio of the least CPU times.  On a busy host it leans
      above the truth: a short load finds a quiet moment among N more often than a load 4x longer;
    - ``median_cpu_ratio_over_size_ratio``, ``gc_disabled_cpu_ratio_over_size_ratio`` (a diagnostic);
    - ``xml_parse_*``: the same measurement (``parse``) of lxml parsing the same files: for URDF and
      OpenRAVE XML (many small elements; 1.02 on a quiet host) how far from 1.0 this host puts a linear
      task in this run.  Not for the generated COLLADA files: lxml itself parses the 1,000-joint one
      1.4-1.6x slower per byte than the 250-joint one, repeatably (cause not found; not its long
      ``float_array`` text: one text of 2.9 MB parses at the same speed per byte as 45 KB)."""
    import statistics
    for run, m in zip(runs, measured):
        mb = run["bytes"] / 1e6
        run.update(load_s=round(m["wall_s"], 4), load_s_per_mb=round(m["wall_s"] / mb, 3),
                   load_cpu_s=round(m["cpu_s"], 4), load_cpu_s_per_mb=round(m["cpu_s"] / mb, 3),
                   load_cpu_s_median=round(m["cpu_s_median"], 4),
                   load_cpu_s_gc_disabled=round(m["cpu_s_gc_disabled"], 4),
                   gc_collections=m["gc_collections"])
    size_ratio = runs[-1]["bytes"] / runs[0]["bytes"]

    def paired(rows) -> float:
        return statistics.median(b / a for a, b in zip(rows[0]["cpu_s_rounds"], rows[-1]["cpu_s_rounds"]))

    small, large = measured[0], measured[-1]
    return {"runs": runs, "size_ratio": round(size_ratio, 2),
            "time_ratio": round(large["wall_s"] / small["wall_s"], 2),
            "cpu_time_ratio": round(paired(measured), 2),
            "cpu_ratio_over_size_ratio": round(paired(measured) / size_ratio, 2),
            "least_cpu_ratio_over_size_ratio": round(large["cpu_s"] / small["cpu_s"] / size_ratio, 2),
            "median_cpu_ratio_over_size_ratio": round(
                large["cpu_s_median"] / small["cpu_s_median"] / size_ratio, 2),
            "gc_disabled_cpu_ratio_over_size_ratio": round(
                large["cpu_s_gc_disabled"] / small["cpu_s_gc_disabled"] / size_ratio, 2),
            "xml_parse_cpu_ratio_over_size_ratio": round(paired(parse) / size_ratio, 2),
            "xml_parse_least_cpu_ratio_over_size_ratio": round(
                parse[-1]["cpu_s"] / parse[0]["cpu_s"] / size_ratio, 2)}


def _our_geometry(path: Path) -> int:
    """Every <geometry> of the file through our reader's geometry pass: triangle count."""
    from robot_bridge.formats.collada import open_document
    from robot_bridge.formats.collada.geometry import read_geometry
    doc = open_document(path)     # parsed as the reader parses it (read, namespace, ids)
    return sum(len(g.shape.triangles) for el in doc.root.iter("geometry")
               for g in read_geometry(doc, el, {}, str(path), lambda _msg: None))


def _pycollada_geometry(path: Path) -> int:
    import collada as pycollada   # the COLLADA reader trimesh uses
    mesh = pycollada.Collada(str(path), ignore=[pycollada.common.DaeUnsupportedError,
                                                pycollada.common.DaeBrokenRefError])
    # polylists / polygons triangulated (as ours are); a TriangleSet is one already
    return sum(len((prim.triangleset() if hasattr(prim, "triangleset") else prim).vertex_index)
               for geom in mesh.geometries for prim in geom.primitives)


def collada_generated(repeat: int = 3, sizes: tuple[int, int] = GENERATED_SIZES) -> dict:
    """Generated COLLADA robots of ``sizes`` joints (and as many primitives on one shared source): whole
    loads of both sizes interleaved in a steady process (:func:`_steady_loads`, 6 more rounds than
    ``repeat``), then each file's geometry pass against pycollada's."""
    import tempfile
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs, paths = [], []
        for joints in sizes:
            path = Path(tmp) / f"robot_{joints}.dae"
            size = large_collada.write(path, joints, shared_primitives=joints)
            runs.append({"joints": joints, "bytes": size})
            paths.append(path)
        linear = _linearity(runs, _steady_loads([lambda p=p: load(p) for p in paths], repeat + 6),
                            _steady_loads([lambda p=p: _parse_xml(p) for p in paths], repeat + 6))
        for run, path in zip(runs, paths):
            try:
                triangles = _pycollada_geometry(path)
            except ImportError as exc:
                out["pycollada"] = f"skipped: {exc}"
                geometry = _best(lambda: _our_geometry(path), repeat, CPU)       # in-process: CPU time
                run["geometry_cpu_s"] = round(geometry, 3)
            else:
                # interleaved, so load on the host hits both alike
                ours, peer = (lambda: _our_geometry(path)), (lambda: _pycollada_geometry(path))
                geometry, pyc = _best_of_each([ours, peer], repeat + 2, CPU)
                run.update(geometry_cpu_s=round(geometry, 3), pycollada_geometry_cpu_s=round(pyc, 3),
                           geometry_vs_pycollada=round(geometry / pyc, 2),
                           triangles_agree=triangles == _our_geometry(path))
        out["collada_generated"] = runs
        out.update({f"collada_{key}": value for key, value in linear.items() if key != "runs"})
        # the CATIA export of issue 33 (5 joints, 1,909 primitives on shared sources) took 413 s
        path = Path(tmp) / "catia_like.dae"
        size = large_collada.write(path, 5, shared_primitives=1909)
        seconds = _best(lambda: load(path), repeat)
        out["collada_1909_primitives"] = {"bytes": size, "load_s": round(seconds, 3)}
    return out


def generated(repeat: int = 15, sizes: tuple[int, int] = GENERATED_SIZES) -> dict:
    """Generated URDF and OpenRAVE XML robots of ``sizes`` joints: time per MB and linearity (both sizes
    timed interleaved in a steady process: :func:`_steady_loads`)."""
    import tempfile
    out: dict = {}
    for fmt, suffix in (("urdf", ".urdf"), ("openrave", ".robot.xml")):
        with tempfile.TemporaryDirectory() as tmp:
            runs, paths = [], []
            for joints in sizes:
                path = Path(tmp) / f"robot_{joints}{suffix}"
                runs.append({"joints": joints, "bytes": large_files.write(path, joints, fmt)})
                paths.append(path)
            measured = _steady_loads([lambda p=p: load(p) for p in paths], repeat)
            parse = _steady_loads([lambda p=p: _parse_xml(p) for p in paths], repeat)
        out[f"{fmt}_generated"] = _linearity(runs, measured, parse)
    return out


def _peer(name: str):
    """The module ``name``, or the reason it cannot be used (a string)."""
    import importlib
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any import failure: the peer is skipped, the reason kept
        return f"skipped: {type(exc).__name__}: {exc}"


def _pr2_urdf(folder: Path) -> Path | None:
    """The corpus PR2 URDF without its leading comments before ``<?xml ...?>`` (which our reader and
    urdfdom tolerate, but yourdfpy's and pinocchio's parsers reject), so every peer reads the same bytes."""
    src = CORPUS / "collada_urdf" / "collada_urdf" / "test" / "pr2.urdf"
    if not src.is_file():
        return None
    data = src.read_bytes()
    start = data.find(b"<?xml")
    path = folder / "pr2.urdf"
    path.write_bytes(data[start:] if start >= 0 else data)
    return path


def urdf_peers(repeat: int = 15) -> dict:
    """PR2 and a generated URDF: ours against yourdfpy and pinocchio (least CPU time of ``repeat`` rounds,
    each running every reader once: all run in this process, interleaved, so a loaded host skews them less
    than wall time or one reader's block after another's)."""
    import tempfile

    from robot_bridge.formats import urdf
    yourdfpy, pinocchio = _peer("yourdfpy"), _peer("pinocchio")
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = {"pr2": _pr2_urdf(Path(tmp))}
        generated_path = Path(tmp) / "generated.urdf"
        large_files.write(generated_path, 250, "urdf")
        files["generated_250_joints"] = generated_path
        for label, path in files.items():
            if path is None:
                out[f"urdf_{label}"] = "skipped: corpus not found"
                continue
            load(path)
            # every reader once per round, rounds repeated: a host's load changing over the run hits
            # them alike (least CPU time of each over the rounds)
            fns = {"load": lambda: load(path), "read": lambda: urdf.read(path)}
            if isinstance(yourdfpy, str):
                skipped = {"yourdfpy": yourdfpy}
            else:
                kw = dict(load_meshes=False, load_collision_meshes=False)
                fns["yourdfpy"] = lambda: yourdfpy.URDF.load(str(path), build_scene_graph=False, **kw)
                fns["yourdfpy_scene_graph"] = lambda: yourdfpy.URDF.load(str(path), **kw)
                skipped = {}
            if isinstance(pinocchio, str):
                skipped["pinocchio"] = pinocchio
            else:
                fns["pinocchio"] = lambda: pinocchio.buildModelFromUrdf(str(path))
            ms = dict(zip(fns, (round(s * 1000, 2) for s in _best_of_each(list(fns.values()), repeat, CPU))))
            row = {"bytes": path.stat().st_size, "load_ms": ms["load"], "read_ms": ms["read"], **skipped}
            if "yourdfpy" in ms:
                row["yourdfpy_ms"] = ms["yourdfpy"]
                row["yourdfpy_scene_graph_ms"] = ms["yourdfpy_scene_graph"]
                row["load_over_yourdfpy"] = round(row["load_ms"] / row["yourdfpy_ms"], 2)
                row["load_over_yourdfpy_scene_graph"] = round(row["load_ms"] / row["yourdfpy_scene_graph_ms"],
                                                              2)
                row["read_over_yourdfpy"] = round(row["read_ms"] / row["yourdfpy_ms"], 2)
            if "pinocchio" in ms:
                row["pinocchio_ms"] = ms["pinocchio"]
                row["load_over_pinocchio"] = round(row["load_ms"] / row["pinocchio_ms"], 2)
            out[f"urdf_{label}"] = row
    return out


MEASUREMENTS = [openrave_corpus_rate, largest_openrave_robot_ms, largest_xml_only_robot_ms, largest_zae_ms,
                collada_generated, generated, urdf_peers]
NEEDS_NO_CORPUS = {collada_generated, generated}


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measurements", nargs="*", help="names of measurements to run (default: all)")
    parser.add_argument("--peers", action="append", default=[],
                        help="a folder holding pycollada / yourdfpy (pip install --target); appended to "
                        "sys.path")
    args = parser.parse_args()
    sys.path.extend(str(Path(p).resolve()) for p in args.peers)
    chosen = [m for m in MEASUREMENTS if m.__name__ in args.measurements] or MEASUREMENTS
    if not OPENRAVE.is_dir() and not set(chosen) <= NEEDS_NO_CORPUS:
        print(json.dumps({"error": f"corpus not found at {CORPUS}"}))
        return 1
    result: dict = {}
    for measure in chosen:
        result.update(measure())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
