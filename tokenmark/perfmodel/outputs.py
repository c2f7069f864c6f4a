"""How long the emulated model answers, and how a reasoning model splits its answer.

Pure: the emulated server, the in-process emulator and the simulator plan outputs by
this one rule. ``data/outputs.csv`` holds, per reasoning benchmark, the published
statistics of its outputs (MLPerf's reference mean and maximum, with sources; the shape
and the split between reasoning and answer are stated assumptions) and the field its
reasoning streams in: ``reasoning_content`` (DeepSeek-R1 style) or ``reasoning``
(gpt-oss style).

:meth:`OutputPlanner.plan` decides one request's output from its ``max_tokens`` (M):

- **Length.** By default the answer is exactly M tokens (``finish_reason``
  ``length``), as an emulator with exact lengths should be. It stops earlier (``stop``)
  only when the request does not set ``ignore_eos`` and there is a natural length L to
  stop at: the request's reference length (the dataset's reference answer, sent by
  tokenmark to its own emulator) or a draw from the stop-length distribution the
  server was started with (``tokenmark serve --stop-lengths``; ``published`` is the
  benchmark's published distribution). Then the answer is ``min(L, M)`` tokens,
  ``stop`` when ``L < M``.
- **Reasoning.** A reasoning model's natural answer for a prompt is L tokens (the stop
  length above, or, with exact lengths, a draw from the benchmark's published output
  distribution), of which the last ``A = min(a, L - 1)`` are the answer (``a`` drawn
  from the benchmark's answer-length distribution) and the ``R = L - A`` before them
  reasoning. When it stops (or is cut at M) the reasoning keeps ``min(R, M)`` tokens and
  the answer the rest (none when the reasoning alone reaches M, as a real model cut off
  mid-thought); with exact lengths the M tokens are split in the natural proportions:
  ``max(1, round(M x R / L))`` reasoning tokens, at most ``M - 1`` (an exact answer is
  a whole one: reasoning, then at least one answer token, when M >= 2), the rest answer.

Random streams (DESIGN "Random streams"): the draws for a request depend only on the
server's seed and the request's prompt, like a greedy model's output, so the same
prompt always gets the same lengths whatever the arrival order. With ``k`` the first 32
hex digits of ``sha256(prompt key)``, the stop length is the first draw of
``numpy.random.default_rng(derive_seed(seed, f"emulator/stop/{k}"))``, the natural
length with exact lengths that of ``derive_seed(seed, f"emulator/length/{k}")`` and the
answer length that of ``derive_seed(seed, f"emulator/answer/{k}")``, each by
:meth:`~tokenmark.dataset.LengthDistribution.draw`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

import numpy as np

from tokenmark.dataset import LengthDistribution
from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.perfmodel.hardware import read_data_csv

__all__ = [
    "REASONING_FIELDS",
    "OutputModel",
    "OutputPlan",
    "OutputPlanner",
    "output_model",
    "prompt_key",
]

#: The chat delta fields reasoning streams in, by API style.
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(frozen=True, slots=True)
class OutputModel:
    """A benchmark's outputs as published (``outputs.csv``); empty for plain models."""

    benchmark: str
    reasoning_field: str = ""  # "" (no reasoning), "reasoning_content" or "reasoning"
    total: LengthDistribution | None = None  # the whole output (reasoning + answer)
    published_mean: float = 0.0
    max_tokens: int = 0
    answer: LengthDistribution | None = None
    source: str = ""

    @property
    def reasons(self) -> bool:
        return bool(self.reasoning_field)

    def stop_lengths(self, text: str) -> LengthDistribution | None:
        """A ``--stop-lengths`` value: "" (none), ``published`` (this benchmark's
        published output distribution) or a length distribution (``lognormal:M:S``...)."""
        text = text.strip()
        if not text:
            return None
        if text.lower() == "published":
            if self.total is None:
                raise ConfigError(
                    f"--stop-lengths published: no published output-length distribution "
                    f"for {self.benchmark} (outputs.csv has deepseek-r1 and gpt-oss-120b); "
                    "give a distribution such as lognormal:300:0.8")
            return self.total
        return LengthDistribution.parse(text)


@cache
def _models() -> dict[str, OutputModel]:
    out: dict[str, OutputModel] = {}
    for r in read_data_csv("outputs.csv"):
        field = r["reasoning_field"]
        if field and field not in REASONING_FIELDS:
            raise ValueError(f"outputs.csv: unknown reasoning field {field!r}")
        out[r["benchmark"]] = OutputModel(
            benchmark=r["benchmark"], reasoning_field=field,
            total=LengthDistribution.parse(r["output_tokens"]),
            published_mean=float(r["output_mean_published"]),
            max_tokens=int(r["max_output_tokens"]),
            answer=LengthDistribution.parse(r["answer_tokens"]), source=r["sources"])
    return out


def output_model(benchmark: str) -> OutputModel:
    """The benchmark's output model (``deepseek-r1``, ``gpt-oss-120b``; an
    ``-interactive`` suffix is accepted); plain models get an empty one."""
    name = benchmark.strip().lower().removesuffix("-interactive")
    return _models().get(name, OutputModel(name))


def prompt_key(*parts: bytes) -> str:
    """The 32 hex digits that name a request's random draws (its prompt's digest)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
        h.update(b"\x00")
    return h.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """One request's output: ``reasoning`` tokens, then ``answer`` tokens."""

    reasoning: int
    answer: int
    finish: str  # "length" or "stop"

    @property
    def total(self) -> int:
        return self.reasoning + self.answer


class OutputPlanner:
    """Plans outputs for one served model (see the module docstring)."""

    def __init__(self, model: OutputModel, *, stop: LengthDistribution | None = None,
                 seed: int = 0) -> None:
        self.model = model
        self.stop = stop
        self.seed = seed

    def _draw(self, dist: LengthDistribution, stream: str, key: str) -> int:
        rng = np.random.default_rng(derive_seed(self.seed, f"emulator/{stream}/{key}"))
        return int(dist.draw(rng, 1)[0])

    def plan(self, key: str, max_tokens: int, *, ignore_eos: bool = False,
             reference: int = -1, split: bool = True) -> OutputPlan:
        """The output of a request whose prompt has ``key`` (:func:`prompt_key`).

        ``reference``: the request's reference output length (-1: none); ``split``:
        whether reasoning is told apart (chat), else every token is answer text.
        """
        m = max(1, max_tokens)
        natural = -1
        if not ignore_eos:
            if reference >= 1:
                natural = reference
            elif self.stop is not None:
                natural = max(1, self._draw(self.stop, "stop", key))
        total, finish = (natural, "stop") if 1 <= natural < m else (m, "length")
        mod = self.model
        if not (split and mod.reasons and mod.answer is not None and mod.total is not None):
            return OutputPlan(0, total, finish)
        length = natural if natural >= 1 else max(1, self._draw(mod.total, "length", key))
        answer = min(self._draw(mod.answer, "answer", key), length - 1) if length > 1 else 0
        if natural >= 1:  # it stops (or is cut at max_tokens): reasoning comes first
            reasoning = min(length - answer, total)
        else:  # exact length: the natural proportions, and an answer when there is room
            reasoning = min(max(1, total - 1), max(1, round(total * (length - answer) / length)))
        return OutputPlan(reasoning, total - reasoning, finish)
