"""COLLADA namespaces (issue 33): the root's default namespace is dropped from the text before parsing
(formats/collada/document.py ``parse``), so only elements of other declared namespaces (MathML) are
renamed after it.  Whatever the spelling of the namespaces, a document reads as the same robot, and
errors keep their line numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fixtures import large_collada as lc
from robot_bridge.errors import SchemaError
from robot_bridge.formats import load
from robot_bridge.formats.collada.document import Document, parse

COLLADA_URI = "http://www.collada.org/2008/03/COLLADASchema"
COLLADA_NS = f'xmlns="{COLLADA_URI}"'
MATHML_NS = 'xmlns="http://www.w3.org/1998/Math/MathML"'


def _text() -> str:
    text = lc.collada_text(20, shared_primitives=3)
    assert text.count(COLLADA_NS) == 1 and MATHML_NS in text
    return text


def _model(path):
    """Everything a test compares: links' geometry and joints' kinematics and formulas."""
    robot = load(path)
    links = {name: [(g.name, np.asarray(g.shape.vertices).tolist(), np.asarray(g.shape.triangles).tolist(),
                     np.round(g.origin, 12).tolist()) for g in link.visuals]
             for name, link in robot.links.items()}
    joints = {name: (j.type, j.parent, j.child, np.round(j.origin, 12).tolist(), [a.tolist() for a in j.axes],
                     j.lower.tolist(), j.upper.tolist(), [m and (m.position, m.velocity) for m in j.mimic])
              for name, j in robot.joints.items()}
    return links, joints


def _prefixed(text: str, prefix: str, uri_attr: str, mathml: bool) -> str:
    """``text`` with every element (MathML's too when ``mathml``) written ``prefix:tag``."""
    body = text.replace(COLLADA_NS, f"xmlns:{prefix}={uri_attr}")
    if not mathml:
        return re.sub(r"<(/?)(?!math\b|apply\b|times\b|cn\b|csymbol\b)([A-Za-z_])", rf"<\1{prefix}:\2", body)
    body = body.replace(f" {MATHML_NS}", "")
    return re.sub(r"<(/?)([A-Za-z_])", rf"<\1{prefix}:\2", body)


SPELLINGS = {
    "default namespace": lambda t: t,
    "no namespace": lambda t: t.replace(f" {COLLADA_NS}", ""),
    "prefixed namespace": lambda t: _prefixed(t, "c", f'"{COLLADA_URI}"', False),
    "everything prefixed": lambda t: _prefixed(t, "c", f"'{COLLADA_URI}'", True),
    "declaration over lines": lambda t: t.replace(COLLADA_NS, '\n  xmlns =\n "http://www.collada.org/2005/11/'
                                                  'COLLADASchema"'),
    "MathML prefixed": lambda t: t.replace(f"<math {MATHML_NS}>", '<m:math xmlns:m="http://www.w3.org/1998/Math/'
                                           'MathML">').replace("</math>", "</m:math>"),
    # a character reference in a URI: not readable from the bytes, every element is looked at
    "character reference": lambda t: t.replace(MATHML_NS, 'xmlns="http://www.w3.org/1998/Math/&#77;athML"'),
    "xmlns in a comment": lambda t: t.replace("<library_joints>", "<!-- xmlns=' --><library_joints>"),
    "default namespace redeclared": lambda t: t.replace("<library_joints>", '<library_joints xmlns="urn:x">'),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_spelling_of_the_namespaces_reads_the_same_robot(tmp_path, spelling):
    plain, other = tmp_path / "plain.dae", tmp_path / "other.dae"
    plain.write_text(_text())
    other.write_text(SPELLINGS[spelling](_text()))
    assert other.read_text() != plain.read_text() or spelling == "default namespace"
    links, joints = _model(other)
    assert (links, joints) == _model(plain)
    assert len(joints) == 20 and sum(m is not None for j in joints.values() for m in j[-1]) == 2


def test_only_the_root_default_namespace_is_dropped_before_parsing():
    data = _text().encode()
    tree, namespaces = parse(data)
    root = tree.getroot()
    assert root.tag == "COLLADA"                           # no namespace: nothing to rename
    assert namespaces == {"http://www.w3.org/1998/Math/MathML"}
    math = next(root.iter("{http://www.w3.org/1998/Math/MathML}math"))
    doc = Document(tree, "robot.dae", namespaces)
    assert math.tag == "math" and not [el.tag for el in doc.root.iter() if el.tag[0] == "{"]
    # not readable from the bytes: unknown (every element renamed)
    for text in (data.replace(b"<COLLADA xmlns=", b"<COLLADA xmlns:c="), data.decode().encode("utf-16"),
                 data.replace(b"<library_joints>", b"<library_joints><!-- xmlns -->")):
        assert parse(text)[1] is None


def test_an_error_keeps_its_line_after_the_declaration_is_dropped(tmp_path):
    text = SPELLINGS["declaration over lines"](_text()).replace("<p>0 1 7", "<p>0 1\nx7", 1)
    start = text.index("<p>0 1\nx7")
    assert text.count("\n", 0, start) == 3            # two of them inside the dropped declaration
    path = tmp_path / "bad.dae"
    path.write_text(text)
    with pytest.raises(SchemaError) as info:
        load(path)
    assert info.value.line == text.count("\n", 0, start) + 1
