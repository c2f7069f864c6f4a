"""The seed's ratios, predicted by the simulator beside the published v6.1 figures.

Predicts, through the one prediction path (tokenmark/sim/predict.py) with the shipped
parameters (tokenmark/data/efficiency.csv and model_levels.csv) or those of a
calibration output folder (``--efficiency DIR/efficiency.csv``, with
DIR/model_levels.csv when there is one),
under the v6.1 rules:

- Vera Rubin NVL72 (72 x VR200) against GB300 NVL72 (72 x GB300) on DeepSeek-R1
  Interactive and Qwen3-VL Interactive;
- GB300 NVL72 from 72 to 288 GPUs (4 racks) on DeepSeek-R1 Offline and Server:
  scaling efficiency ``(T_288 / 288) / (T_72 / 72)``.

The published figures are the v6.1 results the issue quotes (NVIDIA's submissions):
Qwen3-VL Interactive 1,306.6 vs 349.29 queries/s (3.74x), DeepSeek-R1 Interactive
652,750 vs 253,506 tokens/s (2.57x), GB300 288 vs 4 x 72 Offline 2,705,130 vs
4 x 679,740 (99.5%) and Server 84.9%.

Server's scaling is printed with the spread LoadGen's last-query term gives it
(tokenmark/sim/scaling.py): a Server result is (n - 1) / (T + L), T the issue span and L
the latency of the one query issued last, so two runs of the same system differ by the
ratio of two draws of T / (T + L). The 5th-95th percentile of the predicted efficiency
and where the published figure falls in it are shown for runs of the rules' minimum
(600 s) and of the lengths NVIDIA's runs had, with the published figure's own split
into offered rates and last queries (their LoadGen logs).

    .venv/bin/python bench/seed_ratios.py [--efficiency PATH] [--requests N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from tokenmark.mlperf.presets import load_round
from tokenmark.mlperf.settings import Scenario
from tokenmark.perfmodel import find_accelerator, find_model
from tokenmark.sim.calibration import Lengths, limits_for
from tokenmark.sim.params import efficiency_for, read_efficiency, read_levels
from tokenmark.sim.plan import ClusterSpec
from tokenmark.sim.predict import Prediction, predict
from tokenmark.sim.scaling import (
    BAND,
    LastQuery,
    last_query,
    loadgen_run_seconds,
    ratio_quantiles,
)

PUBLISHED = {
    "qwen_interactive": (1306.6, 349.29),
    "r1_interactive": (652750.0, 253506.0),
    "r1_offline_scaling": 2705130.0 / (4 * 679740.0),
    "r1_server_scaling": 0.849,
}
#: NVIDIA's v6.1 GB300 DeepSeek-R1 Server runs (closed/NVIDIA/results/GB300-NVL72_GB300-
#: 288GB_aarch64x{72,288}_TRT/deepseek-r1/Server/performance/run_1/mlperf_log_summary.txt,
#: inference_results_v6.1): scheduled and completed samples/s, min_query_count.
SERVER_RUNS = {72: (165.21, 156.23, 236952), 288: (639.93, 530.42, 947808)}
#: Their end-to-end latency percentiles (s): min, p50, p90, p95, p97, p99, p99.9, max.
LATENCY_POINTS = (0.0, 0.5, 0.9, 0.95, 0.97, 0.99, 0.999, 1.0)
SERVER_LATENCIES = {72: (6.14, 130.9, 572.1, 775.6, 914.6, 1135.4, 1273.6, 1288.1),
                    288: (5.18, 129.1, 564.4, 766.8, 903.5, 1123.4, 1261.4, 1350.3)}
ROUND = "v6.1"


def efficiency_lookup(path: Path | None) -> Any:
    """Efficiency lookup as every prediction makes it (tokenmark.sim.params.efficiency_for)
    over the packaged efficiency.csv and model_levels.csv or another folder's."""
    rows = read_efficiency(path) if path is not None else None
    lv = path.parent / "model_levels.csv" if path is not None else None
    levels = read_levels(lv) if lv is not None and lv.exists() else None
    return lambda acc, bench, scenario: efficiency_for(
        find_accelerator(acc), "trtllm", None, scenario, rows,
        model=find_model(bench).name, levels=levels)


