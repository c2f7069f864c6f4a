"""Find-peak: the highest rate whose run is VALID under the preset's limits (pure parts).

The search is tokenmark's own (LoadGen's find-peak is a different, constraint-only
search). Each *probe* is a full run at one rate, judged by the same rules as any run;
the search reads the verdicts, not raw latencies:

- a probe whose latency percentile breaks a limit, or whose requests failed, or that
  was stopped early because its failure was already certain, was **too high**;
- a probe that met the limits but failed only LoadGen's early-stopping criterion does
  not yet hold enough queries to prove it: it is **inconclusive** and is run again
  with the query count early stopping asked for (LoadGen's own advice), so the search
  respects early stopping instead of mistaking a short run for a slow server;
- a probe the client could not send on schedule (send lag) ends the search as
  **client-limited**: a higher rate would measure the client, not the server;
- otherwise it **passed**.

:class:`PeakSearch` brackets the peak (doubling up from the start rate while probes
pass, halving down while they fail) and then bisects geometrically until the valid and
the invalid rate are within the tolerance. A confirming full run at the found rate
follows (:mod:`tokenmark.api.scale`); if it fails, the rate steps down and is
confirmed again.

:func:`certain_failure` is the probes' early stop: it watches records as they finish
and says so as soon as the run can no longer be VALID whatever the remaining requests
do (enough of them already exceed a limit that the judged percentile must exceed it),
so an overloaded probe ends in seconds instead of draining a growing queue.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from tokenmark.metrics.definitions import tpot_one, ttft_one
from tokenmark.metrics.stats import loadgen_index
from tokenmark.mlperf.rules import Verdicts
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import Phase, RequestRecord

__all__ = [
    "PeakSearch",
    "ProbeJudgement",
    "ProbeKind",
    "certain_failure",
    "judge",
]

#: Rules about the run's length; probes shorter than the preset's minimum ignore them
#: (the confirming run is full length and is judged by every rule).
LENGTH_RULES = frozenset({"min_duration", "min_queries"})
_LATENCY_RULES = frozenset({"perf_constraints", "latency_limits"})
_CLIENT_RULES = frozenset({"send_lag", "client_overhead", "client_issue_time"})
_FAILURE_RULES = frozenset({"error_rate", "all_queries_answered", "run_completed"})
#: An inconclusive probe is rerun only if early stopping asks for at most this many
#: times the queries it had; beyond that the rate is too close to the limit to prove.
MAX_QUERY_GROWTH = 8.0
#: Prefix of the reason :func:`certain_failure` gives (recognised by :func:`judge`).
STOP_PREFIX = "probe stopped early"


class ProbeKind(StrEnum):
    PASSED = "valid"
    TOO_HIGH = "too high"
    MORE_QUERIES = "needs more queries"
    CLIENT_LIMITED = "client-limited"


@dataclass(frozen=True)
class ProbeJudgement:
    kind: ProbeKind
    reason: str
    queries_needed: int = 0


def judge(verdicts: Verdicts, *, interrupt_reason: str = "",
          ignore_length: bool = False) -> ProbeJudgement:
    """What a probe's verdicts say about its rate."""
    findings = [*verdicts.mlperf.findings, *verdicts.tokenmark.findings]
    failed = {f.rule: f for f in findings if not f.passed}
    if ignore_length:
        for rule in LENGTH_RULES:
            failed.pop(rule, None)
    if interrupt_reason.startswith(STOP_PREFIX):
        return ProbeJudgement(ProbeKind.TOO_HIGH, interrupt_reason)
    for rule in _LATENCY_RULES:
        if rule in failed:
            f = failed[rule]
            return ProbeJudgement(ProbeKind.TOO_HIGH,
                                  f"{rule}: {f.observed} (required {f.required})")
    for rule in _CLIENT_RULES:
        if rule in failed:
            f = failed[rule]
            return ProbeJudgement(ProbeKind.CLIENT_LIMITED,
                                  f"{rule}: {f.observed} (required {f.required})")
    for rule in _FAILURE_RULES:
        if rule in failed:
            return ProbeJudgement(ProbeKind.TOO_HIGH, f"{rule}: {failed[rule].observed}")
    if "early_stopping" in failed:
        es = verdicts.early_stopping
        needed = max((r.queries_needed for r in es.values()), default=0)
        f = failed["early_stopping"]
        return ProbeJudgement(ProbeKind.MORE_QUERIES,
                              f"early_stopping: {f.observed}, {f.required}", needed)
    if failed:
        rule, f = next(iter(failed.items()))
        return ProbeJudgement(ProbeKind.TOO_HIGH, f"{rule}: {f.observed}")
    return ProbeJudgement(ProbeKind.PASSED, "every rule passed")


