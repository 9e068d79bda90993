"""tools/interface_cache.py: a built interface package stored from one venv and restored into another names
the new venv wherever the old one was named (text files), is otherwise byte for byte the same, and a file
naming the venv in binary content is never cached."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_tool():
    path = REPO / "tools" / "interface_cache.py"
    spec = importlib.util.spec_from_file_location("interface_cache", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def installed(venv: Path, build: Path, files: dict[str, bytes]) -> None:
    """A venv with `files` installed by a build whose install_manifest.txt lists them (as cmake --install)."""
    for rel, data in files.items():
        (venv / rel).parent.mkdir(parents=True, exist_ok=True)
        (venv / rel).write_bytes(data)
    build.mkdir(parents=True, exist_ok=True)
    (build / "install_manifest.txt").write_text("\n".join(str(venv / rel) for rel in files))


@pytest.fixture
def tool():
    return load_tool()


def test_restore_names_the_new_venv_and_keeps_the_rest(tool, tmp_path):
    old, new = tmp_path / "clone1" / ".venv", tmp_path / "other" / "clone2" / ".venv"
    so = b"\x7fELF\0\0 binary without the prefix"
    files = {
        "share/pkg/local_setup.sh": f': ${{AMENT_CURRENT_PREFIX:="{old}"}}\n'.encode(),
        "share/pkg/cmake/export_pkg__rosidl_generator_pyExport.cmake":
            f'INTERFACE_INCLUDE_DIRECTORIES "/usr/include/python3;{old}/lib/numpy/include"\n'.encode(),
        "lib/libpkg__rosidl_typesupport_c.so": so,
        "share/pkg/msg/A.msg": b"int32 a\n",
    }
    installed(old, tmp_path / "build", files)
    (old / "share/pkg/cmake/run.sh").write_text("#!/bin/sh\n")
    os.chmod(old / "share/pkg/cmake/run.sh", 0o755)
    (tmp_path / "build" / "install_manifest.txt").write_text(
        (tmp_path / "build" / "install_manifest.txt").read_text() + f"\n{old}/share/pkg/cmake/run.sh\n")
    entry = tmp_path / "cache" / "kilted" / "pkg-0123-abcd"

    assert tool.main(["store", str(old), str(tmp_path / "build"), str(entry)]) == 0
    new.mkdir(parents=True)
    assert tool.main(["restore", str(entry), str(new)]) == 0

    assert (new / "share/pkg/local_setup.sh").read_text() == f': ${{AMENT_CURRENT_PREFIX:="{new}"}}\n'
    assert (new / "share/pkg/cmake/export_pkg__rosidl_generator_pyExport.cmake").read_text() == \
        f'INTERFACE_INCLUDE_DIRECTORIES "/usr/include/python3;{new}/lib/numpy/include"\n'
    assert (new / "lib/libpkg__rosidl_typesupport_c.so").read_bytes() == so
    assert (new / "share/pkg/msg/A.msg").read_bytes() == b"int32 a\n"
    assert os.access(new / "share/pkg/cmake/run.sh", os.X_OK)
    restored = {str(p.relative_to(new)) for p in new.rglob("*") if p.is_file()}
    assert restored == set(files) | {"share/pkg/cmake/run.sh"}
    assert str(old) not in "".join(p.read_text(errors="replace") for p in new.rglob("*") if p.is_file())


def test_a_binary_naming_the_venv_is_not_cached(tool, tmp_path, capsys):
    venv = tmp_path / ".venv"
    elf = b"\x7fELF\0RUNPATH=" + str(venv).encode() + b"/lib\0"
    installed(venv, tmp_path / "build", {"lib/libpkg.so": elf})
    entry = tmp_path / "cache" / "pkg-1"
    assert tool.main(["store", str(venv), str(tmp_path / "build"), str(entry)]) == 1
    assert "lib/libpkg.so names" in capsys.readouterr().err
    assert not entry.exists() and list((tmp_path / "cache").iterdir()) == []     # no half entry either


def test_a_file_outside_the_venv_is_not_cached(tool, tmp_path, capsys):
    venv = tmp_path / ".venv"
    installed(venv, tmp_path / "build", {"share/pkg/a.msg": b"int32 a\n"})
    (tmp_path / "build" / "install_manifest.txt").write_text(f"{tmp_path}/elsewhere/a.msg\n")
    assert tool.main(["store", str(venv), str(tmp_path / "build"), str(tmp_path / "cache" / "e")]) == 1
    assert "outside" in capsys.readouterr().err


def test_no_entry_restores_nothing(tool, tmp_path):
    assert tool.main(["restore", str(tmp_path / "absent"), str(tmp_path / "venv")]) == 1
    assert not (tmp_path / "venv").exists()


def test_an_existing_entry_is_kept(tool, tmp_path):
    """Two set-ups storing the same entry: the first stays, the second leaves no temporary folder."""
    venv = tmp_path / ".venv"
    installed(venv, tmp_path / "build", {"share/pkg/a.msg": b"int32 a\n"})
    entry = tmp_path / "cache" / "e"
    assert tool.main(["store", str(venv), str(tmp_path / "build"), str(entry)]) == 0
    (venv / "share/pkg/a.msg").write_bytes(b"int32 b\n")
    assert tool.main(["store", str(venv), str(tmp_path / "build"), str(entry)]) == 0
    assert (entry / "tree/share/pkg/a.msg").read_bytes() == b"int32 a\n"
    assert [p.name for p in entry.parent.iterdir()] == ["e"]
