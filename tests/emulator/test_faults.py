"""Every fault of the emulated server is produced, and the HTTP client counts it in the
right error class; with faults on, no finished answer is lost and /metrics agrees with
the client. The server runs on the run's own event loop (loopback, real time) so its
ground truth (one :class:`~tokenmark.servers.faults.Truth` row per request, keyed by the
client's X-Request-Id) and its counters can be read after the run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.api.run import EmulatedTarget, RunResult, SutSpec, make_sut, run_benchmark
from tokenmark.clock import Clock
from tokenmark.config.layering import LayeredSettings, build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import EmulatorSpec
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.records import ErrorClass, RequestRecord
from tokenmark.servers.emulated import EmulatedConfig
from tokenmark.sut import SystemUnderTest

OUT = 8  # output tokens per request: 8 model steps of ~7 ms

#: fault -> the client's error class (None: a complete answer)
EXPECTED: dict[str, ErrorClass | None] = {
    "ok": None,
    "status:500": ErrorClass.HTTP_STATUS,
    "status:429": ErrorClass.RATE_LIMITED,
    "reset": ErrorClass.RESET,
    "reset_mid:2": ErrorClass.RESET_MID_STREAM,
    "close_mid:2": ErrorClass.TRUNCATED,
    "end_mid:2": ErrorClass.TRUNCATED,
    "no_done": None,
    "malformed": ErrorClass.MALFORMED,
    "bad_chunk": ErrorClass.MALFORMED,
    "error_event": ErrorClass.SUT_ERROR,
    "stall": ErrorClass.TIMEOUT_FIRST_TOKEN,
    "stall_mid:2": ErrorClass.TIMEOUT_REQUEST,
    "usage:3": None,
    "echo_auth": ErrorClass.HTTP_STATUS,
    "slow_head:300": None,
    "oversize:300000": None,
}


def closed(n: int, concurrency: int) -> LayeredSettings:
    return build_settings("v6.0", "llama3.1-8b", Scenario.CLOSED_LOOP, overrides={
        "concurrency": concurrency, "min_query_count": n, "max_query_count": n,
        "min_duration_ms": 0})


class Emulated:
    """A run against the emulated server (same process), the target kept for reading."""

    def __init__(self, tmp: Path, layered: LayeredSettings, server: EmulatedConfig,
                 client: OpenAIConfig | None = None, size: int = 16) -> None:
        spec = SutSpec(kind="emulated", emulator=EmulatorSpec(), emulator_in_process=True,
                       emulator_server=server, client=client)
        self.targets: list[EmulatedTarget] = []

        def factory(clock: Clock) -> SystemUnderTest:
            sut = make_sut(spec, clock)
            assert isinstance(sut, EmulatedTarget)
            self.targets.append(sut)
            return sut

        ds = SyntheticDataset(size, LengthDistribution.parse("64"),
                              LengthDistribution.parse(str(OUT)))
        self.result: RunResult = run_benchmark(layered, ds, factory, tmp, drain_timeout_s=20)
        self.records: list[RequestRecord] = list(read_records(tmp / "records.jsonl"))

    @property
    def target(self) -> EmulatedTarget:
        return self.targets[0]

    def truth(self) -> dict[str, Any]:
        assert self.target.server is not None
        return {t.rid: t for t in self.target.server.truth}

    def by_rid(self) -> dict[str, RequestRecord]:
        client = self.target.client
        assert client is not None
        return {client.request_id(r.seq): r for r in self.records}

    def metrics(self) -> dict[str, float]:
        assert self.target.server is not None
        out: dict[str, float] = {}
        for line in self.target.server.metrics_text().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


#: Wide enough that a complete answer (slow_head's 300 ms head included) never times out
#: on a machine at a load of 15 on 2 cores; the stalls wait them out, once each.
TIMEOUTS = OpenAIConfig(urls=("http://unused",), first_token_timeout_s=2.5,
                        request_timeout_s=5.0)


def test_every_fault_is_produced_and_classified(tmp_path):
    plan = tuple(EXPECTED)
    n = len(plan)
    run = Emulated(tmp_path, closed(n, 4), EmulatedConfig(fault_cycle=plan, keep_truth=True),
                   TIMEOUTS)
    truth = run.truth()
    recs = run.by_rid()
    assert len(truth) == len(recs) == n  # one server request per query: no retries
    assert sorted(t.fault for t in truth.values()) == sorted(plan)
    for rid, t in truth.items():
        r = recs[rid]
        assert r.error is EXPECTED[t.fault], (t.fault, r.error, r.error_detail)
        if r.error is None:
            want = OUT + 3 if t.fault == "usage:3" else OUT
            assert r.output_tokens == want and sum(r.chunk_tokens) == OUT, t.fault
    slow = next(recs[rid] for rid, t in truth.items() if t.fault == "slow_head:300")
    assert slow.first_token_ns - slow.issued_ns >= 300_000_000
    big = next(recs[rid] for rid, t in truth.items() if t.fault == "oversize:300000")
    # the padded event is one token, however many reads it takes: counted per event, the
    # stream still holds OUT tokens (per read it would hold more). Its first read may
    # also carry the events after it on a loaded machine, so chunk_tokens[0] can be > 1.
    assert big.output_tokens == OUT and sum(big.chunk_tokens) == OUT
    cut = next(recs[rid] for rid, t in truth.items() if t.fault == "reset_mid:2")
    assert sum(cut.chunk_tokens) == 2  # what streamed before the cut is kept
    s = run.result.summary
    want: dict[str, int] = {}
    for e in EXPECTED.values():
        if e is not None:
            want[e.value] = want.get(e.value, 0) + 1
    assert s.errors == want and s.completed == sum(e is None for e in EXPECTED.values())
    doc = run.result.document
    assert doc["run"]["sut"]["profile"] == "emulated H200 x1, llama3.1-8b, bf16"
    assert "cycle" in doc["run"]["sut"]["faults"]


def test_with_faults_on_no_finished_record_is_lost_and_metrics_agree(tmp_path):
    faults = (("status:500", 0.08), ("status:429", 0.08), ("reset", 0.06),
              ("reset_mid:3", 0.06), ("end_mid:2", 0.05), ("malformed", 0.05))
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON, overrides={
        "target_qps": 60.0, "min_query_count": 120, "max_query_count": 120,
        "min_duration_ms": 0})
    run = Emulated(tmp_path, layered, EmulatedConfig(faults=faults, fault_seed=7,
                                                     keep_truth=True), size=32)
    truth = run.truth()
    recs = run.by_rid()
    assert len(run.records) == 120 == len(truth)
    written_whole = {rid for rid, t in truth.items() if t.fault == "ok"}
    assert 40 < len(written_whole) < 120
    for rid in written_whole:  # every answer the server completed is a finished record
        assert recs[rid].ok and recs[rid].output_tokens == OUT
    assert sum(r.ok for r in run.records) == len(written_whole)
    m = run.metrics()
    base = 'model_name="llama3.1-8b"'
    s = run.result.summary
    assert m[f'vllm:request_success_total{{{base},finished_reason="length"}}'] == s.completed
    assert m[f"tokenmark:requests_received_total{{{base}}}"] == 120
    injected = {re.search(r'fault="([^"]+)"', k).group(1): v  # type: ignore[union-attr]
                for k, v in m.items() if k.startswith("tokenmark:faults_injected_total")}
    classes = {"status:500": "http_status", "status:429": "http_429",
               "reset": "connection_reset", "reset_mid:3": "reset_mid_stream",
               "end_mid:2": "truncated_stream", "malformed": "malformed_stream"}
    assert {classes[f]: int(v) for f, v in injected.items()} == s.errors
    # every queued request was prefilled (a cut comes after tokens); the engine goes on
    # generating for a cut stream (as it would until a real server noticed), so the run
    # may end before it has; requests answered before queueing generated nothing
    queued = [t for t in truth.values() if t.fault not in ("status:500", "status:429",
                                                           "reset", "malformed")]
    assert m[f"vllm:prompt_tokens_total{{{base}}}"] == sum(t.prompt_tokens for t in queued)
    finished = m[f"tokenmark:requests_finished_total{{{base}}}"]
    assert s.completed <= finished <= len(queued)
    generated = m[f"vllm:generation_tokens_total{{{base}}}"]
    assert OUT * finished <= generated <= OUT * len(queued)
    assert sum(r.input_tokens for r in run.records if r.ok) == 64 * s.completed
    assert m[f'vllm:num_requests_running{{engine="0",{base}}}'] == 0


def test_a_server_that_exits_after_n_requests_keeps_every_finished_record(tmp_path):
    """In its own process (as ``tokenmark run`` starts it): it exits with code 70."""
    spec = SutSpec(kind="emulated", emulator=EmulatorSpec(),
                   emulator_server=EmulatedConfig(exit_after=10))
    targets: list[EmulatedTarget] = []

    def factory(clock: Clock) -> SystemUnderTest:
        sut = make_sut(spec, clock)
        assert isinstance(sut, EmulatedTarget)
        targets.append(sut)
        return sut

    ds = SyntheticDataset(16, LengthDistribution.parse("64"), LengthDistribution.parse("4"))
    res = run_benchmark(closed(24, 2), ds, factory, tmp_path, drain_timeout_s=10)
    proc = targets[0].process
    assert proc is not None and proc.proc is not None and proc.proc.returncode == 70
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == 24
    assert 8 <= sum(r.ok for r in recs) <= 10
    assert not res.verdicts.valid
    assert set(res.summary.errors) <= {"connect_error", "connection_reset",
                                       "reset_mid_stream", "truncated_stream"}


@pytest.mark.parametrize("api,stream", [("chat", True), ("completions", False),
                                        ("chat", False)])
def test_both_apis_streamed_or_not(tmp_path, api, stream):
    client = OpenAIConfig(urls=("http://unused",), api=api, stream=stream)
    run = Emulated(tmp_path, closed(6, 3), EmulatedConfig(), client)
    assert all(r.ok and r.output_tokens == OUT for r in run.records)
    if stream:
        assert all(sum(r.chunk_tokens) == OUT for r in run.records)
