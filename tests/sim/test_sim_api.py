"""``tokenmark.api.simulation``: a simulated run writes the same kind of results folder as a
real run, bad input is one line with the numbers, and scaling sweeps report
efficiency against the smallest size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenmark.api.simulation import scaling, simulate
from tokenmark.config.layering import build_settings
from tokenmark.errors import ConfigError
from tokenmark.mlperf.mllog import parse_detail, parse_summary
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.perfmodel import Efficiency
from tokenmark.sim.plan import ClusterSpec, plan_deployment

EFF = Efficiency(mfu=0.5, mbu=0.75, step_overhead_ns=1_500_000, seq_overhead_ns=2_000,
                 source="test")


def _server(qps: float = 300.0, seconds: int = 30):
    return build_settings("v6.0", "llama3.1-8b", Scenario.SERVER,
                          overrides={"target_qps": qps, "min_duration_ms": seconds * 1000})


def test_simulated_run_writes_a_results_folder(tmp_path: Path):
    spec = ClusterSpec("H200", "llama3.1-8b", nodes=1, per_node=8, efficiency=EFF)
    res = simulate(_server(), spec, tmp_path)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["schema"] == "tokenmark.results/1" and doc["label"] == "unverified"
    assert doc["run"]["clock"] == "virtual (simulator)"
    assert doc["verdicts"]["mlperf"]["validity"] == "VALID" == res.verdicts.mlperf.validity
    assert res.exit_code == 0
    n = doc["summary"]["counts"]["completed"]
    assert n == res.summary.completed > 9000
    sim = doc["simulation"]
    assert sim["deployment"]["parallelism"] == {
        "tp": 1, "dp": 1, "pp": 1, "ep": 1, "replicas": 8, "accelerators_per_replica": 1,
        "tp_spans_scale_up_domains": False, "replica_spans_scale_up_domains": False}
    assert sim["explanation"]["binding_limit"] == "arrival rate"
    assert set(sim["explanation"]["step_time_split"]) == {
        "prefill_compute", "decode_compute", "weights_memory", "kv_memory",
        "communication", "overhead"}
    # the MLPerf logs parse back with LoadGen's keys and agree with the summary
    summary = parse_summary((tmp_path / "mlperf_log_summary.txt").read_text())
    assert summary.sut_name == "tokenmark-simulator" and summary.result_validity == "VALID"
    assert summary.headline["completed_tokens_per_second"] == pytest.approx(
        res.summary.tokens_per_second, rel=1e-4)
    assert parse_detail((tmp_path / "mlperf_log_detail.txt").read_text()).entries
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == n and all(r.ok for r in recs)
    first = min(recs, key=lambda r: r.seq)
    assert first.first_token_ns > first.scheduled_ns
    assert "binding limit" in (tmp_path / "report.txt").read_text()


def test_offline_follows_loadgen_padding_and_formula():
    """Equal-issue pads 20,000 samples to whole datasets; tokens/s is LoadGen's Offline
    formula (tokens over the last completion)."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE,
                             overrides={"min_query_count": 20_000, "offline_expected_qps": 1.0})
    spec = ClusterSpec("B200", "llama3.1-8b", nodes=1, per_node=8, efficiency=EFF)
    res = simulate(layered, spec, None)
    s = res.summary
    assert s.completed == 2 * 13368
    assert s.tokens_per_second == pytest.approx(s.token_count / (s.max_latency_ns / 1e9))


@pytest.mark.parametrize(("spec", "message"), [
    (ClusterSpec("H9000", "llama3.1-8b"), "unknown accelerator 'H9000'"),
    (ClusterSpec("H200", "llama9"), "unknown model 'llama9'"),
    (ClusterSpec("H100", "llama3.1-405b", nodes=1, per_node=2, precision="fp8"),
     r"needs 405 GB of weights; 2 x H100 give 144 GB usable"),
    (ClusterSpec("H200", "llama2-70b-99", nodes=1, per_node=8, tp=3),
     r"tp 3 x dp 1 x pp 1 = 3 accelerators per replica does not divide the 8 accelerators"),
    (ClusterSpec("H200", "llama3.1-8b", nodes=0), "at least one node"),
])
def test_bad_input_names_the_numbers(spec, message):
    with pytest.raises(ConfigError, match=message):
        plan_deployment(spec, 800, 128)


