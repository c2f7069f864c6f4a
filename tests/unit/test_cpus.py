"""tokenmark.cpus (issue 21): the emulated server tokenmark starts on one CPU, the client on
the others; nothing pinned on one CPU, when turned off, or for a user's own server.

Ground truth: the kernel's own affinity masks (``os.sched_getaffinity`` of the processes),
or, where a machine has too few CPUs, the calls a recording stand-in receives.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from tokenmark import cpus
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api.suts import EmulatedTarget, SutSpec, http_sut_factory, make_sut
from tokenmark.clock import MonotonicClock
from tokenmark.cpus import CpuPinning, split
from tokenmark.servers.process import ServerProcess
from tokenmark.trust import fingerprint
from tokenmark.trust.fingerprint import CpuSnapshot

HAS_AFFINITY = hasattr(os, "sched_setaffinity")
REAL_OTHER_WORK_CORES = fingerprint.other_work_cores  # before the fixture replaces it


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """The machine these tests run on may be busy; the load gate has its own tests."""
    monkeypatch.setattr(cpus, "load_average", lambda: 0.0)

    async def no_other_work(window_s: float = 0.2) -> float:
        return 0.0
    monkeypatch.setattr(fingerprint, "other_work_cores", no_other_work)


def test_split_gives_the_server_the_highest_cpu_and_the_client_the_rest():
    assert split({0, 1}) == (frozenset({0}), 1)
    assert split([3, 1]) == (frozenset({1}), 3)
    assert split(range(8)) == (frozenset(range(7)), 7)
    client, server = split({2, 5, 9})  # type: ignore[misc]
    assert server not in client and client | {server} == {2, 5, 9}


@pytest.mark.parametrize("one", [set(), {0}, {7}])
def test_fewer_than_two_cpus_split_nothing(one):
    assert split(one) is None
    p = CpuPinning(cpus=one)
    assert p.plan is None and p.description.startswith("not pinned")


class Recorder:
    """Stands in for the kernel's affinity calls."""

    def __init__(self, mask: set[int], fail_client: bool = False) -> None:
        self.masks: dict[int, set[int]] = {0: set(mask)}
        self.calls: list[tuple[int, set[int]]] = []
        self.fail_client = fail_client

    def get(self, pid: int) -> set[int]:
        return set(self.masks.get(pid, self.masks[0]))

    def set(self, pid: int, mask: set[int]) -> None:
        self.calls.append((pid, set(mask)))
        if pid == 0 and self.fail_client:
            raise PermissionError(1, "Operation not permitted")
        self.masks[pid] = set(mask)


@pytest.fixture
def kernel(monkeypatch):
    def make(mask: set[int], fail_client: bool = False) -> Recorder:
        r = Recorder(mask, fail_client)
        monkeypatch.setattr(os, "sched_getaffinity", r.get, raising=False)
        monkeypatch.setattr(os, "sched_setaffinity", r.set, raising=False)
        return r
    return make


def test_pin_puts_server_and_client_on_distinct_cpus_and_restore_undoes_it(kernel):
    k = kernel({0, 1, 2, 3})
    p = CpuPinning()
    assert p.description == "client 0,1,2, server 3"
    p.pin(5_000_000)
    assert k.masks[5_000_000] == {3} and k.masks[0] == {0, 1, 2}
    assert cpus.available() == 4  # the machine's, not the pinned client's
    p.restore()
    assert k.masks[0] == {0, 1, 2, 3}
    assert cpus.available() == 4


def test_turned_off_or_one_cpu_pins_nothing(kernel):
    k = kernel({0, 1})
    off = CpuPinning(enabled=False)
    off.pin(5_000_000)
    off.restore()
    assert "--no-pin-cpus" in off.description
    k1 = kernel({0})
    one = CpuPinning()
    one.pin(5_000_000)
    one.restore()
    assert k.calls == [] and k1.calls == [] and "one CPU" in one.description


