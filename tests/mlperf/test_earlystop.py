"""Early stopping against LoadGen's published numbers (digest §3.1) and its summary text."""

from __future__ import annotations

import pytest

from tokenmark.mlperf.earlystop import (
    MinPassingQueriesFinder,
    server_early_stopping,
    stream_early_stopping,
)

# Queries needed (h_min(t) + t) from the digest's table, computed by LoadGen's algorithm.
TABLE = {
    0.99: {0: 459, 1: 662, 2: 838, 5: 1307, 10: 2010, 50: 6898},
    0.90: {0: 44, 1: 64, 2: 81, 5: 127, 10: 197, 50: 681},
}


@pytest.mark.parametrize("p", sorted(TABLE))
def test_min_queries_table(p):
    for t, needed in TABLE[p].items():
        assert MinPassingQueriesFinder()(t, p) + t == needed


def test_cache_history_gives_same_answers_in_increasing_order():
    find = MinPassingQueriesFinder()
    got = {t: find(t, 0.99) + t for t in sorted(TABLE[0.99])}
    assert got == TABLE[0.99]


def test_server_success_and_advice():
    lat = [1] * 459
    ok = server_early_stopping(lat, 459, limit_ns=10, percentile=0.99)
    assert ok.passed and ok.text == " * Run successful."
    short = server_early_stopping([1] * 200, 200, limit_ns=10, percentile=0.99)
    assert not short.passed
    assert "Would need to run at least 259 more queries" in short.text
    # one over-latency query raises the requirement to 662
    one_over = server_early_stopping([1] * 660 + [100], 661, limit_ns=10, percentile=0.99)
    assert not one_over.passed and "at least 1 more queries" in one_over.text


def test_stream_estimates_discard_worst():
    lat = sorted(range(1, 1001))
    res = stream_early_stopping(lat, 1000, 0.90, single_stream=True)
    assert res.passed
    assert " * Processed at least 64 queries (1000)." in res.text
    # the estimate is an element at or above the plain p90
    assert res.estimate_ns is not None and res.estimate_ns >= lat[900]
    assert res.estimate_p99_ns is not None
    too_few = stream_early_stopping(list(range(50)), 50, 0.90, single_stream=True)
    assert not too_few.passed and "Need to process at least 64 queries" in too_few.text
    ms = stream_early_stopping(list(range(700)), 700, 0.99, single_stream=False)
    assert ms.passed and "at least 662 queries" in ms.text
