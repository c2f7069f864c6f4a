"""The analyses on the shared CSV of published LLM results, against figures computed by hand.

Every expected number below is written as the arithmetic on values copied from
``llm_results_v4.1_v5.1.csv`` (the row is named next to it), not as the code's output.
"""

from __future__ import annotations

import pytest

from tests.results.support import csv_records
from tokenmark import analyses
from tokenmark.errors import AnalysisError
from tokenmark.resultrows import Label, Tier


def test_leaderboard_two_tiers_v51_llama2_70b_offline(published):
    lb = analyses.leaderboard(published, "llama2-70b-99", "Offline")
    assert lb.rounds == ("v5.1",)  # the newest round present, by default
    assert (lb.division, lb.availability, lb.unit) == ("closed", "available", "Tokens/s")
    # counted independently from the CSV: closed, available, v5.1, by nodes
    recs = [x for x in csv_records() if x["round"] == "v5.1" and x["division"] == "closed"
            and x["availability"] == "available" and x["benchmark"] == "llama2-70b-99"
            and x["scenario"] == "Offline"]
    assert len(lb.single_node) == sum(x["number_of_nodes"] == "1" for x in recs) == 40
    assert len(lb.multi_node) == sum(x["number_of_nodes"] != "1" for x in recs) == 7
    top = lb.single_node[0]
    # Lenovo SR680a_V3_B200SXMx8_TRT, 102909 tokens/s on 1 x 8 B200
    assert (top.rank, top.row.submitter, top.row.system_id) == (
        1, "Lenovo", "SR680a_V3_B200SXMx8_TRT")
    assert top.row.value == 102909 and top.per_accelerator == 102909 / 8
    # Lambda B200-SXM-180GBx8_TRT, 102725, second
    assert lb.single_node[1].row.value == 102725
    first, second = lb.multi_node[0], lb.multi_node[1]
    # MangoBoost's 6-node heterogeneous cluster: 169197 on 32 MI300X + 16 MI325X
    assert first.row.submitter == "MangoBoost" and first.row.value == 169197
    assert first.per_accelerator == 169197 / 48
    # Cisco HGX-H100_H100-SXM-80GBx32_TRT: 4 nodes x 8, 124879
    assert second.row.system_id == "HGX-H100_H100-SXM-80GBx32_TRT"
    assert second.per_accelerator == 124879 / 32
    assert all(e.row.tier is Tier.MULTI_NODE for e in lb.multi_node)
    assert "not MLPerf results" in lb.derived_note


def test_leaderboard_ranks_latency_ascending_and_filters(published):
    lb = analyses.leaderboard(published, "gptj-99", "SingleStream", round="v4.1")
    # v4.1 gptj-99 SingleStream p90 latency (ms): Lenovo 2xL40S 1429.24, ConnectTech Orin
    # 4079.42, NVIDIA Orin 4149.77: lower is better
    assert [e.row.value for e in lb.single_node] == [1429.24, 4079.42, 4149.77]
    assert lb.single_node[0].per_accelerator is None  # no per-chip latency
    edge = analyses.leaderboard(published, "gptj-99", "SingleStream", round="v4.1",
                                category="datacenter")
    assert edge.single_node == ()  # SingleStream is an edge scenario
    assert analyses.leaderboard(published, "llama2-70b-99", "Offline",
                                round="v4.1").rounds == ("v4.1",)
    both = analyses.leaderboard(published, "llama2-70b-99", "Offline", round="all")
    assert both.rounds == ("v4.1", "v5.1")
    none = analyses.leaderboard(published, "llama2-70b-99", "Offline",
                                labels=(Label.UNVERIFIED,))
    assert none.single_node == () and none.multi_node == ()
    preview = analyses.leaderboard(published, "llama2-70b-99", "Offline",
                                   availability="preview", round="all")
    entries = preview.single_node + preview.multi_node
    assert entries and all(e.row.availability == "preview" for e in entries)


