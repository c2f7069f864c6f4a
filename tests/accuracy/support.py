"""Shared helpers for the accuracy and compliance tests: in-process SUTs that return token
ids, and a one-call way to run a schedule through the runner with the accuracy recorder
(what ``tokenmark.api.run.run_benchmark`` does for accuracy mode, without the rest)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenmark.clock import FakeClock, run_virtual
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.loadgen.runner import Runner
from tokenmark.mlperf.scenarios import build_schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.output.accuracy import AccuracyRecorder
from tokenmark.records import Query, TokenSource
from tokenmark.sut import ResponseHandle, TokenIdsHandle

#: sample index -> (output ids, first chunk ids, reported token count)
Answer = Callable[[int], tuple[list[int], list[int], int]]


def plain_answer(idx: int) -> tuple[list[int], list[int], int]:
    ids = [100 + idx, idx % 7 + 3, 2]
    return ids, ids[:1], len(ids)


class IdsSUT:
    """Answers at once with ``answer(sample_index)``; reports first-chunk ids."""

    def __init__(self, answer: Answer = plain_answer) -> None:
        self.answer = answer

    @property
    def name(self) -> str:
        return "ids"

    def describe(self) -> dict[str, str]:
        return {}

    async def start(self) -> None:
        return None

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        ids, first, count = self.answer(query.sample.index)
        if isinstance(handle, TokenIdsHandle):
            handle.first_token_ids(first)
        handle.token(len(first))
        if len(ids) > len(first):
            handle.token(len(ids) - len(first))
        handle.complete(count, TokenSource.SUT, token_ids=ids)


def dataset(n: int) -> SyntheticDataset:
    return SyntheticDataset(n, LengthDistribution.parse("8"), LengthDistribution.parse("3"))


@dataclass
class Recorded:
    path: Path
    recorder: AccuracyRecorder
    sample_index: list[int]


def record(eff: EffectiveSettings, sut: object, out: Path, n: int,
           encode: Callable[[str], Sequence[int]] | None = None) -> Recorded:
    """Run ``eff``'s schedule over a synthetic dataset of ``n`` on a virtual clock."""
    out.mkdir(parents=True, exist_ok=True)
    schedule = build_schedule(eff, n)
    rec = AccuracyRecorder(out / "mlperf_log_accuracy.json", eff, encode=encode)
    clock = FakeClock()
    runner = Runner(schedule, dataset(n), sut, clock, outputs=rec)  # type: ignore[arg-type]
    run_virtual(runner.run(), clock)
    rec.close()
    return Recorded(rec.path, rec, schedule.sample_index.tolist())


def run_real(eff: EffectiveSettings, sut: object, out: Path, n: int,
             encode: Callable[[str], Sequence[int]] | None = None,
             ds: object | None = None) -> Recorded:
    """As :func:`record` on the real clock (for SUTs with threads or sockets)."""
    from tokenmark.clock import MonotonicClock

    out.mkdir(parents=True, exist_ok=True)
    schedule = build_schedule(eff, n)
    rec = AccuracyRecorder(out / "mlperf_log_accuracy.json", eff, encode=encode)

    async def go() -> None:
        await sut.start()  # type: ignore[attr-defined]
        try:
            runner = Runner(schedule, ds or dataset(n), sut, MonotonicClock(),  # type: ignore[arg-type]
                            outputs=rec)
            await runner.run()
        finally:
            await sut.stop()  # type: ignore[attr-defined]

    asyncio.run(go())
    rec.close()
    return Recorded(rec.path, rec, schedule.sample_index.tolist())
