"""Per-endpoint breakdown of a run against several replicas (pure, from records).

Every record names the endpoint that served it (``RequestRecord.endpoint``, the base URL
as the HTTP adapter normalised it). :class:`EndpointBreakdown` is a record consumer,
like the summary's accumulator, that keeps per endpoint the counts (requests, answered,
errors by class, output tokens) and the TTFT and end-to-end latencies of answered
requests in the measured window (:mod:`tokenmark.metrics.definitions`);
:meth:`EndpointBreakdown.to_json` gives each endpoint's counts with LoadGen-style
percentiles, in endpoint order of first appearance. Memory is two int64 values per
answered request.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenmark.metrics.columns import RecordColumns
from tokenmark.metrics.definitions import e2e_ns, ttft_ns, ttft_one
from tokenmark.metrics.stats import Distribution
from tokenmark.records import Phase, RequestRecord

__all__ = ["EndpointBreakdown"]

_PCTS = (0.5, 0.9, 0.99)


@dataclass
class _Endpoint:
    requests: int = 0
    ok: int = 0
    output_tokens: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    ttft: array[int] = field(default_factory=lambda: array("q"))
    e2e: array[int] = field(default_factory=lambda: array("q"))


class EndpointBreakdown:
    """A record consumer: ``consumers=[acc.add, breakdown.add]``."""

    def __init__(self) -> None:
        self._eps: dict[str, _Endpoint] = {}

    def add(self, r: RequestRecord) -> None:
        ep = self._eps.get(r.endpoint)
        if ep is None:
            ep = self._eps[r.endpoint] = _Endpoint()
        ep.requests += 1
        if r.ok:
            ep.ok += 1
            ep.output_tokens += r.output_tokens
            if r.phase is Phase.MEASURE:
                ep.ttft.append(ttft_one(r.scheduled_ns, r.first_token_ns, r.done_ns))
                ep.e2e.append(r.done_ns - r.scheduled_ns)
        elif r.error is not None:
            ep.errors[r.error.value] += 1

    def add_columns(self, cols: RecordColumns) -> None:
        """``add`` for every record of a packed batch, in order (same result)."""
        which = cols.col("endpoint")
        ok = cols.col("ok").astype(bool)
        measured = ok & cols.col("measured").astype(bool)
        sched, done = cols.col("scheduled"), cols.col("done")
        ttft = ttft_ns(sched, cols.col("first"), done)
        e2e = e2e_ns(sched, done)
        out, err = cols.col("output_tokens"), cols.col("error")
        for i, name in enumerate(cols.endpoints):
            mine = which == i
            ep = self._eps.get(name)
            if ep is None:
                ep = self._eps[name] = _Endpoint()
            ep.requests += int(mine.sum())
            good = mine & ok
            ep.ok += int(good.sum())
            ep.output_tokens += int(out[good].sum())
            kept = mine & measured
            ep.ttft.frombytes(ttft[kept].tobytes())
            ep.e2e.frombytes(e2e[kept].tobytes())
            for index in err[mine & ~ok].tolist():
                if index >= 0:
                    ep.errors[cols.error_key(index)] += 1

    @property
    def endpoints(self) -> list[str]:
        return list(self._eps)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, ep in self._eps.items():
            ttft = Distribution.from_sorted(np.sort(np.frombuffer(ep.ttft, dtype=np.int64)),
                                            _PCTS)
            e2e = Distribution.from_sorted(np.sort(np.frombuffer(ep.e2e, dtype=np.int64)),
                                           _PCTS)
            out[name or "(none)"] = {
                "requests": ep.requests,
                "completed": ep.ok,
                "errors": dict(sorted(ep.errors.items())),
                "output_tokens": ep.output_tokens,
                "ttft_ns": {f"p{round(p * 100):g}": v for p, v in ttft.percentiles.items()},
                "e2e_ns": {f"p{round(p * 100):g}": v for p, v in e2e.percentiles.items()},
            }
        return out
