"""Accelerator, processor and submitter names as published, read as hardware.

Every published spelling below is copied from the shared tables (the round is named).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.paths import SHARED_DATA
from tokenmark.hardware import (
    ACCELERATOR_ALIASES,
    FAMILIES,
    MIXED,
    accelerator,
    alias_table,
    hardware_of,
    processor,
    submitter_key,
    system_key,
)
from tokenmark.resultrows import Label, ResultRow


@pytest.mark.parametrize("a, b", [
    # v5.1 and v6.0: the MAXSUN board's brand tag dropped in v6.0
    ("[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo", "MS-Intel Arc Pro B60 Dual 48G Turbo"),
    # v6.0 and v6.1: the trademark marks moved
    ("Intel(R) Arc Pro(R) B70", "Intel(R) Arc(TM) Pro B70"),
    # v4.1 (Dell, and AMD) and v5.1
    ("AMD MI300X-NPS1-SPX-192GB-750W", "AMD Instinct MI300X 192GB HBM3"),
    ("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "AMD Instinct MI300X 192GB HBM3"),
    # v6.1: Nebius and NVIDIA name the Vera Rubin superchip differently
    ("NVIDIA VR200", "NVIDIA Vera Rubin"),
    # case only (v6.1)
    ("Nvidia B300-SXM-270GB", "NVIDIA B300-SXM-270GB"),
])
def test_one_piece_of_hardware_spelled_two_ways(a, b):
    ha, hb = accelerator(a), accelerator(b)
    assert ha.key == hb.key and ha.vendor == hb.vendor != ""
    assert ha.aliases or hb.aliases or a.lower() == b.lower()


@pytest.mark.parametrize("a, b", [
    ("NVIDIA H200-SXM-141GB", "NVIDIA H200-SXM-141GB-CTS"),   # higher power rating
    ("NVIDIA H200-SXM-141GB", "NVIDIA H200-NVL-141GB"),       # another form factor
    ("AMD Instinct MI355X 288GB HBM3e", "AMD Instinct MI350X 288GB HBM3e"),
    ("NVIDIA RTX PRO 4500 Blackwell", "NVIDIA RTX PRO 4500 Blackwell Server Edition"),
])
def test_different_hardware_stays_apart(a, b):
    assert accelerator(a).key != accelerator(b).key


def test_heterogeneous_systems_are_shown_as_such_and_never_one_vendors():
    # v6.1 Cisco_UCS_H200x8_MI350Xx8_G200_2x2_TOR
    cisco = accelerator("NVIDIA H200-SXM-141GB + AMD Instinct MI350X 288GB HBM3e")
    assert cisco.heterogeneous and cisco.vendor == MIXED
    assert [p.vendor for p in cisco.parts] == ["nvidia", "amd"]
    assert cisco.label.endswith("(heterogeneous)")
    assert not cisco.matches("MI350X") and not cisco.matches("H200")
    assert not cisco.matches("MI350-series")
    # v6.1 Dell_MangoBoost 2x8xMI355X_2x8xMI300X: one vendor, two models
    mango = accelerator("AMD Instinct MI300X 192GB HBM3 (x2x8) and AMD Instinct MI355X "
                        "288GB HBM3e (x2x8)")
    assert mango.heterogeneous and mango.vendor == "amd"
    assert [p.count for p in mango.parts] == [16, 16]
    assert not mango.matches("MI355X") and mango.matches("AMD Instinct")
    # v5.1 MangoBoost: 32 MI300X and 16 MI325X, the latter spelled HBM3E (an alias)
    v51 = accelerator("AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct MI325X 256GB "
                      "HBM3E (x16)")
    assert [(p.name, p.count) for p in v51.parts] == [
        ("AMD Instinct MI300X 192GB HBM3", 32), ("AMD Instinct MI325X 256GB HBM3e", 16)]
    # one model with a stated count is not heterogeneous (v6.0 AMD, 87 of 88 GPUs)
    amd87 = accelerator("AMD Instinct MI355X 288GB HBM3e (x87)")
    assert not amd87.heterogeneous and amd87.parts[0].count == 87
    assert amd87.matches("MI350-series") and amd87.matches("mi355x")


def test_vendors_of_every_accelerator_of_the_shared_llm_rows():
    names: Counter[str] = Counter()
    for f in ("v5.1_summary_results.json", "v6.0_summary_results.json", "v6.1_summary.json"):
        doc = json.loads((SHARED_DATA / "mlperf" / "summaries" / f).read_text())
        for x in (doc if isinstance(doc, list) else doc.values()):
            model = str(x.get("Model", ""))
            if any(k in model.lower() for k in ("llama", "gpt", "mixtral", "deepseek", "qwen")):
                names[str(x.get("Accelerator", x.get("accelerator_model_name")) or "")] += 1
    vendors = {n: accelerator(n).vendor for n in names}
    assert {v for n, v in vendors.items() if not accelerator(n).parts} == {""}  # CPU only
    named = {n: v for n, v in vendors.items() if accelerator(n).parts}
    assert "" not in named.values()
    for n, v in named.items():
        if v != MIXED:
            first = n.split()[0].lower().strip("[]").removesuffix("(r)")
            assert v == first or first in ("ms-intel", "maxsun", "virtualized"), n
    assert named["NVIDIA H200-SXM-141GB + AMD Instinct MI350X 288GB HBM3e"] == MIXED


def test_cpu_only_results_are_their_processors():
    # v5.1 and v6.1 Intel 1-node-2S-GNR_128C, llama3.1-8b: no accelerator, 2 x Xeon 6980P
    def row(proc: str, acc: str) -> ResultRow:
        return ResultRow(round="v6.1", division="closed", submitter="Intel",
                         system_id="1-node-2S-GNR_128C", benchmark="llama3.1-8b",
                         scenario="Offline", value=1.0, unit="Tokens/s", metric="m",
                         label=Label.OFFICIAL, accelerator_model=acc, nodes=1,
                         accelerators_per_node=0, host_processor=proc,
                         host_processors_per_node=2)
    h51, n51 = hardware_of(row("INTEL(R) XEON(R) 6980P", ""))
    h61, n61 = hardware_of(row("Intel(R) Xeon(R) 6980P", "None"))
    assert h51.cpu and h51.key == h61.key == processor("Intel Xeon 6980P").key
    assert (n51, n61, h51.vendor) == (2, 2, "intel")
    assert h61.label == "Intel Xeon 6980P (CPU only)"


def test_submitters_systems_and_the_alias_table():
    assert submitter_key("ORACLE") == submitter_key("Oracle") == "oracle"
    assert system_key("Intel", "1-node-2S-GNR-PyTorch") == "1-node-2S-GNR_128C"
    assert system_key("Intel", "1-node-2S-GNR_128C") == "1-node-2S-GNR_128C"
    every = alias_table()
    assert set(ACCELERATOR_ALIASES) <= set(every) and all(a.reason for a in every)
    assert set(FAMILIES["mi350-series"]) == {"MI350X", "MI355X", "MI350P"}
    maxsun = accelerator("[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo")
    assert [a.name for a in alias_table([maxsun])] == ["MS-Intel Arc Pro B60 Dual 48G Turbo"]
    assert "tag in brackets" in alias_table([maxsun])[0].reason