def test_reproducibility_partners_against_the_vendor(published):
    groups = {(g.accelerator, g.accelerators): g for g in analyses.reproducibility(
        published, benchmark="llama2-70b-99", scenario="Offline", round="v5.1")}
    gb200 = groups[("NVIDIA GB200", 4)]
    # NVIDIA GB200-NVL72_GB200-186GB_aarch64x4_TRT 51736.9; Azure ND_GB200_v6 52061.6;
    # Nebius 49683.5
    assert gb200.vendor.submitter == "NVIDIA" and gb200.vendor.value == 51736.9
    spreads = {p.row.submitter: p.spread for p in gb200.partners}
    assert spreads["Azure"] == pytest.approx(52061.6 / 51736.9 - 1)       # +0.63%
    assert spreads["Nebius"] == pytest.approx(49683.5 / 51736.9 - 1)      # -3.97%
    assert gb200.within(0.04) and gb200.max_abs_spread == pytest.approx(1 - 49683.5 / 51736.9)
    mi325 = groups[("AMD Instinct MI325X 256GB HBM3e", 8)]
    # AMD's best of its two MI325X systems: 8xMI325X_2xEPYC_9575F_2 34555 (the _1: 34520.4)
    assert mi325.vendor.value == 34555 and len(mi325.vendor_rows) == 2
    quanta = next(p for p in mi325.partners if p.row.submitter == "Quanta_Cloud_Technology")
    assert quanta.spread == pytest.approx(32760.5 / 34555 - 1)           # -5.19%
    assert not mi325.within(0.04)
    mi300 = groups[("AMD Instinct MI300X 192GB HBM3", 8)]
    # AMD 27803.9 vs MangoBoost 27854.4, Dell_MangoBoost 27678.1, Dell 27325.9
    assert [round(p.spread, 6) for p in mi300.partners] == [
        round(27854.4 / 27803.9 - 1, 6), round(27678.1 / 27803.9 - 1, 6),
        round(27325.9 / 27803.9 - 1, 6)]
    # v5.1 H200 x8 has eight partners but no NVIDIA result: no baseline, no group
    assert not any("H200" in a for a, _ in groups)


def test_generation_over_generation_shows_rows_and_refuses_unequal_counts(published):
    c = analyses.compare(published, "v4.1/NVIDIA/H200-SXM-141GBx8_TRT",
                         "v5.1/NVIDIA/B200-SXM-180GBx8_TRT", benchmark="llama2-70b-99")
    ratios = {r.scenario: r for r in c.ratios}
    # H200 v4.1: Offline 31302.7, Server 29228.22; B200 v5.1: 101527, 99123.04
    assert ratios["Offline"].ratio == pytest.approx(101527 / 31302.7)     # 3.24x
    assert ratios["Server"].ratio == pytest.approx(99123.04 / 29228.22)   # 3.39x
    assert ratios["Offline"].a.system_id == "H200-SXM-141GBx8_TRT"
    assert ratios["Offline"].b.round == "v5.1" and not c.normalised
    assert [r.scenario for r in c.only_b] == ["Interactive"]
    with pytest.raises(AnalysisError, match="uses 4 accelerators and .* uses 8"):
        analyses.compare(published, "v5.1/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x4_TRT",
                         "v5.1/NVIDIA/B200-SXM-180GBx8_TRT")
    n = analyses.compare(published, "v5.1/NVIDIA/GB200-NVL72_GB200-186GB_aarch64x4_TRT",
                         "v5.1/NVIDIA/B200-SXM-180GBx8_TRT", benchmark="llama2-70b-99",
                         scenario="Offline", normalise=True)
    # per accelerator: B200 101527 / 8 against GB200 51736.9 / 4
    assert n.ratios[0].ratio == pytest.approx((101527 / 8) / (51736.9 / 4))  # 0.981x
    assert n.ratios[0].a_value == 51736.9 / 4 and n.normalised
    with pytest.raises(AnalysisError, match="ambiguous"):
        analyses.compare(published, "B200-SXM-180GBx8_TRT", "v5.1/NVIDIA/B200-SXM-180GBx8_TRT")
    with pytest.raises(AnalysisError, match="no results"):
        analyses.compare(published, "nope", "v5.1/NVIDIA/B200-SXM-180GBx8_TRT")