def _predict(acc: str, bench: str, scenario: str, nodes: int, eff: Any, lengths: Lengths,
             requests: int) -> Prediction:
    inp, out, enc = lengths.get(bench)
    spec = ClusterSpec(acc, bench, nodes=nodes, per_node=4, stack="trtllm",
                       rules_round=ROUND)
    samples = bench.startswith("qwen3-vl")
    return predict(spec, scenario, inp, out, offline_eff=eff(acc, bench, "Offline"),
                   latency_eff=eff(acc, bench, scenario), limits=limits_for(bench, scenario, ROUND),
                   samples=samples, requests=requests, encoder=enc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--efficiency", type=Path, default=None)
    ap.add_argument("--requests", type=int, default=1500)
    args = ap.parse_args()
    eff = efficiency_lookup(args.efficiency)
    lengths = Lengths()
    t0 = time.perf_counter()
    lines = []

    def show(name: str, predicted: float, published: float, detail: str) -> None:
        off = predicted / published - 1
        lines.append(f"{name:<44} predicted {predicted:8.3f}  published {published:8.3f}  "
                     f"({off * 100:+.1f}%)  {detail}")
        print(lines[-1], flush=True)

    for key, bench in (("qwen_interactive", "qwen3-vl-235b-a22b"),
                       ("r1_interactive", "deepseek-r1")):
        vr = _predict("VR200", bench, "Interactive", 18, eff, lengths, args.requests)
        gb = _predict("GB300", bench, "Interactive", 18, eff, lengths, args.requests)
        pub_vr, pub_gb = PUBLISHED[key]
        show(f"VR200 / GB300 NVL72, {bench} Interactive", vr.value / gb.value,
             pub_vr / pub_gb, f"(VR200 {vr.value:,.1f} [{vr.plan.deployment.label}; "
             f"{vr.binding}], GB300 {gb.value:,.1f} [{gb.plan.deployment.label}; "
             f"{gb.binding}]; published {pub_vr:,.1f} and {pub_gb:,.1f})")
    for key, scenario in (("r1_offline_scaling", "Offline"), ("r1_server_scaling", "Server")):
        one = _predict("GB300", "deepseek-r1", scenario, 18, eff, lengths, args.requests)
        four = _predict("GB300", "deepseek-r1", scenario, 72, eff, lengths, args.requests)
        ratio = (four.value / 288) / (one.value / 72)
        show(f"GB300 72 -> 288 GPUs, deepseek-r1 {scenario}", ratio, PUBLISHED[key],
             f"(72: {one.value:,.0f} [{one.plan.deployment.label}]; 288: {four.value:,.0f} "
             f"[{four.plan.deployment.label}])")
        if scenario == "Server":
            _last_queries(one, four)
    print(f"\n{time.perf_counter() - t0:.0f} s")


def _last_queries(one: Prediction, four: Prediction) -> None:
    """The Server scaling's spread from LoadGen's last-query term, and the published
    figure's split (module docstring)."""
    rules = load_round(ROUND).benchmarks["deepseek-r1"].scenarios[Scenario.SERVER]
    # each prediction's own latencies, in runs of the rules' minimum length
    lq = {n: last_query(p).over(loadgen_run_seconds(p.qps, rules.min_duration_ms / 1000,
                                                    rules.min_query_count))
          for n, p in ((72, one), (288, four))}
    # the offered rates' ratio: each draw of the two last queries multiplies it
    offered = (four.offered / 288) / (one.offered / 72)
    published = PUBLISHED["r1_server_scaling"]
    spans = {n: q / sched for n, (sched, _, q) in SERVER_RUNS.items()}

    def band(a: LastQuery, b: LastQuery, how: str) -> None:
        lo, mid, hi, share = ratio_quantiles(a.factors, b.factors, (BAND[0], 0.5, BAND[1]),
                                             at=published / offered)
        print(f"    last-query spread, {how}: 5-95% {offered * lo:.3f}-{offered * hi:.3f} "
              f"(median {offered * mid:.3f}); the published {published:.3f} lies at the "
              f"{share:.0%} point (mean latency {b.mean_latency_s:.0f} s at 72, "
              f"{a.mean_latency_s:.0f} s at 288; T {b.run_s:.0f} s and {a.run_s:.0f} s)")

    band(lq[288], lq[72], f"runs of the rules' minimum ({rules.min_duration_ms // 1000} s)")
    band(lq[288].over(spans[288]), lq[72].over(spans[72]), "runs as long as NVIDIA's")
    (s72, c72, _), (s288, c288, _) = SERVER_RUNS[72], SERVER_RUNS[288]
    observed = (c288 / s288) / (c72 / s72)
    print(f"    published split: offered rates {s288 / (4 * s72):.3f} x last queries "
          f"{observed:.3f} = {c288 / (4 * c72):.3f} (NVIDIA's LoadGen logs: "
          f"last query {spans[72] * (s72 / c72 - 1):.0f} s of a {spans[72]:.0f} s run at 72, "
          f"{spans[288] * (s288 / c288 - 1):.0f} s of {spans[288]:.0f} s at 288)")
    # the same lottery over the published runs' own latency distributions (their
    # percentiles, linear between them)
    g = (np.arange(4000) + 0.5) / 4000
    pub = {n: LastQuery(s, spans[n], np.interp(g, LATENCY_POINTS, SERVER_LATENCIES[n]) * 1e9)
           for n, (s, _, _) in SERVER_RUNS.items()}
    lo, mid, hi, share = ratio_quantiles(pub[288].factors, pub[72].factors,
                                         (BAND[0], 0.5, BAND[1]), at=observed)
    print(f"    over the published runs' own latencies (mean {pub[72].mean_latency_s:.0f} s and "
          f"{pub[288].mean_latency_s:.0f} s as interpolated): last-query ratio 5-95% "
          f"{lo:.3f}-{hi:.3f} (median {mid:.3f}); the observed {observed:.3f} lies at the "
          f"{share:.0%} point")


if __name__ == "__main__":
    main()
