"""PCIe cards without a GPU-to-GPU link (RTX PRO 6000 Blackwell Server, Arc Pro B60,
L40S): their datasheet figures, the calibration family the RTX PRO 6000 belongs to, and
the narrowest replica the planner tries on them. Expected figures are from the vendors'
datasheets and hand computation (the numbers in the comments), not from the code."""

from __future__ import annotations

from tokenmark.perfmodel import Efficiency, find_accelerator
from tokenmark.sim.params import EfficiencyRow, efficiency_for

RTX = "RTX PRO 6000 Blackwell Server"


def test_rtx_pro_6000_server_edition_datasheet_figures() -> None:
    # NVIDIA's server-edition sheet: FP4 4 PFLOPS, FP8 2 PFLOPS, FP16/BF16 1 PFLOPS with
    # sparsity (dense: half), 96 GB GDDR7 on a 512-bit bus at 1,597 GB/s (the 1,792 GB/s
    # often quoted is the workstation edition's 28 Gbps), up to 600 W
    a = find_accelerator(RTX)
    assert a.tflops == {"fp4": 4000 / 2, "fp8": 2000 / 2, "bf16": 1000 / 2}
    assert a.hbm_tb_s == 1.597
    assert (a.hbm_gb, a.memory_type, a.tdp_w) == (96, "GDDR7", 600)


def test_rtx_pro_6000_is_calibrated_apart_from_the_hbm_blackwell_parts() -> None:
    # GB202 is compute capability 12.0 (SM120), built apart from B200/GB200's SM100
    # kernels, and reads GDDR7: its own family, which B200 does not share
    rtx, b200 = find_accelerator(RTX), find_accelerator("B200")
    assert rtx.architecture != b200.architecture
    assert b200.architecture == find_accelerator("GB200").architecture

    def row(family: str, mfu: float) -> EfficiencyRow:
        return EfficiencyRow(family, "trtllm", "*", Efficiency(mfu=mfu, source=family), 2,
                             0.1, "Offline")

    table = (row(b200.architecture, 0.5), row(rtx.architecture, 0.7))
    assert efficiency_for(rtx, "trtllm", scenario="Offline", rows=table).mfu == 0.7
    assert efficiency_for(b200, "trtllm", scenario="Offline", rows=table).mfu == 0.5


def test_half_the_rules_tp_is_tried_where_it_still_holds_half_the_target_batch() -> None:
    # Llama-3.1-8B at INT8: 8.03e9 weight bytes; FP8 KV: 32 layers x 8 KV heads x 128
    # x 2 (K and V) x 1 byte = 65,536 bytes a token. Mean length 867 + 128 = 995 tokens,
    # so the rules' 256 sequences need 254,720 KV tokens and half the target (128)
    # 127,360. At gpu_memory_utilization 0.9:
    #   Arc Pro B60, 24 GB, tp 1: (21.6e9 - 8.03e9) / 65,536 = 207,061 tokens (208
    #     sequences): not 256, so the rules take tp 2 (and twice it, 4), and tp 1 holds
    #     more than 128: tried as well;
    #   Arc Pro B50, 16 GB, tp 1: (14.4e9 - 8.03e9) / 65,536 = 97,198 (97 sequences):
    #     the rules take tp 2 (316,925 tokens), tp 1 holds fewer than 128: not tried;
    #   Arc Pro B70, 32 GB, tp 1: (28.8e9 - 8.03e9) / 65,536 = 316,925: the rules take
    #     tp 1, nothing narrower exists.
    from tokenmark.sim.plan import NARROW_BATCH, ClusterSpec, candidates

    assert NARROW_BATCH == 128

    def layouts(acc: str) -> list[tuple[int, int]]:
        spec = ClusterSpec(accelerator=acc, model="llama3.1-8b", per_node=4, precision="int8")
        return [(p.deployment.tp, p.deployment.replicas)
                for p in candidates(spec, 867.0, 128.0, "Offline")]

    assert layouts("Arc Pro B60") == [(2, 2), (4, 1), (1, 4)]
    assert layouts("Arc Pro B50") == [(2, 2), (4, 1)]
    assert layouts("Arc Pro B70") == [(1, 4), (2, 2)]
    spec = ClusterSpec(accelerator="Arc Pro B60", model="llama3.1-8b", per_node=4,
                       precision="int8")
    narrow = candidates(spec, 867.0, 128.0, "Offline")[2]
    assert narrow.deployment.kv_capacity_tokens == 207_061
    assert any("half the rules' tp, holding 208 sequences" in n for n in narrow.notes)
