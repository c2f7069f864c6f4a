"""Tables of requests from JSON Lines, JSON, CSV, Parquet or (on request) pickle files.

A :class:`ColumnMap` says which column holds what; unnamed roles are found by their
usual names (``prompt``/``text``/``input``/``question``; ``messages``;
``max_tokens``/``output_tokens``; ``output``/``completion``/``response``/``answer``;
``image``/``images``/``image_path``). A request is a prompt, pre-tokenized ids, or
OpenAI-style messages (whose image parts may be data URLs or local paths); an image
column attaches images to it; a system column opens it with a system message.

:func:`load_table` reads the file once through a :class:`RecordTable` (text files
stream; Parquet keeps one Arrow copy of the mapped columns; pickles need
``allow_pickle``) and returns a :class:`~tokenmark.workload.table.TableDataset`.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

from tokenmark.errors import DatasetError
from tokenmark.inputs import json_loads
from tokenmark.records import Message
from tokenmark.sources.image_files import LoadedImage, load_image
from tokenmark.sources.textfiles import RecordFile, checked_file
from tokenmark.tokenizer import Tokenizer
from tokenmark.workload.table import Row, TableDataset, TableOptions

__all__ = ["ColumnMap", "MappedReader", "RecordTable", "TextTable", "detect_format",
           "load_table", "open_table"]

_GUESS = {
    "prompt": ("prompt", "text", "input", "question", "instruction"),
    "messages": ("messages", "conversation"),
    "output_tokens": ("max_tokens", "output_tokens", "output_len", "max_new_tokens"),
    "reference": ("output", "completion", "response", "answer", "reference"),
    "image": ("image", "images", "image_path", "image_url"),
}
_FORMATS = ("jsonl", "json", "csv", "parquet", "pickle")


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Which column holds each role (``None``: found by its usual names, or absent)."""

    prompt: str | None = None
    token_ids: str | None = None
    messages: str | None = None
    system: str | None = None
    output_tokens: str | None = None
    reference: str | None = None
    reference_ids: str | None = None
    image: str | None = None

    @classmethod
    def parse(cls, text: str) -> ColumnMap:
        """``ROLE=COLUMN,...``, e.g. ``prompt=question,reference=answer``."""
        roles = {f.name for f in fields(cls)}
        given: dict[str, str] = {}
        for item in filter(None, (x.strip() for x in text.split(","))):
            role, eq, col = item.partition("=")
            if not eq or role.strip() not in roles or not col.strip():
                raise DatasetError(
                    f"cannot read the column mapping {item!r}; write ROLE=COLUMN pairs with "
                    f"ROLE one of {', '.join(sorted(roles))} (e.g. prompt=question)")
            given[role.strip()] = col.strip()
        return cls(**given)

    def named(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def resolve(self, columns: Sequence[str], source: str) -> ColumnMap:
        """Fill unnamed roles from ``columns`` and check every named column exists."""
        have = set(columns)
        for role, col in self.named().items():
            if col not in have:
                raise DatasetError(
                    f"{source}: no column {col!r} (for {role}); its columns are "
                    f"{_list(columns)}; fix the mapping (--columns {role}=NAME)")
        filled = self
        for role, names in _GUESS.items():
            if getattr(filled, role) is None:
                hit = next((c for c in names if c in have), None)
                if hit is not None and hit not in filled.named().values():
                    filled = replace(filled, **{role: hit})
        if filled.prompt is None and filled.token_ids is None and filled.messages is None:
            raise DatasetError(
                f"{source}: no prompt column among {_list(columns)}; name it with --columns "
                "prompt=NAME (or token_ids=NAME, messages=NAME)")
        if filled.messages is not None and self.prompt is None:
            filled = replace(filled, prompt=None)  # messages win over a guessed prompt
        return filled


def _list(columns: Sequence[str]) -> str:
    shown = ", ".join(repr(c) for c in list(columns)[:20])
    return shown + (", ..." if len(columns) > 20 else "") if columns else "(none)"


class RecordTable(Protocol):
    """A file's records in order, then any of them again by ordinal."""

    @property
    def source(self) -> str: ...

    @property
    def columns(self) -> Sequence[str]:
        """Column names (for text files, those of the first record)."""
        ...

    def scan(self) -> Iterator[tuple[dict[str, Any], str]]: ...

    def get(self, k: int) -> dict[str, Any]: ...

    @property
    def fingerprint(self) -> str:
        """Content hash; complete once a scan has finished."""
        ...


class TextTable:
    """JSON Lines, JSON array or CSV, streamed once and then read by byte offsets."""

    def __init__(self, path: Path, kind: str) -> None:
        self._file = RecordFile(path, kind)
        self._start = array("q")
        self._end = array("q")
        self._digest = ""
        first = next(iter(self._file.scan()[0]), None)
        if first is None:
            raise DatasetError(f"{path}: no records; give a file with at least one request")
        self._columns = list(first.fields)

    @property
    def source(self) -> str:
        return str(self._file.path)

    @property
    def columns(self) -> Sequence[str]:
        return self._columns

    @property
    def fingerprint(self) -> str:
        return self._digest

    def scan(self) -> Iterator[tuple[dict[str, Any], str]]:
        records, digest = self._file.scan()
        del self._start[:], self._end[:]
        for r in records:
            self._start.append(r.start)
            self._end.append(r.end)
            yield r.fields, f"{self._file.path} line {r.line}"
        self._digest = f"{self._file.kind}:{digest.hexdigest()}"

    def get(self, k: int) -> dict[str, Any]:
        return self._file.read(self._start[k], self._end[k])


#: Rows of one record: (fields, where it is, the record's 0-based ordinal) -> rows.
Shape = Callable[[dict[str, Any], str, int], list[Row]]


class MappedReader:
    """A :class:`~tokenmark.workload.table.RowReader` over a table and a shape function
    that makes rows of a record (one, or one per conversation turn)."""

    def __init__(self, table: RecordTable, shape: Shape, label: str) -> None:
        self._table = table
        self._shape = shape
        self._label = label
        self._record = array("q")
        self._sub = array("i")

    @property
    def source(self) -> str:
        return self._table.source

    @property
    def fingerprint(self) -> str:
        return f"{self._table.fingerprint}|{self._label}"

    def scan(self) -> Iterator[tuple[Row, str]]:
        del self._record[:], self._sub[:]
        for k, (rec, where) in enumerate(self._table.scan()):
            for j, row in enumerate(self._shape(rec, where, k)):
                self._record.append(k)
                self._sub.append(j)
                yield row, where

    def row(self, index: int) -> Row:
        k = self._record[index]
        return self._shape(self._table.get(k), f"{self.source} record {k + 1}", k)[
            self._sub[index]]


# -- cells -----------------------------------------------------------------------------
def cell(rec: dict[str, Any], col: str, where: str) -> Any:
    if col not in rec:
        raise DatasetError(f"{where}: no column {col!r} in this record (its columns are "
                           f"{_list(list(rec))}); add it or fix the mapping")
    return rec[col]


def text_cell(rec: dict[str, Any], col: str, where: str) -> str:
    v = cell(rec, col, where)
    if not isinstance(v, str):
        raise DatasetError(f"{where}: column {col!r} holds {type(v).__name__}, not text")
    return v


def int_cell(rec: dict[str, Any], col: str, where: str) -> int:
    v = cell(rec, col, where)
    try:
        if isinstance(v, bool):
            raise ValueError
        n = int(v) if isinstance(v, int) else int(str(v).strip())
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: column {col!r} is {v!r}, not a whole number") from None
    return n


def ids_cell(rec: dict[str, Any], col: str, where: str) -> tuple[int, ...]:
    v = cell(rec, col, where)
    if isinstance(v, str):
        try:
            v = json_loads(v) if v.lstrip().startswith("[") else [int(x) for x in v.split()]
        except ValueError:
            raise DatasetError(f"{where}: column {col!r} is not a list of token ids "
                               "(write [1, 2, 3] or 1 2 3)") from None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if not isinstance(v, list | tuple) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise DatasetError(f"{where}: column {col!r} is not a list of token ids (whole "
                           "numbers >= 0)")
    return tuple(v)


def _messages(v: Any, base: Path, where: str, verify: bool) -> tuple[list[Message], int]:
    if isinstance(v, str):
        try:
            v = json_loads(v)
        except ValueError as e:  # not JSON, or nested too deep
            raise DatasetError(f"{where}: the messages cell is not usable JSON ({e})"
                               ) from None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if not isinstance(v, list) or not v:
        raise DatasetError(f"{where}: messages must be a non-empty list of "
                           '{"role": ..., "content": ...} objects')
    out: list[Message] = []
    nbytes = 0
    for m in v:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise DatasetError(f"{where}: each message needs a 'role' and a 'content'")
        content = m.get("content")
        if isinstance(content, str):
            out.append(Message(m["role"], content))
            continue
        if not isinstance(content, list):
            raise DatasetError(f"{where}: a message's content must be text or a list of "
                               "parts")
        texts, urls = [], []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, dict) else url
                img = load_image(url, base, where, verify=verify)
                urls.append(img.url)
                nbytes += img.nbytes
            else:
                raise DatasetError(f"{where}: unknown content part {kind!r}; use 'text' "
                                   "or 'image_url'")
        out.append(Message(m["role"], "\n".join(texts), tuple(urls)))
    return out, nbytes


