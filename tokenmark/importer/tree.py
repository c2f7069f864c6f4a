"""Reading files of an import tree without leaving it, and per-file errors.

Every file the importer opens goes through :class:`Tree`, which enforces three rules:

* Confinement: the file's resolved path (symlinks followed) must lie inside the import
  root; a symlink to ``/etc/passwd`` or ``../../outside`` is a :class:`FileError`, never
  a read. Directory symlinks are followed only when they resolve inside the root.
* Size: each kind of file has a byte limit (:class:`Limits`) checked *before* reading,
  so a huge or sparse file costs a ``stat``, not memory. The defaults are ten or more
  times the largest real file of the v5.1 round (detail logs 2.6 MB, ``spl.txt``
  1.5 MB, ``accuracy.txt`` 95 kB, summaries 3.5 kB).
* Text: logs and JSON must decode as UTF-8; a binary or corrupt file is a
  :class:`FileError` naming the byte offset.

A :class:`FileError` is data (the import report lists them), not an exception;
:class:`Rejected` carries one out of a helper to the loop that records it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FileError", "Limits", "Rejected", "Tree"]

_MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class FileError:
    """A file (or result folder) that was not imported, and why. ``path`` is relative
    to the import root (``archive.tar.gz!member`` inside an archive)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class Rejected(Exception):
    """Raised by readers to turn into one :class:`FileError` for ``path``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.error = FileError(path, reason)


@dataclass(frozen=True, slots=True)
class Limits:
    """Byte limits per kind of file, and for archives."""

    detail_log: int = 64 * _MiB
    summary_log: int = 1 * _MiB
    json_file: int = 4 * _MiB
    accuracy_txt: int = 64 * _MiB
    power_log: int = 256 * _MiB
    results_json: int = 64 * _MiB
    #: An official results table: the largest published one (v5.1 summary_results.json)
    #: is 2.2 MB.
    summary_table: int = 64 * _MiB
    archive_member: int = 256 * _MiB
    archive_total: int = 8 * 1024 * _MiB
    archive_members: int = 2_000_000

    def for_name(self, name: str) -> int:
        """The limit for a file named ``name``."""
        if name.endswith("mlperf_log_detail.txt"):
            return self.detail_log
        if name.endswith("mlperf_log_summary.txt"):
            return self.summary_log
        if name == "accuracy.txt":
            return self.accuracy_txt
        if name == "spl.txt":
            return self.power_log
        if name == "results.json":
            return self.results_json
        return self.json_file


class Tree:
    """An import root: confined, size-limited reads and directory listings.

    ``label`` is how paths are shown (the root's relative form, or ``archive!`` for an
    extracted archive).
    """

    def __init__(self, root: Path, limits: Limits | None = None, *, label: str = "") -> None:
        self.root = root.resolve()
        self.limits = limits or Limits()
        self.label = label

    def rel(self, path: Path) -> str:
        """``path`` relative to the root, as shown in reports and stored as ``source_path``."""
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            rel = path.as_posix()
        return f"{self.label}{rel}"

    def confine(self, path: Path) -> Path:
        """``path`` resolved; :class:`Rejected` if it leaves the root."""
        try:
            resolved = path.resolve(strict=True)
        except FileNotFoundError:
            raise Rejected(self.rel(path), "missing (or a broken symlink)") from None
        except (OSError, RuntimeError) as exc:  # symlink loops raise RuntimeError/OSError
            raise Rejected(self.rel(path), f"cannot be resolved ({exc})") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise Rejected(self.rel(path), f"resolves to {resolved}, outside the import root "
                           f"{self.root}; symlinks and '..' must stay inside the tree")
        return resolved

    def exists(self, path: Path) -> bool:
        """Whether ``path`` exists (a dangling or escaping link counts as existing, so the
        read that follows reports it)."""
        return os.path.lexists(path)

    def read_bytes(self, path: Path, limit: int | None = None) -> bytes:
        real = self.confine(path)
        if not real.is_file():
            raise Rejected(self.rel(path), "is not a regular file")
        cap = self.limits.for_name(path.name) if limit is None else limit
        size = real.stat().st_size
        if size > cap:
            raise Rejected(self.rel(path), f"is {size:,} bytes, over the {cap:,}-byte limit for "
                           f"{path.name} files (a corrupt or wrong file?)")
        try:
            with open(real, "rb") as f:
                data = f.read(cap + 1)
        except OSError as exc:
            raise Rejected(self.rel(path), f"cannot be read ({exc.strerror})") from None
        if len(data) > cap:  # grew while being read
            raise Rejected(self.rel(path), f"is over the {cap:,}-byte limit")
        return data

    def read_json_object(self, path: Path) -> dict[str, Any]:
        """The JSON object in the file at ``path`` (within the limits of
        :mod:`tokenmark.inputs`); :class:`Rejected` for anything else."""
        from tokenmark.inputs import InputLimitError, json_loads

        rel = self.rel(path)
        try:
            doc = json_loads(self.read_bytes(path).decode("utf-8"))
        except InputLimitError as exc:
            raise Rejected(rel, f"is {exc}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise Rejected(rel, f"is not valid JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise Rejected(rel, "is not a JSON object")
        return doc

    def read_text(self, path: Path, limit: int | None = None) -> str:
        data = self.read_bytes(path, limit)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Rejected(self.rel(path), f"is not UTF-8 text (byte {exc.start}): a binary or "
                           "corrupt file") from None

    def read_tail(self, path: Path, nbytes: int) -> str:
        """The last ``nbytes`` of a text file (accuracy.txt ends with its figures)."""
        real = self.confine(path)
        if not real.is_file():
            raise Rejected(self.rel(path), "is not a regular file")
        size = real.stat().st_size
        cap = self.limits.for_name(path.name)
        if size > cap:
            raise Rejected(self.rel(path), f"is {size:,} bytes, over the {cap:,}-byte limit")
        with open(real, "rb") as f:
            f.seek(max(0, size - nbytes))
            data = f.read(nbytes)
        text = data.decode("utf-8", errors="replace")
        if "\ufffd" in text[64:] or "\x00" in text:
            raise Rejected(self.rel(path), "is not UTF-8 text: a binary or corrupt file")
        return text

    def subdirs(self, path: Path, errors: list[FileError] | None = None) -> Iterator[Path]:
        """The directories in ``path`` (sorted; hidden ones skipped). A directory symlink
        inside the root is listed; one that leaves it is appended to ``errors`` and
        skipped (or raises :class:`Rejected` when ``errors`` is ``None``)."""
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            raise Rejected(self.rel(path), f"cannot be listed ({exc.strerror})") from None
        for e in entries:
            if e.name.startswith("."):
                continue
            if e.is_symlink():
                p = Path(e.path)
                try:
                    inside = self.confine(p).is_dir()
                except Rejected as r:
                    if errors is None:
                        raise
                    errors.append(r.error)
                    continue
                if inside:
                    yield p
            elif e.is_dir(follow_symlinks=False):
                yield Path(e.path)

    def files(self, path: Path) -> list[Path]:
        """The non-directory entries of ``path`` (sorted), links included unread."""
        try:
            return sorted(Path(e.path) for e in os.scandir(path)
                          if not e.is_dir(follow_symlinks=False))
        except OSError:
            return []
