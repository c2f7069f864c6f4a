"""Datasets: what the load generator samples from.

A :class:`Dataset` is a sized, indexable collection of :class:`~tokenmark.records.Sample`
with a content fingerprint. This module holds the interface and the synthetic dataset
(exact input lengths from a tokenizer's vocabulary, output lengths from a distribution);
file formats live in their own modules.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tokenmark.errors import DatasetError
from tokenmark.records import Sample
from tokenmark.settings import derive_seed
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = ["Dataset", "LengthDistribution", "SyntheticDataset"]

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


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """A token-length distribution, written as ``KIND:ARGS``.

    - ``128`` or ``fixed:128``
    - ``uniform:LO:HI`` (inclusive)
    - ``normal:MEAN:STD`` (rounded, clipped to ``[1, 3*MEAN]``)
    - ``lognormal:MEDIAN:SIGMA`` (rounded, at least 1)
    """

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str) -> LengthDistribution:
        parts = text.strip().split(":")
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
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "normal":
            return self.a
        return self.a * math.exp(self.b**2 / 2)

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


def _length_help(text: str) -> str:
    return (
        f"cannot read the length distribution {text!r}; write N, fixed:N, uniform:LO:HI, "
        "normal:MEAN:STD or lognormal:MEDIAN:SIGMA with positive numbers (e.g. normal:800:200)"
    )


class SyntheticDataset:
    """``size`` prompts whose token counts under ``tokenizer`` are exactly as drawn.

    Lengths come from one stream (seed ``derive_seed(seed, "synthetic/lengths")``); the
    words of prompt *i* from its own stream (``derive_seed(seed, f"synthetic/prompt/{i}")``),
    so any sample can be rebuilt alone, in any order, on any machine.
    """

    def __init__(
        self,
        size: int,
        input_lengths: LengthDistribution,
        output_lengths: LengthDistribution,
        *,
        seed: int = 0,
        tokenizer: BuiltinTokenizer | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if size <= 0:
            raise DatasetError(f"a synthetic dataset needs at least one sample (got {size})")
        self._size = size
        self._seed = seed
        self._tok = tokenizer or BuiltinTokenizer()
        self.input_lengths = input_lengths
        self.output_lengths = output_lengths
        rng = np.random.default_rng(derive_seed(seed, "synthetic/lengths"))
        self._in = input_lengths.draw(rng, size)
        out = output_lengths.draw(rng, size)
        if max_output_tokens is not None:
            out = np.minimum(out, max_output_tokens)
        self._out = out
        self._cache: OrderedDict[int, Sample] = OrderedDict()

    @property
    def name(self) -> str:
        return (
            f"synthetic(n={self._size}, input={self.input_lengths}, "
            f"output={self.output_lengths}, seed={self._seed})"
        )

    @property
    def tokenizer(self) -> BuiltinTokenizer:
        return self._tok

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.name.encode())
        h.update(self._tok.fingerprint.encode())
        h.update(self._in.tobytes())
        h.update(self._out.tobytes())
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return self._size

    @property
    def input_token_counts(self) -> np.ndarray:
        return self._in

    @property
    def output_token_counts(self) -> np.ndarray:
        return self._out

    def _make_prompt(self, index: int, n_in: int) -> tuple[str, tuple[int, ...]]:
        rng = np.random.default_rng(derive_seed(self._seed, f"synthetic/prompt/{index}"))
        words = self._tok.word_ids()
        ids = rng.integers(words.start, words.stop, size=n_in)
        token_ids = tuple(int(i) for i in ids)
        return self._tok.decode(token_ids), token_ids

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        n_in = int(self._in[index])
        s = Sample(
            index=index,
            prompt=None,
            input_tokens=n_in,
            output_tokens=int(self._out[index]),
            make=functools.partial(self._make_prompt, index, n_in),
        )
        self._cache[index] = s
        if len(self._cache) > _CACHE_SAMPLES:
            self._cache.popitem(last=False)
        return s
