"""The one reader of peers' world documents (issue 41): body files only under the roots trusted at launch,
refused lexically without a system call on the path and with one message whatever the host holds there;
symbolic links below a root refused; bounded documents; a cache keyed by the file's identity; the newest
document wins on the worker.

Opens are recorded with an audit hook ("open" events) and the stat family by wrapping os.stat / os.lstat
(they raise no audit event): a refused path must appear in neither."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from fixtures.opens import RECORDING as _RECORDING
from robot_bridge.errors import DescriptionError, SchemaError, UnsafeInputError
from robot_bridge.world import PlacedBody, to_xml
from robot_bridge.world import reader as reader_module
from robot_bridge.world.reader import (NOT_THERE, OUTSIDE, LatestWorker, WorldReader, lexical_root,
                                       package_data, trusted_roots)

BOX = """<KinBody name="box"><Body name="box" type="dynamic">
  <Geom type="box"><extents>0.05 0.1 0.3</extents></Geom></Body></KinBody>"""
FORGED = ["/etc/shadow", "/proc/self/environ", "/nonexistent/x.xml", "/etc/passwd", "/etc"]



@pytest.fixture
def touched(monkeypatch):
    """Every path opened (audit hook) or stat'ed (os.stat / os.lstat wrapped) while the test runs."""
    seen: list[str] = []
    for name in ("stat", "lstat"):
        real = getattr(os, name)

        def wrapped(path, *args, _real=real, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)):
                seen.append(os.fsdecode(os.fspath(path)))
            return _real(path, *args, **kwargs)
        monkeypatch.setattr(os, name, wrapped)
    _RECORDING.append(seen)
    yield seen
    _RECORDING.remove(seen)


def doc(*bodies: tuple) -> str:
    """A document of (name, file[, srdf]) bodies at the origin."""
    return to_xml([PlacedBody(b[0], "c", b[1], np.eye(4), b[2] if len(b) > 2 else "") for b in bodies])


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    (folder / "objects").mkdir(parents=True)
    (folder / "objects" / "box.kinbody.xml").write_text(BOX)
    return folder


def test_forged_paths_are_refused_unopened_unstated_with_one_message(root, touched):
    reader = WorldReader([str(root)])
    read = reader.objects(doc(*[(f"b{i}", path) for i, path in enumerate(FORGED)],
                              ("ok", str(root / "objects" / "box.kinbody.xml"))))
    assert list(read.objects) == ["ok"]
    assert read.problems == [f"body 'b{i}': {OUTSIDE}" for i in range(len(FORGED))]
    forged = [p for p in touched if p.startswith(("/etc", "/proc", "/nonexistent"))]
    assert forged == [], forged


def test_dot_dot_relative_and_odd_paths_are_refused_lexically(root, touched):
    (root.parent / "secret.xml").write_text(BOX)                # exists, a valid body, beside the root
    escapes = [f"{root}/objects/../../secret.xml", f"{root}/../secret.xml", "objects/box.kinbody.xml",
               "./objects/box.kinbody.xml", f"{root}/objects/box.kinbody.xml\0", "", f"{root}",
               f"{root}/", f"//{str(root).lstrip('/')}/objects/box.kinbody.xml", "/" + "a/" * 3000 + "b.xml",
               f"{root}x/objects/box.kinbody.xml"]
    reader = WorldReader([str(root)])
    touched.clear()                                             # from here on
    for path in escapes:
        assert lexical_root(path, reader.roots) is None, path
        with pytest.raises(DescriptionError, match="file outside the trusted roots$"):
            reader.body(path, name="x")
    assert not [p for p in touched if "secret" in p]
    # `..` that stays inside the root is just a path inside it
    assert reader.body(f"{root}/objects/../objects/box.kinbody.xml", name="x").name == "box"


def test_symbolic_links_below_a_root_are_refused_and_their_targets_never_opened(root, tmp_path, touched):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "body.xml").write_text(BOX)
    (root / "link.xml").symlink_to(outside / "body.xml")               # a file link leading out
    (root / "dir").symlink_to(outside)                                  # a folder link leading out
    (root / "inner.xml").symlink_to(root / "objects" / "box.kinbody.xml")   # even one staying inside
    (root / "shadow.xml").symlink_to("/etc/shadow")
    reader = WorldReader([str(root)])
    touched.clear()
    messages = []
    for path in ("link.xml", "dir/body.xml", "inner.xml", "shadow.xml", "objects/missing.xml", "objects",
                 "objects/box.kinbody.xml/x"):
        with pytest.raises(DescriptionError) as info:
            reader.body(f"{root}/{path}", name="x")
        messages.append(str(info.value))
    assert set(messages) == {f"body 'x': file: {NOT_THERE}"}            # missing, link, folder: one message
    assert not [p for p in touched if str(outside) in p or p.startswith("/etc")]


