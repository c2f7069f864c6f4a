"""The official LoadGen as an oracle: run it against a dummy SUT, read back what it saw.

Two halves:

* run as a script (``python tests/loadgen_oracle.py '<json>'``, one LoadGen test per
  process, since LoadGen reads ``mlperf.conf`` once per process), it drives
  ``mlperf_loadgen`` with a SUT of known, seeded behaviour: per sample a TTFT, a decode
  time and an output token count (some samples report 1 token, LoadGen's quirk), served
  by one scheduler thread that calls ``FirstTokenComplete`` and ``QuerySamplesComplete``
  when each is due. The SUT writes what it did, in issue order, to ``sut_record.json``.
* imported, it starts those runs (:func:`start`), parses ``mlperf_log_detail.txt``
  (:func:`read_detail`, floats kept as the decimal text LoadGen printed) and the trace
  (:func:`read_trace`; in 6.0.17 the file is not valid JSON as a whole, so line by
  line) and says where LoadGen's clock started (:func:`run_origin_ns`), from which
  ``tests/integration/test_loadgen_equivalence.py`` rebuilds tokenmark records.

What the trace gives, per LoadGen's source (``loadgen.cc`` ``SampleComplete`` /
``TokenComplete``, ``issue_query_controller.cc``):

* every "Sample" async begin event: ``ts`` = the query's scheduled time, relative to the
  trace origin, in microseconds printed with 3 decimals, i.e. exact nanoseconds;
  ``issue_start_ns`` and ``complete_ns`` = issue and completion relative to that
  scheduled time, in ns (``complete_ns`` is exactly the latency LoadGen records);
* the first token: in Server a "Token_Latency" counter event keyed by the same ``ts``,
  with TTFT = ``issue_delay + issue_to_done`` (exact); in SingleStream/MultiStream a
  "Token" async event with ``complete_ns`` = TTFT; in Offline nothing (not needed);
* the run's origin ``start``: in Server the first query is scheduled at delta 0 and in
  Offline every query is scheduled at ``start``, so ``start`` is that sample's ``ts``
  exactly. SingleStream/MultiStream schedule each query at its issue time, so ``start``
  is not in the trace; the first "SampleLoop" event, which begins right after ``start``
  (a few hundred ns here, from LoadGen's own "QPS w/ loadgen overhead"), stands in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
MLLOG = ":::MLLOG "


# -- parent side: start runs, read logs ----------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What the dummy SUT does; every random draw comes from ``seed``, in issue order.

    Times are milliseconds. Per sample: TTFT ~ U(ttft_ms), output tokens ~ U{tokens}
    (1 with probability ``one_token_fraction``), decode = (n - 1) * U(tpot_ms) (n = 1:
    one TPOT draw). ``*_override`` map an issue ordinal to a fixed TTFT or TPOT; a TPOT
    override also fixes the sample's token count at ``override_tokens``.
    """

    seed: int = 1
    ttft_ms: tuple[float, float] = (2.0, 20.0)
    tpot_ms: tuple[float, float] = (0.2, 1.0)
    tokens: tuple[int, int] = (2, 64)
    one_token_fraction: float = 0.05
    first_token: bool = True  # call FirstTokenComplete (not in Offline, nor non-token models)
    ttft_override: dict[int, float] = field(default_factory=dict)
    tpot_override: dict[int, float] = field(default_factory=dict)
    override_tokens: int = 8

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "ttft_ms": list(self.ttft_ms),
            "tpot_ms": list(self.tpot_ms),
            "tokens": list(self.tokens),
            "one_token_fraction": self.one_token_fraction,
            "first_token": self.first_token,
            "ttft_override": {str(k): v for k, v in self.ttft_override.items()},
            "tpot_override": {str(k): v for k, v in self.tpot_override.items()},
            "override_tokens": self.override_tokens,
        }


@dataclass(frozen=True)
class RunSpec:
    model: str  # LoadGen's config name, e.g. "llama3_1-8b"
    scenario: str  # LoadGen's TestScenario name
    conf: dict[str, str]  # user.conf "key = value" lines, keys without model.scenario.
    plan: Plan = field(default_factory=Plan)
    total: int = 200  # QSL total sample count
    perf_count: int = 100  # QSL performance sample count

    def user_conf(self) -> str:
        lines = [f"{self.model}.{self.scenario}.{k} = {v}" for k, v in self.conf.items()]
        return "\n".join(lines) + "\n"


