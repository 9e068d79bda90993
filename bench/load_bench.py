"""Load-speed benchmark: prints one JSON object.

- ``openrave_files_per_s``: every OpenRAVE XML file of the corpus loaded (search path
  corpus/openrave/src), files per second (failures counted in ``openrave_failures``);
- ``largest_openrave_robot_ms``: best-of-N time to load the OpenRAVE XML robot with the most links
  (today pr2 through a COLLADA include, so mostly COLLADA time);
- ``largest_xml_only_robot_ms``: the same for the largest robot without COLLADA includes;
- ``largest_zae_ms``: best-of-N time to load the largest .zae of the corpus (by bytes), with
  and without mesh data (``largest_zae_no_meshes_ms``).

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


MEASUREMENTS = [openrave_corpus_rate, largest_openrave_robot_ms, largest_xml_only_robot_ms, largest_zae_ms]


def main() -> int:
    if not OPENRAVE.is_dir():
        print(json.dumps({"error": f"corpus not found at {CORPUS}"}))
        return 1
    result: dict = {}
    for measure in MEASUREMENTS:
        result.update(measure())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
