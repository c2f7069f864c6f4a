"""LoadGen's view of a run: the figures and criteria LoadGen would compute from the run's
settings, summary and verdicts, with LoadGen's own arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

from tokenmark.errors import InternalError
from tokenmark.metrics.stats import Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.mllog.common import _DEFAULT_TOKEN_LATENCY_NS, RunFacts, _seconds
from tokenmark.mlperf.rules import Finding, Validity, Verdicts
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

# -- LoadGen's view of a run ------------------------------------------------------------

_MIN_DURATION_ADVICE = {
    Scenario.OFFLINE: "Increase expected QPS so the loadgen pre-generates a larger "
    "(coalesced) query.",
    Scenario.SERVER: "Increase the target QPS so the loadgen pre-generates more queries.",
    Scenario.SINGLE_STREAM: "Decrease the expected latency so the loadgen pre-generates "
    "more queries.",
    Scenario.MULTI_STREAM: "Decrease the expected latency so the loadgen pre-generates "
    "more queries.",
}
_MIN_QUERIES_SUMMARY = (
    " * The test exited early, before enough queries were issued.\n"
    "   See the detailed log for why this may have occurred."
)
_MIN_QUERIES_DETAIL = "The test exited early, before enough queries were issued."
_TTFT_FAIL = "TTFT constrain not met: Reduce target QPS to improve latency."
_TPOT_FAIL = "TPOT constrain not met: Reduce target QPS to improve latency."
_LATENCY_FAIL = "Reduce target QPS to improve latency."
_RAN_OUT = (
    "Ending early: Ran out of generated queries to issue before the minimum query count "
    "and test duration were reached. Please update the relevant expected latency or "
    "target qps in the TestSettings so they are more accurate."
)
_ENDING_NATURALLY = "Ending naturally: Minimum query count and test duration met."
_CONCAT_WARNING = (
    "WARNING: sample_concatenate_permutation was set to true. ",
    "Generated samples per query might be different as the one in the setting.",
    "Check the generated_samples_per_query line in the detailed log for the real",
    "samples_per_query value",
)


@dataclass(frozen=True, slots=True)
class _View:
    """LoadGen's ``PerformanceSummary`` of a tokenmark run, shared by both writers."""

    scenario: Scenario  # LoadGen's TestScenario (Interactive is Server)
    mode: Mode
    tokens: bool
    n: int
    queries: int
    token_count: int
    lat: Distribution
    ttft: Distribution
    tpot: Distribution
    qlat: Distribution
    target_p: float
    max_latency_s: float
    final_sched_s: float
    final_issued_s: float
    final_done_s: float
    target_latency_ns: int
    ttft_limit_ns: int
    tpot_limit_ns: int
    overlatency: int
    valid: bool
    perf_met: bool
    min_duration_met: bool
    min_queries_met: bool
    early_stopping_met: bool
    perf_rec: str
    min_duration_rec: str
    unanswered: Finding | None
    es_texts: dict[str, str]
    es_latency_ss: int
    es_latency_ms: int
    errors: tuple[str, ...]
    warnings: tuple[str, ...]


def _finding(verdicts: Verdicts, rule: str) -> Finding | None:
    for f in verdicts.mlperf.findings:
        if f.rule == rule:
            return f
    return None


def _passed(verdicts: Verdicts, rule: str) -> bool:
    f = _finding(verdicts, rule)
    return True if f is None else f.passed


