"""Result rows: the tier rule, accelerator counts and names, derived figures."""

from __future__ import annotations

import pytest

from tokenmark.resultrows import (
    Label,
    ResultRow,
    Tier,
    accelerator_key,
    accelerator_vendor,
    round_order,
    scale_label,
    stated_accelerator_count,
    tier_of,
)


def row(**kw) -> ResultRow:
    base = dict(round="v6.0", division="closed", submitter="X", system_id="s",
                benchmark="llama2-70b-99", scenario="Offline", value=1000.0, unit="Tokens/s",
                metric="result_tokens_per_second", label=Label.OFFICIAL)
    base.update(kw)
    return ResultRow(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("nodes", "per_node", "tier"), [
    (1, 8, Tier.SINGLE_NODE),
    (1, 16, Tier.SINGLE_NODE),      # the largest server chassis published
    (1, 72, Tier.MULTI_NODE),       # a rack described as one node
    (2, 8, Tier.MULTI_NODE),
    (18, 4, Tier.MULTI_NODE),       # v5.1 GB300 NVL72: 18 trays of 4
    (None, None, Tier.SINGLE_NODE),
    (1, 0, Tier.SINGLE_NODE),       # CPU-only submissions report 0 accelerators
])
def test_tier_rule(nodes, per_node, tier):
    assert tier_of(nodes, per_node) is tier


def test_a_name_alone_never_decides_the_tier():
    # v6.0 NVIDIA "GB300 NVL72 (4x ...)": one 4-GPU tray of the rack
    tray = row(system_id="GB300-NVL72_GB300-288GB_aarch64x4_TRT", nodes=1,
               accelerators_per_node=4, system_name="NVIDIA GB300 NVL72 (4x GB300-288GB)")
    rack = row(system_id="GB300-NVL72_GB300-288GB_aarch64x288_TRT", nodes=72,
               accelerators_per_node=4, system_name="NVIDIA GB300 NVL72 (72x GB300-288GB)")
    cluster = row(system_id="HGX-H100_H100-SXM-80GBx32_TRT", nodes=4, accelerators_per_node=8)
    assert tray.tier is Tier.SINGLE_NODE and scale_label(tray) == "single-node"
    assert rack.tier is Tier.MULTI_NODE and scale_label(rack) == "rack-scale (NVL72)"
    assert cluster.tier is Tier.MULTI_NODE and scale_label(cluster) == "multi-node"
    # NVL8 or an NVL2 platform is not a rack-scale NVLink domain
    assert scale_label(row(system_id="GB300-NVL8-CoreWeave_TRT", nodes=2,
                           accelerators_per_node=4)) == "multi-node"


def test_stated_counts_come_from_the_accelerator_name_or_notes_only():
    assert stated_accelerator_count("AMD Instinct MI355X 288GB HBM3e (x87)") == 87
    assert stated_accelerator_count(
        "AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct MI325X 256GB HBM3e (x16)") == 48
    assert stated_accelerator_count("NVIDIA H100", "ran on 15 of 16 GPUs") == 15
    assert stated_accelerator_count("NVIDIA H100", "using 7 GPUs for the run") == 7
    assert stated_accelerator_count("NVIDIA GB300") is None
    assert stated_accelerator_count("NVIDIA GB300", "GB300 TGP 1400W") is None


def test_counts_used_and_total_and_per_accelerator():
    r = row(nodes=11, accelerators_per_node=8, accelerators_stated=87, value=1042110.0)
    assert (r.total_accelerators, r.accelerators_used) == (88, 87)
    assert r.per_accelerator == pytest.approx(1042110.0 / 87)
    plain = row(nodes=1, accelerators_per_node=8, value=103480.0)
    assert plain.accelerators_used == plain.total_accelerators == 8
    assert plain.per_accelerator == 103480.0 / 8
    assert row(nodes=1, accelerators_per_node=0).per_accelerator is None  # CPU only
    assert row(unit="Latency (ms)", nodes=1, accelerators_per_node=1).per_accelerator is None
    assert not row(unit="Latency (ms)").higher_is_better


def test_names_keys_and_rounds():
    assert accelerator_key("NVIDIA H200-SXM-141GB") == accelerator_key("nvidia h200 sxm 141GB")
    assert accelerator_key("AMD Instinct MI355X 288GB HBM3e (x87)") == accelerator_key(
        "AMD Instinct MI355X 288GB HBM3e")
    assert accelerator_key("NVIDIA H200-SXM-141GB") != accelerator_key("NVIDIA H200-NVL-141GB")
    assert accelerator_vendor("AMD Instinct MI355X") == "amd"
    assert accelerator_vendor("NVIDIA GB300") == "nvidia"
    assert sorted(["v6.0", "v4.1", "v10.0", "v5.1"], key=round_order) == [
        "v4.1", "v5.1", "v6.0", "v10.0"]


def test_natural_keys():
    assert row(benchmark_folder="llama3_1-8b").key == (
        "published|v6.0|closed|X|s|llama3_1-8b|Offline")
    assert row(kind="run", run_hash="abc").key == "run|abc"
