"""The records file: every request of a run, one JSON object per line, as it finishes.

``records.jsonl`` is written in completion order and handed to the operating system at
least every 50 ms (the runner's flush interval), so if tokenmark is killed or crashes the
file holds every record finished more than that long ago; it is fsynced at the end.
Each line is flat and typed the same way, so it loads straight into columns
(``pandas.read_json(path, lines=True)``, ``pyarrow.json``).

Fields (times are integer ns from the run's start): :data:`FIELDS`, the one list of
them, which :func:`encode_record`, :func:`encode_columns` (the simulator's records) and
:func:`read_records` all follow; a line holds every attribute of a
:class:`~tokenmark.records.RequestRecord`.

``input_tokens`` is the prompt's planned length (the dataset's tokenizer) and
``server_input_tokens`` the server's own count (usage ``prompt_tokens``; -1 when not
reported); ``finish_reason`` is the server's (``""``: not told). ``stream_tokens`` are
the output tokens counted from the streamed events and ``token_basis`` says how (see
:class:`~tokenmark.records.RequestRecord`); ``demanded_output_tokens`` the length the
request demanded exactly (``ignore_eos``), -1 otherwise. Files written before these
fields existed read back with their defaults.

``cached_input_tokens`` are the prompt tokens the server served from its prefix cache
(usage ``prompt_tokens_details.cached_tokens``); -1 when not reported.

``reasoning_tokens`` and ``first_answer_ns`` are for reasoning models (tokens of
``reasoning_content``, and when the first answer token came); -1 when not reported.
``chunk_gaps_ns`` are the gaps between successive streamed chunks (their sum is
``last chunk - first_token_ns``); ``chunk_tokens`` the tokens per chunk, only when a chunk
carried more than one (``null`` means one each).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, fields
from itertools import repeat
from pathlib import Path
from typing import IO, Any

from tokenmark.records import ErrorClass, Phase, RequestRecord, TokenSource

__all__ = ["FIELDS", "RECORDS_FILE", "JsonlRecordSink", "encode_columns", "encode_record",
           "read_records"]

RECORDS_FILE = "records.jsonl"

#: The one list of a line's fields, in file order: (key, the
#: :class:`~tokenmark.records.RequestRecord` attribute it holds). ``chunk_gaps_ns`` is
#: written from ``chunk_ns`` (the gaps between chunk times); every other field is the
#: attribute as it is. Every attribute of a record is in the file.
FIELDS: tuple[tuple[str, str], ...] = (
    ("seq", "seq"), ("query", "query_id"), ("sample", "sample_index"), ("phase", "phase"),
    ("scheduled_ns", "scheduled_ns"), ("issued_ns", "issued_ns"),
    ("first_token_ns", "first_token_ns"), ("done_ns", "done_ns"),
    ("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
    ("token_source", "token_source"), ("alt_output_tokens", "alt_output_tokens"),
    ("error", "error"), ("error_detail", "error_detail"), ("endpoint", "endpoint"),
    ("reasoning_tokens", "reasoning_tokens"), ("first_answer_ns", "first_answer_ns"),
    ("cached_input_tokens", "cached_input_tokens"),
    ("server_input_tokens", "server_input_tokens"), ("finish_reason", "finish_reason"),
    ("stream_tokens", "stream_tokens"), ("token_basis", "token_basis"),
    ("demanded_output_tokens", "demanded_output_tokens"),
    ("chunk_gaps_ns", "chunk_ns"), ("chunk_tokens", "chunk_tokens"),
)
#: One line, every value already rendered as JSON (``%s`` each, in :data:`FIELDS` order).
_LINE = "{" + ",".join(f'"{key}":%s' for key, _ in FIELDS) + "}\n"
_QUOTED: dict[Any, str] = {e: f'"{e.value}"' for e in (*Phase, *TokenSource, *ErrorClass)}
_dumps = json.dumps


class JsonlRecordSink:
    def __init__(self, path: Path) -> None:
        self.path = path
        # binary: lines are ASCII (json escapes the rest), and batches encoded elsewhere
        # (a remote worker's) go to the file without a copy
        self._f: IO[bytes] = open(path, "wb", buffering=1 << 20)  # noqa: SIM115
        self._lines: list[str] = []
        self.count = 0

    def write(self, r: RequestRecord) -> None:
        self._lines.append(encode_record(r))
        self.count += 1

    def write_encoded(self, data: bytes | memoryview, count: int) -> None:
        """Append ``count`` records' lines already encoded (UTF-8) and joined."""
        if self._lines:
            self._f.write("".join(self._lines).encode())
            self._lines.clear()
        self._f.write(data)
        self.count += count

    def flush(self) -> None:
        if self._lines:
            self._f.write("".join(self._lines).encode())
            self._lines.clear()
        self._f.flush()

    def close(self) -> None:
        if self._f.closed:
            return
        self.flush()
        os.fsync(self._f.fileno())
        self._f.close()