def test_planner_follows_the_documented_rules():
    h100 = plan_deployment(ClusterSpec("H100", "llama2-70b-99", efficiency=EFF), 300, 290)
    # 69 GB of FP8 weights leave no room for 256 sequences on one 80 GB H100: tp 2
    assert (h100.deployment.tp, h100.deployment.replicas) == (2, 4)
    assert h100.deployment.precision.value == "fp8"
    b200 = plan_deployment(ClusterSpec("B200", "llama2-70b-99", efficiency=EFF), 300, 290)
    assert (b200.deployment.tp, b200.deployment.precision.value) == (1, "fp4")
    gptj = plan_deployment(ClusterSpec("H100", "gptj-99", efficiency=EFF), 800, 65)
    assert gptj.deployment.policy.beams == 4  # the reference's beam search
    nvl = plan_deployment(ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4,
                                      tp=8, efficiency=EFF), 700, 3700)
    assert nvl.deployment.topo.domain == 72 and not nvl.deployment.tp_spans_domains


def test_scaling_reports_efficiency_against_the_smallest_size():
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE)
    spec = ClusterSpec("H200", "llama3.1-8b", per_node=8, efficiency=EFF)
    pts = scaling(layered, spec, [8, 16], requests=300)
    assert [p.accelerators for p in pts] == [8, 16]
    assert pts[0].efficiency == 1.0 and pts[1].replicas == 16
    # identical, independent replicas: throughput scales with their count
    assert pts[1].efficiency == pytest.approx(1.0)
    # a 16-way tensor-parallel replica: inside an NVL72 rack vs across two HGX nodes
    l405 = build_settings("v6.0", "llama3.1-405b", Scenario.OFFLINE)
    nvl = scaling(l405, ClusterSpec("GB200", "llama3.1-405b", per_node=4, tp=16,
                                    efficiency=EFF), [16], requests=100)[0]
    hgx = scaling(l405, ClusterSpec("B200", "llama3.1-405b", per_node=8, tp=16,
                                    efficiency=EFF), [16], requests=100)[0]
    assert nvl.note == "" and hgx.note == "replica spans scale-up domains"
    assert hgx.communication_share > nvl.communication_share


def test_one_prediction_path_for_scaling_calibration_and_simulate():
    # the same system predicted by simulate --scaling and by calibration's predict()
    # (what the forward evaluation calls) gives the same figure, for Offline and Server;
    # Server never above the same deployment's Offline
    from tokenmark.api.simulation import choose_plan, simulation_dataset
    from tokenmark.sim.predict import predict
    from tokenmark.sim.run import request_arrays

    spec = ClusterSpec("H200", "llama3.1-8b", per_node=8, efficiency=EFF)
    for sc in (Scenario.OFFLINE, Scenario.SERVER):
        layered = build_settings("v6.0", "llama3.1-8b", sc)
        ds = simulation_dataset(layered)
        inp, out, enc = request_arrays(ds, "llama3.1-8b")
        point = scaling(layered, spec, [8], dataset=ds, requests=400)[0]
        # the same run (the settings' minimum duration and query count: LoadGen's
        # last query takes the same expected share of the offered rate)
        st = layered.settings
        p = predict(spec, sc.value, inp, out, offline_eff=EFF, latency_eff=EFF,
                    limits=layered.settings.limits if sc is Scenario.SERVER else None,
                    requests=400, encoder=enc, min_duration_s=st.min_duration_ms / 1000,
                    min_queries=st.min_query_count)
        assert point.tokens_per_second == p.value and point.deployment == p.plan.deployment.label
        assert p.value <= p.offline_bound * (1 + 1e-12)
        # a simulated run uses the deployment the same search chose, and its notes say
        # the searched figures' unit and, for a latency scenario, that the run is at the
        # settings' rate (1 query/s here), not at the searched one
        chosen = choose_plan(layered, spec, ds)
        assert chosen.deployment.label == p.plan.deployment.label
        searched = [n for n in chosen.notes if n.startswith("layout searched")]
        assert len(searched) == 1 and searched[0].endswith("tokens per second")
        rate = [n for n in chosen.notes if n.startswith("this run's rate")]
        assert rate == ([] if sc is Scenario.OFFLINE else [
            "this run's rate: 1 queries/s (--qps, else the preset's target_qps); the "
            "searched rate is the prediction (--scaling prints it)"])



