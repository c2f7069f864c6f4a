"""Where the client and the emulated server tokenmark starts itself run (issue 21).

On a machine with two or more CPUs, ``tokenmark run`` against its built-in emulated server
(:class:`tokenmark.api.suts.EmulatedTarget`) puts the server's process on one CPU and the
client's event loop on the others, as the peers harness does (``../shared/bench-peers``:
client on one core, server on the other). Left to the scheduler, the two shared the
cores: the server's wake-ups preempted the client's timed sends (bench/loop_stalls.py: 24
of 25 demo sends later than 0.2 ms waited behind a runner step that ran ~0.6 ms of CPU in
up to 2.3 ms of wall time). A user's own server (``--url``) is never touched;
``--no-pin-cpus`` turns the placement off. What was chosen is in the results
(``sut.cpus``). Measured (bench/send_lag.py, 8 alternating demo runs each, the rest of
the machine's load held off): send lag p99 median 1.23 ms unpinned, 0.51 ms pinned. A
pinned client cannot move away from a core that other work loads (at load 12: p99 17-25
ms pinned, 4-7 ms unpinned; at load 2.4-6 the two were alike, 4.3 ms; beside one other
process busy 0.6 of a core: 2.5-4.1 ms pinned, 0.4-1.0 ms unpinned, demo p99, 6 runs each),
so nothing is pinned when the machine is not quiet: other work of a quarter core or more in
the 0.2 s before the run (:func:`tokenmark.trust.fingerprint.other_work_cores`), or a
one-minute load average at or above the CPU count (``sut.cpus`` then says so). Pinning only
the server was no better than not pinning on a quiet machine (0.42-0.54 ms), so it is both
or neither.

:func:`available` is the CPU set the process had *before* any pinning, so the machine
facts (``cores_available``) and the client monitor's shares stay those of the machine.
"""

from __future__ import annotations

import os
from collections.abc import Collection

__all__ = ["QUIET_CORES", "CpuPinning", "available", "split"]

#: Other work (cores, measured just before the run) below which the machine is quiet.
QUIET_CORES = 0.25

_before: frozenset[int] | None = None  # this process's CPUs before the first pinning


def _affinity() -> frozenset[int] | None:
    getaff = getattr(os, "sched_getaffinity", None)
    if getaff is None:
        return None
    try:
        return frozenset(getaff(0))
    except OSError:
        return None


def available() -> int:
    """How many CPUs this process may run on, as before any :class:`CpuPinning`."""
    cpus = _before if _before is not None else _affinity()
    return max(1, len(cpus)) if cpus is not None else max(1, os.cpu_count() or 1)


def split(cpus: Collection[int]) -> tuple[frozenset[int], int] | None:
    """The client's CPUs and the server's one: the highest-numbered CPU for the server,
    the rest for the client; None with fewer than two CPUs (nothing to split)."""
    ordered = sorted(set(cpus))
    if len(ordered) < 2:
        return None
    return frozenset(ordered[:-1]), ordered[-1]


def _threads(pid: int) -> list[int]:
    """Every thread of process ``pid`` (a server's BLAS workers started at import too);
    just ``pid`` where ``/proc`` does not list them."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")] or [pid]
    except (OSError, ValueError):
        return [pid]


def load_average() -> float | None:
    """The machine's one-minute load average; None where the system has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _names(cpus: Collection[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


class CpuPinning:
    """The placement of one client and the one server process it started.

    ``enabled`` False (``--no-pin-cpus``, ``--loadgen official``, emulated replicas:
    ``off_reason`` says which), fewer than two CPUs, or a machine that is not
    quiet (``other``, cores of other work just before the run, at or above
    :data:`QUIET_CORES`, or ``load``, the one-minute load average, at or above the CPU
    count): nothing is pinned and :attr:`description` says why. Otherwise :meth:`pin`
    puts the server's process on its CPU and the calling thread (the event loop's; threads
    it starts later inherit it) on the others, until :meth:`restore`. The client's other
    threads (idle BLAS workers numpy starts at import) keep their CPUs.
    """

    def __init__(self, enabled: bool = True, cpus: Collection[int] | None = None,
                 load: float | None = None, other: float | None = None,
                 off_reason: str = "--no-pin-cpus") -> None:
        if cpus is None:
            cpus = _affinity()
        self.enabled = enabled
        self.plan = split(cpus) if enabled and cpus is not None else None
        if self.plan is not None and load is None:
            load = load_average()
        machine = os.cpu_count() or len(set(cpus or ()))
        busy = self.plan is not None and load is not None and load >= machine
        held = self.plan is not None and other is not None and other >= QUIET_CORES
        if not enabled:
            self.description = f"not pinned ({off_reason})"
        elif cpus is None:
            self.description = "not pinned (this system cannot set CPU affinity)"
        elif self.plan is None:
            self.description = f"not pinned (one CPU: {_names(cpus)})"
        elif busy:
            self.plan = None
            self.description = (f"not pinned (load average {load:.2f} on {machine} CPUs: "
                                "a pinned client could not move away from the other work)")
        elif held:
            self.plan = None
            self.description = (f"not pinned (other work kept {other:.2f} cores of {machine} "
                                "busy just before the run: a pinned client could not move "
                                "away from it)")
        else:
            client, server = self.plan
            self.description = f"client {_names(client)}, server {server}"
        self._restore: frozenset[int] | None = None

    def pin(self, server_pid: int) -> None:
        """Put the server's process on its CPU and the calling thread on the others; a
        system that refuses (a container's CPU set) leaves both where they were."""
        global _before
        if self.plan is None or self._restore is not None:
            return
        now = _affinity()
        if now is None:
            return
        client, server = self.plan
        try:
            for tid in _threads(server_pid):
                os.sched_setaffinity(tid, {server})
            os.sched_setaffinity(0, client)
        except OSError as e:
            self.description = f"not pinned ({e.strerror or e})"
            try:  # the server may have been pinned before the client's call failed
                os.sched_setaffinity(server_pid, now)
            except OSError:
                pass
            return
        if _before is None:
            _before = now
        self._restore = now

    def restore(self) -> None:
        global _before
        if self._restore is not None:
            os.sched_setaffinity(0, self._restore)
            if self._restore == _before:
                _before = None
            self._restore = None
