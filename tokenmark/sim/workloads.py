"""Request-length distributions of the MLPerf LLM benchmarks, for simulated runs.

``data/workloads.csv`` gives, per benchmark, the input and output token-length
distributions a simulated run draws its synthetic dataset from, and where each number
comes from. Output means are matched to the published results themselves (tokens/s
divided by samples/s in the MLPerf results CSV); input lengths are estimates where no
published mean was found, and say so. A run against a real dataset file does not use
this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.perfmodel.hardware import read_data_csv

__all__ = ["Workload", "synthetic_dataset", "workload"]


@dataclass(frozen=True, slots=True)
class Workload:
    benchmark: str
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    output_mean_published: float | None
    beams: int  # sequences decoded per request (beam search width)
    status: str
    sources: str


@cache
def _table() -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for r in read_data_csv("workloads.csv"):
        mean = r["output_mean_published"].strip()
        out[r["benchmark"]] = Workload(
            benchmark=r["benchmark"],
            input_tokens=LengthDistribution.parse(r["input_tokens"]),
            output_tokens=LengthDistribution.parse(r["output_tokens"]),
            output_mean_published=float(mean) if mean else None,
            beams=int(r["beams"] or 1),
            status=r["status"],
            sources=r["sources"],
        )
    return out


def _key(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum()).replace("interactive", "")


def workload(benchmark: str) -> Workload:
    """The length distributions of ``benchmark`` (checker or LoadGen spelling)."""
    k = _key(benchmark)
    for name, w in _table().items():
        if _key(name) == k:
            return w
    raise ConfigError(
        f"no request-length table for {benchmark!r}; choose one of: {', '.join(_table())} "
        "or give --input-len/--output-len"
    )


def synthetic_dataset(
    benchmark: str,
    size: int,
    *,
    max_output_tokens: int | None = None,
    seed: int = 0,
    input_lengths: LengthDistribution | None = None,
    output_lengths: LengthDistribution | None = None,
) -> SyntheticDataset:
    """A synthetic dataset with ``benchmark``'s length distributions (either may be
    overridden), outputs capped at ``max_output_tokens``."""
    w = workload(benchmark) if input_lengths is None or output_lengths is None else None
    inp = input_lengths or (w.input_tokens if w else None)
    out = output_lengths or (w.output_tokens if w else None)
    assert inp is not None and out is not None
    return SyntheticDataset(size, inp, out, seed=seed, max_output_tokens=max_output_tokens)
