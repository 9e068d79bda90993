"""A cache of built interface packages, shared by the venvs of one distribution in every clone
(tools/setup_venv.sh).

An entry is what `cmake --install` put into a venv (the files its install_manifest.txt lists), stored relative
to the venv.  The installed files name the venv's absolute path in text only (share/<pkg>/local_setup.sh, the
NumPy include dir in share/<pkg>/cmake/*__rosidl_generator_pyExport.cmake): those are listed in the entry and
the path is rewritten to the new venv on restore.  A file that names the venv in binary content (no such file
today) makes `store` refuse, so a restored package is always byte for byte what a build there installs.

    python tools/interface_cache.py store VENV BUILD_DIR ENTRY  # after a build: its install_manifest.txt
    python tools/interface_cache.py restore ENTRY VENV          # exit 1 without a (complete) entry

An entry is written to a temporary folder and renamed into place, so concurrent set-ups never see half of one.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

FILES = "files.txt"          # the installed paths, relative to the venv, one a line
REWRITE = "rewrite.txt"      # those among them that name the venv (text files)
PREFIX = "prefix.txt"        # the venv the entry was built in
TREE = "tree"                # the files themselves


class CacheError(Exception):
    pass


def store(venv: Path, build_dir: Path, entry: Path) -> int:
    venv = venv.resolve()
    if entry.is_dir():
        return 0
    prefix = str(venv).encode()
    manifest = (build_dir / "install_manifest.txt").read_text().split("\n")
    relative, rewrite = [], []
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        for line in filter(None, manifest):
            path = Path(line)
            if not path.is_relative_to(venv):
                raise CacheError(f"{line} is outside {venv}")
            rel = path.relative_to(venv)
            target = tmp / TREE / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                os.symlink(os.readlink(path), target)
            else:
                data = path.read_bytes()
                if prefix in data:
                    if b"\0" in data:
                        raise CacheError(f"{line} names {venv} in binary content")
                    rewrite.append(str(rel))
                shutil.copy2(path, target)
            relative.append(str(rel))
        (tmp / FILES).write_text("".join(f"{r}\n" for r in relative))
        (tmp / REWRITE).write_text("".join(f"{r}\n" for r in rewrite))
        (tmp / PREFIX).write_text(str(venv))
        try:
            tmp.rename(entry)
        except OSError:            # another set-up stored the same entry first: theirs is as good
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def restore(entry: Path, venv: Path) -> int:
    venv = venv.resolve()
    try:
        files = (entry / FILES).read_text().split()
        rewrite = set((entry / REWRITE).read_text().split())
        old = (entry / PREFIX).read_text().encode()
    except OSError:
        return 1
    for rel in files:
        source, target = entry / TREE / rel, venv / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif rel in rewrite:
            target.write_bytes(source.read_bytes().replace(old, str(venv).encode()))
            shutil.copymode(source, target)
        else:
            shutil.copy2(source, target)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "store":
        try:
            return store(Path(argv[1]), Path(argv[2]), Path(argv[3]))
        except (CacheError, OSError) as error:
            print(f"interface_cache: not cached: {error}", file=sys.stderr)
            return 1
    if len(argv) == 3 and argv[0] == "restore":
        return restore(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
