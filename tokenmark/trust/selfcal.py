"""Client self-calibration: what this client machine sustains, and whether a plan fits.

:func:`measure` starts the exact-delay server (:mod:`tokenmark.servers.process`) in its
own process with zero delays, so it answers as fast as the client reads, and drives it
with the real HTTP client in a closed loop at ``concurrency`` streams for
``duration_s`` seconds (after a short warm-up). What the client completed per second,
requests and streamed tokens, is its capacity on this machine (:class:`Capacity`).

Capacities are cached per machine (:func:`cache_key`: CPU model, cores available, Python
and tokenmark versions, OS, the client's worker count and the calibration's shape) in
``$TOKENMARK_CACHE_DIR`` (default ``~/.cache/tokenmark``) ``/selfcal.json`` for
``max_age_days``.

:func:`judge` compares a run's planned load (open-loop schedules: requests/s and
output tokens/s) with the capacity: above ``max_share`` of it the run is refused
(:class:`~tokenmark.errors.ConfigError`) unless the user overrides, which turns the
refusal into a warning recorded in the results.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.adapters.workers import WorkerPoolSUT
from tokenmark.clock import MonotonicClock
from tokenmark.config.layering import build_settings
from tokenmark.dataset import Dataset, LengthDistribution, SyntheticDataset
from tokenmark.errors import ConfigError
from tokenmark.inputs import json_loads
from tokenmark.loadgen.runner import Runner
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind, build_schedule
from tokenmark.mlperf.settings import EffectiveSettings, Scenario, effective
from tokenmark.records import RequestRecord
from tokenmark.servers.process import ServerProcess
from tokenmark.sut import SystemUnderTest
from tokenmark.trust.canonical import canonical_bytes, sha256_hex
from tokenmark.trust.fingerprint import client_machine

__all__ = ["Capacity", "Judgement", "cache_key", "cached", "judge", "measure",
           "planned_load", "store"]

CACHE_FILE = "selfcal.json"


@dataclass(frozen=True)
class Capacity:
    """What the client sustained against the built-in server at full speed."""

    requests_per_s: float
    tokens_per_s: float
    concurrency: int
    duration_s: float
    output_tokens: int
    workers: int
    completed: int
    failed: int
    measured_utc: str
    key: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cache_dir() -> Path:
    env = os.environ.get("TOKENMARK_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tokenmark"


def cache_key(*, workers: int, concurrency: int, output_tokens: int) -> str:
    m = client_machine()
    ident = {k: m[k] for k in ("cpu_model", "cores_available", "python", "tokenmark",
                               "system", "machine", "host_sha256")}
    ident.update(workers=workers, concurrency=concurrency, output_tokens=output_tokens)
    return sha256_hex(canonical_bytes(ident))[:24]


def cached(key: str, *, max_age_days: float = 7.0, directory: Path | None = None
           ) -> Capacity | None:
    path = (directory or cache_dir()) / CACHE_FILE
    try:
        doc = json_loads(path.read_text(encoding="utf-8"))
        entry = doc[key]
        cap = Capacity(**entry)
        when = dt.datetime.fromisoformat(cap.measured_utc)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if dt.datetime.now(dt.UTC) - when > dt.timedelta(days=max_age_days):
        return None
    return cap


def store(cap: Capacity, *, directory: Path | None = None) -> Path:
    """Add ``cap`` to the cache (atomically; other machines' entries are kept)."""
    d = directory or cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / CACHE_FILE
    try:
        doc = json_loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            doc = {}
    except (OSError, ValueError):
        doc = {}
    doc[cap.key] = cap.to_json()
    tmp = path.with_name(f"{CACHE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def measure(*, duration_s: float = 3.0, concurrency: int = 32, output_tokens: int = 64,
            workers: int = 0, warmup_s: float = 0.5) -> Capacity:
    """Drive the built-in server at full speed and measure the client (blocking)."""
    if duration_s <= 0 or concurrency < 1 or output_tokens < 1:
        raise ConfigError("calibration needs a positive duration, concurrency and output "
                          "length")
    key = cache_key(workers=workers, concurrency=concurrency, output_tokens=output_tokens)
    with ServerProcess(["--tokens", str(output_tokens)]) as server:
        cfg = OpenAIConfig(urls=(server.url,), model="exact", check_models=False,
                           max_tokens=output_tokens, preconnect=concurrency)
        done = asyncio.run(_drive(cfg, duration_s, warmup_s, concurrency, output_tokens,
                                  workers))
    ok, failed, tokens, span_s = done
    return Capacity(
        requests_per_s=round(ok / span_s, 1) if span_s > 0 else 0.0,
        tokens_per_s=round(tokens / span_s, 1) if span_s > 0 else 0.0,
        concurrency=concurrency, duration_s=round(span_s, 3), output_tokens=output_tokens,
        workers=workers, completed=ok, failed=failed,
        measured_utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), key=key)


