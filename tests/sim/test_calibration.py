"""Calibration: which published rows are eligible, that a recorded Offline trace is
exact under any parameters, that fitting recovers parameters it was generated with, and
the prediction error on published rows themselves."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.paths import RESULTS_CSV, SHARED_DATA
from tokenmark.perfmodel import (
    Deployment,
    Efficiency,
    Precision,
    ReplicaEngine,
    ServingPolicy,
    find_accelerator,
    find_model,
)
from tokenmark.sim.calibration import forward_evaluation
from tokenmark.sim.fit import OfflineTrace, fit_efficiency, predict_rate
from tokenmark.sim.published import read_published, read_rounds
from tokenmark.sim.search import max_server_rate, replica_offline_rate, replica_saturated_rate

SUMMARIES = SHARED_DATA / "mlperf" / "summaries"
UNIT = Efficiency(mfu=1.0, mbu=1.0, step_overhead_ns=0, seq_overhead_ns=0)


def test_eligibility_and_reasons_on_the_published_csv():
    rows = read_published(RESULTS_CSV)
    assert len(rows) == 753
    by_reason = {r.reason.split(";")[0] for r in rows if not r.eligible}
    assert any("CPU-only" in x for x in by_reason)
    assert any("open division" in x for x in by_reason)
    assert any("heterogeneous" in x for x in by_reason)
    assert any("SingleStream" in x for x in by_reason)
    eligible = [r for r in rows if r.eligible]
    assert len(eligible) > 600
    gb = next(r for r in eligible if r.accelerator == "GB300")
    assert gb.benchmark in ("deepseek-r1", "llama3.1-405b") and gb.stack == "trtllm"
    b60 = next(r for r in rows if "B60" in r.accelerator_name)
    assert b60.gpus_per_listed == 2  # the dual-GPU board counts as two GPUs
    mi = next(r for r in eligible if r.accelerator == "MI300X" and "vLLM" in r.system_name)
    assert mi.stack == "vllm"


def _requests(n: int, seed: int = 0) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(int(a), int(b)) for a, b in zip(rng.integers(50, 1200, n),
                                              rng.integers(2, 300, n), strict=True)]


def _trace(d: Deployment, reqs: list[tuple[int, int]]) -> OfflineTrace:
    e = ReplicaEngine(Deployment(d.accelerator, d.model, d.precision, tp=d.tp,
                                 efficiency=UNIT, policy=d.policy))
    for i, (a, b) in enumerate(reqs):
        e.submit(i, a, b)
    c0, m0, a0, k0, cm, sq = [], [], [], [], [], []
    while e.has_work:
        c = e.advance()
        c0.append(c.plan.cost.compute_ns)
        m0.append(c.plan.cost.memory_ns)
        a0.append(c.plan.cost.compute_ns * c.plan.cost.attn_flop_share)
        k0.append(c.plan.cost.memory_ns * c.plan.cost.kv_byte_share)
        cm.append(c.plan.cost.comm_ns)
        sq.append(c.plan.batch)
    return OfflineTrace(np.asarray(c0, float), np.asarray(m0, float), np.asarray(cm, float),
                        np.asarray(sq, float), float(e.tokens_out), d.replicas,
                        d.model.hidden, np.asarray(a0, float), np.asarray(k0, float))


def _real_time(d: Deployment, reqs: list[tuple[int, int]]) -> int:
    e = ReplicaEngine(d)
    for i, (a, b) in enumerate(reqs):
        e.submit(i, a, b)
    t = 0
    while e.has_work:
        t += e.advance().plan.cost.total_ns
    return t


@pytest.mark.parametrize("eff", [
    Efficiency(mfu=0.4, mbu=0.9, step_overhead_ns=1_000_000, seq_overhead_ns=3_000),
    Efficiency(mfu=0.9, mbu=0.2, step_overhead_ns=10_000, seq_overhead_ns=0),
    Efficiency(mfu=0.6, mbu=0.6, step_overhead_ns=0, seq_overhead_ns=0, size_exponent=1.0),
    Efficiency(mfu=0.5, mbu=0.5, step_overhead_ns=500_000, serial_fraction=0.6),
])
def test_an_offline_trace_is_exact_under_any_parameters(eff):
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   efficiency=eff)
    reqs = _requests(300)
    trace = _trace(d, reqs)
    # per-step ns are truncated once per step in the engine and once in the trace
    assert trace.time_ns(eff) == pytest.approx(_real_time(d, reqs), abs=3 * trace.steps)


def test_fit_recovers_the_parameters_it_was_generated_with():
    truth = Efficiency(mfu=0.55, mbu=0.7, step_overhead_ns=2_000_000, seq_overhead_ns=5_000,
                       size_exponent=1.0)
    rows = []
    for acc, bench, n in (("H200", "llama3.1-8b", 400), ("H200", "llama2-70b-99", 300),
                          ("H100", "llama3.1-8b", 200), ("L40S", "llama3.1-8b", 150),
                          ("H200", "mixtral-8x7b", 250)):
        d = Deployment(find_accelerator(acc), find_model(bench), Precision.FP8,
                       tp=1 if "70b" not in bench else 2, efficiency=UNIT)
        t = _trace(d, _requests(n, seed=n))
        rows.append((t, predict_rate(t, truth)))
    fitted, ape = fit_efficiency(rows, Efficiency(), "synthetic", size_exponent=1.0)
    assert ape < 0.01
    for t, rate in rows:
        assert predict_rate(t, fitted) == pytest.approx(rate, rel=0.02)


def test_saturated_rate_by_hand():
    # every step costs ~1 s (the fixed overhead dwarfs 64 tokens of an 8B model); a
    # request holds one of the 64 slots for 50 steps (its prefill step, which makes
    # the first token, and 49 decode steps), so a full replica completes 64 / 50
    # requests a step, whatever the ramp and the drain of the run around it
    eff = Efficiency(mfu=1.0, mbu=1.0, step_overhead_ns=1_000_000_000, seq_overhead_ns=0)
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   efficiency=eff, policy=ServingPolicy(max_num_seqs=64))
    inputs, outputs = np.full(10, 100), np.full(10, 50)
    rate = replica_saturated_rate(d, inputs, outputs, requests=2000)
    assert rate == pytest.approx(64 / 50, rel=0.01)
    # the whole run (ramp and drain included) is slower than the saturated middle
    assert replica_offline_rate(d, inputs, outputs, requests=300) < rate


def test_no_server_rate_above_saturation():
    # with generous limits the search stops just under the saturated rate (the queue
    # would grow without bound above it), not at some multiple of it
    from tokenmark.mlperf.settings import LatencyLimits
    eff = Efficiency(mfu=0.5, mbu=0.7, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   efficiency=eff, policy=ServingPolicy(max_num_seqs=128))
    inputs, outputs = np.full(50, 300), np.full(50, 100)
    sat = replica_saturated_rate(d, inputs, outputs)
    best = max_server_rate(d, inputs, outputs,
                           LatencyLimits(ttft_ns=60_000_000_000, tpot_ns=10_000_000_000),
                           requests=800)
    assert best.passed and 0.9 * sat < best.qps < sat


@pytest.mark.slow
def test_forward_step_predicts_the_next_rounds_llama2_rows(tmp_path: Path):
    # fitted on the v4.1 H100/H200/B200 llama2-70b-99 rows only, predicting v5.1's
    keep = {"H100", "H200", "B200"}
    rows = [r for r in read_rounds(RESULTS_CSV, [SUMMARIES / "v5.1_summary_results.json"])
            if r.eligible and r.benchmark == "llama2-70b-99" and r.accelerator in keep
            and r.scenario in ("Offline", "Server") and r.round in ("v4.1", "v5.1")]
    rep = forward_evaluation(rows, ["v5.1"], requests=800)
    off = [r for r in rep.rows if r.step == "v5.1" and r.row.scenario == "Offline"]
    assert len(off) >= 10
    # measured 19.1% (deterministic: virtual time, fixed seeds), against issue 26's goal of
    # 15% per forward step, not met: a bound that catches the model getting worse
    assert float(np.median([r.ape for r in off])) < 0.20
    srv = [r for r in rep.rows if r.step == "v5.1" and r.row.scenario == "Server"]
    assert srv and all(r.predicted > 0 for r in srv)
    # a Server prediction never exceeds the same deployment's Offline throughput
    assert all(r.predicted <= r.offline_bound * (1 + 1e-9) for r in srv)
    files = rep.write(tmp_path / "out")
    assert [p.name for p in files] == ["forward_rows.csv", "efficiency.csv",
                                       "forward_summary.json", "forward_tables.md"]
    tables = json.loads((tmp_path / "out" / "forward_summary.json").read_text())["tables"]
    assert tables["v5.1"]["overall"]["rows"] == len(off) + len(srv)


def test_each_scenario_takes_its_own_calibrated_row(monkeypatch):
    from tokenmark.perfmodel import find_accelerator
    from tokenmark.sim import params

    def row(fam: str, rnd: str, sc: str, mbu: float, st: str = "trtllm") -> params.EfficiencyRow:
        return params.EfficiencyRow(fam, st, rnd, Efficiency(mbu=mbu, source=f"{rnd} {sc}"),
                                    3, 0.05, sc)

    rows = (row("Hopper", "v4.1", "Offline", 0.5), row("Hopper", "v4.1", "Server", 0.45),
            row("Hopper", "v4.1", "Interactive", 0.4), row("Hopper", "v5.1", "Offline", 0.6),
            row("Hopper", "v5.1", "Server", 0.65), row("Hopper", "v5.1", "Interactive", 0.8),
            row("Hopper", "*", "*", 0.7, st="*"))
    monkeypatch.setattr(params, "efficiency_rows", lambda: rows)
    h100 = find_accelerator("H100")
    assert params.efficiency_for(h100).mbu == 0.65  # newest round, Server's (online load)
    assert params.efficiency_for(h100, scenario="Server").mbu == 0.65
    assert params.efficiency_for(h100, scenario="poisson").mbu == 0.65
    assert params.efficiency_for(h100, scenario="Offline").mbu == 0.6
    assert params.efficiency_for(h100, scenario="Interactive").mbu == 0.8
    assert params.efficiency_for(h100, round_="v4.1", scenario="Interactive").mbu == 0.4
    # a stack without its own rows falls back to the architecture's row for any scenario
    assert params.efficiency_for(h100, stack="vllm", scenario="Offline").mbu == 0.7
    # with a model: the group's row at the model's level (its newest round up to the
    # row's on the stack; a model without a level takes the new-model prior)
    levels = ({("Llama-3.1-8B", "trtllm", "v4.1"): math.log(0.5),
               ("Llama-3.1-8B", "trtllm", "v5.1"): math.log(0.8)}, math.log(0.9))
    got = params.efficiency_for(h100, scenario="Offline", model="Llama-3.1-8B", levels=levels)
    assert got.mbu == pytest.approx(0.6 * 0.8) and got.mfu == pytest.approx(0.45 * 0.8)
    assert got.step_overhead_ns == round(1_500_000 / 0.8)
    assert "Llama-3.1-8B/trtllm/v5.1" in got.source
    old = params.efficiency_for(h100, round_="v4.1", scenario="Offline",
                                model="Llama-3.1-8B", levels=levels)
    assert old.mbu == pytest.approx(0.5 * 0.5)
    new = params.efficiency_for(h100, scenario="Offline", model="gpt-oss-120b", levels=levels)
    assert new.mbu == pytest.approx(0.6 * 0.9) and "new model" in new.source


def test_a_new_architecture_takes_its_vendors_most_capable_one():
    # Rubin has no calibrated rows: it takes Blackwell Ultra's (GB300 15 PF FP4, the
    # NVIDIA architecture with rows whose part computes most), not the NVIDIA-wide row
    from tokenmark.sim import params

    def row(fam: str, mbu: float) -> params.EfficiencyRow:
        return params.EfficiencyRow(fam, "*", "*", Efficiency(mbu=mbu), 3, 0.05, "Server")

    rows = (row("Hopper", 0.3), row("Blackwell Ultra", 0.55), row("NVIDIA", 0.4),
            row("CDNA 3", 0.2), row("AMD", 0.25))
    vr = find_accelerator("VR200")
    assert params.efficiency_for(vr, scenario="Server", rows=rows).mbu == 0.55
    # CDNA 4 (MI355X) without rows: CDNA 3's, the only AMD architecture with rows
    assert params.efficiency_for(find_accelerator("MI355X"), rows=rows).mbu == 0.2
    # an architecture with its own rows keeps them
    assert params.efficiency_for(find_accelerator("H200"), rows=rows).mbu == 0.3
    # a lesser part of a newer line is no flagship's successor: the RTX PRO 6000 (2 PF
    # FP4, a PCIe card) takes the NVIDIA-wide row, not Blackwell Ultra's (15 PF), whose
    # efficiencies put its v6.0 rows 50% low (the code before took them)
    rtx = find_accelerator("RTX PRO 6000 Blackwell Server")
    assert rtx.architecture == "RTX Blackwell"
    assert params.efficiency_for(rtx, scenario="Server", rows=rows).mbu == 0.4


def test_offline_trace_counts_the_answers_tokens_under_beam_search():
    # GPT-J decodes 4 beams a request; MLPerf counts the returned answer's tokens (its
    # tokens/s is 69 x samples/s): n requests of 40 output tokens are 40 n tokens
    from tokenmark.sim.predict import offline_trace

    d = Deployment(find_accelerator("H100"), find_model("gptj-99"), Precision.FP8,
                   efficiency=UNIT, policy=ServingPolicy(beams=4))
    inp, out = np.full(50, 800), np.full(50, 40)
    n = offline_trace(d, inp, out, samples=True).units  # the requests it ran
    assert n >= 8192 and offline_trace(d, inp, out).units == pytest.approx(40 * n)


def test_an_offline_trace_is_sized_by_the_saturated_rate_not_by_the_replica_count():
    """LoadGen queues max(dataset, 1.1 x min_duration x expected rate) samples and the
    replicas share them, so one replica's Offline run does not depend on how many others
    the system has: DeepSeek-R1's attention data-parallel replica of 8 B200s gives the
    same throughput alone and as one of 9 (an NVL72 rack). Sized by a short run's rate
    (1,500 requests queued at once: mostly the drain of their longest answers), the
    trace held 8,192 / replicas requests, and the 9-replica system's replicas came out
    24% slower (0.76x) than the same replica alone."""
    from dataclasses import replace

    from tokenmark.sim import predict

    rng = np.random.default_rng(3)
    inp = rng.integers(300, 1100, 4096)
    # reasoning answers: lognormal, median 2,600 tokens, capped at 20,000 (outputs.csv)
    out = np.minimum(20000, rng.lognormal(np.log(2600), 0.85, 4096)).astype(np.int64)
    one = Deployment(find_accelerator("B200"), find_model("deepseek-r1"), Precision.FP4,
                     dp=8, ep=8, policy=ServingPolicy(max_num_seqs=8192,
                                                      max_batched_tokens=65536))
    rack = replace(one, replicas=9)
    sat = replica_saturated_rate(replace(one, efficiency=predict.SIZING), inp, out)
    n = predict.trace_requests(one, inp, out)
    # the run LoadGen sizes: 1.1 x the duration at the expected (saturated) rate
    assert n == int(min(max(predict.MAX_TRACE_REQUESTS, 4 * 8192),
                        1.1 * predict.OFFLINE_SECONDS * sat))
    assert predict.trace_requests(rack, inp, out) == n > 8192
    eff = Efficiency(mfu=0.4, mbu=0.7, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)
    r1 = predict.offline_rate(one, inp, out, eff)
    assert predict.offline_rate(rack, inp, out, eff) / 9 == pytest.approx(r1, rel=1e-9)
    # a run that long stays near the steady rate (the drain is a small part of it)
    steady = replica_saturated_rate(replace(one, efficiency=eff), inp, out) * float(out.mean())
    assert 0.75 * steady < r1 <= 1.02 * steady


def test_latency_rows_are_predicted_in_turn_per_benchmark_scenario_and_architecture():
    """An evaluation cut short has scored a spread of the groups: the first rows
    predicted are one of each (benchmark, scenario, architecture), then the second..."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import _interleaved

    def item(bench: str, scenario: str, arch: str, n: int) -> tuple[object, object]:
        row = SimpleNamespace(benchmark=bench, scenario=scenario, index=n)
        return (n, SimpleNamespace(row=row, arch=arch))

    test = [item("a", "Server", "X", 0), item("a", "Server", "X", 1),
            item("a", "Server", "X", 2), item("b", "Server", "X", 3),
            item("a", "Interactive", "Y", 4), item("b", "Server", "X", 5)]
    got = [n for n, _ in _interleaved(test)]  # type: ignore[arg-type]
    # groups sorted: (a, Interactive, Y), (a, Server, X), (b, Server, X)
    assert got == [4, 0, 3, 1, 5, 2]
    assert sorted(got) == list(range(6))


