"""NVIDIA's v6.0 GB300 NVL72 DeepSeek-R1 runs on one rack and on four, beside the simulator.

The design round (v6.0) holds the same pair of systems whose v6.1 results give the seed's
72 -> 288 GPU ratios (issue 26): NVIDIA's GB300 NVL72 on 72 GPUs (one rack) and on 288
(four), DeepSeek-R1 Offline and Server. Published 72 -> 288 scaling, ``(T_288 / 288) /
(T_72 / 72)``: Offline 2,494,310 / (4 x 647,076) = 0.964, Server 1,555,110 / (4 x 400,437)
= 0.971. Their LoadGen summaries say what those figures are made of:

1. **Offline.** LoadGen issues every sample at once and divides by the completion of the
   last (``samples / max latency``), so a run's figure is its steady rate diluted by its
   drain (the last, longest answers decoding as the batch empties). Samples done by each
   latency percentile over that percentile's time give the completion rate up to it, per
   rack; the two runs agree to 1% up to p95 and differ in the drain and the run's length:
   samples per rack (LoadGen's ``samples_per_query``, from ``user.conf``'s
   ``min_query_count``: 877,600 = 200 x the 4,388-sample set on one rack, 3,071,600 = 700 x
   it over four) and the seconds after p90 and p99.
2. **The model's Offline runs of the same sizes.** The planner's Offline deployment under
   the shipped parameters (or ``--efficiency``), each replica's run simulated to its end
   with the sample count the published run gave it (the simulator's driver,
   :func:`tokenmark.sim.driver.simulate`, every request issued at once and drawn as the
   Offline trace draws them): its percentiles as shares of the run, its drain, and the
   ratio the two run sizes alone give.
3. **Server.** The offered rate per rack (scheduled samples/s), the completed share (LoadGen's
   last-query term, ``tokenmark/sim/scaling.py``), and the TPOT/TTFT p99 against the
   v6.0 rules' limits (80 ms, 2 s): whether each run sat at its limits.

Sources: the 288-GPU summaries from ``../shared/data/mlperf/samples`` (their copy in
``tests/data/shared``, read with
tokenmark's own LoadGen summary parser); the 72-GPU ones transcribed below from
``inference_results_v6.0`` ``closed/NVIDIA/results/GB300-NVL72_GB300-288GB_aarch64x72_TRT/
deepseek-r1/{Offline,Server}/`` (``performance/run_1/mlperf_log_summary.txt`` and
``user.conf``; the copy read is the fork ``gbeezybez/inference_results_v6.0``, commit
232fbf9, whose 288-GPU files are byte-identical to the samples').

    .venv/bin/python bench/rack_pair.py [--efficiency PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from tokenmark.mlperf.mllog.read_summary import parse_summary
from tokenmark.mlperf.presets import load_round
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import Scenario
from tokenmark.perfmodel.deployment import Deployment, Efficiency
from tokenmark.sim.calibration import Lengths
from tokenmark.sim.cluster import Cluster
from tokenmark.sim.driver import simulate
from tokenmark.sim.plan import ClusterSpec
from tokenmark.sim.predict import predict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_ratios import efficiency_lookup  # noqa: E402  (bench/ is not a package)

#: the shared reference data as the tests find it (tests/paths.py: $TOKENMARK_SHARED/data,
#: else the copy in tests/data/shared)
_SHARED = (Path(os.environ["TOKENMARK_SHARED"]) / "data" if os.environ.get("TOKENMARK_SHARED")
           else Path(__file__).resolve().parents[1] / "tests" / "data" / "shared")
SAMPLES = (_SHARED / "mlperf" / "samples" / "v6.0" / "closed" / "NVIDIA" / "results"
           / "GB300-NVL72_GB300-288GB_aarch64x288_TRT" / "deepseek-r1")
#: the latency percentiles LoadGen's summary prints, and the maximum
POINTS = (0.5, 0.9, 0.95, 0.97, 0.99, 0.999, 1.0)
#: NVIDIA's v6.0 72-GPU runs (module docstring): Offline samples_per_query and latency
#: percentiles (s) at POINTS; Server scheduled and completed samples/s, min_query_count,
#: TPOT p50 and p99 (ms), TTFT p99 (s)
OFFLINE_72 = (877600, (2149.292525238, 3993.664645188, 4261.787291986, 4412.282741699,
                       4661.896972134, 4949.388439210, 5089.252432235))
SERVER_72 = {"scheduled": 110.02, "completed": 106.66, "queries": 219400,
             "tpot_p50_ms": 57.680634, "tpot_p99_ms": 76.061582, "ttft_p99_s": 1.002}
ROUND = "v6.0"


def published_288() -> tuple[tuple[int, tuple[float, ...]], dict[str, float]]:
    """The 288-GPU Offline run (samples, latency percentiles in s) and Server figures,
    read from the LoadGen summaries in ``../shared/data``."""
    logs = {}
    for scenario in ("Offline", "Server"):
        p = SAMPLES / scenario / "performance" / "run_1" / "mlperf_log_summary.txt"
        if not p.is_file():
            sys.exit(f"rack_pair: no LoadGen summary at {p}: point TOKENMARK_SHARED at the "
                     "shared reference data (its data/mlperf/samples), or run from a clone "
                     "that has tests/data/shared")
        logs[scenario] = parse_summary(p.read_text(encoding="utf-8"), str(p)).fields
    off = dict(logs["Offline"]["additional_stats"])
    samples = int(dict(logs["Offline"]["test_parameters"])["samples_per_query"])
    names = [f"{p * 100:.2f} percentile latency (ns)" for p in POINTS[:-1]] + ["Max latency (ns)"]
    pcts = tuple(float(off[n]) / 1e9 for n in names)
    srv = dict(logs["Server"]["additional_stats"])
    res = dict(logs["Server"]["results"])
    params = dict(logs["Server"]["test_parameters"])
    server = {"scheduled": float(srv["Scheduled samples per second"]),
              "completed": float(res["Completed samples per second"]),
              "queries": float(params["min_query_count"]),
              "tpot_p50_ms": float(srv["50.00 percentile time to output token (ns)"]) / 1e6,
              "tpot_p99_ms": float(srv["99.00 percentile time to output token (ns)"]) / 1e6,
              "ttft_p99_s": float(srv["99.00 percentile first token latency (ns)"]) / 1e9}
    return (samples, pcts), server


def model_run(d: Deployment, eff: Efficiency, per_replica: int, inputs: np.ndarray,
              outputs: np.ndarray, seed: int = 7) -> tuple[np.ndarray, float]:
    """One replica's Offline run of ``per_replica`` requests (drawn as the Offline trace
    draws them, all issued at once) under ``eff``, through the simulator's own driver:
    each request's completion time (s) and the output tokens."""
    idx = np.random.default_rng(seed).integers(0, inputs.shape[0], size=per_replica)
    zeros = np.zeros(per_replica, dtype=np.int64)
    sched = Schedule(kind=ScheduleKind.TIMED, scenario=Scenario.OFFLINE, sample_index=idx,
                     query_id=zeros, scheduled_ns=zeros)
    r = simulate(sched, inputs, outputs, Cluster(replace(d.single_replica(), efficiency=eff)))
    return r.done.astype(np.float64) / 1e9, float(r.output_tokens.sum())


