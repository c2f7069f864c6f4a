"""DeepSeek-R1's request lengths come from its MLPerf dataset: the 4,388 samples' own
prompt and reference-output token counts (``bench/data/deepseek-r1``). Ground truth
independent of the copy: the submission checker's ``TOKENS_PER_SAMPLE`` for deepseek-r1,
3886.2274, is the reference outputs' mean capped at the 20,000-token maximum."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tokenmark.perfmodel.outputs import output_model
from tokenmark.sim.workloads import synthetic_dataset, workload

LENGTHS = Path(__file__).parents[2] / "bench" / "data" / "deepseek-r1" / "lengths.csv"
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
