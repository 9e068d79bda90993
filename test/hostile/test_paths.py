"""robot_bridge.formats.paths: the allowed-roots policy."""

from __future__ import annotations

import os

import pytest

from robot_bridge.errors import UnsafeInputError
from robot_bridge.formats.paths import ENV_ALLOWED_ROOTS, AllowedRoots, roots_for


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "desc" / "sub").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "desc" / "sub" / "a.xml").write_text("<a/>")
    (tmp_path / "data" / "b.xml").write_text("<b/>")
    (tmp_path / "outside" / "c.xml").write_text("<c/>")
    (tmp_path / "desc" / "r.xml").write_text("<r/>")
    return tmp_path


def test_default_roots_are_folder_and_search_path(tree):
    roots = roots_for(tree / "desc" / "r.xml", [tree / "data"])
    assert roots.roots == ((tree / "desc").resolve(), (tree / "data").resolve())
    assert roots.find("sub/a.xml", [tree / "desc"]) == (tree / "desc" / "sub" / "a.xml").resolve()
    assert roots.find("b.xml", [tree / "desc", tree / "data"]) == (tree / "data" / "b.xml").resolve()
    assert roots.find("missing.xml", [tree / "desc"]) is None


@pytest.mark.parametrize("ref", ["../outside/c.xml", "sub/../../outside/c.xml", "{tree}/outside/c.xml"])
def test_escape_refused_naming_file_and_reference(tree, ref):
    ref = ref.format(tree=tree)
    roots = roots_for(tree / "desc" / "r.xml")
    with pytest.raises(UnsafeInputError) as info:
        roots.find(ref, [tree / "desc"], file="r.xml", line=3)
    assert str(info.value).startswith("r.xml:3: reference ")
    assert repr(ref) in str(info.value) and "outside the allowed roots" in str(info.value)


def test_symlink_out_of_the_roots_refused(tree):
    (tree / "desc" / "ln.xml").symlink_to(tree / "outside" / "c.xml")
    with pytest.raises(UnsafeInputError):
        roots_for(tree / "desc" / "r.xml").find("ln.xml", [tree / "desc"])


def test_escaping_candidate_skipped_when_another_is_inside(tree):
    """``../b.xml`` from desc/sub is desc/b.xml... a candidate outside is never probed."""
    roots = AllowedRoots([tree / "desc"])
    (tree / "desc" / "b.xml").write_text("<b/>")
    assert roots.find("../b.xml", [tree, tree / "desc" / "sub"]) == (tree / "desc" / "b.xml").resolve()


def test_configured_roots_replace_default(tree, monkeypatch):
    roots = roots_for(tree / "desc" / "r.xml", allowed_roots=[tree / "outside"])
    assert roots.find("c.xml", [tree / "outside"]) is not None
    with pytest.raises(UnsafeInputError):
        roots.check(tree / "desc" / "sub" / "a.xml")
    monkeypatch.setenv(ENV_ALLOWED_ROOTS, os.pathsep.join([str(tree / "data"), str(tree / "outside")]))
    expected = ((tree / "data").resolve(), (tree / "outside").resolve())
    assert roots_for(tree / "desc" / "r.xml").roots == expected


def test_default_roots_widen_to_the_enclosing_ros_package(tree):
    pkg = tree / "desc"
    (pkg / "package.xml").write_text("<package><name>desc</name></package>")
    roots = roots_for(pkg / "sub" / "a.xml")
    assert roots.roots == ((pkg / "sub").resolve(), pkg.resolve())
    assert roots.find("../r.xml", [pkg / "sub"]) == (pkg / "r.xml").resolve()
    with pytest.raises(UnsafeInputError):
        roots.find("../../outside/c.xml", [pkg / "sub"])
