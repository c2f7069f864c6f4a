"""The records file: every request of a run, one JSON object per line, as it finishes.

``records.jsonl`` is written in completion order and handed to the operating system at
least every 50 ms (the runner's flush interval), so if tokenmark is killed or crashes the
file holds every record finished more than that long ago; it is fsynced at the end.
Each line is flat and typed the same way, so it loads straight into columns
(``pandas.read_json(path, lines=True)``, ``pyarrow.json``).

Fields (times are integer ns from the run's start):
``seq, query, sample, phase, scheduled_ns, issued_ns, first_token_ns, done_ns,
input_tokens, output_tokens, token_source, alt_output_tokens, error, error_detail,
endpoint, reasoning_tokens, first_answer_ns, cached_input_tokens, server_input_tokens,
finish_reason, stream_tokens, token_basis, demanded_output_tokens, chunk_gaps_ns,
chunk_tokens``.

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
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from tokenmark.records import ErrorClass, Phase, RequestRecord, TokenSource

__all__ = ["RECORDS_FILE", "JsonlRecordSink", "encode_record", "read_records"]

RECORDS_FILE = "records.jsonl"

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


def encode_record(r: RequestRecord) -> str:
    """One record's line of ``records.jsonl`` (with its newline)."""
    times = r.chunk_ns
    # int lists written as json.dumps writes them, without its per-call encoder set-up
    gaps = ",".join([str(b - a) for a, b in zip(times, times[1:], strict=False)])
    toks = r.chunk_tokens
    tok_field = "null" if all(k == 1 for k in toks) else f"[{', '.join(map(str, toks))}]"
    err = "null" if r.error is None else f'"{r.error.value}"'
    detail = _dumps(r.error_detail) if r.error_detail else '""'
    endpoint = _dumps(r.endpoint) if r.endpoint else '""'
    finish = _dumps(r.finish_reason[:64]) if r.finish_reason else '""'
    return (
        f'{{"seq":{r.seq},"query":{r.query_id},"sample":{r.sample_index},'
        f'"phase":"{r.phase.value}","scheduled_ns":{r.scheduled_ns},'
        f'"issued_ns":{r.issued_ns},"first_token_ns":{r.first_token_ns},'
        f'"done_ns":{r.done_ns},"input_tokens":{r.input_tokens},'
        f'"output_tokens":{r.output_tokens},"token_source":"{r.token_source.value}",'
        f'"alt_output_tokens":{r.alt_output_tokens},"error":{err},'
        f'"error_detail":{detail},"endpoint":{endpoint},'
        f'"reasoning_tokens":{r.reasoning_tokens},"first_answer_ns":{r.first_answer_ns},'
        f'"cached_input_tokens":{r.cached_input_tokens},'
        f'"server_input_tokens":{r.server_input_tokens},"finish_reason":{finish},'
        f'"stream_tokens":{r.stream_tokens},"token_basis":"{r.token_basis}",'
        f'"demanded_output_tokens":{r.demanded_output_tokens},'
        f'"chunk_gaps_ns":[{gaps}],'
        f'"chunk_tokens":{tok_field}}}\n'
    )


def read_records(path: Path) -> Iterator[RequestRecord]:
    """Read a records file back. A torn last line (a crash mid-write) is skipped."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.endswith("\n"):
                return
            try:
                d = json.loads(line)
            except RecursionError:
                raise ValueError(f"{path} line {n}: nested too deep to be a record") from None
            first = d["first_token_ns"]
            gaps = d["chunk_gaps_ns"]
            chunk_ns: list[int] = []
            if first >= 0:
                t = first
                chunk_ns.append(t)
                for g in gaps:
                    t += g
                    chunk_ns.append(t)
            toks = d["chunk_tokens"] or [1] * len(chunk_ns)
            yield RequestRecord(
                seq=d["seq"],
                query_id=d["query"],
                sample_index=d["sample"],
                scheduled_ns=d["scheduled_ns"],
                issued_ns=d["issued_ns"],
                first_token_ns=first,
                done_ns=d["done_ns"],
                input_tokens=d["input_tokens"],
                output_tokens=d["output_tokens"],
                token_source=TokenSource(d["token_source"]),
                chunk_ns=chunk_ns,
                chunk_tokens=list(toks),
                error=None if d["error"] is None else ErrorClass(d["error"]),
                error_detail=d["error_detail"],
                phase=Phase(d["phase"]),
                endpoint=d["endpoint"],
                alt_output_tokens=d["alt_output_tokens"],
                reasoning_tokens=d.get("reasoning_tokens", -1),
                first_answer_ns=d.get("first_answer_ns", -1),
                cached_input_tokens=d.get("cached_input_tokens", -1),
                server_input_tokens=d.get("server_input_tokens", -1),
                finish_reason=d.get("finish_reason", ""),
                stream_tokens=d.get("stream_tokens", -1),
                token_basis=d.get("token_basis", ""),
                demanded_output_tokens=d.get("demanded_output_tokens", -1),
            )