def test_special_files_under_a_root_are_not_opened_for_reading(root):
    fifo = root / "objects" / "pipe.xml"
    os.mkfifo(fifo)
    reader = WorldReader([str(root)])
    with pytest.raises(DescriptionError, match=NOT_THERE):             # a FIFO never blocks the reader
        reader.body(str(fifo), name="x")


def test_same_message_whatever_exists_on_the_host(tmp_path):
    reader = WorldReader([str(tmp_path)])
    outside = [reader.objects(doc(("x", path))).problems for path in FORGED]
    assert all(p == [f"body 'x': {OUTSIDE}"] for p in outside), outside
    inside = [reader.objects(doc(("x", str(tmp_path / name)))).problems
              for name in ("none.xml", "sub/none.xml")]
    (tmp_path / "folder.xml").mkdir()
    inside.append(reader.objects(doc(("x", str(tmp_path / "folder.xml")))).problems)
    assert all(p == [f"body 'x': file: {NOT_THERE}"] for p in inside), inside


def test_body_files_are_cached_by_identity_and_read_again_when_changed(root):
    path = root / "objects" / "box.kinbody.xml"
    reader = WorldReader([str(root)])
    first = reader.body(str(path), name="a")
    assert reader.body(str(path), name="b") is first                     # a body that only moves
    path.write_text(BOX.replace("0.05 0.1 0.3", "0.05 0.1 0.35"))        # size and mtime change
    assert reader.body(str(path), name="a") is not first
    broken = root / "objects" / "broken.xml"
    broken.write_text("<KinBody")
    with pytest.raises(DescriptionError) as info:
        reader.body(str(broken), name="a")
    assert str(broken) in str(info.value)                   # inside the roots: the reader's reason
    calls = []
    monkey = reader._load
    reader._load = lambda key: calls.append(key) or monkey(key)
    with pytest.raises(DescriptionError):
        reader.body(str(broken), name="a")
    assert calls == []                                       # a failed file is not read again unchanged


def test_the_cache_keeps_at_most_max_files(root):
    for i in range(5):
        (root / f"b{i}.xml").write_text(BOX)
    reader = WorldReader([str(root)], max_files=3)
    bodies = [reader.body(str(root / f"b{i}.xml")) for i in range(5)]
    assert len(reader._cache) == 3
    assert reader.body(str(root / "b4.xml")) is bodies[4]
    assert reader.body(str(root / "b0.xml")) is not bodies[0]           # dropped, read anew
    read = reader.objects(doc(*[(f"n{i}", str(root / f"b{i}.xml")) for i in range(5)]))
    assert list(read.objects) == ["n0", "n1", "n2"]
    assert read.problems == [f"body 'n{i}': more than 3 distinct body files in one document" for i in (3, 4)]


def test_document_bounds(root):
    reader = WorldReader([str(root)], max_bodies=2)
    box = str(root / "objects" / "box.kinbody.xml")
    read = reader.objects(doc(*[(f"n{i}", box) for i in range(5)]))
    assert list(read.objects) == ["n0", "n1"] and read.left_out == 3 and read.bodies == 5
    assert read.problems == ["5 bodies: the first 2 used, 3 left out"]
    many = "<Environment>" + "<KinBody name='a' file='/x'/>" * (reader_module.MAX_DOCUMENT_BODIES + 1) + \
        "</Environment>"
    with pytest.raises(UnsafeInputError, match="10001 bodies, more than the 10000 allowed"):
        reader.objects(many)
    with pytest.raises(UnsafeInputError, match="more than the 8388608 allowed"):
        reader.objects("<Environment>" + " " * reader_module.MAX_DOCUMENT_BYTES + "</Environment>")
    with pytest.raises(SchemaError, match="name of 300 characters"):
        reader.objects(doc(("n" * 300, box)))
    with pytest.raises(UnsafeInputError, match="DTD|entity"):
        reader.objects('<!DOCTYPE x [<!ENTITY e SYSTEM "/etc/shadow">]><Environment>&e;</Environment>')
    with pytest.raises(SchemaError, match="root element <KinBody>"):
        reader.objects(BOX)
    with pytest.raises(SchemaError, match="non-finite pose"):
        reader.objects(f"<Environment><KinBody name='a' file='{box}'><translation>1 nan 0</translation>"
                       "</KinBody></Environment>")


