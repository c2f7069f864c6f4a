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
    assert len(found.rows) == 156 and {r.round for r in found.rows} == {"v5.0"}
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
    assert len(rows) == 156
    refused = [r for r in rows if not r.eligible]
    assert len(refused) == 17
    assert all(r.scenario == "Offline" and "interactive benchmark" in r.reason
               for r in refused)
    inter = [r for r in rows if r.scenario == "Interactive"]
    assert inter and all(r.eligible and r.benchmark in ("llama2-70b-99", "llama2-70b-99.9")
                         for r in inter)
    gb = [r for r in rows if r.accelerator == "GB200"]
    assert gb and all(r.total == 72 for r in gb)


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