def table_shape(cm: ColumnMap, base: Path, *, verify_images: bool = False) -> Shape:
    """The row of one record of a generic table under the column map ``cm``."""

    def shape(rec: dict[str, Any], where: str, k: int) -> list[Row]:
        del k
        msgs: list[Message] | None = None
        nbytes = 0
        ids = ids_cell(rec, cm.token_ids, where) if cm.token_ids else None
        prompt = text_cell(rec, cm.prompt, where) if cm.prompt else None
        if cm.messages and ids is None:
            msgs, nbytes = _messages(cell(rec, cm.messages, where), base, where,
                                     verify_images)
        images: list[LoadedImage] = []
        if cm.image:
            v = cell(rec, cm.image, where)
            if hasattr(v, "tolist"):
                v = v.tolist()
            for item in v if isinstance(v, list) else [v]:
                images.append(load_image(item, base, where, verify=verify_images))
        if cm.system or images:
            if ids is not None:
                raise DatasetError(f"{where}: token ids cannot take a system message or "
                                   "images; map a prompt or messages column instead")
            msgs = msgs or [Message("user", prompt or "")]
            if images:
                last = msgs[-1]
                msgs[-1] = Message(last.role, last.content,
                                   last.images + tuple(i.url for i in images))
                nbytes += sum(i.nbytes for i in images)
            if cm.system:
                msgs.insert(0, Message("system", text_cell(rec, cm.system, where)))
        ref = text_cell(rec, cm.reference, where) if cm.reference else None
        return [Row(
            prompt=None if msgs is not None else prompt, token_ids=ids,
            messages=tuple(msgs) if msgs is not None else None,
            output_tokens=int_cell(rec, cm.output_tokens, where) if cm.output_tokens else None,
            reference_tokens=len(ids_cell(rec, cm.reference_ids, where))
            if cm.reference_ids else None,
            reference_text=ref,
            images=sum(len(m.images) for m in msgs) if msgs else 0, image_bytes=nbytes)]

    return shape