def _view(
    eff: EffectiveSettings, s: Summary, verdicts: Verdicts, facts: RunFacts
) -> _View:
    if not eff.scenario.is_mlperf:
        raise InternalError(
            f"MLPerf logs are written for MLPerf scenarios only, not {eff.scenario.value!r}"
        )
    if verdicts.mlperf.validity is Validity.NOT_APPLICABLE:
        raise InternalError("MLPerf logs need the MLPerf verdict; it is 'not applicable'")
    sc = eff.scenario.loadgen
    tokens = eff.use_token_latencies
    lim = eff.limits
    target_latency = (lim.e2e_ns or 0) if sc is Scenario.SERVER else 0
    if facts.server_token_limits_ns is not None:
        ttft_limit, tpot_limit = facts.server_token_limits_ns
    else:
        ttft_limit = lim.ttft_ns if lim.ttft_ns is not None else _DEFAULT_TOKEN_LATENCY_NS
        tpot_limit = lim.tpot_ns if lim.tpot_ns is not None else _DEFAULT_TOKEN_LATENCY_NS
    # LoadGen hard-codes 0.99 for Offline, where the percentile is not used.
    target_p = 0.99 if sc is Scenario.OFFLINE else eff.target_latency_percentile

    perf_met = _passed(verdicts, "perf_constraints")
    perf_rec = ""
    if sc is Scenario.SERVER and not perf_met:
        perf_rec = _perf_recommendation(eff, s, target_latency)
        if not perf_rec:  # the verdict failed on a limit LoadGen would not test
            f = _finding(verdicts, "perf_constraints")
            perf_rec = f.advice if f is not None else ""
    min_duration_met = _passed(verdicts, "min_duration")
    answered = _finding(verdicts, "all_queries_answered")
    unanswered = answered if answered is not None and not answered.passed else None

    es_texts = {k: v.text for k, v in verdicts.early_stopping.items()}
    ss = ms = 0
    es = verdicts.early_stopping
    if sc in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        # LoadGen evaluates TPOT then TTFT into the same members, so the estimates of
        # the last evaluation that got that far are the ones it logs.
        ttft = es.get("ttft")
        last = ttft if ttft is not None and ttft.text else es.get("tpot", es.get("latency"))
        if last is not None:
            if sc is Scenario.SINGLE_STREAM:
                ss = last.estimate_ns or 0
                ms = last.estimate_p99_ns or 0
            else:
                ms = last.estimate_ns or 0

    errors: list[str] = []
    if facts.ran_out_of_generated_queries:
        errors.append(_RAN_OUT)
    errors.extend(facts.errors)
    if unanswered is not None:
        errors.append(f"tokenmark: not every query was answered: {unanswered.observed}.")

    overlatency = 0
    if sc is Scenario.SERVER and s.sorted_latency.size:
        overlatency = int((s.sorted_latency > target_latency).sum())
    return _View(
        scenario=sc,
        mode=eff.mode,
        tokens=tokens,
        n=s.sample_count,
        queries=s.queries_issued,
        token_count=s.token_count,
        lat=s.latency,
        ttft=s.ttft,
        tpot=s.tpot,
        qlat=s.query_latency,
        target_p=target_p,
        max_latency_s=_seconds(s.max_latency_ns),
        final_sched_s=_seconds(s.final_query_scheduled_ns),
        final_issued_s=_seconds(s.final_query_issued_ns),
        final_done_s=_seconds(s.final_query_done_ns),
        target_latency_ns=target_latency,
        ttft_limit_ns=ttft_limit,
        tpot_limit_ns=tpot_limit,
        overlatency=overlatency,
        valid=verdicts.mlperf.validity is Validity.VALID,
        perf_met=perf_met,
        min_duration_met=min_duration_met,
        min_queries_met=_passed(verdicts, "min_queries"),
        early_stopping_met=_passed(verdicts, "early_stopping"),
        perf_rec=perf_rec,
        min_duration_rec="" if min_duration_met else _MIN_DURATION_ADVICE[sc],
        unanswered=unanswered,
        es_texts=es_texts,
        es_latency_ss=ss,
        es_latency_ms=ms,
        errors=tuple(errors),
        warnings=tuple(facts.warnings),
    )


def _perf_recommendation(eff: EffectiveSettings, s: Summary, target_latency: int) -> str:
    """LoadGen's ``PerfConstraintsMet`` recommendation text."""
    p = eff.target_latency_percentile
    if not eff.use_token_latencies:
        return _LATENCY_FAIL if s.latency.percentiles.get(p, 0) > target_latency else ""
    rec = ""
    lim = eff.limits
    if lim.ttft_ns is not None and s.ttft.percentiles.get(p, 0) > lim.ttft_ns:
        rec = _TTFT_FAIL
    if lim.tpot_ns is not None and s.tpot.percentiles.get(p, 0) > lim.tpot_ns:
        rec = f"{rec}\n * {_TPOT_FAIL}" if rec else _TPOT_FAIL
    return rec


def _yes(b: bool) -> str:
    return "Yes" if b else "NO"