def test_a_new_models_level_is_fitted_against_its_group_and_becomes_the_prior():
    """Two rounds of Hopper/TensorRT-LLM Offline rows generated with one set of group
    parameters: Llama-3.1-8B at the group's speed in both, Mixtral-8x7B (the same hidden
    size, so the size exponent cannot tell them apart) debuting in v5.1 with kernels 0.6x
    as fast. The fit gives Mixtral a level well below Llama's, its rows' error falls,
    and a model the training set never saw takes the debut level (the new-model prior)."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import LEVEL_SHRINK, Fit

    truth = Efficiency(mfu=0.55, mbu=0.7, step_overhead_ns=2_000_000, seq_overhead_ns=5_000)
    rows, traces = [], {}
    for rnd, bench, speed in (("v4.1", "llama3.1-8b", 1.0), ("v5.1", "llama3.1-8b", 1.0),
                              ("v5.1", "mixtral-8x7b", 0.6)):
        for acc in ("H100", "H200"):
            d = Deployment(find_accelerator(acc), find_model(bench), Precision.FP8,
                           efficiency=UNIT)
            t = _trace(d, _requests(250, seed=len(rows)))
            row = SimpleNamespace(round=rnd, scenario="Offline", benchmark=bench,
                                  system_key=(rnd, "s", acc), index=len(rows), source="t",
                                  result=predict_rate(t, truth.at_speed(speed)))
            s = SimpleNamespace(row=row, key=("t", len(rows)), arch="Hopper", stack="trtllm",
                                vendor="NVIDIA", plans=[SimpleNamespace(deployment=d)])
            traces[s.key] = [t]
            rows.append(s)
    f = Fit(rows, traces)  # type: ignore[arg-type]
    mixtral = f.speed(rows[4])[0]
    llama = f.speed(rows[2])[0]
    assert f.speed(rows[4])[1] == "Mixtral-8x7B/trtllm/v5.1"
    # 0.6 in truth; the shrinkage (2 rows + LEVEL_SHRINK at zero) leaves part of the
    # gap to the v5.1 group, whose four parameters also fit the two models' different
    # compute/memory mix: measured 0.78
    assert LEVEL_SHRINK == 1.0
    assert 0.6 < mixtral / llama < 0.85

    def ape(s: SimpleNamespace, eff: Efficiency) -> float:
        return abs(predict_rate(traces[s.key][0], eff) / s.row.result - 1.0)

    with_level = [ape(s, f.offline_params(s)[0]) for s in rows[4:]]  # type: ignore[arg-type]
    group_only = [ape(s, f._offline(s)[0]) for s in rows[4:]]  # type: ignore[arg-type]
    # measured 5% and 10% against 20% and 26%
    assert sum(with_level) < 0.5 * sum(group_only)
    # the only model that debuted after the training set's first round sets the prior
    assert list(f.debuts) == ["Mixtral-8x7B"]
    v, how = f.model_level("gpt-oss-120b", "trtllm", "v6.0")
    assert how == "new model" and math.exp(v) == pytest.approx(mixtral)
    # a model seen only on another stack takes that stack's level of its newest round
    assert f.model_level("Llama-3.1-8B", "vllm", "v6.0")[1] == "Llama-3.1-8B/*/v5.1"
    # a row of v4.1 never takes a level fitted on v5.1
    assert f.model_level("Mixtral-8x7B", "trtllm", "v4.1")[1] == "new model"
    # latency rows of v4.1 only. Interactive: the v5.1 group, without latency rows of
    # its own, ships the (Hopper, trtllm, all rounds) group's mbu as a v5.1 row's
    # latency_params take it, each inverted mbu over its model's speed (Llama's level in
    # v4.1). Server: every group ships its vendor's Server speed, the geometric mean of
    # the two rows' inverted speeds (their median log), one factor on the stage-1 mfu,
    # mbu and overheads
    lat = []
    for i, acc in enumerate(("H100", "H200")):
        row = SimpleNamespace(round="v4.1", scenario="Server", benchmark="llama3.1-8b",
                              system_key=("v4.1", "s", acc), index=100 + i, source="t",
                              result=1.0)
        lat.append(SimpleNamespace(row=row, key=("t", 100 + i), arch="Hopper",
                                   stack="trtllm", vendor="NVIDIA", plans=rows[0].plans))
    f.train = rows + lat
    f.set_inverted({s.key: (0, [mbu, mbu]) for s, mbu in zip(lat, (0.3, 0.5), strict=True)},
                   {s.key: v for s, v in zip(lat, (0.5, 0.8), strict=True)})
    sp = f.speed(lat[0])[0]
    want = math.sqrt(0.3 * 0.5) / sp  # the median log of two: their geometric mean
    table = f.table()
    assert table[("Hopper", "trtllm", "v5.1", "Interactive")][0].mbu == pytest.approx(want)
    fast = math.sqrt(0.5 * 0.8)
    assert f.server_speed(("NVIDIA", "*", "*")) == (pytest.approx(fast), 2)
    base = table[("Hopper", "trtllm", "v5.1", "Offline")][0]
    got = table[("Hopper", "trtllm", "v5.1", "Server")][0]
    assert got.mbu == pytest.approx(base.mbu * fast)
    assert got.mfu == pytest.approx(base.mfu * fast)
    assert got.step_overhead_ns == pytest.approx(base.step_overhead_ns / fast, abs=1)
    assert got.serial_fraction == base.serial_fraction
    def as_(scenario: str) -> SimpleNamespace:  # rows[2] (v5.1) as a latency row
        return SimpleNamespace(**{**vars(rows[2]), "row": SimpleNamespace(
            **{**vars(rows[2].row), "scenario": scenario})})

    off = f.offline_params(rows[2])[0]  # type: ignore[arg-type]
    srv = f.latency_params(as_("Server"))[0]  # type: ignore[arg-type]
    assert srv.mbu == pytest.approx(off.mbu * fast)
    assert srv.seq_overhead_ns == pytest.approx(off.seq_overhead_ns / fast, abs=1)
    assert f.latency_params(as_("Interactive"))[0].mbu == pytest.approx(  # type: ignore[arg-type]
        want * f.speed(rows[2])[0])
    # a Server speed above 1 is cut to 1: serving adds work to a step, takes none away
    f.set_inverted(f.inverted, {s.key: 1.5 for s in lat})
    assert f.server_speed(("NVIDIA", "*", "*")) == (1.0, 2)
    # stage 2 inverts a latency row on its Offline parameters at its own system's Offline
    # residual (the same system, benchmark and round): published over predicted
    o = rows[0]
    hand = o.row.result / predict_rate(traces[o.key][0], f.offline_params(o)[0])
    assert f.offline_residual(lat[0]) == pytest.approx(hand)  # type: ignore[arg-type]
    assert abs(math.log(hand)) > 1e-3  # the fit does not reproduce it exactly
    alone = SimpleNamespace(row=SimpleNamespace(**{**vars(lat[0].row),
                                                   "system_key": ("v4.1", "s", "B200")}))
    assert f.offline_residual(alone) is None  # type: ignore[arg-type]


def test_a_fixed_table_is_scored_at_each_models_level(tmp_path: Path):
    """``forward_evaluation(table=...)`` fits nothing and predicts with the table: a
    level of 2 for Llama-3.1-8B halves every step's compute, memory and overhead time on
    one-accelerator replicas (no links), so every Offline prediction doubles."""
    from tokenmark.sim.calibration import TableParams
    from tokenmark.sim.params import EfficiencyRow

    rows = [r for r in read_rounds(RESULTS_CSV, [SUMMARIES / "v5.1_summary_results.json"])
            if r.eligible and r.benchmark == "llama3.1-8b" and r.scenario == "Offline"
            and r.round == "v5.1" and r.accelerator == "H200"][:2]
    assert len(rows) == 2
    eff = Efficiency(mfu=0.3, mbu=0.4, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)
    table = (EfficiencyRow("*", "*", "*", eff, 3, 0.1, "*"),)
    got = {}
    for speed in (1.0, 2.0):
        t = TableParams(table, ({("Llama-3.1-8B", "trtllm", "v5.1"): math.log(speed)}, 0.0),
                        f"x{speed}")
        rep = forward_evaluation(rows, ["v5.1"], server=False, table=t)
        got[speed] = [r.predicted for r in rep.rows if r.step == "v5.1"]
        assert rep.params == {} and f"x{speed}" in rep.rows[0].group
        assert [p.name for p in rep.write(tmp_path / str(speed))] == [
            "forward_rows.csv", "forward_summary.json", "forward_tables.md"]
    assert len(got[1.0]) == 2
    for slow, fast in zip(got[1.0], got[2.0], strict=True):
        assert fast == pytest.approx(2 * slow, rel=1e-3)


def test_stage2_inverts_the_server_speed_a_result_was_simulated_at():
    """A Server row whose published result is the simulator's own at 0.6 times its
    Offline parameters (every kernel and overhead 1/0.6 as long) inverts to 0.6, and
    the candidate picked is the one that is best at the nominal speed."""
    from tokenmark.mlperf.settings import LatencyLimits
    from tokenmark.sim.calibration import NOMINAL_SPEED, _speed_job
    from tokenmark.sim.predict import server_rate

    eff = Efficiency(mfu=0.5, mbu=0.7, step_overhead_ns=1_000_000, seq_overhead_ns=2_000)
    d = Deployment(find_accelerator("H200"), find_model("llama3.1-8b"), Precision.FP8,
                   efficiency=eff, policy=ServingPolicy(max_num_seqs=128))
    inputs, outputs = np.full(50, 300), np.full(50, 100)
    limits = LatencyLimits(ttft_ns=2_000_000_000, tpot_ns=20_000_000)
    published, ok = server_rate(d, inputs, outputs, limits, eff.at_speed(0.6),
                                requests=300, rel_tol=0.01)
    assert ok and published > 0
    k, (speed,) = _speed_job(("speed", (d,), inputs, outputs, limits, False, eff,
                               published, 300, None))
    assert k == 0 and NOMINAL_SPEED != 0.6
    # the secant search stops within 3% of the published result, the server search
    # within its own tolerance: the speed is close, not exact
    assert speed == pytest.approx(0.6, rel=0.06)


def test_stage2_leaves_out_inversions_clamped_at_the_ends_of_the_mbu_range():
    """Two of three systems' Interactive rows cannot be made slow enough by ``mbu`` at
    serial fraction 0 (their inversions stop at the range's floor, 0.05): they measure
    nothing, so serial 0 has one system found (fewer than MIN_SYSTEMS) and the group
    takes serial 1's median, 0.35 - not 0.05, which the clamped rows' zero spread would
    have picked. With every inversion clamped the group has nothing (the next level's)."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import MBU_BOUNDS, MIN_SYSTEMS, Fit

    assert MIN_SYSTEMS == 2 and MBU_BOUNDS == (0.05, 1.0)

    def group(inverted: list[tuple[float, float]]) -> object:
        rows = [SimpleNamespace(key=i, arch="Blackwell",
                                row=SimpleNamespace(scenario="Interactive",
                                                    system_key=("v6.0", i)))
                for i in range(len(inverted))]
        f = SimpleNamespace(latency=rows, _matches=lambda s, lv: True, _stage2={},
                            inverted={i: (0, list(v)) for i, v in enumerate(inverted)},
                            speed=lambda s: (1.0, "group"))
        f._serial = Fit._one_serial(f)  # type: ignore[arg-type]
        return f

    level = ("Blackwell", "trtllm", "v6.0")
    got = Fit.stage2(group([(0.05, 0.3), (0.05, 0.35), (0.4, 0.5)]),  # type: ignore[arg-type]
                     level, "Interactive")
    assert got is not None
    mbu, serial, systems = got
    assert serial == 1.0 and mbu == pytest.approx(0.35) and systems == 3
    # found rows agreeing at serial 0 still win there; a ceiling clamp counts as not found
    got = Fit.stage2(group([(0.2, 1.0), (0.21, 0.3), (0.2, 0.9)]),  # type: ignore[arg-type]
                     level, "Interactive")
    assert got == (pytest.approx(0.2), 0.0, 3)
    assert Fit.stage2(group([(0.05, 1.0), (0.05, 1.0)]),  # type: ignore[arg-type]
                      level, "Interactive") is None


def test_stage2_takes_the_serial_fraction_that_reproduces_the_most_systems():
    """v6.0 step's CDNA 3 Interactive rows (4 systems): at serial fraction 0 two of them
    cannot be made slow enough (clamped at the floor) and the other two agree closely
    (0.385, 0.436: log spread 0.062); at serial 1 all four are found (0.24, 0.243,
    0.332, 0.411: spread 0.165). The group takes serial 1, which reproduces four
    systems, and its median sqrt(0.243 * 0.332) = 0.284 - not serial 0's 0.41 from the
    two rows that happened to agree."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import Fit

    inverted = [(0.385, 0.243), (0.05, 0.411), (0.436, 0.332), (0.05, 0.24)]
    rows = [SimpleNamespace(key=i, arch="CDNA 3", row=SimpleNamespace(
                scenario="Interactive", system_key=("v5.1", i)))
            for i in range(len(inverted))]
    f = SimpleNamespace(latency=rows, _matches=lambda s, lv: True, _stage2={},
                        inverted={i: (0, list(v)) for i, v in enumerate(inverted)},
                        speed=lambda s: (1.0, "group"))
    f._serial = Fit._one_serial(f)  # type: ignore[arg-type]
    got = Fit.stage2(f, ("CDNA 3", "vllm", "v5.1"), "Interactive")  # type: ignore[arg-type]
    assert got is not None
    mbu, serial, systems = got
    assert serial == 1.0 and systems == 4
    assert mbu == pytest.approx(math.sqrt(0.243 * 0.332))


def test_every_group_takes_the_one_serial_fraction_chosen_over_all_interactive_rows():
    """Two architectures' Interactive rows. Alone, Blackwell's three systems (all found
    either way; log spread 0.0 at serial 0, 0.08 at serial 1) would take serial 0 and
    CDNA 3's four would take serial 1 (two of them clamped at serial 0). Chosen over all
    seven, serial 1 reproduces 7 systems against serial 0's 5, so both groups take
    serial 1: Blackwell's mbu is its serial-1 median 0.30, not its serial-0 0.20 (the
    per-group choice flipped a group's Interactive rows by 10-30% on one system)."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import SERIALS, Fit

    assert SERIALS == (0.0, 1.0)
    inverted = {0: (0.2, 0.3), 1: (0.2, 0.28), 2: (0.2, 0.32),              # Blackwell
                3: (0.385, 0.243), 4: (0.05, 0.411), 5: (0.436, 0.332), 6: (0.05, 0.24)}
    arch = {i: "Blackwell" if i < 3 else "CDNA 3" for i in inverted}
    rows = [SimpleNamespace(key=i, arch=arch[i], row=SimpleNamespace(
                scenario="Interactive", system_key=("v5.1", i))) for i in inverted]
    f = SimpleNamespace(latency=rows, _stage2={},
                        _matches=lambda s, lv: s.arch == lv[0],
                        inverted={i: (0, list(v)) for i, v in inverted.items()},
                        speed=lambda s: (1.0, "group"))
    f._serial = Fit._one_serial(f)  # type: ignore[arg-type]
    assert f._serial == 1
    bw = Fit.stage2(f, ("Blackwell", "trtllm", "v5.1"), "Interactive")  # type: ignore[arg-type]
    cd = Fit.stage2(f, ("CDNA 3", "vllm", "v5.1"), "Interactive")  # type: ignore[arg-type]
    assert bw == (pytest.approx(0.30), 1.0, 3)
    assert cd is not None and cd[1] == 1.0 and cd[2] == 4


def _synthetic_setup(i: int, rnd: str, model: str, arch: str, system: str,
                     eff: Efficiency, active: float = 8e9,
                     vendor: str = "NVIDIA", fp4: bool = False) -> tuple[object, OfflineTrace]:
    """A synthetic Offline row whose published result is its trace's rate under ``eff``:
    the trace's steps (hidden 8192, so the size exponent does not matter) mix
    compute-bound and memory-bound ones in a proportion of its own; ``active`` is the
    model's active parameter count (which decides whether a group's rows can tell its
    overheads from its compute); ``fp4``: its matmuls run at FP4 (else FP8)."""
    from types import SimpleNamespace

    rng = np.random.default_rng(i)
    steps = 200
    c0 = rng.uniform(0.2e6, 3e6, steps) * (1 + i % 3)
    m0 = rng.uniform(0.5e6, 2.5e6, steps) * (1 + (i + 1) % 4)
    t = OfflineTrace(c0, m0, np.zeros(steps), rng.integers(1, 64, steps).astype(float),
                     units=1e5 * (1 + i % 5), replicas=1, hidden=8192, fp4=fp4)
    row = SimpleNamespace(round=rnd, scenario="Offline", benchmark=model.lower(),
                          system_key=(rnd, system, arch), index=i, source="t",
                          result=predict_rate(t, eff))
    model_ns = SimpleNamespace(name=model, active_params=active)
    dep = SimpleNamespace(model=model_ns, fp4_matmuls=fp4)
    s = SimpleNamespace(row=row, key=("t", i), arch=arch, stack="trtllm", vendor=vendor,
                        plans=[SimpleNamespace(deployment=dep)])
    return s, t


def test_a_models_debut_rows_do_not_fit_the_groups_physical_parameters():
    """A debut round says how mature the model's software is, not how fast the hardware
    is. Hopper (two systems) runs model A in v4.1 and v5.1 and model C (four times A's
    active parameters, so Hopper's groups over both rounds can fit their overheads) in
    v4.1 at the group's parameters (put at the prior's centre, where the fit's optimum is
    exactly them) and model B in its debut round, v5.1, at half their speed. The v5.1
    group is fitted on A's rows only (its overheads Hopper's, A's and C's, as its one
    model cannot tell them from its compute), so it comes out as generated and A's rows
    are reproduced; B's level is its rows' log
    residual (log 0.5 each) over its 2 rows plus LEVEL_SHRINK: 0.5 ** (2/3) = 0.630 by
    hand; and B's published results do not move the group at all. On the code before
    (every row fitted the groups, B's level backfitted with them) the v5.1 group took
    mfu 0.30, A's v5.1 rows came out 0.87x and 0.93x of their results and B's level
    0.81.
    An architecture whose mature rows come from one system (X: A on one, B debuting on
    another) is not anchored: its group is fitted on all its rows, B's at the level
    measured on Hopper, which X's rows do not change."""
    from dataclasses import replace as dreplace

    from tokenmark.sim.calibration import LEVEL_SHRINK, Fit

    truth = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000)

    def build(b_factor: float, x_factor: float = 1.0) -> tuple[Fit, list[object]]:
        rows, traces = [], {}
        spec = [("v4.1", "A", "Hopper", "h100", 1.0), ("v4.1", "A", "Hopper", "h200", 1.0),
                ("v5.1", "A", "Hopper", "h100", 1.0), ("v5.1", "A", "Hopper", "h200", 1.0),
                ("v5.1", "B", "Hopper", "h100", 0.5 * b_factor),
                ("v5.1", "B", "Hopper", "h200", 0.5 * b_factor),
                ("v5.1", "A", "X", "x1", 1.0), ("v5.1", "B", "X", "x2", 0.5 * x_factor),
                ("v4.1", "C", "Hopper", "h100", 1.0), ("v4.1", "C", "Hopper", "h200", 1.0)]
        for i, (rnd, model, arch, system, speed) in enumerate(spec):
            s, t = _synthetic_setup(i, rnd, model, arch, system, truth.at_speed(speed),
                                    active=32e9 if model == "C" else 8e9)
            rows.append(s)
            traces[s.key] = [t]  # type: ignore[attr-defined]
        return Fit(rows, traces), rows  # type: ignore[arg-type]

    f, rows = build(1.0)
    got = f.stage1(("Hopper", "trtllm", "v5.1"))
    assert got is not None and got[2] == 2
    g = got[0]
    assert g.mfu == pytest.approx(0.5, rel=0.01) and g.mbu == pytest.approx(0.75, rel=0.01)
    for s in rows[2:4]:  # A's v5.1 rows, reproduced
        pred = predict_rate(f.traces[s.key][0], f.offline_params(s)[0])  # type: ignore[attr-defined]
        assert pred == pytest.approx(s.row.result, rel=0.01)  # type: ignore[attr-defined]
    assert LEVEL_SHRINK == 1.0
    b_speed, how = f.speed(rows[4])  # type: ignore[arg-type]
    assert how == "B/trtllm/v5.1"
    assert b_speed == pytest.approx(0.5 ** (2 / 3), rel=0.01)
    # B's results do not move the group: the same parameters with B 0.7x as fast again
    f2, _ = build(0.7)
    g2 = f2.stage1(("Hopper", "trtllm", "v5.1"))
    assert g2 is not None
    assert (g2[0].mfu, g2[0].mbu, g2[0].step_overhead_ns, g2[0].seq_overhead_ns) == (
        g.mfu, g.mbu, g.step_overhead_ns, g.seq_overhead_ns)
    assert f2.speed(rows[4])[0] == pytest.approx(b_speed * 0.7 ** (2 / 3), rel=0.01)  # type: ignore[arg-type]
    assert f.debut_round == {"B": "v5.1"} and f.anchored == {"Hopper"}
    # X: not anchored (A's rows from one system), so its own group, fitted on both its
    # rows, B's at Hopper's level for B, which X's B row does not change
    x = f.stage1(("X", "trtllm", "v5.1"))
    assert x is not None and x[2] == 2 and f._offline(rows[6])[1] == "X/trtllm/v5.1"  # type: ignore[arg-type]
    f3, _ = build(1.0, x_factor=0.6)
    assert f3.speed(rows[7])[0] == pytest.approx(b_speed, rel=1e-9)  # type: ignore[arg-type]
    x3 = f3.stage1(("X", "trtllm", "v5.1"))
    assert x3 is not None and x3[0].mfu != x[0].mfu
    assert dreplace(x[0], source="") != dreplace(g, source="")


def test_a_rows_interactive_parameters_come_from_its_offline_groups_chain():
    """The shipped table holds a group's row only where stage 1 fitted it, so a user of an
    architecture without one (Y: Offline rows from one system) gets its predecessor's
    (Hopper's) row, Interactive included. The forward evaluation gives Y's Interactive
    rows the same: Hopper's inverted ``mbu`` (0.3), not the 0.6 of Y's own two
    Interactive systems, which no table row carries (the code before took Y's)."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import Fit

    truth = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000)
    h100 = find_accelerator("H100")
    rows, traces = [], {}
    for i, (arch, system) in enumerate((("Hopper", "h1"), ("Hopper", "h2"), ("Y", "y1"))):
        s, t = _synthetic_setup(i, "v4.1", "A", arch, system, truth)
        s.plans[0].deployment.accelerator = h100  # type: ignore[attr-defined]
        rows.append(s)
        traces[s.key] = [t]  # type: ignore[attr-defined]
    lat = []
    for i, (arch, system) in enumerate((("Hopper", "h1"), ("Hopper", "h2"), ("Y", "y1"),
                                        ("Y", "y2"))):
        row = SimpleNamespace(**{**vars(rows[0].row), "scenario": "Interactive",  # type: ignore[attr-defined]
                                 "system_key": ("v4.1", system, arch), "index": 10 + i})
        lat.append(SimpleNamespace(**{**vars(rows[0]), "row": row, "key": ("t", 10 + i),
                                      "arch": arch}))
    f = Fit(rows, traces)  # type: ignore[arg-type]
    f.train = rows + lat  # type: ignore[assignment]
    f.set_inverted({s.key: (0, [m, m]) for s, m in zip(lat, (0.3, 0.3, 0.6, 0.6),  # type: ignore[attr-defined]
                                                         strict=True)})
    assert f._offline(lat[2])[1] == "Hopper/trtllm/*"  # type: ignore[arg-type]
    sp = f.speed(lat[2])[0]  # type: ignore[arg-type]
    got = f.latency_params(lat[2])[0]  # type: ignore[arg-type]
    assert got.mbu == pytest.approx(0.3 * sp / f.speed(lat[0])[0])  # type: ignore[arg-type]
    table = f.table()
    assert not any(k[0] == "Y" for k in table)
    assert got.mbu == pytest.approx(table[("Hopper", "trtllm", "*", "Interactive")][0].mbu * sp)


def test_overheads_are_fitted_only_on_rows_of_models_of_different_sizes():
    """A decode step's time per sequence is its compute per token over ``mfu`` plus the
    per-sequence overhead: on one model both grow with the batch, so only models whose
    active parameters differ at least ``OVERHEAD_SPAN`` times tell them apart.
    Llama-3.1-8B (8.0B) with Llama-2-70B (69B) does; gpt-oss-120b (5.7B active) with
    Llama-3.1-8B (1.4x) does not, nor one model on any number of systems."""
    from types import SimpleNamespace

    from tokenmark.sim.calibration import OVERHEAD_SPAN, spans_sizes

    def rows(*names: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(plans=[SimpleNamespace(deployment=SimpleNamespace(
            model=find_model(n)))]) for n in names]

    assert OVERHEAD_SPAN == 2.0
    assert spans_sizes(rows("llama3.1-8b", "llama2-70b-99"))  # type: ignore[arg-type]
    assert spans_sizes(rows("llama2-70b-99", "deepseek-r1", "llama3.1-405b"))  # type: ignore[arg-type]
    assert not spans_sizes(rows("gpt-oss-120b", "llama3.1-8b"))  # type: ignore[arg-type]
    assert not spans_sizes(rows("llama2-70b-99", "llama2-70b-99.9", "llama2-70b-99"))  # type: ignore[arg-type]
    assert not spans_sizes([])


def test_fit_holds_given_overheads_and_fits_the_rest():
    """``fit_efficiency(..., overheads=(step, seq))`` keeps both exactly as given and
    fits ``mfu`` and ``mbu``: rows generated at mfu 0.5, mbu 0.75 (the prior's centre,
    so the optimum is exactly them) and overheads 1.2 ms and 4 us (off it) are
    reproduced, and the two recovered, when the overheads are given."""
    truth = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_200_000, seq_overhead_ns=4_000)
    rows = []
    for i in range(4):
        _, t = _synthetic_setup(i, "v5.1", "A", "Hopper", f"h{i}", truth)
        rows.append((t, predict_rate(t, truth)))
    eff, ape = fit_efficiency(rows, Efficiency(), "given", overheads=(1_200_000, 4_000))
    assert (eff.step_overhead_ns, eff.seq_overhead_ns) == (1_200_000, 4_000)
    assert eff.mfu == pytest.approx(0.5, rel=0.01) and eff.mbu == pytest.approx(0.75, rel=0.01)
    assert ape < 0.005


def test_a_group_whose_rows_hold_one_model_size_takes_the_next_groups_overheads():
    """v6.1 step, as it was: CDNA 4's v6.0 group was fitted on Llama-2-70B rows alone,
    at FP4 and FP8, and came out with a per-sequence overhead of 38 us (CDNA 3: 2 us)
    and mfu 0.65, which an 8B model and a 5.7B-active MoE paid 0.55-0.65x. Here CDNA 3
    (two systems) runs model A (8B) and C (70B) in v5.1 at the prior's centre, so its
    groups, and AMD's pooled over both architectures, can fit every parameter. CDNA 4
    runs only C, in v6.0, at FP8 on one system and at FP4 (half the compute time and
    weight reads) on another, whose kernels reach mfu 0.5 at FP8 but 0.3 at FP4: FP4 is
    far less than twice as fast, which with one ``mfu`` only a large overhead (paid at
    either precision alike) reproduces - fitted on its own rows (the code before) CDNA
    4's step overhead came out 4.48 ms (mfu 0.67), three times AMD's 1.64 ms. Its rows
    cannot tell the overheads from the compute, so each CDNA 4 group takes AMD's,
    exactly, and fits its mfu and mbu with them; CDNA 3's own groups keep their own fit
    (the generating 1.5 ms and 2 us)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from tokenmark.sim.calibration import Fit

    base = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000)
    spec = [("v5.1", "A", "CDNA 3", "m1", 8e9), ("v5.1", "A", "CDNA 3", "m2", 8e9),
            ("v5.1", "C", "CDNA 3", "m1", 70e9), ("v5.1", "C", "CDNA 3", "m2", 70e9)]
    rows, traces = [], {}
    for i, (rnd, model, arch, system, active) in enumerate(spec):
        s, t = _synthetic_setup(i, rnd, model, arch, system, base, active=active, vendor="AMD")
        rows.append(s)
        traces[s.key] = [t]  # type: ignore[attr-defined]
    # CDNA 4: one trace of C, at FP8 and at FP4 (every kernel's time halved)
    rng = np.random.default_rng(7)
    c0, m0 = rng.uniform(2e6, 6e6, 300), rng.uniform(0.5e6, 2.5e6, 300)
    seqs = rng.integers(32, 256, 300).astype(float)
    for j, (system, scale, mfu) in enumerate((("n1", 1.0, 0.5), ("n2", 0.5, 0.3))):
        t = OfflineTrace(c0 * scale, m0 * scale, np.zeros(300), seqs, units=1e6, replicas=1,
                         hidden=8192)
        row = SimpleNamespace(round="v6.0", scenario="Offline", benchmark="c",
                              system_key=("v6.0", system, "CDNA 4"), index=10 + j,
                              source="t", result=predict_rate(t, replace(base, mfu=mfu)))
        s = SimpleNamespace(row=row, key=("t", 10 + j), arch="CDNA 4", stack="trtllm",
                            vendor="AMD", plans=rows[2].plans)  # type: ignore[attr-defined]
        rows.append(s)
        traces[s.key] = [t]
    f = Fit(rows, traces)  # type: ignore[arg-type]
    amd = f.stage1(("AMD", "*", "*"))
    own = f.stage1(("CDNA 3", "trtllm", "v5.1"))
    assert amd is not None and own is not None
    assert own[0].step_overhead_ns == pytest.approx(1_500_000, rel=0.02)
    assert own[0].seq_overhead_ns == pytest.approx(2_000, rel=0.05)
    for level in (("CDNA 4", "trtllm", "v6.0"), ("CDNA 4", "trtllm", "*"), ("CDNA 4", "*", "*")):
        got = f.stage1(level)
        assert got is not None
        assert (got[0].step_overhead_ns, got[0].seq_overhead_ns) == (
            amd[0].step_overhead_ns, amd[0].seq_overhead_ns)
        assert f.overheads_from[level] == ("AMD", "*", "*")
        assert "(overheads of AMD/*/*)" in got[0].source
    assert ("CDNA 3", "trtllm", "v5.1") not in f.overheads_from
    # CDNA 4's rows fitted freely (as before) put the FP4 shortfall into an overhead
    free, _ = fit_efficiency(f._pairs(rows[4:]), Efficiency(), "free", f.alpha)  # type: ignore[arg-type]
    assert free.step_overhead_ns > 2 * amd[0].step_overhead_ns
    # a CDNA 4 row takes its group's overheads
    eff, used = f._offline(rows[4])  # type: ignore[arg-type]
    assert used == "CDNA 4/trtllm/v6.0" and eff.seq_overhead_ns == amd[0].seq_overhead_ns