@dataclass
class Running:
    spec: RunSpec
    out: Path
    proc: subprocess.Popen[bytes]


def start(spec: RunSpec, out: Path) -> Running:
    """Start one LoadGen test in a child process writing its logs to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    conf = out / "user.conf"
    conf.write_text(spec.user_conf())
    args = {
        "conf": str(conf),
        "model": spec.model,
        "scenario": spec.scenario,
        "out": str(out),
        "total": spec.total,
        "perf_count": spec.perf_count,
        "plan": spec.plan.to_json(),
    }
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), json.dumps(args)],
        cwd=out,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return Running(spec, out, proc)


@dataclass(frozen=True)
class TraceSample:
    seq: int
    query: int
    index: int
    sched_ns: int  # scheduled time, ns from the trace origin
    issue_ns: int  # issue - scheduled
    complete_ns: int  # completion - scheduled (LoadGen's latency)


@dataclass
class Trace:
    samples: list[TraceSample]  # by sample_seq
    first_token_ns: dict[int, int]  # sample_seq -> TTFT (first token - scheduled)
    first_sample_loop_ns: int | None  # ts of the first "SampleLoop" event


@dataclass
class LoadGenRun:
    spec: RunSpec
    out: Path
    detail: dict[str, list[Any]]
    trace: Trace
    sut: list[dict[str, Any]]  # the SUT's own record, in issue order
    summary: str

    def one(self, key: str) -> Any:
        """The single value LoadGen logged under ``key``."""
        (value,) = self.detail[key]
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self.one(key) if key in self.detail else default


def wait(running: Running, timeout: float = 120.0) -> LoadGenRun:
    output, _ = running.proc.communicate(timeout=timeout)
    if running.proc.returncode != 0:
        raise RuntimeError(
            f"LoadGen child failed (rc={running.proc.returncode}):\n{output.decode()[-4000:]}"
        )
    return load(running.spec, running.out)


def load(spec: RunSpec, out: Path) -> LoadGenRun:
    """Read back the logs of a finished run."""
    return LoadGenRun(
        spec,
        out,
        read_detail(out / "mlperf_log_detail.txt"),
        read_trace(out / "mlperf_log_trace.json"),
        json.loads((out / "sut_record.json").read_text()),
        (out / "mlperf_log_summary.txt").read_text(),
    )


def read_detail(path: Path) -> dict[str, list[Any]]:
    """``:::MLLOG`` lines as key -> values (floats as :class:`Decimal`, as printed)."""
    detail: dict[str, list[Any]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.startswith(MLLOG):
            record = json.loads(line[len(MLLOG) :], parse_float=Decimal)
            detail[record["key"]].append(record["value"])
    return dict(detail)


def _ns(ts: Decimal) -> int:
    ns = ts * 1000
    assert ns == ns.to_integral_value(), ts
    return int(ns)


def read_trace(path: Path) -> Trace:
    samples: list[TraceSample] = []
    tokens_by_seq: dict[int, int] = {}
    token_counters: dict[int, int] = {}  # scheduled ts (ns) -> TTFT
    first_loop: int | None = None
    for line in path.read_text().splitlines():
        if not line.startswith("{\"name\":"):
            continue
        is_sample = line.startswith('{"name":"Sample"')
        is_token = line.startswith('{"name":"Token"')
        is_counter = line.startswith('{"name":"Token_Latency"')
        is_loop = first_loop is None and line.startswith('{"name":"SampleLoop"')
        if not (is_sample or is_token or is_counter or is_loop):
            continue
        e = json.loads(line.rstrip().rstrip(","), parse_float=Decimal)
        if is_loop:
            first_loop = _ns(e["ts"])
        elif is_counter:
            ts = _ns(e["ts"])
            assert ts not in token_counters, "two first tokens for one scheduled time"
            token_counters[ts] = e["args"]["issue_delay"] + e["args"]["issue_to_done"]
        elif e["ph"] == "b":
            a = e["args"]
            if is_sample:
                samples.append(
                    TraceSample(
                        a["sample_seq"],
                        a["query_seq"],
                        a["sample_idx"],
                        _ns(e["ts"]),
                        a["issue_start_ns"],
                        a["complete_ns"],
                    )
                )
            else:
                tokens_by_seq[a["sample_seq"]] = a["complete_ns"]
    samples.sort(key=lambda s: s.seq)
    if token_counters:  # Server: join on the scheduled time
        by_sched = {s.sched_ns: s.seq for s in samples}
        assert len(by_sched) == len(samples), "two samples share a scheduled time"
        tokens_by_seq = {by_sched[ts]: ttft for ts, ttft in token_counters.items()}
    return Trace(samples, tokens_by_seq, first_loop)


def run_origin_ns(run: LoadGenRun) -> tuple[int, bool]:
    """LoadGen's ``start`` in trace time, and whether it is exact (see the module doc)."""
    s = run.trace.samples
    if run.spec.scenario == "Server":
        first = min(s, key=lambda x: x.query)
        return first.sched_ns, True
    if run.spec.scenario == "Offline":
        (origin,) = {x.sched_ns for x in s}
        return origin, True
    loop = run.trace.first_sample_loop_ns
    assert loop is not None
    return loop, False


