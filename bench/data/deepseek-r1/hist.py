"""Print the ``hist:`` length distributions of DeepSeek-R1's MLPerf dataset for
``tokenmark/data/workloads.csv`` and ``outputs.csv`` (README.md here says where
``lengths.csv`` comes from).

    python bench/data/deepseek-r1/hist.py

Each distribution bins the 4,388 samples' lengths (input: 8 tokens a bin; output,
capped at the 20,000-token performance-mode maximum: 32 tokens a bin) and gives each bin
the rounded mean length of its samples, so the histogram keeps the samples' mean. The
simulator's output row is the same shape scaled to the mean of the published results
(``--scale``).
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
MAX_OUTPUT = 20000


def hist(lengths: list[int], width: int, scale: float = 1.0) -> str:
    bins: dict[int, list[int]] = defaultdict(list)
    for n in lengths:
        bins[n // width].append(n)
    parts = []
    for k in sorted(bins):
        v = bins[k]
        parts.append(f"{max(1, round(scale * sum(v) / len(v)))}={len(v)}")
    return "hist:" + ",".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale-to", type=float, default=3667.6,
                    help="the simulator's published output mean (workloads.csv)")
    a = ap.parse_args()
    with (HERE / "lengths.csv").open() as f:
        rows = list(csv.DictReader(f))
    inp = [int(r["input_length"]) for r in rows]
    out = [min(MAX_OUTPUT, int(r["output_length"])) for r in rows]
    mean = sum(out) / len(out)
    print(f"# {len(rows)} samples; input mean {sum(inp) / len(inp):.1f}; output mean "
          f"capped at {MAX_OUTPUT}: {mean:.4f}")
    print("input:", hist(inp, 8))
    print("output (reference):", hist(out, 32))
    print(f"output (x{a.scale_to / mean:.4f}, mean {a.scale_to}):",
          hist(out, 32, a.scale_to / mean))


if __name__ == "__main__":
    main()
