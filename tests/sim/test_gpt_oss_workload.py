"""gpt-oss-120b's request lengths against the figures MLCommons published for its
performance set (6,396 samples): the reference implementation's input-length plot
(mlcommons/inference language/gpt-oss-120b/dataset_isl_distribution.png: mean 5,011,
median 4,593, quartiles 3,492 and 6,046 tokens) and TEST09's output mean (1,278.20)."""

from __future__ import annotations

import math

import numpy as np

from tokenmark.sim.workloads import synthetic_dataset, workload

# the published performance-set figures (tokens)
ISL_MEAN, ISL_MEDIAN, ISL_Q1, ISL_Q3 = 5011, 4593, 3492, 6046
OSL_MEAN = 1278.20
Z75 = 0.6744897501960817  # the standard normal's upper quartile


def test_gpt_oss_input_lengths_are_the_published_performance_set():
    d = workload("gpt-oss-120b").input_tokens
    assert d.kind == "lognormal"
    median, sigma = d.a, d.b
    # a lognormal's mean is median x exp(sigma^2 / 2), its quartiles median x exp(+-z sigma)
    assert abs(median * math.exp(sigma ** 2 / 2) / ISL_MEAN - 1) < 0.01
    assert abs(median / ISL_MEDIAN - 1) < 0.01
    assert abs(median * math.exp(-Z75 * sigma) / ISL_Q1 - 1) < 0.02
    assert abs(median * math.exp(Z75 * sigma) / ISL_Q3 - 1) < 0.02


def test_a_synthetic_gpt_oss_set_has_the_published_means():
    ds = synthetic_dataset("gpt-oss-120b", 6396, max_output_tokens=10240)
    inp = np.asarray(ds.input_token_counts, dtype=float)
    out = np.asarray(ds.output_token_counts, dtype=float)
    assert abs(inp.mean() / ISL_MEAN - 1) < 0.03
    assert abs(np.median(inp) / ISL_MEDIAN - 1) < 0.03
    assert abs(out.mean() / OSL_MEAN - 1) < 0.05