@pytest.mark.parametrize("load", [2.0, 7.5])
def test_a_machine_already_busy_pins_nothing(kernel, monkeypatch, load):
    k = kernel({0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    p = CpuPinning(load=load)
    p.pin(5_000_000)
    p.restore()
    assert p.plan is None and k.calls == []
    assert p.description == (f"not pinned (load average {load:.2f} on 2 CPUs: a pinned "
                             "client could not move away from the other work)")
    monkeypatch.setattr(cpus, "load_average", lambda: load)
    assert CpuPinning().plan is None  # the machine's own figure when none is given
    assert CpuPinning(load=1.99).plan == (frozenset({0}), 1)


def test_other_work_just_before_the_run_pins_nothing(kernel, monkeypatch):
    k = kernel({0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    held = CpuPinning(load=0.4, other=0.61)
    held.pin(5_000_000)
    held.restore()
    assert held.plan is None and k.calls == []
    assert held.description == ("not pinned (other work kept 0.61 cores of 2 busy just "
                                "before the run: a pinned client could not move away from it)")
    assert CpuPinning(load=0.4, other=cpus.QUIET_CORES - 0.01).plan == (frozenset({0}), 1)
    assert CpuPinning(load=0.4, other=None).plan == (frozenset({0}), 1)  # not measured


def test_other_work_is_the_machines_busy_time_less_our_own_between_two_snapshots(
        monkeypatch):
    # /proc/stat's busy seconds +1.2 and ours +0.1 over 0.5 s: 2.2 cores of other work
    snaps = iter([CpuSnapshot(100.0, 5.0, 10.0), CpuSnapshot(101.2, 5.1, 10.5)])
    monkeypatch.setattr(fingerprint, "cpu_snapshot", lambda: next(snaps))
    assert asyncio.run(REAL_OTHER_WORK_CORES(0.0)) == pytest.approx(2.2)
    missing = iter([CpuSnapshot(-1.0, 0.0, 0.0), CpuSnapshot(-1.0, 0.0, 0.5)])
    monkeypatch.setattr(fingerprint, "cpu_snapshot", lambda: next(missing))
    assert asyncio.run(REAL_OTHER_WORK_CORES(0.0)) is None  # no /proc/stat: not measured


def test_a_refusal_leaves_both_where_they_were(kernel):
    k = kernel({0, 1}, fail_client=True)
    p = CpuPinning()
    p.pin(5_000_000)
    assert k.masks[5_000_000] == {0, 1} and k.masks[0] == {0, 1}
    assert p.description.startswith("not pinned (Operation not permitted")
    p.restore()
    assert cpus.available() == 2


needs_two = pytest.mark.skipif(not HAS_AFFINITY or len(os.sched_getaffinity(0)) < 2,
                               reason="needs CPU affinity and two CPUs")


@needs_two
def test_the_emulated_server_tokenmark_starts_is_pinned_apart_from_the_client():
    before = os.sched_getaffinity(0)
    client, server = split(before)  # type: ignore[misc]

    async def go() -> None:
        target = make_sut(SutSpec(kind="emulated"), MonotonicClock())
        assert isinstance(target, EmulatedTarget)
        await target.start()
        try:
            assert target.process is not None
            pid = target.process.pid
            for tid in os.listdir(f"/proc/{pid}/task"):  # every thread of the server
                assert os.sched_getaffinity(int(tid)) == {server}
            assert os.sched_getaffinity(0) == client
            assert target.describe()["cpus"] == split_text(client, server)
        finally:
            await target.stop()
        assert os.sched_getaffinity(0) == before

    asyncio.run(go())


def split_text(client: frozenset[int], server: int) -> str:
    return f"client {','.join(map(str, sorted(client)))}, server {server}"


@needs_two
def test_no_pin_cpus_leaves_the_emulated_server_and_client_alone():
    before = os.sched_getaffinity(0)

    async def go() -> None:
        target = make_sut(SutSpec(kind="emulated", pin_cpus=False), MonotonicClock())
        assert isinstance(target, EmulatedTarget)
        await target.start()
        try:
            assert target.process is not None
            assert os.sched_getaffinity(target.process.pid) == before
            assert os.sched_getaffinity(0) == before
            assert "--no-pin-cpus" in target.describe()["cpus"]
        finally:
            await target.stop()

    asyncio.run(go())


@needs_two
def test_a_users_own_server_is_never_pinned():
    before = os.sched_getaffinity(0)

    async def go(url: str, pid: int) -> None:
        sut = http_sut_factory(OpenAIConfig(urls=(url,)), check=False)(MonotonicClock())
        await sut.start()
        try:
            assert os.sched_getaffinity(0) == before
            assert os.sched_getaffinity(pid) == before
            assert "cpus" not in sut.describe()
        finally:
            await sut.stop()

    with ServerProcess(["--ttft-ms", "1"]) as srv:
        asyncio.run(go(srv.url, srv.pid))


def test_the_flag_and_the_config_file_reach_the_emulated_servers_spec():
    from tokenmark.api.suts import builtin_spec
    from tokenmark.config.runspec import RunSpec

    default = RunSpec.from_options({}, frozenset(), None)
    off = RunSpec.from_options({"pin_cpus": False}, frozenset({"pin_cpus"}), None)
    filed = RunSpec.from_options({"pin_cpus": True}, frozenset(),
                                 {"sut": {"pin_cpus": False}})
    assert builtin_spec(default, default.settings()).pin_cpus is True
    assert builtin_spec(off, off.settings()).pin_cpus is False
    assert filed.sut.pin_cpus is False


def test_the_official_loadgen_and_replicas_run_unpinned():
    from tokenmark.api.launch import prepare
    from tokenmark.api.suts import replicas_of
    from tokenmark.config.runspec import LoadOptions, RunSpec

    demo = {"benchmark": "llama3.1-8b", "scenario": "Server", "profile": "demo"}
    official = prepare(RunSpec(load=LoadOptions(**demo, loadgen="official")))
    assert isinstance(official.sut, SutSpec) and official.sut.pin_cpus is False
    # run.sut.cpus names the reason that applies, not the flag the user never gave
    assert (CpuPinning(official.sut.pin_cpus, off_reason=official.sut.unpinned_because)
            .description == "not pinned (--loadgen official)")
    own = prepare(RunSpec(load=LoadOptions(**demo)))
    assert isinstance(own.sut, SutSpec) and own.sut.pin_cpus is True
    rs = RunSpec(load=LoadOptions(**demo))
    two = replicas_of(rs, rs.settings())(2)(MonotonicClock())
    targets = two.replicas  # type: ignore[attr-defined]
    assert len(targets) == 2
    assert all(isinstance(t, EmulatedTarget) and not t.spec.pin_cpus for t in targets)
    assert {t.spec.unpinned_because for t in targets} == {
        "several emulated replicas share the CPUs"}


@needs_two
def test_a_client_that_fails_to_start_gives_back_the_cpus_and_stops_the_server(monkeypatch):
    from tokenmark.adapters.openai_http import OpenAIHttpSUT

    async def refuse(self: object) -> None:
        raise ConnectionRefusedError("no")

    monkeypatch.setattr(OpenAIHttpSUT, "start", refuse)
    before = os.sched_getaffinity(0)
    target = make_sut(SutSpec(kind="emulated"), MonotonicClock())
    assert isinstance(target, EmulatedTarget)
    with pytest.raises(ConnectionRefusedError):
        asyncio.run(target.start())
    assert os.sched_getaffinity(0) == before
    assert target.process is not None and target.process.proc is not None
    assert target.process.proc.poll() is not None  # the server it started has exited
