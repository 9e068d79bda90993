"""``formats.load`` of URDF files gives the same model as before the reader was made faster (issue 33).

The expected models are a pinned fixture (``test/fixtures/urdf/load_dumps.json.gz``), written by this
module from main's code of 2026-12-03 (59b9c56) before the URDF speed-ups:
``python test/formats/test_urdf_load_identity.py --write`` (run it only on code whose models are known
good).  Each model is dumped canonically -- every dataclass field of the robot, its links, geometry,
materials, inertials, joints (origins, axes, every per-DOF array with its dtype and shape, mimic, extras),
warnings and missing meshes -- and compared value by value, floats to 1e-12 (relative above 1).  The
corpus files are the PR2 URDF of the load bench and a few others of different makers (skipped when
../shared/corpus is absent); the generated file is test/fixtures/large_files.py's URDF.  Every corpus
URDF's outcome (loads, or the error type and message) is pinned too, so no check is lost.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
from fixtures import large_files  # noqa: E402

from robot_bridge import formats  # noqa: E402
from robot_bridge.errors import DescriptionError  # noqa: E402

CORPUS = (HERE.parents[1] / ".." / "shared" / "corpus").resolve()
FIXTURE = HERE.parent / "fixtures" / "urdf" / "load_dumps.json.gz"
# corpus files dumped in full: PR2 (the bench's file), a humanoid, a scene, arms, a mimic-rich robot
FULL = ("collada_urdf/collada_urdf/test/pr2.urdf",
        "example-robot-data/robots/talos_data/robots/talos_reduced.urdf",
        "example-robot-data/robots/romeo_description/urdf/romeo.urdf",
        "hpp_tutorial/urdf/kitchen_area.urdf",
        "moveit_resources/panda_description/urdf/panda.urdf",
        "robot_model/urdf/test/test_robot.urdf")
GENERATED_JOINTS = 60
TOL = 1e-12


def dump(value, base: str):
    """A JSON-able canonical form of a model value (paths below ``base`` written relative to it)."""
    if isinstance(value, np.ndarray):
        values = [dump(v, base) for v in value.ravel().tolist()]
        return ["ndarray", str(value.dtype), list(value.shape), values]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: dump(getattr(value, f.name), base)
                                       for f in dataclasses.fields(value)}]
    if isinstance(value, dict):
        return ["dict", [[dump(k, base), dump(v, base)] for k, v in value.items()]]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [dump(v, base) for v in value]]
    if isinstance(value, str):
        return value.replace(base, "<BASE>")
    if value is None or type(value) in (bool, int, float):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        return [type(value).__name__, value.item() if isinstance(value, np.generic) else value]
    raise TypeError(f"cannot dump {type(value).__name__}")


def model_dump(path: Path, base: Path):
    return dump(formats.load(path), str(base))


def outcome(path: Path, base: Path) -> str:
    try:
        formats.load(path)
    except DescriptionError as exc:
        return f"{type(exc).__name__}: {str(exc).replace(str(base), '<BASE>')}"
    return "ok"


def _corpus_urdfs() -> list[str]:
    return sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.urdf"))


def _generated(folder: Path) -> Path:
    path = folder / "generated.urdf"
    large_files.write(path, GENERATED_JOINTS, "urdf")
    return path


def _installed_here(got: dict, want: dict, key: str) -> bool:
    """A mesh the pin (made where its package was not installed) has unresolved, resolved here to the
    installed package's file, found without robot_bridge (fixtures.installed)."""
    from fixtures.installed import installed_file

    if key != "path" or want[key] is not None or not isinstance(got[key], str) or "uri" not in got:
        return False
    return installed_file(str(got["uri"])) == Path(got[key]).resolve()


def differences(got, want, where: str = "") -> list[str]:
    """Where ``got`` differs from ``want`` (floats to TOL, relative above 1)."""
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool) \
            and type(got) is type(want):
        if got == want or abs(got - want) <= TOL * max(1.0, abs(want)):
            return []
        return [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: length {len(got)} != {len(want)}"]
        out = []
        for i, (g, w) in enumerate(zip(got, want)):
            out += differences(g, w, f"{where}[{i}]")
            if len(out) > 20:
                break
        return out
    if isinstance(want, dict) and isinstance(got, dict):
        if list(got) != list(want):
            return [f"{where}: keys {list(got)} != {list(want)}"]
        return [d for k in want if not _installed_here(got, want, k)
                for d in differences(got[k], want[k], f"{where}.{k}")]
    return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]


@pytest.fixture(scope="module")
def expected():
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        return json.load(f)


def test_generated_urdf_loads_as_pinned(expected, tmp_path):
    tmp = tmp_path.resolve()
    got = json.loads(json.dumps(model_dump(_generated(tmp), tmp)))
    assert differences(got, expected["generated"]) == []


@pytest.mark.parametrize("name", FULL)
def test_corpus_urdf_loads_as_pinned(expected, name):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip("corpus not found (../shared/corpus)")
    got = json.loads(json.dumps(model_dump(path, CORPUS)))
    assert differences(got, _on_this_host(expected["corpus"][name])) == []


def _on_this_host(want: list) -> list:
    """The pin was made where example-robot-data was not installed: its package:// meshes unresolved, one
    warning each.  Where this host has one installed (fixtures.installed), it resolves: no warning, not
    missing (its path is checked by _installed_here)."""
    from fixtures.installed import installed_file

    kind, fields = want
    if kind != "Robot":
        return want
    fields = dict(fields)
    missing = fields["missing_meshes"][1]
    installed = {uri for uri in missing if installed_file(uri) is not None}
    fields["missing_meshes"] = [fields["missing_meshes"][0], [u for u in missing if u not in installed]]
    resolved = {f"mesh {uri!r} not found" for uri in installed}
    fields["warnings"] = [fields["warnings"][0], [w for w in fields["warnings"][1] if w not in resolved]]
    return [kind, fields]


def test_every_corpus_urdf_has_its_pinned_outcome(expected):
    if not CORPUS.is_dir():
        pytest.skip("corpus not found (../shared/corpus)")
    got = {name: outcome(CORPUS / name, CORPUS) for name in _corpus_urdfs()}
    assert got == expected["outcomes"]


def _write() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data = {"generated": model_dump(_generated(Path(tmp).resolve()), Path(tmp).resolve()),
                "corpus": {name: model_dump(CORPUS / name, CORPUS) for name in FULL},
                "outcomes": {name: outcome(CORPUS / name, CORPUS) for name in _corpus_urdfs()}}
    with gzip.GzipFile(FIXTURE, "wb", mtime=0) as f:
        f.write(json.dumps(data, sort_keys=False, separators=(",", ":")).encode())


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _write()


def test_a_refused_mesh_names_file_line_and_element(tmp_path):
    """The mesh's element path is found only when its URI is refused (issue 33): the error is the same."""
    from robot_bridge.errors import UnsafeInputError

    (tmp_path / "robot").mkdir()
    path = tmp_path / "robot" / "r.urdf"
    path.write_text('<robot name="r">\n<link name="a">\n<visual name="v">\n<geometry>\n'
                    '<mesh filename="../../outside.stl"/>\n</geometry>\n</visual>\n</link>\n</robot>\n')
    with pytest.raises(UnsafeInputError) as info:
        formats.load(path)
    assert info.value.line == 5
    assert info.value.element == "/robot[@name='r']/link[@name='a']/visual[@name='v']/geometry/mesh"
    assert str(info.value).startswith(f"{path}:5 {info.value.element}: "
                                      "reference '../../outside.stl' resolves to ")
