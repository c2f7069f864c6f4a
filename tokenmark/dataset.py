"""Datasets: what the load generator samples from.

A :class:`Dataset` is a sized, indexable collection of :class:`~tokenmark.records.Sample`
with a content fingerprint. This module holds the interface and the synthetic dataset
(exact input lengths from a tokenizer's vocabulary, output lengths from a distribution,
optional shared prefixes); multi-turn conversations, traces and file-backed datasets
live in :mod:`tokenmark.workload` and the file formats in :mod:`tokenmark.sources`.

A dataset may also describe itself (:class:`Described`): which tokenizer counted its
tokens, whether a chat template was applied, how many images it holds. Results carry
that description (:func:`describe_dataset`) beside the fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from tokenmark.errors import DatasetError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.records import Sample
from tokenmark.tokenizer import BuiltinTokenizer, VocabularyTokenizer, exact_text

__all__ = [
    "Dataset",
    "Described",
    "LengthDistribution",
    "Loadable",
    "SyntheticDataset",
    "describe_dataset",
    "draw_ids",
]

#: Prompts are rebuilt on demand; this many recently used samples are kept in memory.
_CACHE_SAMPLES = 4096


class Dataset(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str:
        """A content hash: equal fingerprints mean identical samples."""
        ...

    def __len__(self) -> int: ...

    def sample(self, index: int) -> Sample: ...


@runtime_checkable
class Described(Protocol):
    def describe(self) -> dict[str, object]:
        """JSON-ready facts: ``dataset``, ``fingerprint``, ``samples``, ``tokenizer``,
        ``tokenizer_fingerprint``, ``chat_template`` (bool) and any of the dataset's own
        (images, prefix groups, conversations, skipped rows)."""
        ...


@runtime_checkable
class Loadable(Protocol):
    def load_samples(self, indices: Sequence[int]) -> None:
        """Build these samples now, before the timed run (LoadGen's ``LoadSamplesToRam``
        of the loaded sample set), so that what is costly to make (generated images) is
        not made at send time, in the measurement."""
        ...


def describe_dataset(ds: Dataset) -> dict[str, object]:
    """What results record about the dataset: its own description, or the basics."""
    if isinstance(ds, Described):
        return ds.describe()
    return {"dataset": ds.name, "fingerprint": ds.fingerprint, "samples": len(ds),
            "tokenizer": None, "tokenizer_fingerprint": None, "chat_template": False}


def draw_ids(tok: VocabularyTokenizer, rng: np.random.Generator, n: int) -> list[int]:
    """``n`` ids drawn uniformly from the tokenizer's whole-word vocabulary."""
    words = tok.word_ids()
    if isinstance(words, range):
        return [int(i) for i in rng.integers(words.start, words.stop, size=n)]
    pool = np.asarray(words, dtype=np.int64)
    return [int(i) for i in pool[rng.integers(0, pool.shape[0], size=n)]]


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """A token-length distribution, written as ``KIND:ARGS``.

    - ``128`` or ``fixed:128``
    - ``uniform:LO:HI`` (inclusive)
    - ``normal:MEAN:STD`` (rounded, clipped to ``[1, 3*MEAN]``)
    - ``lognormal:MEDIAN:SIGMA`` (rounded, at least 1)
    - ``hist:LEN=WEIGHT,LEN=WEIGHT,...`` an empirical histogram (each length drawn with
      probability weight / total); :meth:`empirical` builds one from observed lengths
    """

    kind: str
    a: float
    b: float = 0.0
    table: tuple[tuple[int, float], ...] = ()

    @classmethod
    def empirical(cls, lengths: Sequence[int] | np.ndarray) -> LengthDistribution:
        """The histogram of observed ``lengths`` (e.g. a dataset's output lengths)."""
        values, counts = np.unique(np.asarray(lengths, dtype=np.int64), return_counts=True)
        if values.size == 0 or values[0] < 1:
            raise DatasetError("an empirical length histogram needs lengths of at least 1")
        return cls("hist", 0.0, 0.0, tuple((int(v), float(c)) for v, c in
                                           zip(values, counts, strict=True)))

    @classmethod
    def parse(cls, text: str) -> LengthDistribution:
        parts = text.strip().split(":")
        if len(parts) == 2 and parts[0].lower() == "hist":
            return cls._hist(parts[1], text)
        try:
            if len(parts) == 1:
                return cls._checked("fixed", float(parts[0]), 0.0, text)
            kind = parts[0].lower()
            nums = [float(x) for x in parts[1:]]
        except ValueError:
            raise DatasetError(_length_help(text)) from None
        if kind == "fixed" and len(nums) == 1:
            return cls._checked(kind, nums[0], 0.0, text)
        if kind in ("uniform", "normal", "lognormal") and len(nums) == 2:
            return cls._checked(kind, nums[0], nums[1], text)
        raise DatasetError(_length_help(text))

    @classmethod
    def _hist(cls, body: str, text: str) -> LengthDistribution:
        table: dict[int, float] = {}
        try:
            for item in body.split(","):
                length, _, weight = item.partition("=")
                v, w = int(length), float(weight) if weight else 1.0
                if v < 1 or not (math.isfinite(w) and w >= 0):
                    raise ValueError
                table[v] = table.get(v, 0.0) + w
        except ValueError:
            raise DatasetError(_length_help(text)) from None
        if not table or sum(table.values()) <= 0:
            raise DatasetError(_length_help(text))
        return cls("hist", 0.0, 0.0, tuple(sorted(table.items())))

    @classmethod
    def _checked(cls, kind: str, a: float, b: float, text: str) -> LengthDistribution:
        ok = {
            "fixed": a >= 1,
            "uniform": 1 <= a <= b,
            "normal": a >= 1 and b >= 0,
            "lognormal": a >= 1 and b >= 0,
        }[kind]
        if not ok or not (math.isfinite(a) and math.isfinite(b)):
            raise DatasetError(_length_help(text))
        return cls(kind, a, b)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "hist":
            values = np.array([v for v, _ in self.table], dtype=np.int64)
            w = np.array([w for _, w in self.table], dtype=np.float64)
            return values[rng.choice(values.shape[0], size=n, p=w / w.sum())]
        if self.kind == "fixed":
            out = np.full(n, round(self.a), dtype=np.int64)
        elif self.kind == "uniform":
            out = rng.integers(int(self.a), int(self.b) + 1, size=n, dtype=np.int64)
        elif self.kind == "normal":
            raw = np.rint(rng.normal(self.a, self.b, size=n))
            out = np.clip(raw, 1, 3 * self.a).astype(np.int64)
        else:
            raw = np.rint(rng.lognormal(math.log(self.a), self.b, size=n))
            out = np.maximum(raw, 1).astype(np.int64)
        return out

    @property
    def mean(self) -> float:
        if self.kind == "hist":
            total = sum(w for _, w in self.table)
            return sum(v * w for v, w in self.table) / total
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "normal":
            return self.a
        return self.a * math.exp(self.b**2 / 2)

    def __str__(self) -> str:
        if self.kind == "hist":
            return "hist:" + ",".join(f"{v}={w:g}" for v, w in self.table)
        if self.kind == "fixed":
            return f"{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