def test_an_architecture_with_fp4_and_wider_rows_fits_its_fp4_paths_own_efficiency():
    """CDNA 4 in the v6.1 step: Llama-2-70B ran FP4 at about the throughput of FP8 (v6.0,
    12,500 against 12,192 tokens/s an MI355X) where the FP4 peak is twice FP8's, so one
    ``mfu`` for both put the FP8 rows (and the 8B model's and gpt-oss's, whose matmuls
    run at FP8) at 0.5-0.6x. Here architecture X's kernels reach mfu 0.5 at FP8 (three
    systems) and 0.5 x 0.6 = 0.3 at FP4 (three more), at the prior's centre otherwise: its
    group fits ``fp4_mfu`` 0.6 with ``mfu`` 0.5 and reproduces every row, and its FP8
    rows are predicted at FP8's efficiency; one ``mfu`` (the code before) misses some
    rows by more than 10%. AMD's pooled group (X beside Y, whose rows are all FP8) fits no
    ``fp4_mfu``: over parts of two generations the precision and the part cannot be told
    apart. A group of one precision fits none either."""
    from tokenmark.sim.calibration import Fit

    base = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000)
    at_fp4 = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000,
                        fp4_mfu=0.6)
    spec = [("A", "x1", 8e9, False), ("C", "x2", 70e9, False), ("A", "x3", 8e9, False),
            ("A", "x4", 8e9, True), ("C", "x5", 70e9, True), ("C", "x6", 70e9, True)]
    rows, traces = [], {}
    for i, (model, system, active, fp4) in enumerate(spec):
        s, t = _synthetic_setup(i, "v6.0", model, "X", system, at_fp4, active=active,
                                vendor="AMD", fp4=fp4)
        rows.append(s)
        traces[s.key] = [t]  # type: ignore[attr-defined]
    for i, (model, system, active) in enumerate((("A", "y1", 8e9), ("C", "y2", 70e9))):
        s, t = _synthetic_setup(20 + i, "v6.0", model, "Y", system, base, active=active,
                                vendor="AMD")
        rows.append(s)
        traces[s.key] = [t]  # type: ignore[attr-defined]
    f = Fit(rows, traces)  # type: ignore[arg-type]
    got = f.stage1(("X", "trtllm", "v6.0"))
    assert got is not None
    eff, ape, _ = got
    assert eff.fp4_mfu is not None
    # (fitted 0.635 and 0.478: the prior's pull toward 1 and the rows' memory-bound
    # steps leave a little room between the two; their product is what FP4 reaches)
    assert eff.fp4_mfu == pytest.approx(0.6, rel=0.1)
    assert eff.mfu == pytest.approx(0.5, rel=0.06)
    assert eff.mfu * eff.fp4_mfu == pytest.approx(0.3, rel=0.03)
    assert ape < 0.02
    for s in rows[:6]:
        t = traces[s.key][0]  # type: ignore[attr-defined]
        assert predict_rate(t, eff) == pytest.approx(s.row.result, rel=0.03)  # type: ignore[attr-defined]
    # one mfu for both precisions (the code before) misses them
    one, _ = fit_efficiency(f._pairs(rows[:6]), Efficiency(), "one", f.alpha)  # type: ignore[arg-type]
    assert one.fp4_mfu is None
    misses = [abs(predict_rate(traces[s.key][0], one) / s.row.result - 1)  # type: ignore[attr-defined]
              for s in rows[:6]]
    assert max(misses) > 0.1
    amd = f.stage1(("AMD", "*", "*"))
    assert amd is not None and amd[0].fp4_mfu is None
    y = f.stage1(("Y", "trtllm", "v6.0"))
    assert y is not None and y[0].fp4_mfu is None


