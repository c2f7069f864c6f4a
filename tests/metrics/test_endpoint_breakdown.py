"""The per-endpoint breakdown counts and times each replica separately."""

from __future__ import annotations

from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.records import ErrorClass, Phase, RequestRecord

MS = 1_000_000


def rec(seq: int, endpoint: str, ttft_ms: int, e2e_ms: int, *, error: ErrorClass | None = None,
        phase: Phase = Phase.MEASURE) -> RequestRecord:
    return RequestRecord(seq=seq, query_id=seq, sample_index=0, scheduled_ns=seq * MS,
                         issued_ns=seq * MS, first_token_ns=(seq + ttft_ms) * MS,
                         done_ns=(seq + e2e_ms) * MS, output_tokens=10, error=error,
                         phase=phase, endpoint=endpoint)


def test_counts_errors_and_latencies_per_endpoint():
    b = EndpointBreakdown()
    for i in range(10):
        b.add(rec(i, "http://a/v1", 10, 100))
    for i in range(10, 14):
        b.add(rec(i, "http://b/v1", 50, 300))
    b.add(rec(20, "http://b/v1", 0, 1, error=ErrorClass.RATE_LIMITED))
    b.add(rec(21, "http://b/v1", 99, 999, phase=Phase.WARMUP))
    d = b.to_json()
    assert b.endpoints == ["http://a/v1", "http://b/v1"]
    assert d["http://a/v1"]["requests"] == 10 and d["http://a/v1"]["completed"] == 10
    assert d["http://a/v1"]["ttft_ns"] == {"p50": 10 * MS, "p90": 10 * MS, "p99": 10 * MS}
    b_ = d["http://b/v1"]
    assert (b_["requests"], b_["completed"], b_["errors"]) == (6, 5, {"http_429": 1})
    assert b_["output_tokens"] == 50 and b_["e2e_ns"]["p99"] == 300 * MS  # warm-up excluded
