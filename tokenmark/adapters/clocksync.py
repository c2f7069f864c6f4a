"""Putting another process's timestamps on the run's time base.

A worker stamps what it sees with its own monotonic clock; the parent must translate
those stamps onto the run's clock before they become records. The offset is measured
the NTP way: the parent sends ``t1`` (its clock), the worker answers with ``t2`` (its
clock), the parent reads ``t3`` on arrival, and

    offset = t2 - (t1 + t3) / 2,   uncertainty = (t3 - t1) / 2,

keeping the exchange with the smallest round trip of several (the one least disturbed by
scheduling). A worker time ``tw`` is then ``tw - offset`` on the run's clock, within the
uncertainty.

On one machine there is nothing to estimate: ``CLOCK_MONOTONIC`` is one clock for every
process of a boot, so when the worker reports the parent's boot id and both read that
clock, the offset is exactly 0 and the measurement only *checks* it (|measured| must be
within the uncertainty; if not, something is wrong and the measured value is used). On
other machines (the Ray issue) the measured offset is applied, and measuring again at the
end of the run bounds the drift between the two clocks; both are reported with the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ClockSync", "Exchange", "boot_id", "estimate"]

Exchange = tuple[int, int, int]  # (t1 parent send, t2 worker, t3 parent receive)


def boot_id() -> str:
    """This kernel boot's id ('' where the system does not say)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class ClockSync:
    """How a worker's clock maps onto the run's clock."""

    offset_ns: int  # subtract from a worker time to get a run time
    measured_ns: int  # the estimate, even when the offset is known to be 0
    uncertainty_ns: int  # half the best round trip
    shared: bool  # same boot and the same clock: offset exactly 0

    def to_run(self, t_worker: int) -> int:
        return t_worker - self.offset_ns

    def describe(self) -> str:
        if self.shared:
            return (f"shared CLOCK_MONOTONIC (same boot); measured {self.measured_ns / 1e3:+.1f}"
                    f" us within +-{self.uncertainty_ns / 1e3:.1f} us")
        return (f"offset {self.offset_ns / 1e3:+.1f} us +-{self.uncertainty_ns / 1e3:.1f} us "
                "(measured, applied)")


def estimate(exchanges: list[Exchange], *, same_clock: bool) -> ClockSync:
    """The offset from the exchange with the smallest round trip."""
    if not exchanges:
        raise ValueError("no clock exchanges to estimate from")
    t1, t2, t3 = min(exchanges, key=lambda e: e[2] - e[0])
    measured = t2 - (t1 + t3) // 2
    half_rtt = max(0, (t3 - t1 + 1) // 2)
    # A shared clock must look like one: a measured offset beyond the round trip means
    # the premise is wrong (a different clock, or a broken exchange), so trust the data.
    shared = same_clock and abs(measured) <= half_rtt + 1_000
    return ClockSync(0 if shared else measured, measured, half_rtt, shared)
