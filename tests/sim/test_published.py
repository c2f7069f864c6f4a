"""The published-row reader on every entry of the three official summary tables and the
results CSV: how many rows are accepted and refused, and why; every name spelling the
tables use; heterogeneous systems refused; the precision the rows state."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.paths import RESULTS_CSV, SHARED_DATA
from tokenmark.perfmodel import Deployment, Precision, find_accelerator, find_model
from tokenmark.sim.published import (
    canonical_accelerator,
    read_packaged,
    read_published,
    read_rounds,
    read_summary,
    stated_precision,
)

SUMMARIES = SHARED_DATA / "mlperf" / "summaries"
TABLES = {"v5.1": SUMMARIES / "v5.1_summary_results.json",
          "v6.0": SUMMARIES / "v6.0_summary_results.json",
          "v6.1": SUMMARIES / "v6.1_summary.json"}


def _reasons(path: Path) -> Counter[str]:
    """Accepted, or the first reason for refusing (the first of ``;``-joined ones)."""
    rows = read_published(path) if path.suffix == ".csv" else read_summary(path)
    return Counter("accepted" if r.eligible else r.reason.split(";")[0] for r in rows)


# Counted on the files as vendored (their README gives sizes and SHA-256): every entry
# is accepted or refused for exactly one first reason.
@pytest.mark.parametrize("path, total, accepted, refused", [
    (RESULTS_CSV, 753, 664, {"open division": 51, "CPU-only": 26, "heterogeneous": 8,
                             "SingleStream": 4}),
    (TABLES["v5.1"], 1448, 363, {"not an LLM": 1032, "open division": 32, "CPU-only": 12,
                                 "heterogeneous": 8, "SingleStream": 1}),
    (TABLES["v6.0"], 520, 372, {"not an LLM": 119, "open division": 13, "CPU-only": 12,
                                "heterogeneous": 4}),
    (TABLES["v6.1"], 492, 363, {"not an LLM": 84, "open division": 12, "CPU-only": 18,
                                "not in accelerators.csv": 2, "heterogeneous": 10,
                                "no row in models.csv": 3}),
])
def test_every_entry_is_accepted_or_refused_with_a_reason(path, total, accepted, refused):
    counts = _reasons(path)
    assert sum(counts.values()) == total
    assert counts["accepted"] == accepted
    for why, n in refused.items():
        assert sum(v for k, v in counts.items() if why in k) == n, (why, counts)
    assert sum(counts.values()) - accepted == sum(refused.values())


@pytest.mark.parametrize("name, short", [
    ("NVIDIA Vera Rubin", "VR200"), ("NVIDIA VR200", "VR200"),
    ("Intel(R) Arc Pro(R) B60", "Arc Pro B60"),
    ("[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo", "Arc Pro B60"),
    ("MS-Intel Arc Pro B60 Dual 48G Turbo", "Arc Pro B60"),
    ("NVIDIA GB300", "GB300"), ("NVIDIA GB200", "GB200"),
    ("Nvidia B300-SXM-270GB", "B300"), ("NVIDIA B300-SXM-270GB", "B300"),
    ("Virtualized NVIDIA H200-SXM-141GB", "H200"), ("NVIDIA H200-SXM-141GB-CTS", "H200"),
    ("NVIDIA RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server"),
    ("AMD Instinct MI355X 288GB HBM3e (x87)", "MI355X"),
    ("AMD Instinct MI355X 288GB HBM3e (Power Cap 1000 W)", "MI350X"),
    ("AMD MI300X-NPS1-SPX-192GB-750W", "MI300X"), ("AMD Instinct MI350X", "MI350X"),
])
def test_every_spelling_of_a_known_accelerator(name, short):
    assert canonical_accelerator(name) == (short, "")


@pytest.mark.parametrize("name", [
    "AMD Instinct MI300X 192GB HBM3 (x8) and AMD Instinct MI325X 256GB HBM3e (x8) and "
    "AMD Instinct MI355X 288GB HBM3e (x8)",
    "NVIDIA H200-SXM-141GB + AMD Instinct MI350X 288GB HBM3e",
    "AMD Instinct MI300X 192GB HBM3 (x32), AMD Instinct MI325X 256GB HBM3e (x16)",
    "AMD Instinct MI300X 192GB HBM3 (x2x8) and AMD Instinct MI355X 288GB HBM3e (x2x8)",
])
def test_heterogeneous_systems_are_refused_with_a_reason(name):
    short, why = canonical_accelerator(name)
    assert short is None
    assert why.startswith("heterogeneous system (more than one accelerator type: ")


def test_rows_of_the_new_benchmarks_and_parts_are_read():
    rows = {rnd: read_summary(p) for rnd, p in TABLES.items()}
    ok = [r for rs in rows.values() for r in rs if r.eligible]
    assert {"gpt-oss-120b", "qwen3-vl-235b-a22b", "deepseek-r1"} <= {r.benchmark for r in ok}
    vr = [r for r in ok if r.accelerator == "VR200"]
    # NVIDIA's Vera Rubin NVL72 (18 x 4) and Nebius's half rack "VR200 NVL72 (36x ...)"
    assert len(vr) == 8 and sorted({r.total for r in vr}) == [36, 72]
    # "TRTLLM-rubin, vLLM-CentML": the stack named first
    assert {r.stack for r in vr} == {"trtllm"}
    qwen = [r for r in ok if r.benchmark == "qwen3-vl-235b-a22b"]
    assert {r.metric for r in qwen} == {"samples/s", "queries/s"}
    amd87 = next(r for r in ok if "(x87)" in r.accelerator_name)
    assert amd87.total == 87  # the count the name states, not nodes x per node (88)
    dual = next(r for r in ok if "Dual" in r.accelerator_name and r.round == "v6.0")
    assert dual.gpus_per_listed == 2 and dual.accelerators_used == 8
    gb = next(r for r in ok if r.accelerator == "GB300" and r.nodes == 72)
    assert gb.accelerators_used == 288  # 72 nodes x 4
    # the stack from the table's software column
    assert next(r for r in ok if "vLLM" in r.software).stack == "vllm"
    assert next(r for r in ok if "TensorRT" in r.software).stack == "trtllm"


def test_the_precision_a_row_states():
    assert stated_precision("fp4") == "fp4"
    assert stated_precision("NVFP4 weights and activations; FP8 KV cache") == "fp4"
    # a checkpoint's dtypes: U8 (packed E2M1 pairs) beside F8_E4M3 block scales is NVFP4
    assert stated_precision("BF16/F32/F8_E4M3/U8") == "fp4"
    assert stated_precision("BF16/F8_E4M3/U8") == "fp4"
    assert stated_precision("BF16/F32/F8_E4M3") == "fp8"  # an FP8 checkpoint
    nebius = [r for r in read_summary(TABLES["v6.0"])
              if r.submitter == "Nebius" and r.accelerator == "B300"
              and r.benchmark == "qwen3-vl-235b-a22b"]
    assert len(nebius) == 2 and {r.precision for r in nebius} == {"fp4"}
    assert stated_precision("INT8") == "int8" and stated_precision("UINT4") == "int4"
    assert stated_precision("fp32") is None and stated_precision("UNSET") is None
    rows = [r for r in read_summary(TABLES["v6.0"]) if r.eligible]
    b60 = next(r for r in rows if r.accelerator == "Arc Pro B60" and r.precision == "int8")
    # Arc Pro B60 has no FP8 tensor figure but an INT8 one: INT8 weights run INT8 there
    d = Deployment(find_accelerator("Arc Pro B60"), find_model(b60.benchmark or ""),
                   Precision.parse(b60.precision or ""))
    assert d.compute_dtype is Precision.INT8 and d.precision.bytes == 1
    # FP8 where the accelerator has it: the rows' stated FP8 on Hopper and CDNA 3
    h200 = next(r for r in rows if r.accelerator == "H200" and r.precision == "fp8")
    assert Deployment(find_accelerator("H200"), find_model(h200.benchmark or ""),
                      Precision.FP8).compute_dtype is Precision.FP8


def test_the_csv_and_the_official_table_agree_on_v51():
    csv_rows = [r for r in read_published(RESULTS_CSV) if r.round == "v5.1" and r.eligible]
    table = {(r.submitter, r.system_id, r.benchmark, r.scenario): r.result
             for r in read_summary(TABLES["v5.1"]) if r.eligible}
    assert len(csv_rows) == len(table) == 363
    for r in csv_rows:  # the table prints 6 significant digits, the CSV 2 decimals
        assert table[(r.submitter, r.system_id, r.benchmark, r.scenario)] == pytest.approx(
            r.result, rel=1e-5, abs=0.006)
    # read_rounds takes the table for v5.1 and the CSV only for v4.1
    rounds = read_rounds(RESULTS_CSV, TABLES.values())
    assert {r.source for r in rounds if r.round == "v5.1"} == {TABLES["v5.1"].name}
    assert {r.source for r in rounds if r.round == "v4.1"} == {RESULTS_CSV.name}


def test_the_packaged_table_reads_as_the_official_tables():
    # data/published.csv.gz (the results database's table, made from the official
    # tables and the result trees): the same eligible rows per round as the JSON tables,
    # and v4.1 as the results CSV (301 + 363 = the CSV's 664); v5.0 (no official table
    # at hand: bench/data/mlperf_v5.0) 453 of its 504 rows, the 51 others the Offline
    # runs in the interactive benchmark's folders (39) and CPU-only systems (12)
    rows = read_packaged()
    ok = Counter(r.round for r in rows if r.eligible)
    assert ok == {"v4.1": 301, "v5.0": 453, "v5.1": 363, "v6.0": 372, "v6.1": 363}
    for rnd, path in TABLES.items():
        table = {(r.submitter, r.system_id, r.benchmark, r.scenario): r.result
                 for r in read_summary(path) if r.eligible}
        mine = {(r.submitter, r.system_id, r.benchmark, r.scenario): r.result
                for r in rows if r.eligible and r.round == rnd}
        assert mine.keys() == table.keys()
        for k, v in mine.items():
            assert v == pytest.approx(table[k], rel=1e-6)
