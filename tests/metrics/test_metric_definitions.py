"""One definition per metric: the array and per-record forms agree, and every TTFT/TPOT
figure tokenmark shows (report, live view, endpoint table, reproduce) equals the
summary's for the same records, including requests answered without a streamed token
(TTFT = E2E) and 1-token answers (LoadGen's TPOT quirk)."""

from __future__ import annotations

import math
from array import array
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tokenmark.config.layering import build_settings
from tokenmark.metrics.definitions import (
    e2e_ns,
    itl_split,
    spread_itl,
    tpot_ns,
    tpot_one,
    ttft_ns,
    ttft_one,
)
from tokenmark.metrics.endpoints import EndpointBreakdown
from tokenmark.metrics.live import LiveLatency
from tokenmark.metrics.summary import Accumulator, summarize
from tokenmark.mlperf.rules import ClientStats, evaluate
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.output.records import RECORDS_FILE, JsonlRecordSink
from tokenmark.output.results import ResultsDocument, RunInfo, write_results
from tokenmark.records import RequestRecord, TokenSource
from tokenmark.report import run_report_data
from tokenmark.trust.compare import compare_runs, load_run

times = st.integers(min_value=0, max_value=10**12)


@given(st.lists(st.tuples(times, st.integers(-1, 10**12), times, st.integers(0, 5000)),
                min_size=1, max_size=50))
def test_array_and_per_record_forms_agree(rows):
    sched, first, done, n = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    e2e = e2e_ns(sched, done)
    ttft = ttft_ns(sched, first, done)
    tpot = tpot_ns(e2e, ttft, n)
    for i, (s, f, d, k) in enumerate(rows):
        assert ttft[i] == ttft_one(s, f, d) == ((f if f >= 0 else d) - s)
        assert tpot[i] == tpot_one(d - s, ttft_one(s, f, d), k)
        num = d - s - ttft_one(s, f, d)
        den = (k if k > 1 else 0) - 1
        # C++ integer division truncates toward zero
        assert tpot[i] == math.trunc(Fraction(num, den))


def test_tpot_of_a_one_token_answer_is_loadgens():
    # LoadGen records a count of 1 as 0 tokens: TPOT = (E2E - TTFT) / -1
    assert tpot_one(900, 300, 1) == -600
    assert tpot_one(900, 300, 0) == -600
    assert tpot_one(900, 300, 3) == 300
    assert tpot_one(901, 300, 3) == 300  # truncated


@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 9)), min_size=2, max_size=30))
def test_itl_split_equals_spreading_one_by_one(chunks):
    t, chunk_ns, tokens = 0, [], []
    for gap, k in chunks:
        t += gap
        chunk_ns.append(t)
        tokens.append(k)
    one: array[int] = array("q")
    spread_itl(one, chunk_ns, tokens)
    gaps = np.diff(np.array(chunk_ns, dtype=np.int64))
    base, repeats, last = itl_split(gaps, np.array(tokens[1:], dtype=np.int64))
    expanded = [v for b, r, lst in zip(base, repeats, last, strict=True)
                for v in [int(b)] * int(r) + [int(lst)]]
    assert list(one) == expanded
    assert sum(one) == chunk_ns[-1] - chunk_ns[0]


def _records() -> list[RequestRecord]:
    """Answered requests of three kinds by ``seq % 3``: 0 answered without a streamed
    token (no first-token time: TTFT = E2E; records read from files written that way),
    1 with one token, 2 streamed in chunks of 1, 2 and 1 tokens; delays vary with seq."""
    out = []
    for i in range(90):
        sched = i * 20_000_000
        issued = sched + 1000 * (i % 4)
        first = sched + 1_000_000 * (5 + (i * 7) % 13)
        done = first + 3_000_000 * (1 + (i * 5) % 11)
        r = RequestRecord(seq=i, query_id=i, sample_index=i, scheduled_ns=sched,
                          issued_ns=issued, done_ns=done, input_tokens=20,
                          token_source=TokenSource.SUT)
        if i % 3 == 0:
            r.output_tokens = 6
        elif i % 3 == 1:
            r.first_token_ns, r.chunk_ns, r.chunk_tokens, r.output_tokens = (
                first, [first], [1], 1)
        else:
            r.first_token_ns, r.output_tokens = first, 4
            r.chunk_ns, r.chunk_tokens = [first, (first + done) // 2, done], [1, 2, 1]
        out.append(r)
    return out


def test_every_ttft_and_tpot_shown_equals_the_summarys(tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT,
                             overrides={"target_qps": 50.0})
    eff = effective(layered.settings, 90)
    recs = _records()
    acc, endpoints, live = Accumulator(), EndpointBreakdown(), LiveLatency(eff)
    sink = JsonlRecordSink(tmp_path / RECORDS_FILE)
    for r in recs:
        for consume in (acc.add, endpoints.add, live.add, sink.write):
            consume(r)
    sink.close()
    s = summarize(acc.finish(len(recs)), eff)
    run_info = RunInfo(round="v6.0", benchmark="llama3.1-8b", scenario="constant")
    write_results(tmp_path, ResultsDocument.of_run(
        layered, eff, s, evaluate(s, eff, ClientStats()), run_info,
        files={"records": RECORDS_FILE}))
    assert s.sample_count == 90
    assert int((s.sorted_tpot < 0).sum()) == 30  # LoadGen's 1-token TPOT
    no_first = [r for r in recs if r.first_token_ns < 0]
    assert len(no_first) == 30  # their TTFT is their E2E
    assert {r.done_ns - r.scheduled_ns for r in no_first} <= set(s.sorted_ttft.tolist())

    # live view (its window holds the whole run here, so its percentile is exact)
    snap = live.snapshot(len(recs))
    p = eff.target_latency_percentile
    assert snap.ttft_ns == s.ttft.percentiles[p]
    assert snap.tpot_ns == s.tpot.percentiles[p]
    assert snap.e2e_ns == s.latency.percentiles[p]

    # per-endpoint table
    ep = endpoints.to_json()["(none)"]
    for q in (0.5, 0.9, 0.99):
        assert ep["ttft_ns"][f"p{round(q * 100):g}"] == s.ttft.percentiles[q]
        assert ep["e2e_ns"][f"p{round(q * 100):g}"] == s.latency.percentiles[q]

    # report: every per-request value it draws
    data = run_report_data(tmp_path)
    dists = {d["name"]: d for d in data["distributions"]}
    for name, values in (("ttft", s.sorted_ttft), ("tpot", s.sorted_tpot),
                         ("e2e", s.sorted_latency)):
        assert dists[name]["cdf"]["x"] == [v / 1e6 for v in values.tolist()], name

    # reproduce / compare: the per-request values and the percentiles it reads
    run = load_run(tmp_path)
    assert np.array_equal(np.sort(run.ttft_ns), s.sorted_ttft)
    assert np.array_equal(np.sort(run.tpot_ns), s.sorted_tpot)
    assert np.array_equal(np.sort(run.e2e_ns), s.sorted_latency)
    deltas = {d.metric: d for d in compare_runs(run, run)}
    for q in (0.5, 0.9, 0.99):
        assert deltas[f"TTFT p{q * 100:g}"].a == s.ttft.percentiles[q]
        assert deltas[f"E2E p{q * 100:g}"].a == s.latency.percentiles[q]
        tpot = s.tpot.percentiles[q]  # a ratio needs a positive figure: p50 is 0 here
        assert (deltas[f"TPOT p{q * 100:g}"].a == tpot) if tpot > 0 else (
            f"TPOT p{q * 100:g}" not in deltas)
    assert "TPOT p99" in deltas
