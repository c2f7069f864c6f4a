"""Each rule on hand-built records: the verdicts, the observed and required values, advice."""

from __future__ import annotations

import pytest

from tokenmark.metrics.summary import Accumulator, summarize
from tokenmark.mlperf.rules import ClientStats, Validity, evaluate
from tokenmark.mlperf.settings import LatencyLimits, Scenario, Seeds, TestSettings, effective
from tokenmark.records import ErrorClass, RequestRecord

MS = 1_000_000
SEEDS = Seeds(1, 2, 3)


def settings(scenario=Scenario.SERVER, **kw) -> TestSettings:
    base = dict(
        round="v6.0", benchmark="llama3.1-8b", scenario=scenario, seeds=SEEDS,
        target_qps=10.0, min_duration_ms=1000, min_query_count=100,
        use_token_latencies=True, limits=LatencyLimits(ttft_ns=100 * MS, tpot_ns=10 * MS),
    )
    base.update(kw)
    return TestSettings(**base)


def server_records(n, *, gap=2 * MS, ttft=50 * MS, tpot=5 * MS, tokens=11, lag=0,
                   slow_ttft=0, errors=0):
    recs = []
    for i in range(n):
        sched = i * gap
        t_first = ttft * (3 if i < slow_ttft else 1)
        r = RequestRecord(seq=i, query_id=i, sample_index=i % 7, scheduled_ns=sched,
                          issued_ns=sched + lag, first_token_ns=sched + t_first,
                          done_ns=sched + t_first + (tokens - 1) * tpot,
                          input_tokens=5, output_tokens=tokens,
                          chunk_ns=[sched + t_first + k * tpot for k in range(tokens)],
                          chunk_tokens=[1] * tokens)
        if i >= n - errors:
            r.error = ErrorClass.HTTP_STATUS
        recs.append(r)
    return recs


NO_CLIENT = ClientStats()


def judge(recs, s: TestSettings, client=NO_CLIENT, dataset=7, interrupted=False):
    eff = effective(s, dataset)
    acc = Accumulator()
    for r in recs:
        acc.add(r)
    summary = summarize(acc.finish(len(recs), interrupted=interrupted, reason="test"), eff)
    return summary, evaluate(summary, eff, client)


def by_rule(verdict):
    return {f.rule: f for f in verdict.findings}


def test_valid_server_run():
    s, v = judge(server_records(600), settings())
    assert v.mlperf.validity is Validity.VALID and v.tokenmark.validity is Validity.VALID
    assert s.ttft.percentiles[0.99] == 50 * MS and s.tpot.percentiles[0.99] == 5 * MS
    assert v.early_stopping["tpot"].text == " * Run successful."


def test_min_duration_uses_the_last_scheduled_time():
    _, v = judge(server_records(600), settings(min_duration_ms=2000))  # last at 1.198 s
    f = by_rule(v.mlperf)["min_duration"]
    assert not f.passed and "1.198 s" in f.observed and ">= 2.000 s" in f.required
    assert f.advice == "Increase the target QPS so the loadgen pre-generates more queries."


def test_min_queries():
    _, v = judge(server_records(600), settings(min_query_count=700))
    assert not by_rule(v.mlperf)["min_queries"].passed


def test_ttft_constraint_and_early_stopping():
    # 5 of 600 over the TTFT limit: p99 (index 594) is within the limit, but early
    # stopping with t = 5 needs 1307 queries.
    _, v = judge(server_records(600, slow_ttft=5), settings())
    f = by_rule(v.mlperf)
    assert f["perf_constraints"].passed
    assert not f["early_stopping"].passed and ">= 1307" in f["early_stopping"].required
    assert "Would need to run at least 707 more queries" in v.early_stopping["ttft"].text
    # 6 over: p99 index 594 lands on a slow one -> the constraint fails with LoadGen's text
    _, v = judge(server_records(600, slow_ttft=6), settings())
    pc = by_rule(v.mlperf)["perf_constraints"]
    assert not pc.passed and pc.advice.startswith("TTFT constrain not met")


def test_tpot_fails_first_and_short_circuits_ttft():
    _, v = judge(server_records(300, tpot=20 * MS), settings())
    assert not v.early_stopping["tpot"].passed
    assert v.early_stopping["ttft"].text == ""  # LoadGen's && skips TTFT