def test_the_time_bound_leaves_unread_bodies_out(root):
    for i in range(3):
        (root / f"b{i}.xml").write_text(BOX)
    now = [0.0]

    def clock():
        now[0] += 1.0                       # every look at the clock: a second later
        return now[0]
    reader = WorldReader([str(root)], time_limit=2.5, clock=clock)
    read = reader.objects(doc(*[(f"n{i}", str(root / f"b{i}.xml")) for i in range(3)]))
    assert list(read.objects) == ["n0", "n1"]
    assert read.problems == ["1 bodies left out: their files were not read within 2.5 s"]
    reader.time_limit = -1.0                 # every body late: the cached ones are still taken
    read = reader.objects(doc(*[(f"n{i}", str(root / f"b{i}.xml")) for i in range(3)]))
    assert list(read.objects) == ["n0", "n1"]


def test_class_srdf_is_checked_like_the_body_file(tmp_path, touched):
    from robot_bridge.world import load_mapping

    ball = load_mapping(package_data() / "objects.yaml").classes["ball"]
    reader = WorldReader(trusted_roots())
    body = reader.body(ball.file, ball.srdf, name="ball_0")
    assert "side_grasp" in body.semantics.handles
    with pytest.raises(DescriptionError, match="^body 'ball_0': srdf outside the trusted roots$"):
        reader.body(ball.file, "/etc/shadow", name="ball_0")
    assert not [p for p in touched if p.startswith("/etc")]


def test_trusted_roots_are_the_launch_time_folders(tmp_path, monkeypatch):
    monkeypatch.delenv("ROBOT_BRIDGE_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("OPENRAVE_DATA", raising=False)
    robot = tmp_path / "pkg" / "urdf" / "r.urdf"
    robot.parent.mkdir(parents=True)
    (tmp_path / "pkg" / "package.xml").write_text("<package/>")
    extra = tmp_path / "extra"
    extra.mkdir()
    roots = trusted_roots([str(robot)], [str(extra)])
    assert roots == [str(robot.parent), str(tmp_path / "pkg"), str(extra), str(package_data())]
    monkeypatch.setenv("ROBOT_BRIDGE_ALLOWED_ROOTS", str(tmp_path / "env"))
    assert str(tmp_path / "env") in trusted_roots()


def test_the_worker_hands_over_the_newest_document():
    started, release = threading.Event(), threading.Event()
    handled = []

    def handle(item):
        handled.append(item)
        started.set()
        release.wait(10)
    worker = LatestWorker(handle, "test.objects")
    try:
        worker.submit(1)
        assert started.wait(10)
        for item in (2, 3, 4):                      # while 1 is read: 4 replaces 2 and 3
            worker.submit(item)
        release.set()
        assert worker.wait_idle(10)
        assert handled == [1, 4] and worker.replaced == 2
    finally:
        worker.stop()
    assert not worker.thread.is_alive()


def test_the_worker_reports_errors_and_keeps_serving():
    errors, done = [], []
    worker = LatestWorker(lambda item: done.append(1 / item), "test.objects", errors.append)
    try:
        worker.submit(0)
        assert worker.wait_idle(10)
        worker.submit(2)
        assert worker.wait_idle(10)
    finally:
        worker.stop()
    assert [type(e) for e in errors] == [ZeroDivisionError] and done == [0.5]


def test_a_worker_stopped_while_reading_does_not_wait_for_the_read():
    release = threading.Event()
    started = threading.Event()
    worker = LatestWorker(lambda item: started.set() or release.wait(30), "test.objects")
    worker.submit(1)
    assert started.wait(10)
    worker.stop(timeout=0.1)
    assert worker.stopped and worker.thread.daemon and worker.thread.is_alive()    # returned mid-read
    worker.submit(2)                                                               # nothing more is taken
    release.set()
    worker.thread.join(10)
    assert not worker.thread.is_alive() and worker.handled == 1
