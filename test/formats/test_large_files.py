"""Loading grows linearly with the file for URDF and OpenRAVE XML (issue 33), measured as Python lines
executed (a count independent of the host's load; a scan per reference, as OpenRAVE XML's link lookup
was, executes lines quadratic in the file's size), on robots of test/fixtures/large_files.py."""

from __future__ import annotations

import sys

import pytest

from fixtures import large_files as lf
from robot_bridge.formats import load


def _lines_executed(path) -> int:
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        load(path)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("fmt, suffix", [("urdf", ".urdf"), ("openrave", ".robot.xml")])
def test_lines_executed_grow_linearly_with_the_file(tmp_path, fmt, suffix):
    small, big = tmp_path / f"small{suffix}", tmp_path / f"big{suffix}"
    size_ratio = lf.write(big, 320, fmt) / lf.write(small, 40, fmt)
    assert 7.5 < size_ratio < 8.5
    load(small)                                        # imports and first-call costs out of the way
    lines_small, lines_big = _lines_executed(small), _lines_executed(big)
    print(f"{fmt}: {lines_small} -> {lines_big} lines for {size_ratio:.2f}x the bytes")
    assert lines_big / lines_small < 1.15 * size_ratio, (lines_small, lines_big, size_ratio)


@pytest.mark.parametrize("fmt, suffix", [("urdf", ".urdf"), ("openrave", ".robot.xml")])
def test_a_generated_robot_reads_as_written(tmp_path, fmt, suffix):
    path = tmp_path / f"r{suffix}"
    lf.write(path, 25, fmt)
    robot = load(path)
    assert len(robot.links) == 26 and len(robot.joints) == 25
    j = robot.joints[lf.joint_name(1, 3)]
    assert (j.parent, j.child) == (lf.link_name(1, 2), lf.link_name(1, 3))
    mimics = [name for name, joint in robot.joints.items() if joint.is_mimic]
    assert mimics == [lf.joint_name(c, 1) for c in range(3)]
    assert not robot.missing_meshes
