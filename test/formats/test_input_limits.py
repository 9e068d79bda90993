"""Every reader checks a file's size before reading it (issue 29): sparse files far over the limits are
refused quickly, with a typed error naming the file and the limit, without the process's memory growing
(measured in a subprocess: ru_maxrss after the loads against before, under an address-space limit of
512 MB above the imports so a regression fails instead of swapping the machine); and an OpenRAVE include
chain or an object mapping's body files that together exceed their limit are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from robot_bridge import errors as E
from robot_bridge.formats import limits, load
from robot_bridge.world import load_mapping

from fixtures.hostile_cases import openrave, urdf  # noqa: E402

GB = 1 << 30
VALID_BODY = ('<KinBody name="box"><Body name="b"><Geom type="box"><Extents>0.1 0.1 0.1</Extents></Geom>'
              '</Body></KinBody>\n')


def _sparse(path: Path, head: bytes, size: int) -> Path:
    """``head`` then a hole up to ``size`` bytes (no disk used)."""
    with open(path, "wb") as f:
        f.write(head)
    os.truncate(path, size)
    return path


# Each case: (what is loaded, how) -> the subprocess runs them all and reports type, message, seconds.
_CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
from robot_bridge.formats import load, urdf, srdf, xmlsafe  # noqa: F401  (all imports before the baseline)
from robot_bridge.world import load_mapping
import lxml.etree, numpy, yaml  # noqa: F401

def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0

budget = 512 << 20
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + budget, resource.RLIM_INFINITY))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
results = []
for kind, path in json.loads(sys.argv[1]):
    start = time.perf_counter()
    try:
        if kind == "load":
            load(path)
        elif kind == "srdf":
            srdf.read_srdf(path)
        elif kind == "published":
            urdf.read_published(path)
        elif kind == "mapping":
            load_mapping(path)
        outcome = ("loaded", "")
    except MemoryError:
        outcome = ("MemoryError", "")
    except Exception as exc:
        outcome = (type(exc).__name__, str(exc))
    results.append([path, *outcome, time.perf_counter() - start])
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(json.dumps({"results": results, "grown": grown}))
"""


