"""Unpacking a submission archive (tar, tar.gz/bz2/xz, zip) without trusting it.

Only the members the importer reads are written (system descriptions, LoadGen logs,
``accuracy.txt``, ``measurements*.json``, ``spl.txt``, endpoints' JSON, model
mappings, ``results.json``), under a fresh directory; folders are created so that
"is there a ``performance/power/``?" still has its answer. Each member is checked
first, and a bad one is a :class:`FileError` (``archive!member``), never a write:

* names that are absolute, contain ``..`` or a NUL, or use backslashes or drive letters
  (they would land outside the directory on some system);
* links (symbolic or hard) and devices, FIFOs: archives carry regular files only here;
* sizes over :attr:`Limits.archive_member`, a running total over
  :attr:`Limits.archive_total`, or more than :attr:`Limits.archive_members` members
  (decompression bombs). Sizes are checked on the stream as well as the header, so a
  header that lies does not help.
"""

from __future__ import annotations

import re
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Final

from tokenmark.importer.tree import FileError, Limits

__all__ = ["WANTED", "extract", "is_archive"]

#: Basenames the importer reads; other members are skipped, not written.
WANTED: Final = frozenset({
    "mlperf_log_detail.txt", "mlperf_log_summary.txt", "accuracy.txt", "measurements.json",
    "spl.txt", "result_summary.json", "model_mapping.json", "results.json",
    "summary_results.json", "summary.json", "summary.csv",
})
_SUFFIXES: Final = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
_DRIVE = re.compile(r"^[A-Za-z]:")
_CHUNK = 1 << 20


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and name.endswith(_SUFFIXES)


def _wanted(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    if name in WANTED:
        return True
    if name.endswith(".json") and len(parts) >= 2 and parts[-2] in ("systems",):
        return True
    return name.endswith(".json") and "measurements" in parts


def _check_name(name: str) -> str | None:
    """Why a member name is unsafe, or ``None``."""
    if not name or "\x00" in name:
        return "has an empty name or a NUL byte"
    if "\\" in name or _DRIVE.match(name):
        return "uses backslashes or a drive letter, which would leave the target on Windows"
    p = PurePosixPath(name)
    if p.is_absolute():
        return "is an absolute path"
    if ".." in p.parts:
        return "contains '..' and would land outside the import directory"
    return None


class _Budget:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.total = 0
        self.members = 0


def _copy(src: IO[bytes], dest: Path, budget: _Budget, label: str) -> FileError | None:
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        out = open(dest, "xb")  # closed by the with-block below
    except FileExistsError:
        return FileError(label, "appears twice in the archive; the first copy was kept")
    except OSError as exc:
        return FileError(label, f"cannot be unpacked ({exc.strerror})")
    written = 0
    with out:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            budget.total += len(chunk)
            if written > budget.limits.archive_member:
                out.close()
                dest.unlink()
                return FileError(label, f"unpacks to over {budget.limits.archive_member:,} "
                                 "bytes (a decompression bomb?)")
            if budget.total > budget.limits.archive_total:
                out.close()
                dest.unlink()
                return FileError(label, f"the archive unpacks to over "
                                 f"{budget.limits.archive_total:,} bytes in all; stopped")
            out.write(chunk)
    return None


def _mkdir(path: Path, label: str, errors: list[FileError]) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        errors.append(FileError(label, f"cannot be unpacked ({exc.strerror}): a file and a "
                                "folder of the same name?"))
        return False
    return True


def _tar_members(tf: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (m := tf.next()) is not None:
        yield m


def extract(archive: Path, dest: Path, limits: Limits) -> list[FileError]:
    """Unpack the wanted members of ``archive`` into the empty directory ``dest``.

    Returns the per-member errors; an archive that cannot be opened at all is one
    error for the archive itself.
    """
    label = archive.name + "!"
    errors: list[FileError] = []
    budget = _Budget(limits)
    try:
        if archive.name.lower().endswith(".zip"):
            _extract_zip(archive, dest, budget, label, errors)
        else:
            _extract_tar(archive, dest, budget, label, errors)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        errors.append(FileError(archive.name, f"is not a readable archive ({exc}); nothing "
                                "from it was imported"))
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
    return errors


def _member_ok(name: str, budget: _Budget, label: str, errors: list[FileError]) -> bool:
    budget.members += 1
    if budget.members > budget.limits.archive_members:
        if budget.members == budget.limits.archive_members + 1:
            errors.append(FileError(label.rstrip("!"), f"has over "
                                    f"{budget.limits.archive_members:,} members; stopped"))
        return False
    why = _check_name(name)
    if why is not None:
        errors.append(FileError(label + name.replace("\x00", "\\0"), why))
        return False
    return True


def _extract_tar(archive: Path, dest: Path, budget: _Budget, label: str,
                 errors: list[FileError]) -> None:
    with tarfile.open(archive, "r:*") as tf:
        for m in _tar_members(tf):
            if not _member_ok(m.name, budget, label, errors):
                continue
            parts = PurePosixPath(m.name).parts
            target = dest.joinpath(*parts) if parts else dest
            if m.isdir():
                _mkdir(target, label + m.name, errors)
                continue
            if m.issym() or m.islnk():
                if parts and _wanted(parts):
                    errors.append(FileError(label + m.name, f"is a link (to {m.linkname!r}); "
                                            "archives may carry regular files only"))
                continue
            if not m.isfile():
                errors.append(FileError(label + m.name, "is a device, FIFO or other special "
                                        "file; archives may carry regular files only"))
                continue
            if not _mkdir(target.parent, label + m.name, errors) or not _wanted(parts):
                continue
            if m.size > budget.limits.archive_member:
                errors.append(FileError(label + m.name, f"is {m.size:,} bytes, over the "
                                        f"{budget.limits.archive_member:,}-byte member limit"))
                continue
            src = tf.extractfile(m)
            if src is None:
                continue
            with src:
                err = _copy(src, target, budget, label + m.name)
            if err is not None:
                errors.append(err)
                if budget.total > budget.limits.archive_total:
                    return


def _extract_zip(archive: Path, dest: Path, budget: _Budget, label: str,
                 errors: list[FileError]) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not _member_ok(info.filename, budget, label, errors):
                continue
            parts = PurePosixPath(info.filename).parts
            mode = (info.external_attr >> 16) & 0o170000
            if info.is_dir():
                _mkdir(dest.joinpath(*parts), label + info.filename, errors)
                continue
            if mode and mode != 0o100000:
                errors.append(FileError(label + info.filename, "is a link or special file; "
                                        "archives may carry regular files only"))
                continue
            if (not _mkdir(dest.joinpath(*parts).parent, label + info.filename, errors)
                    or not _wanted(parts)):
                continue
            if info.file_size > budget.limits.archive_member:
                errors.append(FileError(label + info.filename, f"is {info.file_size:,} bytes, "
                                        f"over the {budget.limits.archive_member:,}-byte limit"))
                continue
            with zf.open(info) as src:
                err = _copy(src, dest.joinpath(*parts), budget, label + info.filename)
            if err is not None:
                errors.append(err)
                if budget.total > budget.limits.archive_total:
                    return
