"""Every fault kind, checked against what the server sent, in one process and in workers.

The exact server logs per request what it wrote (:class:`~tokenmark.servers.faults.Truth`:
tokens, response bytes, how the response ended on the wire). Each record of a run over
every fault kind must agree with that log: the error class fits how the connection
ended, every token the server wrote before the cut is in the record (count, first-token
time after the server wrote it), a response of no bytes has no token. The same holds for
``--workers 2``, whose records must equal the in-process ones field by field (every
field of :class:`~tokenmark.records.RequestRecord` but the times and how tokens fell
into reads).

The transport itself is proven exact: a run whose handles log every call, as a worker
does, replays each request's log onto a fresh handle and must rebuild its record
identically, times and chunks included, on every fault kind.
"""

from __future__ import annotations

import copy
import re
from dataclasses import fields
from typing import Any

import pytest

from tests.integration.openai_support import Run, closed, truth_rows
from tokenmark.adapters import ipc
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.adapters.workers import WorkerPoolSUT
from tokenmark.errors import TargetError
from tokenmark.loadgen.runner import _Pending
from tokenmark.records import ErrorClass, Query, RequestRecord
from tokenmark.servers.faults import FAULT_KINDS
from tokenmark.servers.process import ServerProcess
from tokenmark.sut import ResponseHandle

#: One of each fault kind (status twice: 500 and 429) -> the client's error class.
FAULTS: dict[str, ErrorClass | None] = {
    "ok": None,
    "status:500": ErrorClass.HTTP_STATUS,
    "status:429": ErrorClass.RATE_LIMITED,
    "reset": ErrorClass.RESET,
    "reset_mid:3": ErrorClass.RESET_MID_STREAM,
    "close_mid:3": ErrorClass.TRUNCATED,
    "end_mid:3": ErrorClass.TRUNCATED,
    "no_done": None,
    "malformed": ErrorClass.MALFORMED,
    "bad_chunk": ErrorClass.MALFORMED,
    "error_event": ErrorClass.SUT_ERROR,
    "stall": ErrorClass.TIMEOUT_FIRST_TOKEN,
    "stall_mid:3": ErrorClass.TIMEOUT_REQUEST,
    "usage:3": None,
    "echo_auth": ErrorClass.HTTP_STATUS,
    "slow_head:200": None,
    "oversize:300000": None,
}
#: How the response ended on the wire -> the error classes that fit it.
ENDS: dict[str, set[ErrorClass | None]] = {
    "complete": {None},
    "error": {ErrorClass.SUT_ERROR},
    "status": {ErrorClass.HTTP_STATUS, ErrorClass.RATE_LIMITED},
    "ended": {ErrorClass.TRUNCATED},
    "closed": {ErrorClass.TRUNCATED, ErrorClass.MALFORMED},
    "reset": {ErrorClass.RESET, ErrorClass.RESET_MID_STREAM},
    "": {ErrorClass.TIMEOUT_FIRST_TOKEN, ErrorClass.TIMEOUT_REQUEST},
}
TIMES = {"scheduled_ns", "issued_ns", "first_token_ns", "done_ns", "chunk_ns",
         "first_answer_ns", "chunk_tokens", "seq", "query_id", "sample_index"}
OUT = 16
CFG = dict(first_token_timeout_s=0.5, request_timeout_s=1.0)


def test_the_plan_covers_every_fault_kind():
    assert {f.split(":")[0] for f in FAULTS} == set(FAULT_KINDS)


