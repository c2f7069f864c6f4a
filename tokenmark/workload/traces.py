"""Timed traces: requests replayed at the times a production trace recorded.

A trace gives, per request, an arrival time and input and output lengths (Azure's LLM
inference traces: ``TIMESTAMP``, ``ContextTokens``, ``GeneratedTokens``), and for
Mooncake's traces also ``hash_ids``: one hash per block of ``block_size`` (512) prompt
tokens, chained so that equal hashes mean equal prefixes. :class:`TraceDataset` makes
one synthetic prompt per request of exactly the traced length; each hash id stands for
one fixed block of tokens (stream ``derive_seed(seed, f"trace/block/{hash}")``), so
requests that share hash ids share those prompt tokens and prefix caching sees what it
saw in production. Tokens past the hashed blocks (or all of them, without hash ids) come
from the request's own stream ``trace/prompt/{i}``.

:class:`TraceWorkload` pairs the dataset with the send offsets for
:func:`tokenmark.mlperf.scenarios.timed_trace`: times relative to the first request, divided by
``speedup`` (2.0 replays twice as fast). Times must not go backwards; the error names
the file and line, unless the caller asked to sort (stably, keeping equal times in
file order).
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from tokenmark.dataset import draw_ids
from tokenmark.errors import DatasetError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.records import Sample
from tokenmark.tokenizer import BuiltinTokenizer, VocabularyTokenizer, exact_text

__all__ = ["MOONCAKE_BLOCK_TOKENS", "TraceDataset", "TraceTable", "TraceWorkload"]

MOONCAKE_BLOCK_TOKENS = 512
_CACHE = 4096


@dataclass(frozen=True)
class TraceTable:
    """What a trace reader found: one entry per request, in file order."""

    source: str
    time_ns: np.ndarray  # int64, as recorded (any origin)
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    line: np.ndarray  # int64, the 1-based line of each request
    hash_ids: np.ndarray | None = None  # int64, all requests' hash ids, concatenated
    hash_start: np.ndarray | None = None  # int64, len + 1 offsets into hash_ids
    content_hash: str = ""

    def ordered(self, sort: bool) -> TraceTable:
        """The table in time order: checked, or sorted when ``sort`` is true."""
        back = np.nonzero(np.diff(self.time_ns) < 0)[0]
        if back.size == 0:
            return self
        if not sort:
            i = int(back[0]) + 1
            raise DatasetError(
                f"{self.source} line {int(self.line[i])}: its timestamp is earlier than "
                f"line {int(self.line[i - 1])}'s; sort the trace by time, or let tokenmark "
                "sort it (--trace-sort)")
        order = np.argsort(self.time_ns, kind="stable")
        hash_ids, hash_start = self.hash_ids, self.hash_start
        if hash_ids is not None and hash_start is not None:
            pieces = [hash_ids[hash_start[j]:hash_start[j + 1]] for j in order]
            lengths = np.array([p.shape[0] for p in pieces], dtype=np.int64)
            hash_start = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            hash_ids = np.concatenate(pieces) if pieces else hash_ids
        return TraceTable(self.source, self.time_ns[order], self.input_tokens[order],
                          self.output_tokens[order], self.line[order], hash_ids, hash_start,
                          self.content_hash + ":sorted")


class TraceDataset:
    """One sample per traced request, prompts of exactly the traced input length."""

    def __init__(self, table: TraceTable, *, seed: int = 0,
                 tokenizer: VocabularyTokenizer | None = None,
                 block_tokens: int = MOONCAKE_BLOCK_TOKENS,
                 max_output_tokens: int | None = None) -> None:
        self._t = table
        self._seed = seed
        self._tok: VocabularyTokenizer = tokenizer or BuiltinTokenizer()
        self._block = block_tokens
        out = table.output_tokens
        self._out = np.minimum(out, max_output_tokens) if max_output_tokens else out
        self._blocks: OrderedDict[int, list[int]] = OrderedDict()
        self._cache: OrderedDict[int, Sample] = OrderedDict()
        self._shared = self._shared_prefixes()

    def _hashes(self, i: int) -> np.ndarray:
        t = self._t
        if t.hash_ids is None or t.hash_start is None:
            return np.empty(0, dtype=np.int64)
        return t.hash_ids[t.hash_start[i]:t.hash_start[i + 1]]

    def _shared_prefixes(self) -> np.ndarray:
        """Per request: prompt tokens in leading blocks that an earlier request sent."""
        n = len(self)
        shared = np.zeros(n, dtype=np.int64)
        if self._t.hash_ids is None:
            return shared
        seen: set[int] = set()
        for i in range(n):
            hs = self._hashes(i).tolist()
            k = 0
            while k < len(hs) and hs[k] in seen:
                k += 1
            shared[i] = min(k * self._block, int(self._t.input_tokens[i]))
            seen.update(hs)
        return shared

    @property
    def name(self) -> str:
        return f"trace({self._t.source}, n={len(self)}, seed={self._seed})"

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update(self._t.content_hash.encode())
        h.update(self._tok.fingerprint.encode())
        h.update(self._out.tobytes())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, object]:
        return {"dataset": self.name, "fingerprint": self.fingerprint, "samples": len(self),
                "source": self._t.source, "tokenizer": self._tok.name,
                "tokenizer_fingerprint": self._tok.fingerprint, "chat_template": False,
                "block_tokens": self._block if self._t.hash_ids is not None else None,
                "shared_prefix_tokens": int(self._shared.sum()),
                "input_tokens": int(self._t.input_tokens.sum())}

    def __len__(self) -> int:
        return int(self._t.time_ns.shape[0])

    @property
    def input_token_counts(self) -> np.ndarray:
        return self._t.input_tokens

    @property
    def output_token_counts(self) -> np.ndarray:
        return self._out

    def _block_ids(self, h: int) -> list[int]:
        ids = self._blocks.get(h)
        if ids is None:
            rng = np.random.default_rng(derive_seed(self._seed, f"trace/block/{h}"))
            ids = self._blocks[h] = draw_ids(self._tok, rng, self._block)
            if len(self._blocks) > _CACHE:
                self._blocks.popitem(last=False)
        return ids

    def _make(self, i: int) -> tuple[str, tuple[int, ...]]:
        n = int(self._t.input_tokens[i])
        ids: list[int] = []
        for h in self._hashes(i).tolist():
            if len(ids) >= n:
                break
            ids.extend(self._block_ids(int(h)))
        del ids[n:]
        if len(ids) < n:
            rng = np.random.default_rng(derive_seed(self._seed, f"trace/prompt/{i}"))
            ids.extend(draw_ids(self._tok, rng, n - len(ids)))
        return exact_text(self._tok, ids)

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        hs = self._hashes(index)
        group = int(hs[0]) if hs.size else -1
        shared = int(self._shared[index])
        n_out = int(self._out[index])
        if isinstance(self._tok, BuiltinTokenizer):
            s = Sample(index, None, int(self._t.input_tokens[index]), n_out,
                       make=functools.partial(self._make, index), prefix_group=group,
                       prefix_tokens=shared)
        else:
            text, ids = self._make(index)
            s = Sample(index, text, len(ids), n_out, ids, prefix_group=group,
                       prefix_tokens=shared)
        self._cache[index] = s
        if len(self._cache) > _CACHE:
            self._cache.popitem(last=False)
        return s


@dataclass(frozen=True)
class TraceWorkload:
    """A trace ready to run: its dataset and each request's send offset (ns from the
    first request, already divided by the speed-up factor)."""

    dataset: TraceDataset
    offsets_ns: np.ndarray
    speedup: float

    @classmethod
    def from_table(cls, table: TraceTable, *, speedup: float = 1.0, sort: bool = False,
                   seed: int = 0, tokenizer: VocabularyTokenizer | None = None,
                   block_tokens: int = MOONCAKE_BLOCK_TOKENS,
                   max_output_tokens: int | None = None) -> TraceWorkload:
        if not (speedup > 0 and np.isfinite(speedup)):
            raise DatasetError(f"the trace speed-up must be a positive number (got {speedup});"
                               " e.g. 2 replays twice as fast")
        if table.time_ns.shape[0] == 0:
            raise DatasetError(f"{table.source}: the trace has no requests; give a trace "
                               "with at least one line")
        table = table.ordered(sort)
        rel = (table.time_ns - table.time_ns[0]).astype(np.float64) / speedup
        offsets = np.rint(rel).astype(np.int64)
        ds = TraceDataset(table, seed=seed, tokenizer=tokenizer, block_tokens=block_tokens,
                          max_output_tokens=max_output_tokens)
        return cls(ds, offsets, speedup)

    @property
    def sample_index(self) -> np.ndarray:
        """Request *i* sends sample *i*: the trace's own order."""
        return np.arange(self.offsets_ns.shape[0], dtype=np.int64)