def _offline_rows(name: str, per_rack: float, pcts: tuple[float, ...]) -> list[str]:
    last = pcts[-1]
    cells = [f"p{p * 100:g} {p * per_rack / t:6.1f}/s at {t / last:.3f}"
             for p, t in zip(POINTS, pcts, strict=True)]
    return [f"  {name:<16} {per_rack:>9,.0f} samples a rack in {last:,.0f} s: "
            + "  ".join(cells),
            f"  {'':<16} drain: {last - pcts[1]:,.0f} s after p90, {last - pcts[4]:,.0f} s "
            f"after p99"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--efficiency", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    (n288, p288), s288 = published_288()
    n72, p72 = OFFLINE_72
    print("Offline: completion rate up to each latency percentile (samples done / its "
          "time), per rack; 'at' = the percentile's share of the run")
    for line in (_offline_rows("published x72", n72, p72)
                 + _offline_rows("published x288", n288 / 4, p288)):
        print(line)
    pub = (n288 / 4 / p288[-1]) / (n72 / p72[-1])
    steady = (0.9 * n288 / 4 / p288[1]) / (0.9 * n72 / p72[1])
    print(f"  published scaling {pub:.3f}; completion rate up to p90 {steady:.3f}, "
          f"samples a rack {n288 / 4 / n72:.3f}")

    eff = efficiency_lookup(args.efficiency)("GB300", "deepseek-r1", "Offline")
    inputs, outputs, _ = Lengths().get("deepseek-r1")
    spec = ClusterSpec("GB300", "deepseek-r1", nodes=18, per_node=4, stack="trtllm",
                       rules_round=ROUND)
    d = predict(spec, "Offline", inputs, outputs, offline_eff=eff).plan.deployment
    rates = {}
    for name, racks, total in (("model x72", 1, n72), ("model x288", 4, n288)):
        per_replica = total // racks // d.replicas
        done, tokens = model_run(d, eff, per_replica, inputs, outputs)
        pcts = tuple(float(np.quantile(done, p)) for p in POINTS)
        for line in _offline_rows(name, per_replica * d.replicas, pcts):
            print(line)
        rates[name] = (per_replica / pcts[-1], 0.9 * per_replica / pcts[1], tokens / pcts[-1])
    print(f"  model ({d.label}, per rack {rates['model x72'][2] * d.replicas:,.0f} and "
          f"{rates['model x288'][2] * d.replicas:,.0f} tokens/s): scaling "
          f"{rates['model x288'][0] / rates['model x72'][0]:.3f}; completion rate up to p90 "
          f"{rates['model x288'][1] / rates['model x72'][1]:.3f}")

    limits = load_round(ROUND).benchmarks["deepseek-r1"].scenarios[Scenario.SERVER].limits
    tpot_ms, ttft_s = limits.tpot_ns / 1e6, limits.ttft_ns / 1e9
    print("\nServer: per rack")
    for name, racks, s in (("published x72", 1, SERVER_72), ("published x288", 4, s288)):
        span = s["queries"] / s["scheduled"]
        print(f"  {name:<16} offered {s['scheduled'] / racks:7.2f} queries/s, completed share "
              f"{s['completed'] / s['scheduled']:.4f} (T {span:,.0f} s); TPOT p50 "
              f"{s['tpot_p50_ms']:.1f} ms, p99 {s['tpot_p99_ms']:.1f} ms "
              f"({s['tpot_p99_ms'] / tpot_ms:.0%} of {tpot_ms:.0f}); TTFT p99 "
              f"{s['ttft_p99_s']:.2f} s ({s['ttft_p99_s'] / ttft_s:.0%} of {ttft_s:.0f})")
    offered = s288["scheduled"] / (4 * SERVER_72["scheduled"])
    share = (s288["completed"] / s288["scheduled"]) / (SERVER_72["completed"]
                                                      / SERVER_72["scheduled"])
    print(f"  published scaling (samples/s) {offered * share:.3f} = offered rates {offered:.4f} x "
          f"completed shares {share:.4f}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
