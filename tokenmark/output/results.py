"""``results.json``: one versioned document per run.

Schema ``tokenmark.results/1`` (a new field is a minor change; a renamed or removed one
bumps the number). Top-level keys:

- ``schema``, ``tokenmark_version``, ``label`` (always ``"unverified"``: not reviewed by
  MLCommons), ``profile_note`` (set for knowingly short runs such as ``demo``);
- ``run``: start time (UTC, ISO 8601), round, benchmark, scenario, mode, the system under
  test and what it is (``sut``), dataset name and fingerprint, whether it was interrupted;
- ``settings``: ``layers`` (what each layer set), ``requested`` and ``effective``;
- ``summary``: counts, LoadGen's figures (samples/s, tokens/s, run facts) and tokenmark's
  (token throughput, goodput), latency distributions in ms;
- ``verdicts``: ``mlperf`` and ``tokenmark``, each with its validity and findings;
- ``files``: the other files of the results folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from tokenmark.metrics.stats import Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.rules import Verdict, Verdicts
from tokenmark.settings import EffectiveSettings, TestSettings

__all__ = [
    "RESULTS_FILE",
    "SCHEMA",
    "effective_json",
    "requested_json",
    "summary_json",
    "verdicts_json",
    "write_json_atomic",
]

SCHEMA = "tokenmark.results/1"
RESULTS_FILE = "results.json"
_MS = 1e-6


def _plain(v: Any) -> Any:
    if hasattr(v, "value") and not isinstance(v, int | float | str):
        return v.value
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def requested_json(r: TestSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(r):
        v = getattr(r, f.name)
        if f.name == "seeds":
            out["seeds"] = {k: str(x) for k, x in asdict(v).items()}
        elif f.name == "limits":
            out["limits_ns"] = asdict(v)
        else:
            out[f.name] = _plain(v)
    return out


def effective_json(e: EffectiveSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(e):
        if f.name == "requested":
            continue
        v = getattr(e, f.name)
        if f.name == "seeds":
            out["seeds"] = {k: str(x) for k, x in asdict(v).items()}
        elif f.name == "limits":
            out["limits_ns"] = asdict(v)
        else:
            out[f.name] = _plain(v)
    out["send_lag_limit_ns"] = e.send_lag_limit_ns
    return out


def _dist(d: Distribution) -> dict[str, object]:
    return d.to_json(_MS)


def summary_json(s: Summary) -> dict[str, Any]:
    return {
        "counts": {
            "scheduled": s.scheduled,
            "issued": s.issued,
            "queries_issued": s.queries_issued,
            "completed": s.completed,
            "failed": s.failed,
            "measured": s.measured,
            "errors_by_class": s.errors,
            "interrupted": s.interrupted,
            "interrupt_reason": s.interrupt_reason,
            "token_count_disagreements": s.token_disagreements,
        },
        "loadgen": {
            "sample_count": s.sample_count,
            "token_count": s.token_count,
            "samples_per_second": s.samples_per_second,
            "tokens_per_second": s.tokens_per_second,
            "scheduled_samples_per_second": s.scheduled_samples_per_second,
            "max_latency_ns": s.max_latency_ns,
            "final_query_scheduled_ns": s.final_query_scheduled_ns,
            "final_query_issued_ns": s.final_query_issued_ns,
            "final_query_all_samples_done_ns": s.final_query_done_ns,
        },
        "throughput": {
            "window_s": s.window_ns / 1e9,
            "requests_per_second": s.requests_per_second,
            "output_tokens_per_second": s.output_tokens_per_second,
            "input_tokens_per_second": s.input_tokens_per_second,
            "output_tokens": s.output_tokens,
            "input_tokens": s.input_tokens,
            "goodput_requests_per_second": s.goodput_requests_per_second,
            "goodput_fraction": s.goodput_fraction,
        },
        "latency_ms": {
            "ttft": _dist(s.ttft),
            "tpot": _dist(s.tpot),
            "itl": _dist(s.itl),
            "e2e": _dist(s.latency),
            "query": _dist(s.query_latency),
            "send_lag": _dist(s.send_lag),
            "ttfat": None if s.ttfat is None else _dist(s.ttfat),
        },
        "reasoning": {
            "requests": s.reasoning_requests,
            "reasoning_tokens": s.reasoning_tokens,
            "answer_tokens": s.answer_tokens,
            "no_answer_requests": s.no_answer_requests,
        },
    }


def _verdict(v: Verdict) -> dict[str, Any]:
    return {
        "validity": v.validity.value,
        "failed_rules": [f.rule for f in v.failed],
        "findings": [f.to_json() for f in v.findings],
    }


def verdicts_json(v: Verdicts) -> dict[str, Any]:
    return {"mlperf": _verdict(v.mlperf), "tokenmark": _verdict(v.tokenmark)}


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` so that readers see the old file or the new one, never half."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=False, default=_plain)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