def test_fp4_mfu_slows_only_the_matmuls_of_an_fp4_deployment(tmp_path: Path):
    """``fp4_mfu`` 0.5 doubles the compute time of every step of a deployment whose
    matmuls run at FP4 and leaves one at FP8, and the memory side, as they were; unset
    (None) it pickles as the parameters did before it existed (the calibration caches
    are keyed on pickles), and an efficiency.csv keeps it, or not, through a round trip."""
    import csv
    import pickle
    from dataclasses import fields, replace

    from tokenmark.perfmodel.cost import CostModel
    from tokenmark.sim.calibration_report import write_efficiency
    from tokenmark.sim.params import read_efficiency

    acc, model = find_accelerator("B200"), find_model("llama2-70b-99")
    eff = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=0, seq_overhead_ns=0)
    half = replace(eff, fp4_mfu=0.5)
    for p, slower in ((Precision.FP4, 2.0), (Precision.FP8, 1.0)):
        a = CostModel(Deployment(acc, model, p, tp=8, efficiency=eff))
        b = CostModel(Deployment(acc, model, p, tp=8, efficiency=half))
        assert b.components(2048, 2048 * 1024.0, 0, 1, 64, 64e3) == a.components(
            2048, 2048 * 1024.0, 0, 1, 64, 64e3)  # the parameter-free parts
        sa, sb = a.step([(2048, 0)], [1000] * 64), b.step([(2048, 0)], [1000] * 64)
        assert sb.compute_ns == pytest.approx(slower * sa.compute_ns, rel=1e-6)
        assert sb.memory_ns == sa.memory_ns
    # a simulation's report says what the FP4 matmuls reach, and only at FP4
    from tokenmark.sim.report import _at_fp4, deployment_json
    for p, shown in ((Precision.FP4, " (x0.500 at fp4: 0.250)"), (Precision.FP8, "")):
        dep = deployment_json(Deployment(acc, model, p, tp=8, efficiency=half))
        assert dep["efficiency"]["fp4_mfu"] == 0.5 and _at_fp4(dep) == shown
    assert _at_fp4(deployment_json(Deployment(acc, model, Precision.FP4, tp=8,
                                              efficiency=eff))) == ""
    state = eff.__getstate__()
    assert len(state) == len(fields(Efficiency)) - 1 and pickle.loads(pickle.dumps(eff)) == eff
    assert pickle.loads(pickle.dumps(half)).fp4_mfu == 0.5

    path = tmp_path / "efficiency.csv"
    write_efficiency(path, {("CDNA 4", "vllm", "v6.0", "Offline"): (half, 0.1, 3),
                            ("CDNA 3", "vllm", "v6.0", "Offline"): (eff, 0.1, 3)})
    got = {r.family: r.efficiency for r in read_efficiency(path)}
    assert got["CDNA 4"].fp4_mfu == 0.5 and got["CDNA 3"].fp4_mfu is None
    with open(path, encoding="utf-8", newline="") as fh:
        table = list(csv.DictReader(fh))
    with open(path, "w", encoding="utf-8", newline="") as fh:  # before the column
        w = csv.DictWriter(fh, [k for k in table[0] if k != "fp4_mfu"],
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(table)
    assert "fp4_mfu" not in path.read_text()
    assert all(r.efficiency.fp4_mfu is None for r in read_efficiency(path))


def test_a_trace_cached_before_the_fp4_flag_is_told_it(tmp_path: Path):
    """The trace cache is keyed on the jobs, not the code: a trace pickled before
    :attr:`OfflineTrace.fp4` existed reads the class default (False), so the calibration
    sets the flag from each job's deployment whenever it reads traces. Before it did, the
    v6.1 step predicted CDNA 4's FP4 Llama-2-70B Offline rows at the FP8 ``mfu`` from old
    caches (1.40-1.47x where the fit said 1.0x)."""
    import hashlib
    import pickle

    from tokenmark.sim.calibration import _traces

    d4 = Deployment(find_accelerator("MI355X"), find_model("llama2-70b-99"), Precision.FP4)
    d8 = Deployment(find_accelerator("MI355X"), find_model("llama2-70b-99"), Precision.FP8)
    inp, out = np.full(4, 100), np.full(4, 10)
    jobs = [(d, inp, out, False, None) for d in (d4, d8)]
    store = tmp_path / "traces"
    store.mkdir()
    for j in jobs:  # as an old cache holds them: without the flag
        t = OfflineTrace(np.ones(3), np.ones(3), np.zeros(3), np.ones(3), units=30.0,
                         replicas=1, hidden=8192)
        del t.fp4
        key = hashlib.sha256(pickle.dumps(("traces", j), protocol=5)).hexdigest()
        (store / f"{key}.pkl").write_bytes(pickle.dumps(t, protocol=5))
    got = _traces(jobs, 1, tmp_path, lambda _m: None)
    assert [t.fp4 for t in got] == [True, False]
    assert [t.units for t in got] == [30.0, 30.0]  # read from the cache, not run again