def _check_against_truth(run: Run, truth: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """Each record against the server's log; returns the records by fault."""
    recs = run.by_rid()
    mine = {rid: t for rid, t in truth.items() if rid in recs}
    assert len(recs) == len(mine) == 2 * len(FAULTS)  # one request per query: no retry
    by_fault: dict[str, list[RequestRecord]] = {}
    for rid, t in mine.items():
        r = recs[rid]
        fault = t["fault"]
        by_fault.setdefault(fault, []).append(r)
        assert r.error is FAULTS[fault], (fault, r.error, r.error_detail)
        assert r.error in ENDS[t["end"]], (fault, t["end"], r.error)
        got = sum(r.chunk_tokens)
        # every token written before the cut arrived; an error event ends the request
        # after its one token although the server writes on until it sees the close
        want = 1 if fault == "error_event" else t["tokens"]
        assert got == want, (fault, got, t)
        assert (r.first_token_ns >= 0) == (want > 0), fault
        if want:
            assert run.t0 + r.first_token_ns >= t["first_ns"], fault
            assert run.t0 + r.chunk_ns[-1] >= t["last_ns"] or fault == "error_event"
        if t["sent_bytes"] == 0:  # nothing reached the client: no token, no answer
            assert r.error in (ErrorClass.RESET, ErrorClass.TIMEOUT_FIRST_TOKEN), fault
        if r.error is None:
            assert r.output_tokens == OUT + (3 if fault == "usage:3" else 0), fault
        else:
            assert r.output_tokens == got, fault
        assert r.issued_ns >= 0 and r.done_ns >= r.issued_ns
        assert run.t0 + r.issued_ns <= t["recv_ns"]
        assert not re.search(r"\b(\w+) \1\b", r.error_detail), r.error_detail  # said once
    return by_fault


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The same plan in one process, then in two workers, against one server (each run
    is two whole cycles of the plan, so both meet the same faults)."""
    tmp = tmp_path_factory.mktemp("faults")
    truth = tmp / "truth.jsonl"
    with ServerProcess(["--faults", ",".join(FAULTS), "--itl-ms", "1"], truth=truth) as srv:
        cfg = OpenAIConfig(urls=(srv.url,), **CFG)  # type: ignore[arg-type]
        one = Run(tmp / "one", closed(2 * len(FAULTS), 4), cfg)
        two = Run(tmp / "two", closed(2 * len(FAULTS), 4), cfg, sut_class=WorkerPoolSUT,
                  workers=2)
    assert two.sut.describe()["workers"] == "2"
    rows = truth_rows(truth)
    return _check_against_truth(one, rows), _check_against_truth(two, rows)


def test_each_fault_kind_agrees_with_what_the_server_sent(both):
    one, two = both
    assert set(one) == set(two) == set(FAULTS)
    partial = [r for f, rs in two.items() for r in rs if FAULTS[f] and sum(r.chunk_tokens)]
    # reset_mid, close_mid, end_mid, stall_mid: 3 tokens; error_event: 1 (x2 each)
    assert sum(sum(r.chunk_tokens) for r in partial) == 2 * (4 * 3 + 1)
    assert all(r.first_token_ns >= 0 for r in partial)


def test_worker_records_equal_in_process_records_field_by_field(both):
    one, two = both
    compared = 0
    for fault in FAULTS:
        for a, b in zip(sorted(one[fault], key=lambda r: r.seq),
                        sorted(two[fault], key=lambda r: r.seq), strict=True):
            for f in fields(RequestRecord):
                if f.name not in TIMES:
                    assert getattr(a, f.name) == getattr(b, f.name), (fault, f.name)
                    compared += 1
            assert sum(a.chunk_tokens) == sum(b.chunk_tokens)
            assert (a.first_token_ns >= 0) == (b.first_token_ns >= 0)
            assert (a.first_answer_ns >= 0) == (b.first_answer_ns >= 0)
    assert compared >= 2 * len(FAULTS) * 8


class _Stub:
    """The part of a runner a handle reports to."""

    def __init__(self, clock: Any, t0: int) -> None:
        self.clock = clock
        self.t0 = t0
        self.finished: list[tuple[Any, Any]] = []

    def _finish(self, p: _Pending, token_ids: Any, text: Any) -> None:
        self.finished.append((token_ids, text))


class _Logging(OpenAIHttpSUT):
    """Logs every handle call as a worker does, and makes it on the run's handle too."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.logs: list[tuple[RequestRecord, ipc.CallLog, _Pending]] = []

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        assert isinstance(handle, _Pending)
        shape = ipc.HandleShape.of(type(handle))
        log = ipc.CallLog(shape, query.seq)
        self.logs.append((copy.deepcopy(handle.rec), log, handle))

        def forward(i: int, name: str) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = log.call(i, args, kwargs, self._now)
                return getattr(handle, name)(*args, **kwargs)
            return call

        tee = type("Tee", (), {n: staticmethod(forward(i, n))
                               for i, n in enumerate(shape.methods)})()
        super().issue(query, tee)


def test_a_call_log_rebuilds_the_record_exactly_on_every_fault_kind(tmp_path):
    with ServerProcess(["--faults", ",".join(FAULTS), "--itl-ms", "1",
                        "--reasoning", "2"]) as srv:
        cfg = OpenAIConfig(urls=(srv.url,), api="chat", tokenizer="builtin", **CFG)
        run = Run(tmp_path / "out", closed(len(FAULTS), 4), cfg, sut_class=_Logging)
    logs = run.sut.logs
    assert len(logs) == len(FAULTS)
    kinds = set()
    for start, log, handle in logs:
        stub = _Stub(handle._run.clock, handle._run.t0)
        again = _Pending(stub, start)  # type: ignore[arg-type]
        payload = memoryview(log.encode())[5:]  # past the frame's length and kind
        assert ipc.done_seq(payload) == start.seq
        ipc.replay(payload, ipc.HandleShape.of(_Pending), again, 0)
        assert again.rec == handle.rec  # every field, times and chunks included
        assert len(stub.finished) == 1
        kinds.add(handle.rec.error)
    assert kinds == set(FAULTS.values())
    # the reasoning split travels too
    assert any(h.rec.reasoning_tokens > 0 and h.rec.first_answer_ns > h.rec.first_token_ns
               for _, _, h in logs)


def test_time_stamps_move_by_the_offset_and_missing_ones_are_stamped_where_made():
    class H:
        def __init__(self) -> None:
            self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

        def sent(self, t_ns: int | None = None) -> None:
            self.calls.append(("sent", (t_ns,), {}))

        def token(self, n: int = 1, t_ns: int | None = None) -> None:
            self.calls.append(("token", (n, t_ns), {}))

        def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
                 endpoint: str = "") -> None:
            self.calls.append(("fail", (error, detail), {"t_ns": t_ns, "endpoint": endpoint}))

        def note(self, what: str) -> None:  # a method the contract does not know
            self.calls.append(("note", (what,), {}))

    shape = ipc.HandleShape.of(H)
    assert dict(zip(shape.methods, shape.time_at, strict=True)) == {
        "fail": -2, "note": -1, "sent": 0, "token": 1}
    log = ipc.CallLog(shape, 7)
    clock = iter(range(1000, 2000, 100))
    idx = {n: i for i, n in enumerate(shape.methods)}
    log.call(idx["sent"], (), {}, lambda: next(clock))  # stamped now: 1000
    log.call(idx["token"], (2, 5000), {}, lambda: next(clock))
    log.call(idx["note"], ("x'\"\\é",), {}, lambda: next(clock))
    log.call(idx["token"], (3,), {}, lambda: next(clock))  # stamped: 1100
    log.call(idx["fail"], (ErrorClass.RESET_MID_STREAM, "cut"), {"endpoint": "e"},
             lambda: next(clock))  # stamped: 1200
    h = H()
    ipc.replay(memoryview(log.encode())[5:], shape, h, 10)
    assert h.calls == [
        ("sent", (990,), {}), ("token", (2, 4990), {}), ("note", ("x'\"\\é",), {}),
        ("token", (3, 1090), {}),
        ("fail", (ErrorClass.RESET_MID_STREAM, "cut"), {"t_ns": 1190, "endpoint": "e"})]


def test_messages_say_what_happened_in_plain_words(both):
    one, two = both
    for runs in (one, two):
        closed = [r.error_detail for r in runs["close_mid:3"]]
        assert closed == ["connection closed by the server before the response ended"] * 2
    with pytest.raises(TargetError) as e:
        check_target(OpenAIConfig(urls=("http://nohost.invalid:9",)))
    msg = str(e.value)
    assert "nohost.invalid" in msg and "did not resolve" in msg and "Unknown error" not in msg
