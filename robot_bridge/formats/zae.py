"""COLLADA ``.zae`` containers: find the root document inside the zip and read it
into memory (never extracted to disk), refusing zip bombs.  Limits: ``limits.MAX_ZAE_*`` (archive
size, members, declared and inflated sizes, ratio) and ``limits.MAX_XML_BYTES`` for the root document.

The root document is the one ``manifest.xml`` names in ``<dae_root>`` (collada-dom
convention, e.g. ``./robot.dae``), else the only ``.dae`` in the archive.
"""

from __future__ import annotations

import os
import zipfile

from ..errors import DescriptionError, MissingFileError, SchemaError, UnsafeInputError
from . import limits
from .xmlsafe import local_name, parse_bytes

_CHUNK = 1 << 20


def _check_info(info: zipfile.ZipInfo, file: str) -> None:
    if info.file_size > limits.MAX_XML_BYTES:
        raise UnsafeInputError(f"zip member {info.filename!r} is {info.file_size} bytes uncompressed, more "
                               f"than the {limits.MAX_XML_BYTES} allowed (MAX_XML_BYTES)", file=file)
    ratio = limits.MAX_ZAE_RATIO
    if info.file_size > _CHUNK and info.file_size > ratio * max(info.compress_size, 1):
        raise UnsafeInputError(f"zip member {info.filename!r} has compression ratio "
                               f"{info.file_size / max(info.compress_size, 1):.0f}, more than the "
                               f"{ratio:.0f} allowed (zip bomb?)", file=file)


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, file: str) -> bytes:
    """Read one member, enforcing the limits on the bytes actually inflated (the
    header sizes may lie)."""
    _check_info(info, file)
    limit = min(limits.MAX_XML_BYTES, max(int(limits.MAX_ZAE_RATIO * max(info.compress_size, 1)), _CHUNK))
    out = bytearray()
    with archive.open(info) as stream:
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            out += chunk
            if len(out) > limit:
                raise UnsafeInputError(f"zip member {info.filename!r} inflates beyond {limit} bytes "
                                       "(zip bomb?)", file=file)
    return bytes(out)


def _root_name(archive: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo], file: str) -> str:
    manifest = next((n for n in infos if n.lower() == "manifest.xml"), None)
    if manifest is not None:
        tree = parse_bytes(read_member(archive, infos[manifest], file), file=f"{file}!{manifest}")
        for el in tree.getroot().iter():
            if local_name(el) == "dae_root" and (el.text or "").strip():
                name = el.text.strip()
                while name.startswith("./"):
                    name = name[2:]
                name = name.split("#", 1)[0]
                if name in infos:
                    return name
                raise MissingFileError(f"manifest.xml names dae_root {el.text.strip()!r}, which is not in "
                                       "the archive", file=file, line=el.sourceline)
    daes = [n for n in infos if n.lower().endswith(".dae")]
    if len(daes) == 1:
        return daes[0]
    if not daes:
        raise SchemaError("archive holds no .dae document (and no manifest.xml <dae_root>)", file=file)
    raise SchemaError(f"archive holds {len(daes)} .dae documents and no manifest.xml <dae_root> says "
                      f"which is the root: {', '.join(sorted(daes))}", file=file)


def read_root_document(path: str | os.PathLike) -> tuple[bytes, str]:
    """Bytes of the root .dae inside the .zae at ``path`` and its member name."""
    file = str(path)
    stream = limits.open_regular(path, limits.MAX_ZAE_ARCHIVE_BYTES, ".zae archive", "MAX_ZAE_ARCHIVE_BYTES")
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        stream.close()
        raise SchemaError(f"not a readable zip (.zae) archive: {exc}", file=file) from None
    except BaseException:
        stream.close()
        raise
    with stream, archive:
        members = [i for i in archive.infolist() if not i.is_dir()]
        if len(members) > limits.MAX_ZAE_ENTRIES:
            raise UnsafeInputError(f"archive has {len(members)} members, more than {limits.MAX_ZAE_ENTRIES} "
                                   "(MAX_ZAE_ENTRIES)", file=file)
        total = sum(i.file_size for i in members)
        if total > limits.MAX_ZAE_TOTAL_BYTES:
            raise UnsafeInputError(f"archive declares {total} uncompressed bytes, more than the "
                                   f"{limits.MAX_ZAE_TOTAL_BYTES} allowed (MAX_ZAE_TOTAL_BYTES)", file=file)
        infos = {i.filename: i for i in members}
        name = _root_name(archive, infos, file)
        return read_member(archive, infos[name], file), name


def is_zip(path: str | os.PathLike) -> bool:
    try:
        return limits.read_head(path, 4) == b"PK\x03\x04"
    except DescriptionError:
        return False