@dataclass
class PeakSearch:
    """Bracket, then bisect geometrically, on the rate (queries/s).

    ``lo`` is the highest rate that passed, ``hi`` the lowest that failed. The search is
    done when ``hi / lo <= 1 + tolerance``, when the next rate would leave
    ``[min_rate, max_rate]``, or after ``max_probes`` probes.
    """

    start: float
    tolerance: float = 0.05
    min_rate: float = 0.0
    max_rate: float = math.inf
    max_probes: int = 16
    factor: float = 2.0
    lo: float | None = None
    hi: float | None = None
    probes: int = 0
    note: str = ""
    _tried: set[float] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.start > 0:
            raise ValueError("the start rate must be > 0")
        if not self.tolerance > 0:
            raise ValueError("the tolerance must be > 0")

    def record(self, rate: float, passed: bool) -> None:
        self.probes += 1
        self._tried.add(rate)
        if passed:
            self.lo = rate if self.lo is None else max(self.lo, rate)
        else:
            self.hi = rate if self.hi is None else min(self.hi, rate)

    def next_rate(self) -> float | None:
        """The next rate to probe, or None when the search is over (``note`` says why)."""
        if self.probes >= self.max_probes:
            self.note = f"stopped after {self.probes} probes"
            return None
        lo, hi = self.lo, self.hi
        if lo is None and hi is None:
            return min(self.start, self.max_rate)
        if hi is None:
            assert lo is not None
            if lo >= self.max_rate:
                self.note = f"valid up to the highest rate allowed ({self.max_rate:g}/s)"
                return None
            return min(lo * self.factor, self.max_rate)
        if lo is None:
            nxt = hi / self.factor
            if nxt < self.min_rate:
                self.note = f"no rate down to {self.min_rate:g}/s was valid"
                return None
            return nxt
        if hi / lo <= 1.0 + self.tolerance:
            self.note = f"converged: valid at {lo:g}/s, not at {hi:g}/s"
            return None
        return math.sqrt(lo * hi)


def certain_failure(eff: EffectiveSettings, scheduled: int) -> Callable[[RequestRecord], str]:
    """A ``stop_when`` rule: a reason once the run cannot be VALID, else ''.

    The judged percentile of ``n`` values is the value at index ``int(n * p)`` of the
    sorted list (LoadGen's), so it exceeds a limit as soon as ``n - int(n * p)`` values
    do. ``n`` is the schedule's sample count, which a completed run judges. A failed
    request is certain failure when the error-rate limit is 0 (and always for the
    MLPerf verdict, which expects every query answered).
    """
    lim = eff.limits
    p = eff.target_latency_percentile
    n = max(1, scheduled)
    allowed_over = n - loadgen_index(n, p) - 1  # more than this many over: certain fail
    allowed_errors = int(eff.requested.error_rate_limit * n)
    if eff.is_mlperf:
        allowed_errors = 0
    use_tokens = eff.use_token_latencies or not eff.is_mlperf
    ttft_lim = lim.ttft_ns if use_tokens else None
    tpot_lim = lim.tpot_ns if use_tokens else None
    e2e_lim = lim.e2e_ns if (not eff.is_mlperf or not eff.use_token_latencies) else None
    over = {"TTFT": 0, "TPOT": 0, "E2E": 0}
    errors = 0

    def check(r: RequestRecord) -> str:
        nonlocal errors
        if r.phase is not Phase.MEASURE:
            return ""
        if not r.ok:
            errors += 1
            if errors > allowed_errors:
                return (f"{STOP_PREFIX}: {errors} request(s) failed "
                        f"({r.error.value if r.error else 'unanswered'}); the run cannot be "
                        "VALID")
            return ""
        e2e = r.done_ns - r.scheduled_ns
        ttft = ttft_one(r.scheduled_ns, r.first_token_ns, r.done_ns)
        checks: list[tuple[str, int, int | None]] = [("TTFT", ttft, ttft_lim),
                                                     ("E2E", e2e, e2e_lim)]
        if tpot_lim is not None:
            checks.append(("TPOT", tpot_one(e2e, ttft, r.output_tokens), tpot_lim))
        for name, value, limit in checks:
            if limit is not None and value > limit:
                over[name] += 1
                if over[name] > allowed_over:
                    return (f"{STOP_PREFIX}: {over[name]} of {n} requests over the {name} "
                            f"limit of {limit / 1e6:g} ms, so its p{p * 100:g} is over it "
                            "whatever the rest do")
        return ""

    return check