async def _drive(cfg: OpenAIConfig, duration_s: float, warmup_s: float, concurrency: int,
                 output_tokens: int, workers: int) -> tuple[int, int, int, float]:
    clock = MonotonicClock()
    total_ms = int((duration_s + warmup_s) * 1000)
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": concurrency, "min_duration_ms": total_ms, "max_duration_ms": total_ms,
        "min_query_count": 1})
    ds = SyntheticDataset(512, LengthDistribution.parse("128"),
                          LengthDistribution.parse(str(output_tokens)), seed=1,
                          max_output_tokens=output_tokens)
    eff = effective(layered.settings, len(ds))
    schedule = build_schedule(eff, len(ds))
    sut: SystemUnderTest = (WorkerPoolSUT(clock, cfg, workers=workers) if workers
                            else OpenAIHttpSUT(clock, cfg))
    warm_ns = int(warmup_s * 1e9)
    counts = [0, 0, 0]  # ok, failed, tokens (records done after the warm-up)

    def count(r: RequestRecord) -> None:
        if r.issued_ns < warm_ns:
            return  # the warm-up (connections, caches) is not measured
        if r.ok:
            counts[0] += 1
            counts[2] += r.output_tokens
        else:
            counts[1] += 1

    runner = Runner(schedule, ds, sut, clock, consumers=[count], max_concurrency=concurrency)
    await sut.start()
    try:
        outcome = await runner.run()
    finally:
        await sut.stop()
    span_s = max(0.0, (outcome.end_ns - warm_ns) / 1e9)
    return counts[0], counts[1], counts[2], span_s


# -- planned load -----------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    planned_requests_per_s: float | None
    planned_tokens_per_s: float | None
    share: float | None
    max_share: float
    capacity: Capacity
    refused: bool
    overridden: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["capacity"] = self.capacity.to_json()
        return d


def planned_load(eff: EffectiveSettings, schedule: Schedule, dataset: Dataset
                 ) -> tuple[float, float] | None:
    """Requests/s and output tokens/s an open-loop schedule asks for (None: a closed
    loop or Offline, whose pace the server sets)."""
    if schedule.kind is not ScheduleKind.TIMED or not eff.scenario.is_open_loop:
        return None
    n = len(schedule)
    if n < 2:
        return None
    span_s = float(schedule.scheduled_ns[-1] - schedule.scheduled_ns[0]) / 1e9
    if span_s <= 0:
        return None
    rps = (n - 1) / span_s
    idx = schedule.sample_index[: min(n, 4096)]
    mean_out = float(np.mean([dataset.sample(int(i)).output_tokens for i in idx]))
    return rps, rps * mean_out


def judge(eff: EffectiveSettings, schedule: Schedule, dataset: Dataset, cap: Capacity, *,
          max_share: float = 0.5, allow: bool = False) -> Judgement:
    """Refuse (ConfigError) a plan above ``max_share`` of ``cap`` unless ``allow``."""
    if not 0 < max_share <= 1:
        raise ConfigError(f"--client-share must be in (0, 1] (got {max_share:g})")
    plan = planned_load(eff, schedule, dataset)
    if plan is None:
        return Judgement(None, None, None, max_share, cap, False, False,
                         "no planned rate (the server paces this schedule)")
    rps, tps = plan
    shares = [rps / cap.requests_per_s if cap.requests_per_s > 0 else float("inf"),
              tps / cap.tokens_per_s if cap.tokens_per_s > 0 else float("inf")]
    share = max(shares)
    msg = (f"the plan needs {rps:,.1f} requests/s and {tps:,.0f} output tokens/s, "
           f"{share:.0%} of what this client sustains ({cap.requests_per_s:,.0f} "
           f"requests/s, {cap.tokens_per_s:,.0f} tokens/s measured "
           f"{cap.measured_utc})")
    if share <= max_share:
        return Judgement(rps, tps, share, max_share, cap, False, False, msg)
    if not allow:
        raise ConfigError(f"{msg}: above the {max_share:.0%} this run allows; lower the "
                          "rate, add --workers, or pass --allow-client-overload to run "
                          "anyway (the result records it)")
    return Judgement(rps, tps, share, max_share, cap, True, True, msg)
