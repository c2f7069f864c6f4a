"""Why DeepSeek-R1 Interactive is predicted far too high: the step model's numbers.

Prints, from the shipped parameters (tokenmark/data/efficiency.csv, model_levels.csv)
and the v6.0 rules (MTP drafting 3 tokens, drafts.csv):

1. the decode step time of one 8 x B300 replica (dp 8, ep 8, MTP 3) against its
   sequences, under the Interactive and the Offline calibrated efficiency, split into
   compute, memory, communication and overhead, with the TPOT it implies
   (step / tokens kept per step) and the tokens/s of that replica. The Interactive
   p99 TPOT limit is 15 ms (mlperf.conf, deepseek-r1-interactive), so the largest batch
   within it is where the step reaches 15 ms x tokens per step;
2. the marginal cost of a sequence (ms per sequence added, per replica) against the
   fixed cost of a step, and the batch a published Interactive result implies
   (Little's law at the TPOT limit: throughput x TPOT = sequences in flight);
3. MTP at batch 1 on 8 x B200 (MLA tp 8, MoE ep 2, 1K in / 2K out): the simulator's
   speedup of nextn 3 over none, beside TensorRT-LLM's measured 2.16x (tech blog 2,
   "DeepSeek R1 MTP Implementation and Optimization", Figure 7), and the acceptance
   length that measurement implies under the simulator's step costs.

    .venv/bin/python bench/int_diagnosis.py
"""

from __future__ import annotations

import dataclasses

from tokenmark.perfmodel.cost import CostModel
from tokenmark.sim.plan import ClusterSpec, plan_deployment
from tokenmark.sim.predict import calibrated

TPOT_LIMIT_MS = 15.0  # deepseek-r1 Interactive p99 TPOT (mlperf.conf)
MEAN_CTX = 2300.0  # mean decode context: ~800 input + half of ~3,000 output tokens
#: published v6.0 DeepSeek-R1 Interactive results used for the implied batch
PUBLISHED = (("GigaComputing 8 x B300", 8, 4934.65),
             ("NVIDIA GB200 NVL72", 72, 240318.0),
             ("NVIDIA GB300 NVL72", 72, 250634.0))


def step_table() -> None:
    for scen in ("Interactive", "Offline"):
        spec = ClusterSpec(accelerator="B300", model="deepseek-r1", tp=1, dp=8, ep=8,
                           spec_tokens=3, stack="trtllm", scenario="Interactive",
                           rules_round="v6.0")
        off, lat = calibrated(spec, "Interactive")
        eff = lat if scen == "Interactive" else off
        d = plan_deployment(dataclasses.replace(spec, efficiency=eff), 800.0, 3700.0).deployment
        cm = CostModel(d)
        a = d.tokens_per_step
        print(f"\n{d.label}; {scen} efficiency: mfu {eff.mfu:.3f} mbu {eff.mbu:.3f} "
              f"step {eff.step_overhead_ns / 1e3:.0f} us, per sequence "
              f"{eff.seq_overhead_ns / 1e3:.1f} us; {a:.2f} tokens kept per step")
        print("  seqs/replica   step ms  compute   memory     comm overhead  TPOT ms  tokens/s")
        prev = None
        for s in (1, 8, 32, 64, 128, 256, 512, 1024):
            c = cm.decode_cost(s, s * MEAN_CTX)
            ms = c.total_ns / 1e6
            print(f"  {s:12d} {ms:9.2f} {c.compute_ns / 1e6:8.2f} {c.memory_ns / 1e6:8.2f} "
                  f"{c.comm_ns / 1e6:8.2f} {c.overhead_ns / 1e6:8.2f} {ms / a:8.2f} "
                  f"{s * a / (ms / 1e3):9.0f}")
            if s == 64:
                prev = (s, ms)
        if prev is not None:
            c = cm.decode_cost(1024, 1024 * MEAN_CTX)
            marg = (c.total_ns / 1e6 - prev[1]) / (1024 - prev[0])
            budget = TPOT_LIMIT_MS * a
            print(f"  marginal {marg:.4f} ms per sequence (64 -> 1024); fixed ~{prev[1]:.1f} ms"
                  f"; a step may take {budget:.1f} ms at the TPOT limit")


def implied_batch() -> None:
    print("\nsequences in flight a published Interactive result implies at TPOT = 15 ms "
          "(throughput x TPOT; at a lower mean TPOT fewer):")
    for name, gpus, tps in PUBLISHED:
        seqs = tps * TPOT_LIMIT_MS / 1e3
        print(f"  {name}: {tps:,.0f} tokens/s -> <= {seqs:,.0f} sequences, "
              f"{seqs / gpus:.1f} per GPU")


def mtp_batch1() -> None:
    print("\nMTP nextn 3 at batch 1, 8 x B200 (tp 8, ep 2), 2,000-token context:")
    for scen in ("Offline", "Interactive"):
        steps = {}
        for s in (0, 3):
            spec = ClusterSpec(accelerator="B200", model="deepseek-r1", tp=8, dp=1, ep=2,
                               spec_tokens=s, stack="trtllm", scenario="Interactive",
                               rules_round="v6.0")
            off, lat = calibrated(spec, "Interactive")
            eff = off if scen == "Offline" else lat
            d = plan_deployment(dataclasses.replace(spec, efficiency=eff),
                                1000.0, 2000.0).deployment
            steps[s] = (CostModel(d).decode_cost(1, 2000.0).total_ns, d.tokens_per_step)
        ratio = steps[3][0] / steps[0][0]
        print(f"  {scen} efficiency: step {steps[0][0] / 1e6:.2f} -> {steps[3][0] / 1e6:.2f} ms "
              f"(x{ratio:.3f}); simulated speedup {steps[3][1] / ratio:.2f} "
              f"(drafts.csv {steps[3][1]:.2f} tokens a step); TensorRT-LLM's 2.16x implies "
              f"{2.16 * ratio:.2f} tokens a step")


def main() -> None:
    step_table()
    implied_batch()
    mtp_batch1()


if __name__ == "__main__":
    main()
