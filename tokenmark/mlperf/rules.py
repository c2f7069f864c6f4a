"""Rules: each a pure function that returns a :class:`Finding` with advice.

Two verdicts, never mixed (DESIGN.md):

- the **MLPerf verdict** applies exactly LoadGen's criteria (minimum duration, minimum
  queries, latency limits at the preset's percentile for Server/Interactive, early
  stopping) plus LoadGen's implicit one: every query answered. It exists only for the
  MLPerf scenarios; elsewhere it is "not applicable". An accuracy-mode run is judged by
  that last criterion alone (LoadGen judges no performance in accuracy mode).
- the **tokenmark verdict** adds tokenmark's own rules (client send lag, client
  overhead, error rate, token-count disagreement, interrupted runs, and the user's
  latency limits on non-MLPerf patterns); in accuracy mode only those about the answers
  (errors, completion, token counts), not the client's pacing or latency limits. A run
  is VALID under it only if the MLPerf verdict (where applicable) is VALID too; the
  CLI's exit code follows it.

Every finding records which verdict it belongs to, what was observed, what was
required, how to fix a failure, and its level: a ``fail`` finding that did not pass makes
its verdict INVALID; a ``warn`` finding (``machine_busy``) never does, it only says what
to distrust.

Findings of tokenmark's verdict about lengths and counts (issue "truth against real
servers"): ``input_length_agreement`` (fail), ``output_length`` (fail),
``stream_usage_agreement`` (fail); about the client machine: ``client_saturation``
(fail: only when tokenmark's own processes were the bottleneck) and ``machine_busy``
(warn: other processes' CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tokenmark.findings import Finding, VerdictKind
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.earlystop import (
    EarlyStoppingResult,
    server_early_stopping,
    stream_early_stopping,
)
from tokenmark.mlperf.settings import EffectiveSettings, Mode, Scenario

__all__ = [
    "ClientStats",
    "Finding",
    "Validity",
    "Verdict",
    "VerdictKind",
    "Verdicts",
    "client_bottleneck",
    "evaluate",
    "input_length_agreement",
    "machine_busy",
    "output_length",
    "server_counts",
    "stream_usage_agreement",
    "with_findings",
]


class Validity(StrEnum):
    VALID = "VALID"
    INVALID = "INVALID"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    validity: Validity
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.blocks)


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
    #: What the send lag can be blamed on, where it was measured (None: not measured):
    #: cores tokenmark's own processes used, cores other processes used, the event
    #: loop's p99 lag, and sends that waited for a new connection.
    own_cores: float | None = None
    background_cores: float | None = None
    loop_lag_p99_ns: int | None = None
    connect_waits: int | None = None
    cores: int | None = None
    #: Of the run, the share tokenmark's process was runnable (running or waiting for a
    #: CPU) and the share it waited in the run queue (the client monitor's figures).
    demand_fraction: float | None = None
    runq_wait_fraction: float | None = None


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
    tm_valid = ml_valid and not any(f.blocks for f in own)
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
    accuracy = eff.mode is Mode.ACCURACY
    if accuracy:
        pass  # accuracy mode judges the answers, not the client's timing (no pacing rule)
    elif sc.is_open_loop:
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
            "" if ok else send_lag_advice(client),
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
    if not sc.is_mlperf and eff.limits.any and not accuracy:
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
    valid = tm.validity is Validity.VALID and not any(f.blocks for f in found)
    return replace(v, tokenmark=Verdict(
        VerdictKind.TOKENMARK, Validity.VALID if valid else Validity.INVALID,
        tm.findings + found))


def send_lag_advice(c: ClientStats) -> str:
    """What a late client should do, naming the cause that was measured."""
    parts = []
    if c.own_cores is not None:
        parts.append(f"tokenmark's processes used {c.own_cores:.2f} cores")
    if c.background_cores is not None:
        parts.append(f"other processes {c.background_cores:.2f} cores"
                     + (f" of {c.cores}" if c.cores else ""))
    if c.loop_lag_p99_ns is not None:
        parts.append(f"event-loop lag p99 {_ms(c.loop_lag_p99_ns)}")
    if c.connect_waits is not None:
        parts.append(f"{c.connect_waits} sends waited for a new connection")
    waited = (c.runq_wait_fraction / c.demand_fraction
              if c.runq_wait_fraction is not None and c.demand_fraction else None)
    if waited is not None:
        parts.append(f"it waited for a CPU {waited:.0%} of the time it was ready to run")
    measured = "; ".join(parts)
    if not parts:
        return ("The client could not send on schedule: lower the rate, cap concurrency "
                "less tightly, or use a faster or less loaded client machine.")
    cores = c.cores or 1
    if c.background_cores is not None and c.background_cores >= 0.5 * cores:
        cause = ("the machine was busy with other work: run tokenmark on a quiet client "
                 "machine, or stop the other load")
    elif c.own_cores is not None and c.own_cores >= 0.9:
        cause = ("tokenmark's own process was CPU-bound: use --workers, a faster client "
                 "machine, or a lower rate")
    elif c.connect_waits:
        cause = ("sends waited for TCP/TLS handshakes: raise --spare-connections or "
                 "--preconnect")
    elif waited is not None and waited >= 0.05:
        cause = ("other work held the client's CPU when a send was due (a quiet run waits "
                 "~1% of its ready time): stop the other load or run tokenmark on a quiet "
                 "client machine")
    elif c.loop_lag_p99_ns is not None and c.loop_lag_p99_ns > 2_000_000:
        cause = ("the event loop fell behind without a busy CPU (a blocking call or a "
                 "slow callback): see client_monitor in results.json")
    else:
        cause = "no single cause stands out: lower the rate or use a faster client machine"
    return f"The client could not send on schedule; measured: {measured}. Cause: {cause}."


def client_bottleneck(
    busy_fraction: float,
    lag_p99_ns: int,
    samples: int,
    *,
    busy_limit: float = 0.9,
    lag_limit_ns: int = 10_000_000,
    saturated_share: float = 0.5,
    saturated_samples: int = 0,
    background_cores: float | None = None,
) -> Finding:
    """Was tokenmark the bottleneck? It was when its own process demanded a whole core
    (``busy_fraction``: CPU used plus time waiting for a CPU while runnable, of one core,
    over the run, >= ``busy_limit``, or more than
    ``saturated_share`` of the sampling windows were) *and* its event loop fell behind
    (p99 loop lag above ``lag_limit_ns``): then requests waited for the client, not the
    server. Either alone is not enough: a busy but punctual loop kept up, and a late loop
    in a process that was not busy was starved by something else, which
    :func:`machine_busy` names (the load of other processes is no fault of the client).
    """
    share = saturated_samples / samples if samples else 0.0
    busy = busy_fraction >= busy_limit or share > saturated_share
    lagging = lag_p99_ns > lag_limit_ns
    ok = not (busy and lagging)
    bg = "" if background_cores is None else f", other processes {background_cores:.2f} cores"
    return Finding(
        "client_saturation",
        VerdictKind.TOKENMARK,
        ok,
        f"tokenmark's process demanded {busy_fraction:.0%} of a core ({share:.0%} of {samples} "
        f"windows saturated){bg}, event-loop lag p99 {_ms(lag_p99_ns)}",
        f"not both: tokenmark's own demand >= {busy_limit:.0%} of a core and loop lag "
        f"p99 > {_ms(lag_limit_ns)}",
        "" if ok else "tokenmark's own process, not the server, limited this run: use "
        "client worker processes (--workers), a faster client machine, or a lower load; "
        "'tokenmark calibrate' measures what this client sustains.",
    )


def machine_busy(background_cores: float, cores: int, own_cores: float, lag_p99_ns: int,
                 *, limit: float = 0.5) -> Finding:
    """Warns when other processes kept ``limit`` or more of the client machine's cores
    busy through the run (``/proc/stat`` minus tokenmark's own processes): timings may
    then hold waits for the CPU that neither tokenmark nor the server caused."""
    ok = background_cores < limit * cores
    return Finding(
        "machine_busy",
        VerdictKind.TOKENMARK,
        ok,
        f"other processes used {background_cores:.2f} of {cores} cores through the run "
        f"(tokenmark's own processes {own_cores:.2f}); event-loop lag p99 {_ms(lag_p99_ns)}",
        f"< {limit:.0%} of the cores used by other processes",
        "" if ok else "The client machine was busy with other work, not with tokenmark: "
        "latencies may hold waits for the CPU. Rerun on a quiet machine (or stop the other "
        "load) before trusting small differences.",
        level="warn",
    )


def input_length_agreement(planned: Sequence[int], served: Sequence[int],
                           overhead: int | None, *, tolerance: float = 0.02,
                           max_share: float = 0.01, probe: str = "") -> Finding | None:
    """Do the server's prompt lengths equal the planned ones? ``planned`` and ``served``
    pair each request's planned length with the server's ``prompt_tokens``; the
    ``overhead`` (the chat template's or BOS tokens, measured by one probe request) is
    added to every plan first. Fails when more than ``max_share`` of the requests differ
    by more than ``tolerance``. ``None`` when no request reported its prompt tokens."""
    n = len(served)
    if n == 0:
        return None
    extra = overhead or 0
    off = []
    for p, s in zip(planned, served, strict=True):
        want = p + extra
        if abs(s - want) > tolerance * max(want, 1):
            off.append((s - want, want))
    share = len(off) / n
    ok = share <= max_share
    worst = max(off, key=lambda x: abs(x[0]) / max(x[1], 1)) if off else None
    how = (f"; worst: planned {worst[1]}, server counted {worst[1] + worst[0]} "
           f"({worst[0] / max(worst[1], 1):+.0%})" if worst else "")
    over = "unknown (no probe)" if overhead is None else f"{overhead} tokens"
    return Finding(
        "input_length_agreement",
        VerdictKind.TOKENMARK,
        ok,
        f"{len(off)} of {n} requests' prompts differ from the plan by more than "
        f"{tolerance:.0%} ({share:.1%}){how}; template/BOS overhead {over}{probe}",
        f"<= {max_share:.0%} of requests off by more than {tolerance:.0%} of planned + "
        "overhead",
        "" if ok else "The prompts are not the lengths the plan claims: give the model's "
        "tokenizer (--tokenizer PATH) or let the server build them (--tokenizer server).",
    )


def output_length(short: dict[str, list[int]], demanded: int) -> Finding | None:
    """Answers shorter than a request demanded exactly (``ignore_eos``, or ``min_tokens``
    equal to ``max_tokens``): ``short`` maps each finish reason to the shortfalls (tokens
    missing) of the short answers; ``demanded`` counts the requests that demanded a
    length. ``None`` when no request demanded one."""
    if demanded == 0:
        return None
    n = sum(len(v) for v in short.values())
    parts = []
    for reason, gaps in sorted(short.items()):
        g = sorted(gaps)
        parts.append(f"{reason or 'no finish_reason'}: {len(g)} (missing {g[0]}-{g[-1]}, "
                     f"median {g[len(g) // 2]} tokens)")
    ok = n == 0
    return Finding(
        "output_length",
        VerdictKind.TOKENMARK,
        ok,
        f"{n} of {demanded} answers that demanded an exact length were shorter"
        + (f"; by finish reason: {'; '.join(parts)}" if parts else ""),
        "every answer as long as it demanded (ignore_eos / min_tokens = max_tokens)",
        "" if ok else "The server ended answers early: check its context length (prompt + "
        "max_tokens), its own limits and logs, and whether it honours ignore_eos.",
    )


def stream_usage_agreement(exact: int, exact_off: int, other: int, other_over: int,
                           examples: Sequence[str] = ()) -> Finding | None:
    """Does ``usage.completion_tokens`` equal the tokens the stream carried? Where the
    per-event counts are exact (token ids or logprobs per event, or a server known to
    stream one token per event) they must be equal (``exact`` requests compared,
    ``exact_off`` differ); elsewhere every event carries at least one token, so more
    tokens streamed than usage reports is wrong (``other`` compared, ``other_over``)."""
    if exact + other == 0:
        return None
    bad = exact_off + other_over
    ok = bad == 0
    eg = f"; e.g. {', '.join(examples[:3])}" if examples else ""
    return Finding(
        "stream_usage_agreement",
        VerdictKind.TOKENMARK,
        ok,
        f"{exact_off} of {exact} requests with exact per-event counts disagree with usage; "
        f"{other_over} of {other} others streamed more tokens than usage reports{eg}",
        "usage.completion_tokens equals the streamed tokens (exact counts), and is never "
        "below them",
        "" if ok else "The server's usage does not match what it streamed: the output "
        "token counts (and tokens/s) of this run are not trustworthy.",
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