def test_a_fixed_layout_run_says_its_rate_is_not_a_prediction():
    # with the layout given there is one candidate and no search: the run's note still
    # says it runs at the settings' rate (here --qps 3), and where the prediction is
    from tokenmark.api.simulation import choose_plan, simulation_dataset

    spec = ClusterSpec("H200", "llama3.1-8b", per_node=8, tp=1, efficiency=EFF)
    layered = _server(qps=3.0)
    chosen = choose_plan(layered, spec, simulation_dataset(layered))
    assert not any(n.startswith("layout searched") for n in chosen.notes)
    assert [n for n in chosen.notes if n.startswith("this run's rate")] == [
        "this run's rate: 3 queries/s (--qps, else the preset's target_qps); --scaling "
        "prints the predicted rate"]

def test_moe_layouts_are_searched_with_and_without_the_draft():
    from tokenmark.sim.plan import candidates

    labels = [p.deployment.label for p in candidates(
        ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4, efficiency=EFF,
                    rules_round="v6.1"), 700, 3700) if not p.deployment.disaggregated]
    # a tp group with its experts, a node-wide data-parallel group, the whole NVL72 rack,
    # and (for the latency limits) tp 4 and tp 8 groups with their experts; each with
    # and without the MTP draft (allowed from v6.0)
    assert len(labels) == 10
    assert sum("dp8 ep8" in x for x in labels) == 2 and sum("dp72 ep72" in x for x in labels) == 2
    assert sum("x4 ep4" in x for x in labels) == 2 and sum("x8 ep8" in x for x in labels) == 2
    assert sum("spec3" in x for x in labels) == 5
    before = candidates(ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4,
                                    efficiency=EFF, rules_round="v5.1"), 700, 3700)
    assert not any(p.deployment.spec_tokens for p in before)  # v5.1 rules: no draft
    # the rules allow the draft in Interactive only (never Offline or Server)
    for scenario, drafted in (("Interactive", 5), ("Server", 0), ("Offline", 0)):
        got = candidates(ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4,
                                     efficiency=EFF, rules_round="v6.1"), 700, 3700, scenario)
        assert sum(bool(p.deployment.spec_tokens) for p in got
                   if not p.deployment.disaggregated) == drafted


def test_attention_data_parallel_layouts_balance_their_prefills():
    import pickle

    from tokenmark.perfmodel import ServingPolicy
    from tokenmark.sim.plan import candidates

    spec = ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4, efficiency=EFF,
                       rules_round="v6.1")
    for scenario in ("Offline", "Server", "Interactive"):
        for p in candidates(spec, 700, 3700, scenario):
            d = p.deployment
            assert d.policy.adp_balance_steps == (50 if d.dp > 1 else None)
    # a policy that does not set it pickles as before the field existed (the calibration
    # caches are keyed on pickled deployments): five fields, and six when it is set
    assert len(ServingPolicy().__getstate__()) == 5
    assert len(ServingPolicy(adp_balance_steps=0).__getstate__()) == 6
    for pol in (ServingPolicy(), ServingPolicy(adp_balance_steps=50)):
        assert pickle.loads(pickle.dumps(pol)) == pol


def test_a_dense_system_failing_its_limits_at_any_rate_is_widened():
    """Llama2-70B FP8 on 8 H200 at a 10 ms TPOT limit: one or two H200 per replica cannot
    decode a token in 10 ms (a tp2 replica reads 35 GB of weights per step at 4.8 TB/s x
    0.75 = 9.7 ms, plus 1.5 ms of step overhead), so the planner's candidates fail at any
    rate; the prediction widens the replica to tp 4 (4.9 + 1.5 ms) instead of reporting 0."""
    from tokenmark.mlperf.settings import LatencyLimits
    from tokenmark.sim.calibration import Lengths
    from tokenmark.sim.predict import predict

    inp, out, _ = Lengths().get("llama2-70b-99")
    spec = ClusterSpec("H200", "llama2-70b-99", nodes=1, per_node=8, efficiency=EFF,
                       precision="fp8")
    p = predict(spec, "Interactive", inp, out, offline_eff=EFF,
                limits=LatencyLimits(ttft_ns=450_000_000, tpot_ns=10_000_000), requests=200)
    assert [v for _, v in p.tried[:2]] == [0.0, 0.0]  # the planner's tp 1 and tp 2
    assert p.binding == "latency limits" and p.value > 0
    assert p.plan.deployment.tp == 4 and p.plan.deployment.replicas == 2


