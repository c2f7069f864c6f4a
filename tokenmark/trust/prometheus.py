"""Server metrics during a run: Prometheus text scraped, stored, and cross-checked.

:func:`parse` reads the Prometheus text exposition format (version 0.0.4, and the
OpenMetrics text vLLM and SGLang serve): ``name{label="v",...} value [timestamp]`` lines,
comments skipped. :class:`PrometheusWatcher` scrapes each endpoint's ``/metrics`` when the
run starts, every ``interval_s`` during it and once after the last response, each scrape
under its own deadline; the samples of the engines tokenmark knows (names starting with
``vllm:``, ``sglang:``, ``tgi_`` or ``tokenmark:``) are appended to ``server_metrics.jsonl``
beside the records as they come.

At the end the counters' growth over the run is compared with what the client counted
(:func:`tokenmark.mlperf.rules.server_counts`):

==========  ===============================  =========================  ===========================
engine      finished requests                prompt tokens              generated tokens
==========  ===============================  =========================  ===========================
vLLM        ``vllm:request_success_total``   ``vllm:prompt_tokens_total``  ``vllm:generation_tokens_total``
SGLang      ``sglang:num_requests_total``    ``sglang:prompt_tokens_total``  ``sglang:generation_tokens_total``
TGI         ``tgi_request_success``          ``tgi_request_input_length_sum``  ``tgi_request_generated_tokens_sum``
==========  ===============================  =========================  ===========================

(each summed over its label sets and over the endpoints). A counter the server lacks is
not compared; a server without ``/metrics`` gives no finding, only a note.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Finding, server_counts
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RequestRecord
from tokenmark.redact import Redactor
from tokenmark.trust.http import get

__all__ = ["COUNTERS", "METRICS_FILE", "PrometheusWatcher", "Tolerances", "parse", "totals"]

METRICS_FILE = "server_metrics.jsonl"
KNOWN_PREFIXES = ("vllm:", "sglang:", "tgi_", "tokenmark:")
#: What each engine's counters mean: quantity -> metric names (first one present wins).
COUNTERS: dict[str, tuple[str, ...]] = {
    "requests": ("vllm:request_success_total", "sglang:num_requests_total",
                 "tgi_request_success", "tokenmark:request_success_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total",
                      "tgi_request_input_length_sum", "tokenmark:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                          "tgi_request_generated_tokens_sum",
                          "tokenmark:generation_tokens_total"),
}

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?\s*$")


def parse(text: str) -> Iterator[tuple[str, str, float]]:
    """``(name, labels, value)`` of every sample line (labels as written, ``{}`` or '')."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line.strip())
        if m is None:
            continue
        raw = m.group(3)
        try:
            value = float(raw)
        except ValueError:
            continue
        yield m.group(1), m.group(2) or "", value


def totals(samples: dict[str, float]) -> dict[str, tuple[str, float]]:
    """Quantity -> (metric name, value summed over label sets) for the known counters."""
    by_name: dict[str, float] = {}
    for key, v in samples.items():
        name = key.split("{", 1)[0]
        if math.isfinite(v):
            by_name[name] = by_name.get(name, 0.0) + v
    out: dict[str, tuple[str, float]] = {}
    for what, names in COUNTERS.items():
        for n in names:
            if n in by_name:
                out[what] = (n, by_name[n])
                break
    return out


@dataclass(frozen=True)
class Tolerances:
    requests: float = 0.0
    prompt_tokens: float = 0.02
    generation_tokens: float = 0.01
    check_prompt_tokens: bool = True


