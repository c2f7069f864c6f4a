"""The simulator's prompt lengths come from the MLPerf datasets themselves
(``bench/data/mlperf_lengths``), and DeepSeek-R1's output shape from its reference outputs.
Ground truth independent of the copies: the submission checker's performance sample
counts, its ``TOKENS_PER_SAMPLE`` for deepseek-r1 (3886.2274, the reference outputs' mean
capped at the 20,000-token maximum), and the prompt limits of the MLPerf READMEs."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tokenmark.perfmodel.outputs import output_model
from tokenmark.sim.workloads import synthetic_dataset, workload

HERE = Path(__file__).parents[2] / "bench" / "data" / "mlperf_lengths"
LENGTHS = HERE / "deepseek-r1.csv"
CHECKER_TOKENS_PER_SAMPLE = 3886.2274  # mlcommons/inference submission checker, deepseek-r1
DATASET_SIZE = 4388  # the checker's performance sample count for deepseek-r1


def _lengths() -> tuple[np.ndarray, np.ndarray]:
    with LENGTHS.open() as f:
        rows = list(csv.DictReader(f))
    return (np.array([int(r["input_length"]) for r in rows]),
            np.array([int(r["output_length"]) for r in rows]))


def test_the_copy_is_the_dataset_the_checker_describes():
    inp, out = _lengths()
    assert len(inp) == DATASET_SIZE
    assert np.minimum(out, 20000).mean() == pytest.approx(CHECKER_TOKENS_PER_SAMPLE, abs=5e-5)


def test_the_packaged_distributions_keep_the_datasets_means():
    inp, out = _lengths()
    w = workload("deepseek-r1")
    # the histograms keep each bin's mean length: the means survive the binning
    assert w.input_tokens.mean == pytest.approx(inp.mean(), rel=1e-3)
    assert output_model("deepseek-r1").total.mean == pytest.approx(
        CHECKER_TOKENS_PER_SAMPLE, rel=1e-3)
    # the simulator's outputs: the same shape at the published results' mean
    assert w.output_mean_published is not None
    assert w.output_tokens.mean == pytest.approx(w.output_mean_published, rel=1e-3)
    # a synthetic dataset drawn from them has the dataset's heavy tail (median ~0.56 of
    # the mean; a lognormal of sigma 0.85 had 0.70)
    ds = synthetic_dataset("deepseek-r1", 8192, max_output_tokens=20000, seed=1)
    o = np.asarray(ds.output_token_counts, dtype=float)
    assert o.mean() == pytest.approx(w.output_mean_published, rel=0.03)
    assert np.median(o) / o.mean() == pytest.approx(np.median(out) / np.minimum(out, 20000).mean(),
                                                   abs=0.03)
    assert o.max() <= 20000


# file, the checker's performance sample count, the prompt limit where a source states
# one (llama2-70b: processorca.py --seqlen_limit=1024; llama3.1-405b: 20k-token prompts),
# the benchmarks using it
DATASETS = [
    ("llama2-70b", 24576, 1024, ("llama2-70b-99", "llama2-70b-99.9")),
    ("llama3.1-8b", 13368, None, ("llama3.1-8b", "llama3.1-8b-edge")),
    ("llama3.1-405b", 8313, 20000, ("llama3.1-405b",)),
    ("mixtral-8x7b", 15000, None, ("mixtral-8x7b",)),
    ("deepseek-r1", 4388, None, ("deepseek-r1",)),
]


@pytest.mark.parametrize(("name", "samples", "limit", "benchmarks"), DATASETS)
def test_every_dataset_copy_and_its_packaged_prompt_lengths(name, samples, limit, benchmarks):
    with (HERE / f"{name}.csv").open() as f:
        inp = np.array([int(r["input_length"]) for r in csv.DictReader(f)])
    assert len(inp) == samples and 1 <= inp.min()
    assert limit is None or inp.max() <= limit
    for b in benchmarks:
        dist = workload(b).input_tokens
        assert dist.kind == "hist" and dist.mean == pytest.approx(inp.mean(), rel=1e-3)
        assert max(v for v, _ in dist.table) <= inp.max()
