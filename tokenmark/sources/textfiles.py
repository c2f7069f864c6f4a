"""Reading text files record by record, with byte offsets to read any record again.

JSON Lines and CSV are streamed: one pass finds where each record starts and ends (a CSV
record may span lines inside quotes) and hands it to the caller; afterwards a record is
read again by seeking to its offsets, so memory holds a few integers per record, never
the file. A JSON array (``[{...}, {...}]``, the form of MLPerf's CNN-DailyMail file and
ShareGPT) cannot be split without parsing it, so its text is decoded once, walked element
by element, and dropped; its records are then read again by offset too.

Every problem is a :class:`~tokenmark.errors.DatasetError` naming the file, the line and
the fix: a missing or empty file, bytes that are not UTF-8, a line that is not JSON, a
CSV record with the wrong number of fields.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError
from tokenmark.inputs import MAX_DEPTH, MIB, InputLimitError, check_depth, json_loads, read_bounded

__all__ = ["Record", "RecordFile", "checked_file", "decode_utf8", "scan_csv", "scan_json_array",
           "scan_jsonl"]

#: One JSON Lines record may be this long (a long prompt is a few MiB at most).
JSONL_LINE_MAX = 256 * MIB
#: A JSON array dataset is read whole, so it may be this large; JSON Lines stream.
JSON_ARRAY_MAX = 2048 * MIB
# A CSV field may be a whole long prompt (the csv module's own limit is 128 KiB); a
# record is bounded by JSONL_LINE_MAX instead (scan_csv).
csv.field_size_limit(max(csv.field_size_limit(), JSONL_LINE_MAX))


def checked_file(path: Path | str, what: str = "dataset") -> Path:
    """``path`` if it is a readable, non-empty file; otherwise a clear error."""
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"{p}: no such file; give the path of a local {what} file "
                           "(tokenmark downloads nothing)")
    if not p.is_file():
        raise DatasetError(f"{p}: not a file; give the {what} file itself, not a folder")
    if p.stat().st_size == 0:
        raise DatasetError(f"{p}: the file is empty; give a {what} file with at least one "
                           "record")
    return p


def decode_utf8(data: bytes, path: Path, first_line: int = 1, offset: int = 0) -> str:
    """``data`` as text, or an error naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start)
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DatasetError(
            f"{path} line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at column {col}, "
            f"file offset {offset + e.start}); re-save the file as UTF-8") from None


@dataclass(frozen=True, slots=True)
class Record:
    """One record: its fields, its first line, and its byte span in the file."""

    fields: dict[str, Any]
    line: int
    start: int
    end: int


def scan_jsonl(path: Path, digest: Any) -> Iterator[Record]:
    """Each non-blank line of a JSON Lines file as an object (blank lines are skipped)."""
    pos = 0
    with open(path, "rb") as f:
        for n, raw in enumerate(iter(lambda: f.readline(JSONL_LINE_MAX + 1), b""), start=1):
            if len(raw) > JSONL_LINE_MAX:
                raise DatasetError(f"{path} line {n}: longer than {JSONL_LINE_MAX // MIB} MiB; "
                                   "one record per line, each a prompt and its fields")
            start, pos = pos, pos + len(raw)
            digest.update(raw)
            text = decode_utf8(raw, path, n, start)
            if n == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            yield Record(_object(text, path, n), n, start, pos)


def _object(text: str, path: Path, line: int) -> dict[str, Any]:
    try:
        obj = json_loads(text)
    except InputLimitError as e:
        raise DatasetError(f"{path} line {line}: {e}; a record is a prompt and its "
                           "fields") from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path} line {line}: not valid JSON ({e.msg} at column "
                           f"{e.pos + 1}); write one JSON object per line") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{path} line {line}: a JSON {type(obj).__name__}, not an object; "
                           'write one object per line, e.g. {"prompt": "..."}')
    return obj