def test_errors_make_both_verdicts_invalid():
    _, v = judge(server_records(600, errors=3), settings())
    assert not by_rule(v.mlperf)["all_queries_answered"].passed
    er = by_rule(v.tokenmark)["error_rate"]
    assert not er.passed and "http_status: 3" in er.observed


def test_error_rate_limit_allows_expected_failures():
    _, v = judge(server_records(600, errors=3), settings(scenario=Scenario.POISSON,
                                                           error_rate_limit=0.01))
    assert v.mlperf.validity is Validity.NOT_APPLICABLE
    assert by_rule(v.tokenmark)["error_rate"].passed


def test_send_lag_rule_default_limit():
    # mean inter-arrival 100 ms -> limit max(2 ms, 1 ms) = 2 ms
    _, v = judge(server_records(600, lag=3 * MS), settings())
    f = by_rule(v.tokenmark)["send_lag"]
    assert not f.passed and "3.000 ms" in f.observed and "<= 2.000 ms" in f.required
    assert v.mlperf.validity is Validity.VALID  # LoadGen knows nothing of send lag
    assert v.tokenmark.validity is Validity.INVALID
    _, v = judge(server_records(600, lag=3 * MS), settings(send_lag_limit_ns=5 * MS))
    assert by_rule(v.tokenmark)["send_lag"].passed


def test_offline_client_issue_time():
    recs = server_records(50, gap=0)
    _, v = judge(recs, settings(Scenario.OFFLINE, min_query_count=50, offline_expected_qps=1),
                 ClientStats(issue_span_ns=500 * MS))
    assert not by_rule(v.tokenmark)["client_issue_time"].passed
    assert "early_stopping" in by_rule(v.mlperf) and by_rule(v.mlperf)["early_stopping"].passed


def test_closed_loop_overhead_rule():
    _, v = judge(server_records(100), settings(Scenario.CLOSED_LOOP, concurrency=2),
                 ClientStats(closed_gap_p99_ns=5 * MS, closed_gap_count=99))
    assert not by_rule(v.tokenmark)["client_overhead"].passed


def test_interrupted_run():
    _, v = judge(server_records(600), settings(), interrupted=True)
    assert not by_rule(v.tokenmark)["run_completed"].passed
    assert "interrupted" in by_rule(v.mlperf)["all_queries_answered"].observed


def test_user_limits_on_own_patterns_and_goodput():
    s, v = judge(server_records(600, slow_ttft=60),
                 settings(Scenario.POISSON, limits=LatencyLimits(ttft_ns=100 * MS)))
    f = by_rule(v.tokenmark)["latency_limits"]
    assert not f.passed
    assert s.goodput_fraction == pytest.approx(540 / 600)


def test_token_count_disagreement_is_flagged():
    recs = server_records(600)
    recs[5].alt_output_tokens = 12
    _, v = judge(recs, settings())
    assert not by_rule(v.tokenmark)["token_count_agreement"].passed


def test_single_token_outputs_follow_loadgen_quirk():
    recs = server_records(600, tokens=1)
    s, _ = judge(recs, settings())
    # LoadGen records n_tokens <= 1 as 0, so TPOT = (e2e - ttft) / -1 = 0 here and no
    # tokens are counted
    assert s.token_count == 0 and s.tpot.max == 0


def test_accuracy_mode_judges_answers_not_the_clients_pacing():
    """LoadGen's accuracy mode measures nothing: a late client (send lag 50 ms against a
    2 ms limit) or a slow server (TTFT above the user's limit) does not make its answers
    wrong; failed requests still do."""
    from tokenmark.mlperf.settings import Mode

    late = server_records(600, lag=50 * MS, ttft=300 * MS)
    limits = LatencyLimits(ttft_ns=100 * MS)
    _, perf = judge(late, settings(scenario=Scenario.POISSON, limits=limits))
    assert {"send_lag", "latency_limits"} <= {f.rule for f in perf.tokenmark.failed}
    _, acc = judge(late, settings(scenario=Scenario.POISSON, limits=limits, mode=Mode.ACCURACY))
    assert acc.tokenmark.validity is Validity.VALID
    assert [f.rule for f in acc.tokenmark.findings] == ["error_rate", "run_completed"]
    _, acc = judge(server_records(600, lag=50 * MS, errors=1),
                   settings(mode=Mode.ACCURACY))
    assert acc.tokenmark.validity is Validity.INVALID
    assert [f.rule for f in acc.mlperf.findings] == ["all_queries_answered"]
