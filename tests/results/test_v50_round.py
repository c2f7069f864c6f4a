"""The MLPerf Inference v5.0 round in the packaged table of published results.

No official v5.0 table was at hand; ``bench/data/mlperf_v5.0/v5.0_summary.csv`` is the
checker's ``summary.csv`` shape transcribed from MLCommons' per-system results pages
(its README). Three LoadGen summaries of the round are kept byte for byte beside it
(``logs/``): the rows the table holds must equal what LoadGen printed, an independent
check of the transcription; and the interactive benchmark's Server run, whose summary
shows the interactive latency limits (TTFT 450 ms, TPOT 40 ms), must be read as the
``Interactive`` scenario v5.1 renamed it to.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tokenmark.importer import scan
from tokenmark.importer.checker import result_scenario
from tokenmark.importer.packaged import load, packaged_path
from tokenmark.mlperf.mllog import parse_summary
from tokenmark.mlperf.presets import implied_scenario
from tokenmark.resultrows import round_order
from tokenmark.sim.published import read_packaged

V50 = Path(__file__).resolve().parents[2] / "bench" / "data" / "mlperf_v5.0"
LOGS = V50 / "logs" / "closed" / "NVIDIA" / "results"


def _v50_rows():
    return [r for r in load(packaged_path()).select({"round": "v5.0"})]


@pytest.mark.parametrize("system, folder, scenario, benchmark, table_scenario", [
    ("DGX-H100_H100-SXM-80GBx8_TRT", "llama2-70b-99", "Offline", "llama2-70b-99", "Offline"),
    ("GB200-NVL72_GB200-186GB_aarch64x72_TRT_Triton", "llama3_1-405b", "Server",
     "llama3.1-405b", "Server"),
    ("B200-SXM-180GBx8_TRT", "llama2-70b-interactive-99", "Server", "llama2-70b-99",
     "Interactive"),
])
def test_packaged_v50_rows_equal_what_loadgen_printed(system, folder, scenario, benchmark,
                                                      table_scenario):
    log = parse_summary((LOGS / system / folder / scenario / "performance" / "run_1" /
                         "mlperf_log_summary.txt").read_text(encoding="utf-8"))
    printed = log.headline.get("tokens_per_second",
                               log.headline.get("completed_tokens_per_second"))
    assert printed is not None
    [row] = [r for r in _v50_rows() if r.system_id == system and r.benchmark_folder == folder
             and r.scenario == table_scenario]
    assert row.benchmark == benchmark and row.unit == "Tokens/s"
    # the page prints the checker's figure, six significant digits (59409.25 -> 59409.3)
    sixth = 10 ** (math.floor(math.log10(printed)) - 5)
    assert abs(row.value - printed) <= sixth


def test_the_interactive_run_ran_under_the_interactive_limits():
    text = (LOGS / "B200-SXM-180GBx8_TRT" / "llama2-70b-interactive-99" / "Server" /
            "performance" / "run_1" / "mlperf_log_summary.txt").read_text(encoding="utf-8")
    assert "ttft_latency (ns): 450000000" in text and "tpot_latency (ns): 40000000" in text
    assert "Scenario : Server" in text


@pytest.mark.parametrize("folder, scenario, want", [
    ("llama2-70b-interactive-99", "Server", "Interactive"),
    ("llama2-70b-interactive-99.9", "Server", "Interactive"),
    ("llama2-70b-interactive-99", "Offline", "Offline"),
    ("llama2-70b-99", "Server", "Server"),
    ("llama3_1-405b", "Server", "Server"),
    ("resnet50", "Server", "Server"),
])
def test_a_folder_name_that_implies_interactive_makes_its_server_run_interactive(
        folder, scenario, want):
    assert result_scenario(folder, scenario, "v5.0") == want


def test_implied_scenario_comes_from_the_presets_aliases():
    assert implied_scenario("llama2-70b-interactive-99") == "Interactive"
    assert implied_scenario("llama2-70b-99") is None  # a benchmark's own name
    assert implied_scenario("no-such-benchmark") is None


def test_the_transcribed_table_reads_as_the_packaged_rows():
    found = scan(V50 / "v5.0_summary.csv")
    assert not found.errors
    assert len(found.rows) == 504 and {r.round for r in found.rows} == {"v5.0"}
    packaged = {r.key: r.value for r in _v50_rows()}
    assert {r.key: r.value for r in found.rows} == packaged
    scen = {(r.benchmark_folder, r.scenario) for r in found.rows}
    assert ("llama2-70b-interactive-99", "Interactive") in scen
    assert ("llama2-70b-interactive-99", "Server") not in scen
    gb200 = [r for r in found.rows if r.system_id.startswith("GB200-NVL72")]
    assert gb200 and all(r.nodes == 18 and r.accelerators_per_node == 4 for r in gb200)


def test_v50_sorts_between_v41_and_v51_and_the_simulator_reads_it():
    assert round_order("v4.1") < round_order("v5.0") < round_order("v5.1")
    rows = [r for r in read_packaged() if r.round == "v5.0"]
    assert len(rows) == 504
    refused = [r for r in rows if not r.eligible]
    assert len(refused) == 51
    offline = [r for r in refused if "interactive benchmark" in r.reason]
    cpu = [r for r in refused if "CPU-only" in r.reason]
    assert len(offline) == 39 and all(r.scenario == "Offline" for r in offline)
    # the five Xeon 6 servers' gptj runs: no accelerator to model
    assert len(cpu) == 12 and {r.benchmark for r in cpu} == {"gptj-99", "gptj-99.9"}
    assert {r.submitter for r in cpu} == {"Intel", "Dell", "Cisco", "Supermicro",
                                          "Quanta_Cloud_Technology"}
    inter = [r for r in rows if r.scenario == "Interactive"]
    assert inter and all(r.eligible and r.benchmark in ("llama2-70b-99", "llama2-70b-99.9")
                         for r in inter)
    gb = {r.system_id: r.total for r in rows if r.accelerator == "GB200"}
    # NVIDIA's NVL72 rack (18 nodes of 4) and CoreWeave's one 4-GPU GB200 node
    assert gb == {"GB200-NVL72_GB200-186GB_aarch64x72_TRT_Triton": 72, "5.0-0076": 4}


def test_a_v50_interactive_server_folder_in_a_result_tree_is_read_as_interactive(tmp_path):
    # the v4.1 sample result (LoadGen's Server logs) placed where v5.0 kept the
    # interactive benchmark: the tree reader names it Interactive, as the table reader does
    import shutil

    from tests.paths import SAMPLES

    sub = SAMPLES / "v4.1" / "closed" / "AMD"
    system = "8xMI300X_2xEPYC-9374F"
    root = tmp_path / "v5.0" / "closed" / "AMD"
    shutil.copytree(sub / "systems", root / "systems")
    shutil.copytree(sub / "results" / system / "llama2-70b-99" / "Server",
                    root / "results" / system / "llama2-70b-interactive-99" / "Server")
    found = scan(tmp_path, round="v5.0")
    assert not found.errors, found.errors
    [row] = found.rows
    assert (row.benchmark, row.benchmark_folder, row.scenario) == (
        "llama2-70b-99", "llama2-70b-interactive-99", "Interactive")
    assert row.value == pytest.approx(21028.2)  # the detail log's figure (6 digits)


# Counted on pages.txt (62 systems: 60 pages and CoreWeave's 2 from the results-table
# export; 252 R lines, 504 results): every (benchmark,
# scenario) of the packaged v5.0 rows. Interactive is v5.0's llama2-70b-interactive-*
# Server run; that folder's Offline run counts with the benchmark's own Offline rows.
@pytest.mark.parametrize("benchmark, scenario, n", [
    ("llama2-70b-99", "Offline", 67), ("llama2-70b-99", "Server", 47),
    ("llama2-70b-99", "Interactive", 20),
    ("llama2-70b-99.9", "Offline", 63), ("llama2-70b-99.9", "Server", 44),
    ("llama2-70b-99.9", "Interactive", 19),
    ("llama3.1-405b", "Offline", 15), ("llama3.1-405b", "Server", 15),
    ("mixtral-8x7b", "Offline", 27), ("mixtral-8x7b", "Server", 27),
    ("gptj-99", "Offline", 40), ("gptj-99", "Server", 40),
    ("gptj-99.9", "Offline", 40), ("gptj-99.9", "Server", 40),
])
def test_v50_rows_by_benchmark_and_scenario(benchmark, scenario, n):
    rows = [r for r in _v50_rows() if r.benchmark == benchmark and r.scenario == scenario]
    assert len(rows) == n


# Figures as the MLCommons results pages print them (closed/<submitter>/results/<system>/
# README.md of ntuhpc/mlperf_inference_results_v5.0, commit 08990aab); the first three
# are also what LoadGen printed in that mirror's mlperf_log_summary.txt (commit cf354115).
@pytest.mark.parametrize("submitter, system, folder, scenario, value", [
    ("Quanta_Cloud_Technology", "D74U_7U_H100_SXM_80GBx8_TRT", "llama3_1-405b", "Server",
     261.98),
    ("HPE", "GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1_TRT", "mixtral-8x7b",
     "Offline", 8324.43),
    ("Dell", "XE7745_L40Sx8_TRT", "llama2-70b-99", "Server", 3201.13),
    ("Fujitsu", "H100-NVL-94GBx8_TRT", "llama2-70b-interactive-99", "Interactive", 11041.5),
    ("ASUSTeK", "ESC8000_H200_NVLx8_NVLink_TRT", "llama2-70b-99", "Offline", 27765.3),
    ("Supermicro", "AS_4125GS_TNHR2_LCC_H200_SXM_141GBX8_TRT", "llama3_1-405b", "Offline",
     551.22),
    ("Quanta_Cloud_Technology", "D54U_3U_H100_PCIe_80GBx4_TRT", "mixtral-8x7b", "Offline",
     15843.3),
    ("Intel", "1-node-2S-GNR_128C", "gptj-99", "Offline", 516.77),
    # CoreWeave's systems, from MLCommons' results-table export (no page in the mirror)
    ("coreweave", "5.0-0076", "llama3_1-405b", "Server", 522.12),
    ("coreweave", "5.0-0077", "llama2-70b-99", "Offline", 34403.5),
])
def test_spot_figures_of_the_second_reading(submitter, system, folder, scenario, value):
    [row] = [r for r in _v50_rows() if r.submitter == submitter and r.system_id == system
             and r.benchmark_folder == folder and r.scenario == scenario]
    assert row.value == pytest.approx(value, abs=0.005)


def test_the_accelerators_of_the_second_reading_are_in_the_simulator_tables():
    # H100 NVL / PCIe, H200 NVL, GH200 (96 and 144 GB), L40S and the virtualised H100
    # all name rows of accelerators.csv (no new table rows were needed)
    rows = [r for r in read_packaged() if r.round == "v5.0" and r.accelerator_name != "N/A"]
    assert all(r.accelerator for r in rows)
    seen = {r.accelerator for r in rows}
    assert {"H100 NVL", "H100 PCIe", "H200 NVL", "GH200 144GB", "GH200 96GB",
            "L40S"} <= seen
    virt = [r for r in rows if r.accelerator_name.startswith("Virtualized")]
    assert virt and all(r.accelerator == "H100" and r.eligible for r in virt)