def scan_json_array(path: Path, digest: Any) -> Iterator[Record]:
    """Each element of a top-level JSON array (objects only). The text is held while
    scanning; use JSON Lines for files too large for that."""
    try:
        data = read_bounded(path, JSON_ARRAY_MAX)
    except InputLimitError:
        raise DatasetError(f"{path}: a JSON array larger than {JSON_ARRAY_MAX // MIB} MiB is "
                           "not read whole; write it as JSON Lines (.jsonl), one object per "
                           "line") from None
    digest.update(data)
    text = decode_utf8(data, path)
    del data
    dec = json.JSONDecoder()
    bom = 1 if text.startswith("\ufeff") else 0
    i = _skip_ws(text, bom)
    if i >= len(text) or text[i] != "[":
        raise DatasetError(f"{path} line 1: expected a JSON array of objects ('[' first); "
                           "or give JSON Lines (.jsonl), one object per line")
    line = 1 + text.count("\n", 0, i)
    byte = len(text[:i + 1].encode())
    i += 1
    at = i
    while True:
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == "]":
            return
        chunk = text[at:i]
        line += chunk.count("\n")
        byte += len(chunk.encode())
        at = i
        try:
            obj, end = dec.raw_decode(text, i)
            check_depth(obj)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path} line {e.lineno}: not valid JSON ({e.msg} at column "
                               f"{e.colno}); fix the file or write it as JSON Lines") from None
        except (RecursionError, InputLimitError):
            raise DatasetError(f"{path} line {line}: an element nested deeper than "
                               f"{MAX_DEPTH} levels; a record is a prompt and its fields"
                               ) from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path} line {line}: an array element is a JSON "
                               f"{type(obj).__name__}, not an object")
        body = text[i:end]
        nbytes = len(body.encode())
        yield Record(obj, line, byte, byte + nbytes)
        line += body.count("\n")
        byte += nbytes
        at = end
        i = _skip_ws(text, end)
        if i < len(text) and text[i] == ",":
            i += 1
        elif i >= len(text) or text[i] != "]":
            raise DatasetError(f"{path} line {line}: expected ',' or ']' after an element; "
                               "the JSON array is malformed or cut short")


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    return i


def scan_csv(path: Path, digest: Any) -> Iterator[Record]:
    """Each data record of a CSV file with a header row, as ``{column: text}``."""
    header: list[str] | None = None
    pending = bytearray()
    start = pos = 0
    first_line = 1
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            digest.update(raw)
            if not pending:
                start, first_line = pos, n
            pos += len(raw)
            pending += raw
            if len(pending) > JSONL_LINE_MAX:
                raise DatasetError(f"{path} line {first_line}: a record longer than "
                                   f"{JSONL_LINE_MAX // MIB} MiB (a quoted field never "
                                   "closed?)")
            if pending.count(b'"') % 2:
                continue  # inside a quoted field that spans lines
            text = decode_utf8(bytes(pending), path, first_line, start)
            pending.clear()
            if first_line == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            try:
                fields = _csv_fields(text)
            except csv.Error as e:
                raise DatasetError(f"{path} line {first_line}: not CSV ({e})") from None
            if header is None:
                header = [h.strip() for h in fields]
                continue
            if len(fields) != len(header):
                raise DatasetError(
                    f"{path} line {first_line}: {len(fields)} fields where the header has "
                    f"{len(header)}; quote fields that contain commas or newlines")
            yield Record(dict(zip(header, fields, strict=True)), first_line, start, pos)
    if pending:
        raise DatasetError(f"{path} line {first_line}: a quoted field is never closed; "
                           'close it with a double quote (write "" for a quote inside)')
    if header is None:
        raise DatasetError(f"{path}: no header row; the first line must name the columns")


def _csv_fields(text: str) -> list[str]:
    return next(csv.reader(io.StringIO(text, newline="")), [])


class RecordFile:
    """Random access to the records a scan found: ``read(start, end)`` parses again."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.kind = kind  # jsonl | json | csv
        self._header: list[str] | None = None
        if kind == "csv":
            with open(path, "rb") as f:
                for raw in f:
                    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
                    if text.strip():
                        self._header = [h.strip() for h in _csv_fields(text)]
                        break

    def scan(self) -> tuple[Iterator[Record], Any]:
        digest = hashlib.sha256()
        fn = {"jsonl": scan_jsonl, "json": scan_json_array, "csv": scan_csv}[self.kind]
        return fn(self.path, digest), digest

    def read(self, start: int, end: int) -> dict[str, Any]:
        with open(self.path, "rb") as f:
            f.seek(start)
            text = f.read(end - start).decode("utf-8")
        if self.kind == "csv":
            assert self._header is not None
            return dict(zip(self._header, _csv_fields(text), strict=True))
        obj = json.loads(text)
        assert isinstance(obj, dict)
        return obj
