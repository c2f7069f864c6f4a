"""The contract of a run driven somewhere else: :class:`RunDriver`.

A single-process run walks its schedule with one :class:`~tokenmark.loadgen.runner.Runner`.
A distributed run (``tokenmark run --distributed ray``, :mod:`tokenmark.distributed`)
hands shards of the same precomputed schedule to runners on other machines and feeds
every record they finish back here, moved onto this run's time base, to the same
consumers and sinks a local runner feeds. Metrics, verdicts and writers therefore see
one run either way; :func:`tokenmark.api.run.run_benchmark` takes a driver in place of the
local runner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tokenmark.clock import Clock
from tokenmark.dataset import Dataset
from tokenmark.loadgen.runner import RecordConsumer, RunnerStats, RunOutcome
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RecordSink
from tokenmark.sut import SystemUnderTest

__all__ = ["RunDriver", "SutFactory"]

SutFactory = Callable[[Clock], SystemUnderTest]


class RunDriver(Protocol):
    """Runs a schedule on remote runners and streams their records back."""

    stats: RunnerStats  # live counters for progress displays
    t0: int  # the run's origin on this process's clock, once started

    @property
    def name(self) -> str:
        """The system under test's name (as a local run would log it)."""
        ...

    def describe(self) -> dict[str, str]:
        """Labels of the system under test, plus how the run was distributed."""
        ...

    def report(self) -> dict[str, Any]:
        """What results.json states about the distribution (workers, clock offsets)."""
        ...

    @property
    def stopping(self) -> bool: ...

    def request_stop(self, reason: str) -> None:
        """Stop every worker; records already received are kept. Idempotent."""
        ...

    async def run(
        self,
        eff: EffectiveSettings,
        schedule: Schedule,
        dataset: Dataset,
        factory: SutFactory,
        consumers: Sequence[RecordConsumer],
        sinks: Sequence[RecordSink],
    ) -> RunOutcome:
        """Run ``schedule`` to the end; raise BadInputError before any load is sent
        when the workers cannot run it."""
        ...