# -- child side: LoadGen and the dummy SUT -------------------------------------------------


def _child(args: dict[str, Any]) -> None:
    import array
    import heapq
    import random
    import threading
    import time

    import mlperf_loadgen as lg  # type: ignore[import-not-found]

    plan = args["plan"]
    scenario = args["scenario"]
    settings = lg.TestSettings()
    assert settings.FromConfig(args["conf"], args["model"], scenario) == 0
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly

    rng = random.Random(plan["seed"])
    ttft_over = {int(k): v for k, v in plan["ttft_override"].items()}
    tpot_over = {int(k): v for k, v in plan["tpot_override"].items()}
    tokens = array.array("i", range(1, 4097))
    address = tokens.buffer_info()[0]
    record: list[dict[str, Any]] = []
    heap: list[tuple[float, int, str, int, int, float]] = []
    cv = threading.Condition()
    stop = False

    def draw(k: int) -> tuple[float, int, float]:
        ttft = rng.uniform(*plan["ttft_ms"])
        n = rng.randint(*plan["tokens"])
        if rng.random() < plan["one_token_fraction"]:
            n = 1
        tpot = rng.uniform(*plan["tpot_ms"])
        if k in ttft_over:
            ttft = ttft_over[k]
        if k in tpot_over:
            n, tpot = plan["override_tokens"], tpot_over[k]
        return ttft, n, max(n - 1, 1) * tpot

    def issue(query_samples: list[Any]) -> None:
        now = time.monotonic()
        with cv:
            for q in query_samples:
                k = len(record)
                ttft, n, decode = draw(k)
                record.append(
                    {"k": k, "index": q.index, "n_tokens": n, "ttft_ms": ttft, "decode_ms": decode}
                )
                if plan["first_token"]:
                    heapq.heappush(heap, (now + ttft / 1e3, k, "first", q.id, n, decode))
                else:
                    heapq.heappush(heap, (now + (ttft + decode) / 1e3, k, "done", q.id, n, 0.0))
            cv.notify()

    def serve() -> None:
        while True:
            with cv:
                while not stop and (not heap or heap[0][0] > time.monotonic()):
                    cv.wait(None if not heap else max(0.0, heap[0][0] - time.monotonic()))
                if stop and not heap:
                    return
                due = []
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap))
            for _, k, kind, qid, n, decode in due:
                if kind == "first":
                    lg.FirstTokenComplete([lg.QuerySampleResponse(qid, address, 4)])
                    due_at = time.monotonic() + decode / 1e3
                    with cv:
                        heapq.heappush(heap, (due_at, k, "done", qid, n, 0.0))
                        cv.notify()
                else:
                    size = 4 * max(n, 1)
                    lg.QuerySamplesComplete([lg.QuerySampleResponse(qid, address, size, n)])

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(args["total"], args["perf_count"], lambda _: None, lambda _: None)
    output = lg.LogOutputSettings()
    output.outdir = args["out"]
    output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = output
    log_settings.enable_trace = True
    lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
    with cv:
        stop = True
        cv.notify()
    worker.join()
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
    Path(args["out"], "sut_record.json").write_text(json.dumps(record))


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