def test_scaling_efficiency(published):
    # AMD's own 8 GPUs and AMD_MangoBoost's clusters: two submitters, refused by default
    with pytest.raises(AnalysisError, match=r"2 submitters \(AMD, AMD_MangoBoost\)"):
        analyses.scaling_efficiency(published, "llama2-70b-99", "Offline", accelerator="MI355X",
                         division="open")
    s = analyses.scaling_efficiency(published, "llama2-70b-99", "Offline", accelerator="MI355X",
                         division="open", submitter=analyses.ANY)
    assert s.submitters == ("AMD", "AMD_MangoBoost")
    # open v5.1: AMD 8xMI355X 93045.8; AMD_MangoBoost 4 x 8 350820 and 8 x 8 648248
    assert s.base.accelerators == 8 and s.base.row.value == 93045.8
    eff = {p.accelerators: p.efficiency for p in s.points}
    assert eff[8] == 1.0
    assert eff[32] == pytest.approx((350820 / 32) / (93045.8 / 8))     # 0.943
    assert eff[64] == pytest.approx((648248 / 64) / (93045.8 / 8))     # 0.871
    j = analyses.scaling_efficiency(published, "llama2-70b-99", "Offline",
                                    accelerator="H100-SXM-80GB", submitter="JuniperNetworks",
                                    round="v4.1")
    # JuniperNetworks v4.1: 2 x 8 H100 41672.4, 4 x 8 82749.6
    assert [p.accelerators for p in j.points] == [16, 32]
    assert j.points[1].efficiency == pytest.approx((82749.6 / 32) / (41672.4 / 16))  # 0.993
    with pytest.raises(AnalysisError, match="results in v4.1, v5.1"):
        analyses.scaling_efficiency(published, "llama2-70b-99", "Offline",
                                    accelerator="H100-SXM-80GB")
    with pytest.raises(AnalysisError, match="latency"):
        analyses.scaling_efficiency(published, "gptj-99", "SingleStream", accelerator="Orin",
                         round="v4.1")
    with pytest.raises(AnalysisError, match="several models"):
        analyses.scaling_efficiency(published, "llama2-70b-99", "Offline", accelerator="H200",
                         round="v4.1")


def test_software_gains_same_hardware_across_rounds(published):
    series = analyses.software_gains(published, "llama2-70b-99", "Offline",
                                     accelerator="NVIDIA H200-SXM-141GB", accelerators=8)
    by_key = {s.accelerator: s for s in series}
    h200 = by_key["NVIDIA H200-SXM-141GB"]  # the "-CTS" variant ran in v4.1 only: no series
    assert len(series) == 1
    # best 8 x H200-SXM per round: v4.1 Dell XE9680_H200_SXM_141GBx8_TRT 32124.3,
    # v5.1 Dell XE9680_H200_SXM_141GBx8_TRT 35316.7
    assert [(p.round, p.row.value) for p in h200.points] == [("v4.1", 32124.3),
                                                             ("v5.1", 35316.7)]
    assert h200.points[1].gain == pytest.approx(35316.7 / 32124.3)       # 1.099x
    dell = analyses.software_gains(published, "llama2-70b-99", "Offline",
                                   accelerator="H200-SXM-141GB", accelerators=8,
                                   submitter="Dell")
    assert dell[0].points[1].gain == pytest.approx(35316.7 / 32124.3)
    assert analyses.software_gains(published, "llama2-70b-99", "Offline",
                                   accelerator="H200-SXM-141GB", submitter="NVIDIA") == []
