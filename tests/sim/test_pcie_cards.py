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