def test_a_run_at_the_prediction_backs_off_to_a_rate_a_full_length_run_passes():
    """``simulate`` without ``--qps`` runs Server at the predicted rate, as a submitter
    sets target_qps. The search's runs are shorter than MLPerf's; 8 H200 x llama3.1-8b
    at these parameters is predicted 522.6 queries/s, and a 120 s run there fails its
    TPOT limit (the batch keeps growing past what the short runs saw), so the run steps
    down to the highest rate a run of the settings' length passes, within 3%, and says
    so."""
    import re

    from tokenmark.api.simulation import simulation_dataset
    from tokenmark.sim.predict import predict
    from tokenmark.sim.run import request_arrays

    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER,
                             overrides={"min_duration_ms": 120_000})
    spec = ClusterSpec("H200", "llama3.1-8b", per_node=8, efficiency=EFF)
    inp, out, enc = request_arrays(simulation_dataset(layered), "llama3.1-8b")
    p = predict(spec, "Server", inp, out, offline_eff=EFF, latency_eff=EFF,
                limits=layered.settings.limits, encoder=enc)
    assert p.qps > 0
    # the prediction's rate, in queries/s, is its tokens/s over the run's tokens/request
    # (here capped by the same deployment's Offline throughput, the rate scaled with it)
    assert 0.8 * p.value / out.mean() < p.qps < 1.25 * p.value / out.mean()
    res = simulate(layered, spec, None, at_prediction=True, write_records=False)
    got = res.settings.target_qps
    notes = [n for n in res.plan.notes if n.startswith("this run's rate")]
    assert len(notes) == 1
    m = re.match(r"this run's rate: ([\d,.]+) queries/s \((\d+)% of the predicted ([\d,.]+)\)",
                 notes[0])
    assert m, notes[0]
    assert float(m[1].replace(",", "")) == pytest.approx(got, rel=1e-3)
    assert float(m[3].replace(",", "")) == pytest.approx(p.qps, rel=1e-3)
    assert "fails one (p99 TTFT" in notes[0]
    assert 0.5 * p.qps < got < p.qps
    assert res.verdicts.mlperf.validity == "VALID" and res.exit_code == 0
    # the run's settings record where the rate came from
    layers = {x["layer"]: x["values"] for x in res.document["settings"]["layers"]}
    assert layers["prediction"] == {"target_qps": got}
    # without at_prediction the run keeps the settings' rate (the preset's 1 query/s)
    slow = simulate(build_settings("v6.0", "llama3.1-8b", Scenario.SERVER,
                                   overrides={"min_duration_ms": 20_000,
                                              "min_query_count": 100}),
                    spec, None, write_records=False)
    assert slow.settings.target_qps == 1.0


def test_the_back_off_names_the_rate_it_ran_when_none_passes():
    # a system that fails its limits at every rate tried: the run kept is the last one
    # tried (8 runs, each 10% lower), and the note names that rate, not the next
    from types import SimpleNamespace

    from tokenmark.api import simulation as sim

    fail = SimpleNamespace(rule="perf_constraints", observed="p99 TTFT 9000.000 ms")
    failed = SimpleNamespace(verdicts=SimpleNamespace(mlperf=SimpleNamespace(failed=[fail])))
    tried: list[float] = []

    def at(q: float):
        tried.append(q)
        return ("settings", "effective", "cluster", failed)

    note, got = sim._back_off(100.0, failed, at)
    assert tried == pytest.approx([100.0 * 0.9 ** k for k in range(1, 9)])
    assert got[3] is failed
    assert note.startswith(f"this run's rate: {tried[-1]:,.4g} queries/s, the lowest of 8 "
                           "tried below the predicted 100")
    assert "p99 TTFT 9000.000 ms" in note
    # one that passes from 81 on: bisection between the failing 90 and the passing 81
    # until the bracket is within 3%, the run kept the highest that passed
    ok = SimpleNamespace(verdicts=SimpleNamespace(mlperf=SimpleNamespace(failed=[])))
    tried.clear()

    def at2(q: float):
        tried.append(q)
        return ("settings", "effective", "cluster", ok if q <= 85.0 else failed)

    note, got = sim._back_off(100.0, failed, at2)
    passed = [q for q in tried if q <= 85.0]
    assert got[3] is ok and max(passed) <= 85.0
    assert min(q for q in tried if q > 85.0) / max(passed) <= 1.03
    assert note.startswith(f"this run's rate: {max(passed):,.4g} queries/s")
