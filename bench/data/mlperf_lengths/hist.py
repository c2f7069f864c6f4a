"""Print the ``hist:`` length distributions of the MLPerf LLM datasets for
``tokenmark/data/workloads.csv`` and ``outputs.csv`` (README.md here says where each
``<benchmark>.csv`` comes from).

    python bench/data/mlperf_lengths/hist.py

A distribution bins a dataset's lengths (at most ~400 bins: 8 tokens a bin for prompts up
to 3,200 tokens, wider for longer ones) and gives each bin the rounded mean length of its
samples, so the histogram keeps the samples' mean. Prompts of every dataset; outputs of
DeepSeek-R1 only (its reference outputs, capped at the 20,000-token performance-mode
maximum: as they are for the emulated server, and scaled to the published results' mean
for the simulator, as every benchmark's output is).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
DATASETS = ("deepseek-r1", "llama2-70b", "llama3.1-8b", "llama3.1-405b", "mixtral-8x7b")
R1_MAX_OUTPUT = 20000
R1_PUBLISHED_MEAN = 3667.6  # workloads.csv's output_mean_published for deepseek-r1
MAX_BINS = 400


def lengths(name: str) -> tuple[list[int], list[int]]:
    with (HERE / f"{name}.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [int(r["input_length"]) for r in rows], [int(r["output_length"]) for r in rows]


def width(values: list[int]) -> int:
    return max(8, 8 * math.ceil(max(values) / MAX_BINS / 8))


def hist(values: list[int], bin_width: int, scale: float = 1.0) -> str:
    bins: dict[int, list[int]] = defaultdict(list)
    for n in values:
        bins[n // bin_width].append(n)
    return "hist:" + ",".join(f"{max(1, round(scale * sum(v) / len(v)))}={len(v)}"
                              for _, v in sorted(bins.items()))


def distributions() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name in DATASETS:
        inp, outp = lengths(name)
        out[name] = {"input": hist(inp, width(inp))}
        if name == "deepseek-r1":
            capped = [min(R1_MAX_OUTPUT, n) for n in outp]
            mean = sum(capped) / len(capped)
            out[name]["output_reference"] = hist(capped, 32)
            out[name]["output_published"] = hist(capped, 32, R1_PUBLISHED_MEAN / mean)
    return out


def main() -> None:
    for name, d in distributions().items():
        inp, _ = lengths(name)
        print(f"# {name}: {len(inp)} samples, prompt mean {sum(inp) / len(inp):.1f}, "
              f"bins of {width(inp)}")
        for k, v in d.items():
            print(f"{name} {k}: {v}")


if __name__ == "__main__":
    main()
