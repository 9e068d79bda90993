"""Reader fuzzing: mutated real files (tree edits and raw byte edits) and generated documents.

Whatever the input, ``robot_bridge.formats.load`` returns a Robot or raises a DescriptionError
subclass with a one-line message; the per-input time bound is the profile's deadline.
"""

from __future__ import annotations

import copy
import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from robot_bridge.errors import DescriptionError
from robot_bridge.formats import _reader, load

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "test" / "fixtures"
BASES = {   # format -> (reader module, real files to mutate, suffix)
    "openrave": ("openrave_xml", [FIXTURES / "openrave" / "3dofrobot.robot.xml",
                                  REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml"], ".robot.xml"),
    "collada": ("collada", [FIXTURES / "collada" / "formula.dae", FIXTURES / "collada" / "sensors.dae"],
                ".dae"),
    "urdf": ("urdf", [FIXTURES / "hardware" / "lwa_arm.urdf"], ".urdf"),
    "srdf": ("srdf", [REPO / "robot_bridge" / "data" / "lwa3_gripper.srdf"], ".srdf"),
}
FUZZ = settings.get_profile("fuzz")
_TMP = tempfile.TemporaryDirectory(prefix="robot_bridge_fuzz_")

VALUES = st.one_of(
    st.sampled_from(["", "nan", "NaN 0 0", "1e400", "-1e400 0 0", "0", "0 0 0", "0 0 0 0", "1 2", "a b c",
                     "-0", "1e-320", "999999999", "1 0 0 0 1 0 0 0 1", "2 0 0 0 1 0 0 0 1",
                     "../../etc/passwd", "/etc/passwd", "package://nope/x.stl", "file:///etc/hostname",
                     "#nonexistent",
                     "kmodel/j1", "j1*2", "polyroots2(1,0,-1)", "true", "false", "revolute", "fixed", "hinge",
                     "slider", "spherical"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.lists(st.floats(-10, 10), min_size=1, max_size=9).map(lambda v: " ".join(map(str, v))),
    st.text(st.characters(exclude_categories=("Cc", "Cs", "Cn")), max_size=20))


def _base_trees(fmt: str) -> list[etree._ElementTree]:
    return [etree.parse(str(p)) for p in BASES[fmt][1] if p.is_file()]


_TREES = {fmt: _base_trees(fmt) for fmt in BASES}


@st.composite
def mutated(draw, fmt: str) -> bytes:
    """A base file with 1-4 tree edits, then optionally 0-2 raw byte edits."""
    trees = _TREES[fmt]
    root = copy.deepcopy(draw(st.sampled_from(trees)).getroot())
    for _ in range(draw(st.integers(1, 4))):
        elements = [e for e in root.iter() if isinstance(e.tag, str)]
        el = draw(st.sampled_from(elements))
        op = draw(st.sampled_from(["text", "attr", "delete", "duplicate", "move", "rename"]))
        if op == "text":
            el.text = draw(VALUES)
        elif op == "attr":
            names = list(el.attrib) + ["name", "type", "file", "joint", "link", "url", "sid", "filename"]
            el.set(draw(st.sampled_from(names)), draw(VALUES))
        elif op == "delete" and el is not root:
            el.getparent().remove(el)
        elif op == "duplicate" and el is not root:
            el.addnext(copy.deepcopy(el))
        elif op == "move" and el is not root:
            target = draw(st.sampled_from(elements))
            if el not in target.iterancestors() and target is not el:
                target.append(el)
        elif op == "rename":
            el.tag = draw(st.sampled_from(sorted({e.tag for e in elements})))
    data = etree.tostring(root)
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(data)))
        j = draw(st.integers(i, min(len(data), i + 16)))
        data = data[:i] + draw(st.binary(max_size=8)) + data[j:]
    return data


def _generated_tags(fmt: str) -> list[str]:
    return sorted({e.tag for t in _TREES[fmt] for e in t.getroot().iter() if isinstance(e.tag, str)})


@st.composite
def generated(draw, fmt: str) -> bytes:
    """A random document from the format's own vocabulary (tags and attribute names)."""
    tags = _generated_tags(fmt)
    root_tag = _TREES[fmt][0].getroot().tag

    def grow(parent, depth: int) -> None:
        for _ in range(draw(st.integers(0, 4 if depth < 4 else 0))):
            child = etree.SubElement(parent, draw(st.sampled_from(tags)))
            for _a in range(draw(st.integers(0, 2))):
                child.set(draw(st.sampled_from(["name", "type", "file", "link", "joint", "url", "sid"])),
                          draw(VALUES))
            if draw(st.booleans()):
                child.text = draw(VALUES)
            grow(child, depth + 1)

    root = etree.Element(root_tag, name=draw(st.sampled_from(["r", "", "a b"])))
    grow(root, 0)
    return etree.tostring(root)


@functools.lru_cache(maxsize=1)
def _srdf_model():
    return load(REPO / "robot_bridge" / "data" / "lwa3_gripper.robot.xml")


def _load_bytes(fmt: str, data: bytes, tag: str) -> None:
    path = Path(_TMP.name) / f"{tag}{BASES[fmt][2]}"
    path.write_bytes(data)
    try:
        if fmt == "srdf":    # semantics only: read against the model it describes
            from robot_bridge.formats.srdf import read_srdf

            read_srdf(path, _srdf_model())
            return
        robot = load(path)
    except DescriptionError as err:
        assert "\n" not in str(err), str(err)
        internal = getattr(err, "internal", None)
        if internal is not None:     # load()'s safety net caught a reader bug: report the original
            raise internal
        return
    assert robot.links or robot.joints or robot.name is not None


def _skip_missing(fmt: str) -> None:
    if _reader(BASES[fmt][0]) is None:
        pytest.skip(f"no {fmt} reader yet")
    if not _TREES[fmt]:
        pytest.skip(f"no {fmt} base files")


@pytest.mark.parametrize("fmt", list(BASES))
def test_mutated_real_files(fmt):
    _skip_missing(fmt)

    @FUZZ
    @given(data=mutated(fmt))
    def run(data):
        _load_bytes(fmt, data, "mutated")

    run()


@pytest.mark.parametrize("fmt", list(BASES))
def test_generated_documents(fmt):
    _skip_missing(fmt)

    @settings(FUZZ, max_examples=max(FUZZ.max_examples // 4, 25))
    @given(data=generated(fmt))
    def run(data):
        _load_bytes(fmt, data, "generated")

    run()