def test_sparse_files_over_the_limits_are_refused_before_reading(tmp_path):
    big = int(1.5 * GB)
    desc = tmp_path / "desc"
    desc.mkdir()
    urdf_head = urdf().encode()[:-len(b"</robot>\n")] + b"<!--"
    cases = [
        ("load", _sparse(desc / "big.urdf", urdf_head, big), "MAX_XML_BYTES"),
        ("load", _sparse(desc / "big.robot.xml", urdf_head, 200 << 20), "MAX_XML_BYTES"),
        ("load", _sparse(desc / "big.xml", urdf_head, 200 << 20), "MAX_XML_BYTES"),
        ("load", _sparse(desc / "big.dae", b'<?xml version="1.0"?>\n<COLLADA><!--', big), "MAX_XML_BYTES"),
        ("load", _sparse(desc / "big.zae", b"PK\x03\x04", big), "MAX_ZAE_ARCHIVE_BYTES"),
        ("srdf", _sparse(desc / "big.srdf", b'<robot name="r"><!--', big), "MAX_XML_BYTES"),
        ("published", _sparse(desc / "saved.yaml", b"data: '", big), "MAX_XML_BYTES"),
        ("mapping", _sparse(desc / "objects.yaml", b"classes:\n  a: {file: a.kinbody.xml}\n#", 600 << 20),
         "MAX_OBJECTS_YAML_BYTES"),
    ]
    # an include of an oversized file: named as the file refused
    _sparse(desc / "huge.kinbody.xml", b'<KinBody name="huge"><!--', big)
    (desc / "inc.robot.xml").write_text(openrave(BODYEXTRA='<KinBody file="huge.kinbody.xml"/>'))
    cases.append(("load", desc / "inc.robot.xml", "huge.kinbody.xml: XML document is 1610612736 bytes"))
    # a mapping naming an oversized body file
    _sparse(desc / "huge_body.kinbody.xml", b'<KinBody name="huge"><!--', big)
    (desc / "bodies.yaml").write_text("classes:\n  can: {file: huge_body.kinbody.xml}\n")
    cases.append(("mapping", desc / "bodies.yaml", "huge_body.kinbody.xml"))

    arg = json.dumps([[kind, str(path)] for kind, path, _ in cases])
    code_root = str(Path(limits.__file__).resolve().parents[2])          # the robot_bridge under test
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [code_root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for (kind, path, named), (_p, error, message, seconds) in zip(cases, report["results"]):
        assert error in ("UnsafeInputError", "SchemaError"), (path.name, error, message)
        assert path.name in message and named in message, message
        if named.startswith("MAX_"):
            assert error == "UnsafeInputError" and "allowed" in message, message
        assert seconds < 5.0, (path.name, seconds)          # generous: a stat, not a read of gigabytes
    # the refusals together grew the peak RSS by less than one file's worth of the smallest case
    assert report["grown"] < 64 << 20, report["grown"]


def _chain(folder: Path, count: int, pad: int) -> Path:
    """r.robot.xml including k0.kinbody.xml including k1 ... each ~``pad`` bytes (a comment)."""
    for i in range(count):
        inner = f'<KinBody file="k{i + 1}.kinbody.xml"/>' if i + 1 < count else ""
        (folder / f"k{i}.kinbody.xml").write_text(
            f'<KinBody name="k{i}"><!--{"x" * pad}-->{inner}</KinBody>\n')
    p = folder / "r.robot.xml"
    p.write_text(openrave(BODYEXTRA='<KinBody file="k0.kinbody.xml"/>'))
    return p


def test_include_chain_summing_over_the_limit_is_refused(tmp_path, monkeypatch):
    """Each file is far under MAX_XML_BYTES; together they pass MAX_INCLUDE_TOTAL_BYTES (lowered here to keep
    the files small): refused at the include that crosses it, naming that file and the limit."""
    path = _chain(tmp_path, 6, 10_000)
    robot = load(path)                                        # within the default limit: loads
    assert "j1" in robot.joints
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    monkeypatch.setattr(limits, "MAX_INCLUDE_TOTAL_BYTES", total - 5_000)
    with pytest.raises(E.UnsafeInputError) as info:
        load(path)
    text = str(info.value)
    assert "k5.kinbody.xml" in text and "MAX_INCLUDE_TOTAL_BYTES" in text, text
    monkeypatch.setattr(limits, "MAX_INCLUDE_TOTAL_BYTES", total)
    load(path)                                                # exactly at the limit: loads


def test_include_chain_counts_collada_includes(tmp_path, monkeypatch):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "collada" / "formula.dae"
    (tmp_path / "arm.dae").write_bytes(fixture.read_bytes())
    path = tmp_path / "r.robot.xml"
    path.write_text('<Robot name="r" file="arm.dae"/>')
    load(path)
    monkeypatch.setattr(limits, "MAX_INCLUDE_TOTAL_BYTES", fixture.stat().st_size)   # + the root file: over
    with pytest.raises(E.UnsafeInputError, match="arm.dae.*MAX_INCLUDE_TOTAL_BYTES"):
        load(path)


def test_mapping_body_files_together_are_bounded(tmp_path, monkeypatch):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.kinbody.xml").write_text(VALID_BODY)
    mapping = tmp_path / "objects.yaml"
    mapping.write_text("classes:\n  a: {file: a.kinbody.xml}\n  b: {file: b.kinbody.xml}\n"
                       "  c: {file: c.kinbody.xml}\n")
    assert sorted(load_mapping(mapping).classes) == ["a", "b", "c"]
    monkeypatch.setattr(limits, "MAX_OBJECT_BODIES_TOTAL_BYTES", 2 * len(VALID_BODY))
    with pytest.raises(E.SchemaError) as info:
        load_mapping(mapping)
    text = str(info.value)
    assert "objects.yaml" in text and "c.kinbody.xml" in text and "MAX_OBJECT_BODIES_TOTAL_BYTES" in text


def test_zae_member_over_the_limit_is_refused_from_its_header(tmp_path, monkeypatch):
    """The root document's declared uncompressed size is checked before inflating it."""
    monkeypatch.setattr(limits, "MAX_XML_BYTES", 1 << 16)
    path = tmp_path / "r.zae"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("robot.dae", b"<COLLADA>" + b" " * (1 << 17) + b"</COLLADA>")
    with pytest.raises(E.UnsafeInputError, match="robot.dae.*MAX_XML_BYTES"):
        load(path)


def test_limits_module_documents_every_limit():
    """One place: every MAX_* constant of limits.py is described in its docstring."""
    names = [n for n in vars(limits) if n.startswith("MAX_")]
    assert len(names) >= 8
    for name in names:
        assert f"``{name}``" in limits.__doc__, name



def test_a_file_whose_size_lies_is_read_no_further_than_the_limit(tmp_path):
    """/proc files report size 0 and hold more: the read stops at limit + 1 bytes and is refused."""
    status = Path("/proc/self/status")
    if not status.is_file() or status.stat().st_size != 0:
        pytest.skip("needs Linux /proc")
    with pytest.raises(E.UnsafeInputError, match=r"status: XML document grew beyond the 64 bytes allowed"):
        limits.bounded_read(status, 64, "XML document")
    assert limits.bounded_read(status, 1 << 20, "XML document").startswith(b"Name:")
