"""Records in columns: what the metrics consumers need of a batch, without the objects.

A remote worker (``run --distributed ray``) packs the records it made into one
:class:`RecordColumns` per batch, so the process that merges them feeds
:class:`~tokenmark.metrics.summary.Accumulator` and
:class:`~tokenmark.metrics.endpoints.EndpointBreakdown` with a few array operations
(``add_columns``) instead of one call per record. Both give exactly what ``add`` over
the same records, in the same order, would give.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenmark.records import ErrorClass, Phase, RequestRecord

__all__ = ["COLUMNS", "ERRORS", "ColumnPacker", "RecordColumns", "add_itl", "pack"]

#: The int64 columns, one row of :attr:`RecordColumns.data` each.
COLUMNS = ("seq", "query_id", "scheduled", "issued", "first", "done", "output_tokens",
           "input_tokens", "ok", "measured", "first_answer", "reasoning_tokens",
           "alt_output_tokens", "error", "endpoint")
_IX = {name: i for i, name in enumerate(COLUMNS)}
#: ``error`` column: index into this tuple, -1 for none.
ERRORS: tuple[ErrorClass, ...] = tuple(ErrorClass)
_ERR_IX = {e: i for i, e in enumerate(ERRORS)}


@dataclass(frozen=True)
class RecordColumns:
    """``data[i, j]`` is column ``COLUMNS[i]`` of record ``j``; ``itl`` the batch's
    inter-token gaps in record order; ``endpoint`` indexes ``endpoints``."""

    data: np.ndarray
    itl: np.ndarray
    endpoints: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.data.shape[1])

    def col(self, name: str) -> np.ndarray:
        column: np.ndarray = self.data[_IX[name]]
        return column

    def error_key(self, index: int) -> str:
        """The error counter key of a failed record (``unanswered`` when it has none)."""
        return (ERRORS[index] if index >= 0 else ErrorClass.UNANSWERED).value


def add_itl(out: array[int], times: list[int], tokens: list[int]) -> None:
    """Append a streamed record's inter-token latencies (a chunk of k tokens: k gaps)."""
    prev = times[0]
    for t, k in zip(times[1:], tokens[1:], strict=True):
        gap = t - prev
        prev = t
        if k <= 1:
            out.append(gap)
        else:
            base = gap // k
            out.extend([base] * (k - 1))
            out.append(gap - base * (k - 1))


class ColumnPacker:
    """Packs records one by one as they finish; :meth:`take` hands over the batch so far."""

    __slots__ = ("_add", "_endpoints", "_flat", "_itl")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._endpoints: dict[str, int] = {}
        self._itl: array[int] = array("q")
        self._flat: array[int] = array("q")
        self._add = self._flat.extend

    def __len__(self) -> int:
        return len(self._flat) // len(COLUMNS)

    def add(self, r: RequestRecord) -> None:
        ok = r.error is None and r.done_ns >= 0
        measured = r.phase is Phase.MEASURE
        ep = self._endpoints.get(r.endpoint)
        if ep is None:
            ep = self._endpoints[r.endpoint] = len(self._endpoints)
        self._add((r.seq, r.query_id, r.scheduled_ns, r.issued_ns, r.first_token_ns,
                   r.done_ns, r.output_tokens, r.served_input_tokens, ok, measured,
                   r.first_answer_ns, r.reasoning_tokens, r.alt_output_tokens,
                   -1 if r.error is None else _ERR_IX[r.error], ep))
        if ok and measured and len(r.chunk_ns) > 1:
            add_itl(self._itl, r.chunk_ns, r.chunk_tokens)

    def take(self) -> RecordColumns:
        """The columns of the records added since the last take (in their order)."""
        data = np.frombuffer(self._flat, dtype=np.int64).reshape(-1, len(COLUMNS)).T.copy()
        cols = RecordColumns(data, np.frombuffer(self._itl, dtype=np.int64).copy(),
                             tuple(self._endpoints))
        self._reset()
        return cols


def pack(records: Sequence[RequestRecord]) -> RecordColumns:
    """The columns of ``records`` (in their order)."""
    packer = ColumnPacker()
    add = packer.add
    for r in records:
        add(r)
    return packer.take()