def _gaps(times: Sequence[int]) -> str:
    # int lists written as json.dumps writes them, without its per-call encoder set-up
    return f"[{','.join([str(b - a) for a, b in zip(times, times[1:], strict=False)])}]"


def _chunk_tokens(toks: Sequence[int]) -> str:
    return "null" if all(k == 1 for k in toks) else f"[{', '.join(map(str, toks))}]"


def _text(v: str) -> str:
    return _dumps(v) if v else '""'


def encode_record(r: RequestRecord) -> str:
    """One record's line of ``records.jsonl`` (with its newline)."""
    return _LINE % (
        r.seq, r.query_id, r.sample_index, _QUOTED[r.phase], r.scheduled_ns, r.issued_ns,
        r.first_token_ns, r.done_ns, r.input_tokens, r.output_tokens,
        _QUOTED[r.token_source], r.alt_output_tokens,
        "null" if r.error is None else _QUOTED[r.error], _text(r.error_detail),
        _text(r.endpoint), r.reasoning_tokens, r.first_answer_ns, r.cached_input_tokens,
        r.server_input_tokens, _text(r.finish_reason[:64]), r.stream_tokens,
        f'"{r.token_basis}"', r.demanded_output_tokens, _gaps(r.chunk_ns),
        _chunk_tokens(r.chunk_tokens))


#: How a value of each attribute is rendered when it comes from a column.
_RENDER: dict[str, Any] = {
    "phase": lambda v: _QUOTED[Phase(v)],
    "token_source": lambda v: _QUOTED[TokenSource(v)],
    "error": lambda v: "null" if v is None else _QUOTED[ErrorClass(v)],
    "error_detail": _text, "endpoint": _text,
    "finish_reason": lambda v: _text(v[:64]), "token_basis": lambda v: f'"{v}"',
    "chunk_ns": _gaps, "chunk_tokens": _chunk_tokens,
}
_DEFAULTS: dict[str, Any] = {
    f.name: [] if f.default is MISSING else f.default  # the lists default to empty
    for f in fields(RequestRecord) if f.default is not MISSING or f.default_factory is not MISSING
}


def encode_columns(columns: Mapping[str, Iterable[Any]]) -> Iterator[str]:
    """The lines of records given as columns (attribute name -> one value per record,
    plain ints and strings); an attribute not given takes the record's default. The same
    line :func:`encode_record` writes for the same record."""
    unknown = set(columns) - {attr for _, attr in FIELDS}
    if unknown:
        raise ValueError(f"not record attributes: {', '.join(sorted(unknown))}")
    missing = [attr for _, attr in FIELDS if attr not in columns and attr not in _DEFAULTS]
    if missing:
        raise ValueError(f"records need {', '.join(missing)} (no default)")
    parts: list[Iterable[Any]] = []
    for _, attr in FIELDS:
        render = _RENDER.get(attr)
        if attr in columns:
            col = columns[attr]
            parts.append(col if render is None else map(render, col))
        else:
            value = _DEFAULTS[attr]
            parts.append(repeat(value if render is None else render(value)))
    for values in zip(*parts, strict=False):
        yield _LINE % values


def read_records(path: Path) -> Iterator[RequestRecord]:
    """Read a records file back. A torn last line (a crash mid-write) is skipped; a field
    a file written before it existed lacks reads back as the record's default."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            try:
                d = json.loads(line)
            except RecursionError:
                raise ValueError(f"{path} line {n}: nested too deep to be a record") from None
            kw = {attr: d[key] for key, attr in FIELDS if key in d}
            first = d["first_token_ns"]
            chunk_ns: list[int] = []
            if first >= 0:
                t = first
                chunk_ns.append(t)
                for g in d["chunk_gaps_ns"]:
                    t += g
                    chunk_ns.append(t)
            kw["chunk_ns"] = chunk_ns
            kw["chunk_tokens"] = list(d["chunk_tokens"] or [1] * len(chunk_ns))
            kw["phase"] = Phase(d["phase"])
            kw["token_source"] = TokenSource(d["token_source"])
            kw["error"] = None if d["error"] is None else ErrorClass(d["error"])
            yield RequestRecord(**kw)
