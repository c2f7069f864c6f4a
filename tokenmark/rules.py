"""Rules: each a pure function that returns a :class:`Finding` with advice.

Two verdicts, never mixed (DESIGN.md):

- the **MLPerf verdict** applies exactly LoadGen's criteria (minimum duration, minimum
  queries, latency limits at the preset's percentile for Server/Interactive, early
  stopping) plus LoadGen's implicit one: every query answered. It exists only for the
  MLPerf scenarios; elsewhere it is "not applicable". An accuracy-mode run is judged by
  that last criterion alone (LoadGen judges no performance in accuracy mode).
- the **tokenmark verdict** adds tokenmark's own rules (client send lag, client
  overhead, error rate, token-count disagreement, interrupted runs, and the user's
  latency limits on non-MLPerf patterns). A run is VALID under it only if the MLPerf
  verdict (where applicable) is VALID too; the CLI's exit code follows it.

Every finding records which verdict it belongs to, what was observed, what was
required, and how to fix a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tokenmark.earlystop import (
    EarlyStoppingResult,
    server_early_stopping,
    stream_early_stopping,
)
from tokenmark.metrics.summary import Summary
from tokenmark.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "ClientStats",
    "Finding",
    "Validity",
    "Verdict",
    "VerdictKind",
    "Verdicts",
    "client_bottleneck",
    "evaluate",
    "server_counts",
    "with_findings",
]


class VerdictKind(StrEnum):
    MLPERF = "mlperf"
    TOKENMARK = "tokenmark"


class Validity(StrEnum):
    VALID = "VALID"
    INVALID = "INVALID"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    verdict: VerdictKind
    passed: bool
    observed: str
    required: str
    advice: str = ""
    detail: str = ""  # longer text, e.g. LoadGen's early-stopping lines

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "verdict": self.verdict.value,
            "passed": self.passed,
            "observed": self.observed,
            "required": self.required,
            "advice": self.advice,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    validity: Validity
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.passed)


@dataclass(frozen=True, slots=True)
class Verdicts:
    mlperf: Verdict
    tokenmark: Verdict
    # LoadGen's early-stopping outcomes, kept for the log writers
    early_stopping: dict[str, EarlyStoppingResult]

    @property
    def valid(self) -> bool:
        return self.tokenmark.validity is Validity.VALID


@dataclass(frozen=True, slots=True)
class ClientStats:
    """What the runner measured about itself."""

    issue_span_ns: int = 0  # first to last send of an Offline run
    closed_gap_p99_ns: int = 0  # p99 of (next send - previous completion) per stream
    closed_gap_count: int = 0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _s(ns: float) -> str:
    return f"{ns / 1e9:.3f} s"


def evaluate(summary: Summary, eff: EffectiveSettings, client: ClientStats) -> Verdicts:
    es: dict[str, EarlyStoppingResult] = {}
    if eff.is_mlperf:
        ml = _mlperf_findings(summary, eff, es)
        ml_valid = all(f.passed for f in ml)
        mlperf = Verdict(
            VerdictKind.MLPERF, Validity.VALID if ml_valid else Validity.INVALID, tuple(ml)
        )
    else:
        ml_valid = True
        mlperf = Verdict(VerdictKind.MLPERF, Validity.NOT_APPLICABLE, ())
    own = _tokenmark_findings(summary, eff, client)
    tm_valid = ml_valid and all(f.passed for f in own)
    tokenmark = Verdict(
        VerdictKind.TOKENMARK, Validity.VALID if tm_valid else Validity.INVALID, tuple(own)
    )
    return Verdicts(mlperf, tokenmark, es)


# -- MLPerf (LoadGen's criteria) --------------------------------------------------------


def _mlperf_findings(
    s: Summary, eff: EffectiveSettings, es: dict[str, EarlyStoppingResult]
) -> list[Finding]:
    if eff.mode is Mode.ACCURACY:
        # LoadGen's accuracy mode issues the accuracy set once and judges no performance
        # (no duration, query count, latency or early-stopping criterion): every sample
        # must be answered, for the accuracy log to hold them all.
        return [_all_answered(s)]
    out = [_min_duration(s, eff), _min_queries(s, eff)]
    if eff.scenario.loadgen is Scenario.SERVER:
        out.append(_perf_constraints(s, eff))
    out.append(_early_stopping(s, eff, es))
    out.append(_all_answered(s))
    return out


def _min_duration(s: Summary, eff: EffectiveSettings) -> Finding:
    lg = eff.scenario.loadgen
    if lg is Scenario.OFFLINE:
        observed, what = s.max_latency_ns, "completion of the last sample"
        advice = "Increase expected QPS so the loadgen pre-generates a larger (coalesced) query."
    elif lg is Scenario.SERVER:
        observed, what = s.final_query_scheduled_ns, "scheduled time of the last query"
        advice = "Increase the target QPS so the loadgen pre-generates more queries."
    else:
        observed, what = s.final_query_issued_ns, "issue time of the last query"
        advice = "Decrease the expected latency so the loadgen pre-generates more queries."
    passed = observed / 1e9 >= eff.min_duration_ns / 1e9
    return Finding(
        "min_duration",
        VerdictKind.MLPERF,
        passed,
        f"{what}: {_s(observed)}",
        f">= {_s(eff.min_duration_ns)}",
        "" if passed else advice,
    )


def _min_queries(s: Summary, eff: EffectiveSettings) -> Finding:
    passed = (
        s.queries_issued >= eff.min_query_count and s.sample_count >= eff.min_sample_count
    )
    return Finding(
        "min_queries",
        VerdictKind.MLPERF,
        passed,
        f"{s.queries_issued} queries issued, {s.sample_count} samples completed",
        f">= {eff.min_query_count} queries and >= {eff.min_sample_count} samples",
        ""
        if passed
        else "The test exited early, before enough queries were issued. "
        "Run longer (raise min_duration or the rate) or let every query finish.",
    )


def _pct(p: float) -> str:
    return f"p{p * 100:g}"


def _perf_constraints(s: Summary, eff: EffectiveSettings) -> Finding:
    p = eff.target_latency_percentile
    lim = eff.limits
    problems: list[str] = []
    observed: list[str] = []
    required: list[str] = []
    if eff.use_token_latencies:
        ttft = s.ttft.percentiles.get(p, 0)
        tpot = s.tpot.percentiles.get(p, 0)
        observed += [f"{_pct(p)} TTFT {_ms(ttft)}", f"{_pct(p)} TPOT {_ms(tpot)}"]
        if lim.ttft_ns is not None:
            required.append(f"TTFT <= {_ms(lim.ttft_ns)}")
            if ttft > lim.ttft_ns:
                problems.append("TTFT constrain not met: Reduce target QPS to improve latency.")
        if lim.tpot_ns is not None:
            required.append(f"TPOT <= {_ms(lim.tpot_ns)}")
            if tpot > lim.tpot_ns:
                problems.append("TPOT constrain not met: Reduce target QPS to improve latency.")
    else:
        lat = s.latency.percentiles.get(p, 0)
        target = lim.e2e_ns if lim.e2e_ns is not None else 0
        observed.append(f"{_pct(p)} latency {_ms(lat)}")
        required.append(f"latency <= {_ms(target)}")
        if lat > target:
            problems.append("Reduce target QPS to improve latency.")
    return Finding(
        "perf_constraints",
        VerdictKind.MLPERF,
        not problems,
        ", ".join(observed),
        ", ".join(required),
        " ".join(problems),
    )


def _early_stopping(
    s: Summary, eff: EffectiveSettings, es: dict[str, EarlyStoppingResult]
) -> Finding:
    lg = eff.scenario.loadgen
    p = eff.target_latency_percentile
    if lg is Scenario.OFFLINE:
        return Finding("early_stopping", VerdictKind.MLPERF, True, "not used in Offline", "-")
    q = s.queries_issued
    if lg is Scenario.SERVER:
        if eff.use_token_latencies:
            tpot_lim = eff.limits.tpot_ns if eff.limits.tpot_ns is not None else 0
            ttft_lim = eff.limits.ttft_ns if eff.limits.ttft_ns is not None else 0
            es["tpot"] = server_early_stopping(s.sorted_tpot, q, tpot_lim, p)
            passed = es["tpot"].passed
            if passed:  # LoadGen evaluates TTFT only when TPOT passed (&& short-circuit)
                es["ttft"] = server_early_stopping(s.sorted_ttft, q, ttft_lim, p)
                passed = es["ttft"].passed
            else:
                es["ttft"] = EarlyStoppingResult(False, "", 0)
            needed = max(r.queries_needed for r in es.values())
        else:
            lim = eff.limits.e2e_ns if eff.limits.e2e_ns is not None else 0
            es["latency"] = server_early_stopping(s.sorted_latency, q, lim, p)
            passed, needed = es["latency"].passed, es["latency"].queries_needed
    else:
        single = lg is Scenario.SINGLE_STREAM
        if eff.use_token_latencies:
            # SingleStream estimates over the per-sample TPOT and TTFT arrays; MultiStream
            # reads query latencies in both evaluations (LoadGen passes them unchanged).
            lat_tpot = s.sorted_tpot if single else s.sorted_query_latency
            lat_ttft = s.sorted_ttft if single else s.sorted_query_latency
            es["tpot"] = stream_early_stopping(lat_tpot, q, p, single_stream=single)
            passed = es["tpot"].passed
            if passed:
                es["ttft"] = stream_early_stopping(lat_ttft, q, p, single_stream=single)
                passed = es["ttft"].passed
            else:
                es["ttft"] = EarlyStoppingResult(False, "", 0)
            needed = max(r.queries_needed for r in es.values())
        else:
            lat = s.sorted_latency if single else s.sorted_query_latency
            es["latency"] = stream_early_stopping(lat, q, p, single_stream=single)
            passed, needed = es["latency"].passed, es["latency"].queries_needed
    detail = "\n".join(f"{k.upper()}:\n{v.text}" for k, v in es.items() if v.text)
    return Finding(
        "early_stopping",
        VerdictKind.MLPERF,
        passed,
        f"{q} queries",
        f">= {needed} queries for the observed over-latency counts",
        ""
        if passed
        else f"Run at least {max(0, needed - q)} more queries (longer min_duration), "
        "or lower the rate so fewer queries exceed the limits.",
        detail,
    )


def _all_answered(s: Summary) -> Finding:
    unanswered = s.scheduled - s.issued if s.scheduled > s.issued else 0
    passed = s.failed == 0 and not s.interrupted and unanswered == 0
    parts = [f"{s.failed} failed or unanswered of {s.issued} issued"]
    if unanswered:
        parts.append(f"{unanswered} scheduled but never issued")
    if s.interrupted:
        parts.append(f"run interrupted: {s.interrupt_reason}")
    return Finding(
        "all_queries_answered",
        VerdictKind.MLPERF,
        passed,
        "; ".join(parts),
        "every scheduled query issued and answered (LoadGen waits for all of them)",
        "" if passed else "Fix the errors counted in the summary and run the whole schedule.",
    )


# -- tokenmark's own rules --------------------------------------------------------------


def _tokenmark_findings(
    s: Summary, eff: EffectiveSettings, client: ClientStats
) -> list[Finding]:
    out: list[Finding] = []
    sc = eff.scenario
    if sc.is_open_loop:
        lim = eff.send_lag_limit_ns
        lag = s.send_lag.percentiles.get(0.99, 0) if s.send_lag.count else 0
        ok = lag <= lim
        out.append(Finding(
            "send_lag",
            VerdictKind.TOKENMARK,
            ok,
            f"p99 send lag {_ms(lag)} over {s.send_lag.count} requests",
            f"<= {_ms(lim)} (max of 2 ms and 1% of the mean inter-arrival time, "
            "unless set)",
            "" if ok else "The client could not send on schedule: lower the rate, cap "
            "concurrency less tightly, or use a faster or less loaded client machine.",
        ))
    elif sc.loadgen is Scenario.OFFLINE:
        span = client.issue_span_ns
        lim = max(100_000_000, int(0.01 * s.max_latency_ns))
        ok = span <= lim
        out.append(Finding(
            "client_issue_time",
            VerdictKind.TOKENMARK,
            ok,
            f"issuing all {s.issued} samples took {_ms(span)}",
            f"<= {_ms(lim)} (max of 100 ms and 1% of the run)",
            "" if ok else "The client was slow to issue the Offline query; use a faster "
            "client machine or fewer samples per query.",
        ))
    else:
        gap = client.closed_gap_p99_ns
        lim = max(2_000_000, int(0.01 * s.latency.mean)) if s.latency.count else 2_000_000
        ok = gap <= lim
        out.append(Finding(
            "client_overhead",
            VerdictKind.TOKENMARK,
            ok,
            f"p99 client time between a completion and the next send {_ms(gap)} "
            f"({client.closed_gap_count} gaps)",
            f"<= {_ms(lim)} (max of 2 ms and 1% of the mean latency)",
            "" if ok else "The client, not the server, paced this closed loop; use a "
            "faster or less loaded client machine.",
        ))
    issued = max(s.issued, 1)
    rate = s.failed / issued
    limit = eff.requested.error_rate_limit
    ok = s.failed == 0 if limit == 0 else rate <= limit
    by_class = ", ".join(f"{k}: {v}" for k, v in s.errors.items()) or "none"
    out.append(Finding(
        "error_rate",
        VerdictKind.TOKENMARK,
        ok,
        f"{s.failed} of {s.issued} requests failed ({rate:.2%}); by class: {by_class}",
        f"<= {eff.requested.error_rate_limit:.2%}",
        "" if ok else "Fix the failing requests (see the error classes), or raise "
        "--error-rate-limit if some failures are expected.",
    ))
    complete = not s.interrupted and s.issued >= s.scheduled
    out.append(Finding(
        "run_completed",
        VerdictKind.TOKENMARK,
        complete,
        f"{s.issued} of {s.scheduled} scheduled samples issued"
        + (f"; interrupted: {s.interrupt_reason}" if s.interrupted else ""),
        "the whole schedule issued and answered",
        "" if complete else "Rerun without interruption; records so far are kept on disk.",
    ))
    if s.token_disagreements:
        out.append(Finding(
            "token_count_agreement",
            VerdictKind.TOKENMARK,
            False,
            f"{s.token_disagreements} requests where the two token counts differ",
            "server usage and client tokenizer agree",
            "Check that the client tokenizer is the model's own, or count with one source.",
        ))
    if not sc.is_mlperf and eff.limits.any:
        out.append(_user_limits(s, eff))
    return out


def _user_limits(s: Summary, eff: EffectiveSettings) -> Finding:
    p = eff.target_latency_percentile
    lim = eff.limits
    observed: list[str] = []
    required: list[str] = []
    ok = True
    for name, dist, limit in (
        ("TTFT", s.ttft, lim.ttft_ns),
        ("TPOT", s.tpot, lim.tpot_ns),
        ("E2E", s.latency, lim.e2e_ns),
    ):
        if limit is None:
            continue
        v = dist.percentiles.get(p, 0)
        observed.append(f"{_pct(p)} {name} {_ms(v)}")
        required.append(f"{name} <= {_ms(limit)}")
        ok = ok and v <= limit
    return Finding(
        "latency_limits",
        VerdictKind.TOKENMARK,
        ok,
        ", ".join(observed),
        ", ".join(required),
        "" if ok else "Lower the offered load until the limits hold (see goodput).",
    )


# -- findings of the run's watchers (tokenmark.trust) -----------------------------------


def with_findings(v: Verdicts, extra: Sequence[Finding]) -> Verdicts:
    """``v`` with tokenmark-verdict findings added; a failed one makes it INVALID."""
    found = tuple(f for f in extra if f.verdict is VerdictKind.TOKENMARK)
    if not found:
        return v
    tm = v.tokenmark
    valid = tm.validity is Validity.VALID and all(f.passed for f in found)
    return replace(v, tokenmark=Verdict(
        VerdictKind.TOKENMARK, Validity.VALID if valid else Validity.INVALID,
        tm.findings + found))


def client_bottleneck(
    busy_fraction: float,
    lag_p99_ns: int,
    samples: int,
    *,
    busy_limit: float = 0.9,
    lag_limit_ns: int = 10_000_000,
    saturated_share: float = 0.5,
    saturated_samples: int = 0,
    machine_busy_fraction: float = 0.0,
) -> Finding:
    """Was the client the bottleneck? It was when its process kept a core busy
    (``busy_fraction`` of one core, over the run, >= ``busy_limit``, or more than
    ``saturated_share`` of the sampling windows were), or the whole client machine was
    (``machine_busy_fraction`` of its cores >= ``busy_limit``: other load starved it),
    *and* its event loop fell behind (p99 loop lag above ``lag_limit_ns``): then requests
    waited for the client, not the server. Either alone is not enough: a busy but
    punctual loop kept up, and a late loop on an idle machine is not CPU-bound.
    """
    share = saturated_samples / samples if samples else 0.0
    busy = (busy_fraction >= busy_limit or share > saturated_share
            or machine_busy_fraction >= busy_limit)
    lagging = lag_p99_ns > lag_limit_ns
    ok = not (busy and lagging)
    return Finding(
        "client_saturation",
        VerdictKind.TOKENMARK,
        ok,
        f"client process {busy_fraction:.0%} of a core ({share:.0%} of {samples} windows "
        f"saturated), machine {machine_busy_fraction:.0%} busy, event-loop lag p99 "
        f"{_ms(lag_p99_ns)}",
        f"not both: CPU >= {busy_limit:.0%} (of a core, or of the machine) and loop lag "
        f"p99 > {_ms(lag_limit_ns)}",
        "" if ok else "The client, not the server, limited this run: use client worker "
        "processes (--workers), a faster client machine, or a lower load; "
        "'tokenmark calibrate' measures what this client sustains.",
    )


def server_counts(
    source: str,
    checks: Sequence[tuple[str, float, float, float]],
) -> Finding:
    """Do the server's own counters agree with the client's? ``checks`` are
    ``(what, server, client, relative tolerance)``; any difference beyond its tolerance
    fails (other traffic on the server, lost requests, or miscounted tokens)."""
    observed: list[str] = []
    bad: list[str] = []
    for what, server, client, tol in checks:
        observed.append(f"{what}: server {server:g}, client {client:g}")
        if abs(server - client) > tol * max(abs(client), 1.0):
            bad.append(what)
    ok = not bad
    return Finding(
        "server_counts_agreement",
        VerdictKind.TOKENMARK,
        ok,
        f"{source}: " + "; ".join(observed),
        "server counters equal the client's counts (requests exactly, tokens within "
        "the stated tolerance)",
        "" if ok else f"The server counted different {', '.join(bad)}: make sure nothing "
        "else used the server during the run, and that the client tokenizer is the model's.",
    )
