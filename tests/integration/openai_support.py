"""Helpers for the tests of the OpenAI HTTP client: settings, runs, truth matching."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api.run import RunResult, run_benchmark
from tokenmark.clock import Clock
from tokenmark.config.layering import LayeredSettings, build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.records import RequestRecord
from tokenmark.sut import SystemUnderTest

MS = 1_000_000


def closed(n: int, concurrency: int, **extra: Any) -> LayeredSettings:
    """A closed loop of exactly ``n`` queries with ``concurrency`` streams."""
    return build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": concurrency, "min_query_count": n, "max_query_count": n,
        "min_duration_ms": 0, **extra})


def dataset(output: int = 16, size: int = 16) -> SyntheticDataset:
    return SyntheticDataset(size, LengthDistribution.parse("8"),
                            LengthDistribution.parse(str(output)))


class Run:
    """One benchmark run against an HTTP target, with its SUT kept for inspection."""

    def __init__(self, tmp: Path, layered: LayeredSettings, config: OpenAIConfig, *,
                 output: int = 16, sut_class: Any = OpenAIHttpSUT, **sut_kw: Any) -> None:
        self.suts: list[Any] = []

        def factory(clock: Clock) -> SystemUnderTest:
            sut = sut_class(clock, config, **sut_kw)
            self.suts.append(sut)
            return sut  # type: ignore[no-any-return]

        self.dir = tmp
        self.result: RunResult = run_benchmark(layered, dataset(output), factory, tmp,
                                               drain_timeout_s=30)
        self.records: list[RequestRecord] = list(read_records(tmp / "records.jsonl"))

    @property
    def sut(self) -> Any:
        return self.suts[0]

    @property
    def t0(self) -> int:
        return self.result.outcome.t0_ns

    def by_rid(self) -> dict[str, RequestRecord]:
        return {self.sut.request_id(r.seq): r for r in self.records}

    def findings(self) -> dict[str, Any]:
        return {f.rule: f for f in self.result.verdicts.tokenmark.findings}

    def files_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.dir.rglob("*")
                         if p.is_file())


def truth_rows(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["rid"]: r for r in rows}