def detect_format(path: Path) -> str:
    """The format by suffix (``.jsonl .ndjson .json .csv .parquet .pkl .pickle``); a
    ``.json`` file that starts with ``{`` is JSON Lines."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        with open(path, "rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        return "jsonl" if head.startswith(b"{") else "json"
    if suffix in (".csv", ".parquet"):
        return suffix[1:]
    if suffix in (".pkl", ".pickle"):
        return "pickle"
    raise DatasetError(f"{path}: cannot tell the format from the suffix {suffix!r}; name it "
                       f"(--format {'|'.join(_FORMATS)})")


def open_table(path: Path | str, fmt: str | None = None, *, allow_pickle: bool = False,
               columns: Sequence[str] | None = None) -> RecordTable:
    """The file's records. ``columns`` limits what columnar formats load."""
    p = checked_file(path)
    kind = fmt or detect_format(p)
    if kind in ("jsonl", "json", "csv"):
        return TextTable(p, kind)
    if kind == "parquet":
        from tokenmark.sources.parquet import ParquetTable

        return ParquetTable(p, columns)
    if kind == "pickle":
        from tokenmark.sources.pickled import PickleTable

        return PickleTable(p, allow_pickle=allow_pickle, columns=columns)
    raise DatasetError(f"unknown format {kind!r}; choose one of {', '.join(_FORMATS)}")


def load_table(path: Path | str, tokenizer: Tokenizer, options: TableOptions, *,
               fmt: str | None = None, columns: ColumnMap | None = None,
               allow_pickle: bool = False, verify_images: bool = False) -> TableDataset:
    """A dataset of the file's rows under ``columns`` (see the module docstring)."""
    cm = columns or ColumnMap()
    table = open_table(path, fmt, allow_pickle=allow_pickle)
    resolved = cm.resolve(table.columns, table.source)
    select = getattr(table, "select", None)
    if select is not None:  # columnar formats load only what the mapping uses
        select(list(resolved.named().values()))
    shape = table_shape(resolved, Path(table.source).parent, verify_images=verify_images)
    label = ",".join(f"{k}={v}" for k, v in sorted(resolved.named().items()))
    reader = MappedReader(table, shape, label)
    return TableDataset(reader, tokenizer, options, name=f"file({table.source})")
