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

    .venv/bin/python bench/seed_ratios.py [--efficiency PATH] [--requests N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from tokenmark.perfmodel import find_accelerator, find_model
from tokenmark.sim.calibration import Lengths, limits_for
from tokenmark.sim.params import efficiency_for, read_efficiency, read_levels
from tokenmark.sim.plan import ClusterSpec
from tokenmark.sim.predict import Prediction, predict

PUBLISHED = {
    "qwen_interactive": (1306.6, 349.29),
    "r1_interactive": (652750.0, 253506.0),
    "r1_offline_scaling": 2705130.0 / (4 * 679740.0),
    "r1_server_scaling": 0.849,
}
ROUND = "v6.1"


def _table(path: Path | None) -> Any:
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
    eff = _table(args.efficiency)
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
        show(f"GB300 72 -> 288 GPUs, deepseek-r1 {scenario}",
             (four.value / 288) / (one.value / 72), PUBLISHED[key],
             f"(72: {one.value:,.0f} [{one.plan.deployment.label}]; 288: {four.value:,.0f} "
             f"[{four.plan.deployment.label}])")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
