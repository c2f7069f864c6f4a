"""Order statistics: LoadGen's percentile definition, exact even when spilled to disk."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.metrics.stats import LOADGEN_PERCENTILES, Column, Distribution, loadgen_index


def test_loadgen_index_is_floor_of_double_product():
    assert loadgen_index(800, 0.99) == 792
    assert loadgen_index(100, 0.999) == 99
    # n * p is computed in double precision and truncated, as C++ does
    assert loadgen_index(1000, 0.29) == int(1000 * 0.29) == 290


@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=400))
@settings(max_examples=60, deadline=None)
def test_distribution_matches_sorted_index(values):
    d = Distribution.of(values)
    s = sorted(values)
    for p in LOADGEN_PERCENTILES:
        assert d.percentiles[p] == s[int(len(s) * p)]
    assert d.min == s[0] and d.max == s[-1]
    assert d.count == len(s)
    total = sum(s)
    # LoadGen: int64_t sum / size_t count, C++'s usual conversions (the sum to unsigned)
    assert d.mean_trunc == ctypes.c_int64(ctypes.c_uint64(total).value // len(s)).value
    if total >= 0:
        assert d.mean_trunc == total // len(s)


def test_a_negative_sum_is_divided_as_loadgen_divides_it():
    """A TPOT column with 1-token samples (LoadGen records their count as 0, so their TPOT
    is negative) can sum below 0: LoadGen then logs 2**64 + sum, divided by the count (a
    SingleStream run on a loaded machine logged result_time_to_output_token_mean
    63390873105474806 for 291 samples summing to -16,382,816 ns)."""
    d = Distribution.of([-16_382_816] + [0] * 290)
    assert d.mean_trunc == 63390873105474806 == (2**64 - 16_382_816) // 291
    assert Distribution.of([-5]).mean_trunc == -5  # n = 1: the int64 value comes back


def test_spilled_column_is_exact():
    rng = np.random.default_rng(7)
    values = rng.integers(-(10**9), 10**12, size=20_000)
    small = Column(cap=1000)  # forces ~20 spilled chunks
    try:
        small.extend(int(v) for v in values)
        assert small.spilled
        ref = Distribution.of(values)
        got = small.distribution()
        assert got.percentiles == ref.percentiles
        assert (got.min, got.max, got.count) == (ref.min, ref.max, ref.count)
        assert abs(got.mean - ref.mean) < 1e-6 * abs(ref.mean) + 1e-6
        assert got.intervals == ref.intervals
    finally:
        small.close()


def test_spilled_column_with_many_equal_values():
    col = Column(cap=100)
    try:
        col.extend([5] * 1000 + [7] * 10)
        d = col.distribution()
        # n = 1010: index 999 (p99) is still a 5, index 1008 (p99.9) a 7
        assert d.percentiles[0.99] == 5 and d.percentiles[0.999] == 7
    finally:
        col.close()


def test_confidence_interval_brackets_percentile():
    d = Distribution.of(range(10_000))
    for p, (lo, hi) in d.intervals.items():
        assert lo <= d.percentiles[p] <= hi
