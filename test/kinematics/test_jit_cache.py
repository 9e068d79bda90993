"""Compiled kernels are cached in a user folder ($NUMBA_CACHE_DIR, $ROS_HOME, ~/.cache), a folder per
version of the kernels' sources; a folder that cannot be written means no cache, silently, and nothing
written anywhere else."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robot_bridge import jit

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "robot_bridge"
needs_numba = pytest.mark.skipif(not jit.AVAILABLE, reason="numba not installed (robot_bridge[raycast])")
# compiles a small kernel through robot_bridge.jit in a fresh process and reports what it saw
PROBE = """
import json, sys
import numpy as np
from robot_bridge import jit

@jit.njit(nogil=True)
def twice_sum(a):
    total = 0.0
    for v in a:
        total += 2.0 * v
    return total

value = twice_sum(np.arange(4.0))
print(json.dumps({"value": value, "caching": jit.caching(), "dir": str(jit.cache_dir())}))
"""


def _probe(env_overrides: dict, home: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "ROS_HOME", "XDG_CACHE_HOME")}
    env.update({"HOME": str(home), "PYTHONPATH": str(REPO), **env_overrides})
    script = home / "probe.py"                  # a file: numba caches only functions defined in one
    script.write_text(PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=home)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def _cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc")) if folder.exists() else []


def _package_cache_files() -> set[Path]:
    """numba's in-tree cache files beside the package's modules (where its own fallback writes)."""
    return set(PACKAGE.rglob("*.nbi")) | set(PACKAGE.rglob("*.nbc"))


def test_cache_folder_defaults(monkeypatch, tmp_path):
    for name in ("NUMBA_CACHE_DIR", "ROS_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert jit.cache_root() == tmp_path / ".cache" / "robot_bridge" / "numba"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_root() == tmp_path / "xdg" / "robot_bridge" / "numba"
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros"))
    assert jit.cache_root() == tmp_path / "ros" / "robot_bridge" / "numba_cache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert jit.cache_root() == tmp_path / "mine"
    version = jit.cache_dir()
    assert version.parent == tmp_path / "mine" and re.fullmatch(r"[0-9a-f]{16}", version.name)


def test_every_module_that_compiles_is_a_kernel_source():
    """A kernel's cache is keyed by its sources: a module compiling through jit must be listed."""
    compiling = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                 if "jit.njit(" in p.read_text(encoding="utf-8")}
    assert compiling and compiling <= set(jit.KERNEL_SOURCES)
    assert all((PACKAGE / name).is_file() for name in jit.KERNEL_SOURCES)


@needs_numba
def test_kernels_are_cached_under_ros_home_and_loaded_by_the_next_process(tmp_path):
    before = _package_cache_files()
    home = tmp_path / "home"
    home.mkdir()
    env = {"ROS_HOME": str(tmp_path / "ros")}
    first, _ = _probe(env, home)
    assert first["value"] == 12.0 and first["caching"]
    folder = Path(first["dir"])
    assert folder.parent == tmp_path / "ros" / "robot_bridge" / "numba_cache"
    files = _cache_files(folder)
    assert any(f.suffix == ".nbc" for f in files) and any(f.suffix == ".nbi" for f in files)
    stamps = {f: f.stat().st_mtime_ns for f in files}
    second, _ = _probe(env, home)                        # loaded, not compiled again: nothing rewritten
    assert second["value"] == 12.0 and {f: f.stat().st_mtime_ns for f in _cache_files(folder)} == stamps
    assert _package_cache_files() == before and not _cache_files(home)


def _unwritable(tmp_path: Path) -> Path:
    """A cache folder this process cannot create or write, also as root (who ignores permission bits):
    its parent is a regular file."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    return blocker / "numba"


@needs_numba
@pytest.mark.parametrize("how", ["NUMBA_CACHE_DIR", "ROS_HOME", "read-only folder"])
def test_an_unwritable_cache_folder_means_no_cache_silently(tmp_path, how):
    home = tmp_path / "home"
    home.mkdir()
    if how == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders (the other cases cover an unwritable one)")
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
        env = {"NUMBA_CACHE_DIR": str(folder)}
    else:
        env = {how: str(_unwritable(tmp_path))}
    before = _package_cache_files()
    report, stderr = _probe(env, home)
    assert report["value"] == 12.0 and report["caching"] is False      # compiled, not cached
    assert "Traceback" not in stderr and "Warning" not in stderr
    assert _package_cache_files() == before                # numba's fallbacks wrote nothing beside modules
    assert not _cache_files(home) and not _cache_files(tmp_path)
