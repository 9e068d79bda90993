"""Every corpus robot that loads exports to a URDF that urdfdom accepts and whose pinocchio
forward kinematics equals robot_bridge's, link for link, at random configurations."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


pin = pytest.importorskip("pinocchio")

from fixtures.urdf_export import CORPUS, WORST, assert_export_matches, corpus_files, load_or_skip  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_exported_urdf_matches_model(path, tmp_path):
    assert_export_matches(load_or_skip(path), tmp_path)


def test_hand_built_model_with_every_export_rule(tmp_path):
    spec = importlib.util.spec_from_file_location("tricky_robot", FIXTURES / "urdf" / "tricky_robot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    robot = module.tricky_robot()
    text = assert_export_matches(robot, tmp_path)
    assert "sin(uni_1)*2" in text                          # the nonlinear mimic, as a comment


def test_zz_report_worst_error():
    """Prints the largest FK difference over the whole walk (run with -s to see it)."""
    if not WORST:
        pytest.skip("no export compared")
    print(f"\nURDF export vs pinocchio: {len(WORST)} robots, max error "
          f"{max(w[0] for w in WORST):.3g} m / {max(w[1] for w in WORST):.3g} rad")