class PrometheusWatcher:
    """A :class:`~tokenmark.api.run.RunWatcher` scraping ``/metrics`` of each endpoint."""

    key = "server_metrics"

    def __init__(self, urls: tuple[str, ...], *, interval_s: float = 1.0,
                 timeout_s: float = 2.0, header_lines: bytes = b"",
                 tolerances: Tolerances = Tolerances(), path: str = "/metrics",
                 ssl_context: Any = None, secrets: tuple[str, ...] = ()) -> None:
        self.urls = urls
        self._mask = Redactor(secrets)  # a server may echo the key into a label
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.header_lines = header_lines
        self.tol = tolerances
        self.path = path
        self.ssl_context = ssl_context
        self.first: dict[str, dict[str, float]] = {}
        self.last: dict[str, dict[str, float]] = {}
        self.errors: dict[str, str] = {}
        self.scrapes = 0
        self._file: IO[str] | None = None
        self._task: asyncio.Task[None] | None = None
        self.ok_requests = 0
        self.prompt_tokens = 0
        self.output_tokens = 0

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        pass

    async def _scrape_one(self, url: str) -> dict[str, float] | None:
        ans = await get(url, self.path, extra_headers=self.header_lines,
                        timeout_s=self.timeout_s, max_bytes=32 << 20,
                        ssl_context=self.ssl_context)
        if not ans.ok:
            self.errors[url] = self._mask.text(ans.error or f"HTTP {ans.status}")
            return None
        samples = {self._mask.text(f"{n}{lab}"): v for n, lab, v in parse(
            ans.body.decode("utf-8", "replace")) if n.startswith(KNOWN_PREFIXES)}
        if not samples:
            self.errors[url] = "no vLLM, SGLang, TGI or tokenmark metrics in the answer"
            return None
        self.errors.pop(url, None)
        return samples

    async def scrape(self) -> None:
        t = time.monotonic_ns()
        got = await asyncio.gather(*(self._scrape_one(u) for u in self.urls))
        self.scrapes += 1
        for url, samples in zip(self.urls, got, strict=True):
            if samples is None:
                continue
            self.first.setdefault(url, samples)
            self.last[url] = samples
            if self._file is not None:
                self._file.write(json.dumps({"t_ns": t, "endpoint": url,
                                             "samples": samples}) + "\n")
                self._file.flush()

    async def start(self, output_dir: Path) -> None:
        self._file = open(output_dir / METRICS_FILE, "w", encoding="utf-8")  # noqa: SIM115
        await self.scrape()
        if self.first:
            self._task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.scrape()

    def record(self, rec: RequestRecord) -> None:
        if rec.ok:
            self.ok_requests += 1
            self.prompt_tokens += rec.input_tokens
            self.output_tokens += rec.output_tokens

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        try:
            if self.first:
                await self.scrape()
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None

    def deltas(self) -> dict[str, tuple[str, float]]:
        out: dict[str, tuple[str, float]] = {}
        for url in self.first:
            a, b = totals(self.first[url]), totals(self.last.get(url, self.first[url]))
            for what, (name, v1) in b.items():
                if what in a:
                    prev = out.get(what, (name, 0.0))[1]
                    out[what] = (name, prev + v1 - a[what][1])
        return out

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        section: dict[str, Any] = {"file": METRICS_FILE, "scrapes": self.scrapes,
                                   "endpoints": list(self.urls),
                                   "errors": dict(self.errors)}
        if not self.first:
            section["available"] = False
            return section, []
        section["available"] = True
        d = self.deltas()
        client = {"requests": float(self.ok_requests),
                  "prompt_tokens": float(self.prompt_tokens),
                  "generation_tokens": float(self.output_tokens)}
        section["server_delta"] = {k: {"metric": n, "value": v} for k, (n, v) in d.items()}
        section["client"] = client
        tol = {"requests": self.tol.requests, "prompt_tokens": self.tol.prompt_tokens,
               "generation_tokens": self.tol.generation_tokens}
        checks = [(what, v, client[what], tol[what]) for what, (_, v) in d.items()
                  if what != "prompt_tokens" or self.tol.check_prompt_tokens]
        if not checks:
            section["note"] = "no request or token counters to compare"
            return section, []
        if len(self.last) < len(self.first) or any(u in self.errors for u in self.first):
            section["note"] = "the last scrape failed on some endpoint: counts not compared"
            return section, []
        engines = sorted({n.split(":")[0].split("_")[0] for _, (n, _) in d.items()})
        return section, [server_counts(f"/metrics of {', '.join(engines)}",
                                       sorted(checks))]