def _length_help(text: str) -> str:
    return (
        f"cannot read the length distribution {text!r}; write N, fixed:N, uniform:LO:HI, "
        "normal:MEAN:STD, lognormal:MEDIAN:SIGMA or hist:LEN=WEIGHT,... with positive "
        "numbers (e.g. normal:800:200 or hist:128=3,512=1)"
    )


class SyntheticDataset:
    """``size`` prompts whose token counts under ``tokenizer`` are exactly as drawn.

    Lengths come from one stream (seed ``derive_seed(seed, "synthetic/lengths")``); the
    words of prompt *i* from its own stream (``derive_seed(seed, f"synthetic/prompt/{i}")``),
    so any sample can be rebuilt alone, in any order, on any machine.

    Shared prefixes (``prefix_groups`` > 0, ``prefix_tokens`` > 0): sample *i* joins group
    ``g`` drawn from ``derive_seed(seed, "synthetic/prefix-groups")`` and its prompt starts
    with that group's ``prefix_tokens`` tokens (stream ``synthetic/prefix/{g}``), followed
    by its own drawn length; ``input_tokens`` counts both.

    With the built-in tokenizer prompts are built lazily and counts hold by construction.
    Any other :class:`~tokenmark.tokenizer.VocabularyTokenizer` (a model's) is checked by
    re-encoding (:func:`~tokenmark.tokenizer.exact_text`), so those samples are built
    when first asked for and ``input_tokens`` is the count of the text actually made.
    """

    def __init__(
        self,
        size: int,
        input_lengths: LengthDistribution,
        output_lengths: LengthDistribution,
        *,
        seed: int = 0,
        tokenizer: VocabularyTokenizer | None = None,
        max_output_tokens: int | None = None,
        prefix_groups: int = 0,
        prefix_tokens: int = 0,
    ) -> None:
        if size <= 0:
            raise DatasetError(f"a synthetic dataset needs at least one sample (got {size})")
        if prefix_groups < 0 or prefix_tokens < 0 or (prefix_groups > 0) != (prefix_tokens > 0):
            raise DatasetError(
                f"shared prefixes need both a group count and a length > 0 (got "
                f"{prefix_groups} groups of {prefix_tokens} tokens); e.g. 8 groups of 512"
            )
        self._size = size
        self._seed = seed
        self._tok: VocabularyTokenizer = tokenizer or BuiltinTokenizer()
        self.input_lengths = input_lengths
        self.output_lengths = output_lengths
        self.prefix_groups = prefix_groups
        self.prefix_tokens = prefix_tokens
        rng = np.random.default_rng(derive_seed(seed, "synthetic/lengths"))
        self._in = input_lengths.draw(rng, size)
        out = output_lengths.draw(rng, size)
        if max_output_tokens is not None:
            out = np.minimum(out, max_output_tokens)
        self._out = out
        self._group = np.full(size, -1, dtype=np.int64)
        if prefix_groups:
            grng = np.random.default_rng(derive_seed(seed, "synthetic/prefix-groups"))
            self._group = grng.integers(0, prefix_groups, size=size, dtype=np.int64)
            self._in = self._in + prefix_tokens
        self._prefixes: dict[int, list[int]] = {}
        self._cache: OrderedDict[int, Sample] = OrderedDict()

    @property
    def name(self) -> str:
        prefix = (f", prefix={self.prefix_groups}x{self.prefix_tokens}"
                  if self.prefix_groups else "")
        return (
            f"synthetic(n={self._size}, input={self.input_lengths}, "
            f"output={self.output_lengths}{prefix}, seed={self._seed})"
        )

    @property
    def tokenizer(self) -> VocabularyTokenizer:
        return self._tok

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update(self._tok.fingerprint.encode())
        h.update(self._in.tobytes())
        h.update(self._out.tobytes())
        if self.prefix_groups:
            h.update(self._group.tobytes())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, object]:
        return {
            "dataset": self.name, "fingerprint": self.fingerprint, "samples": self._size,
            "tokenizer": self._tok.name, "tokenizer_fingerprint": self._tok.fingerprint,
            "chat_template": False, "prefix_groups": self.prefix_groups,
            "prefix_tokens": self.prefix_tokens,
        }

    def __len__(self) -> int:
        return self._size

    @property
    def input_token_counts(self) -> np.ndarray:
        return self._in

    @property
    def output_token_counts(self) -> np.ndarray:
        return self._out

    def _prefix(self, group: int) -> list[int]:
        ids = self._prefixes.get(group)
        if ids is None:
            rng = np.random.default_rng(derive_seed(self._seed, f"synthetic/prefix/{group}"))
            ids = self._prefixes[group] = draw_ids(self._tok, rng, self.prefix_tokens)
        return ids

    def _make_prompt(self, index: int, n_in: int) -> tuple[str, tuple[int, ...]]:
        rng = np.random.default_rng(derive_seed(self._seed, f"synthetic/prompt/{index}"))
        group = int(self._group[index])
        own = n_in - (self.prefix_tokens if group >= 0 else 0)
        ids = draw_ids(self._tok, rng, own)
        if group >= 0:
            ids = self._prefix(group) + ids
        return exact_text(self._tok, ids)

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        n_in = int(self._in[index])
        group = int(self._group[index])
        n_out = int(self._out[index])
        p_tokens = self.prefix_tokens if group >= 0 else 0
        if isinstance(self._tok, BuiltinTokenizer):
            s = Sample(index, None, n_in, n_out, prefix_group=group, prefix_tokens=p_tokens,
                       make=functools.partial(self._make_prompt, index, n_in))
        else:  # a model's tokenizer: build now so the count is the real one
            text, ids = self._make_prompt(index, n_in)
            s = Sample(index, text, len(ids), n_out, ids, prefix_group=group,
                       prefix_tokens=p_tokens)
        self._cache[index] = s
        if len(self._cache) > _CACHE_SAMPLES:
            self._cache.popitem(last=False)
        return s
