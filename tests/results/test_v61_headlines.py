"""The MLPerf Inference v6.1 headlines, each one command, against the official table.

Every expected figure is arithmetic on values copied from
``tests/data/shared/mlperf/summaries/v6.1_summary.json`` (the entry is named next to it),
not the code's output. The commands run on a fresh install: no database, the packaged
table of published results. ``test_the_readme_shows_real_output`` runs every command of
docs/v6.1.md ("Reading MLPerf Inference v6.1 with tokenmark") and compares its output;
after a deliberate change, rewrite the section's outputs with::

    python -m tests.results.test_v61_headlines --write
"""

from __future__ import annotations

import re
import shlex
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenmark.analyses import ANY
from tokenmark.api import results as results_api
from tokenmark.cli import app
from tokenmark.errors import AnalysisError

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "v6.1.md"
SECTION = "## Reading MLPerf Inference v6.1 with tokenmark"
WIDTH = "200"
_BLOCK = re.compile(r"```console\n\$ (tokenmark [^\n]*)\n(.*?)```", re.S)


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENMARK_DB", str(tmp_path / "none.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(results_api.PUBLISHED_ENV, raising=False)


def test_vera_rubin_nvl72_against_gb300_nvl72():
    c = results_api.compare_accelerators("GB300", "Vera Rubin", round="v6.1")
    pairs = {(p.benchmark, p.scenario): p for p in c.pairs}
    # NVIDIA VR-NVL72_VR-288GB_aarch64x72_TRT (preview) against NVIDIA
    # GB300-NVL72_GB300-288GB_aarch64x72_TRT (available), 72 accelerators each
    assert set(pairs) == {(b, s) for b in ("deepseek-r1", "qwen3-vl-235b-a22b")
                          for s in ("Interactive", "Offline", "Server")}
    q = pairs[("qwen3-vl-235b-a22b", "Interactive")]
    assert q.ratio == 1306.6078446835 / 349.2921988474                 # 3.7407x
    assert round(q.ratio, 2) == 3.74
    d = pairs[("deepseek-r1", "Interactive")]
    assert d.ratio == 652750.1447708113 / 253506.0                       # 2.5749x
    assert round(d.ratio, 2) == 2.57
    assert pairs[("deepseek-r1", "Offline")].ratio == 1183326.8540322022 / 679740.0  # 1.741x
    for p in c.pairs:
        assert p.submitter == "NVIDIA" and p.a.accelerators_used == p.b.accelerators_used == 72
        assert (p.a.availability, p.b.availability) == ("available", "preview")
        assert p.a.system_id == "GB300-NVL72_GB300-288GB_aarch64x72_TRT"
        assert p.b.system_id == "VR-NVL72_VR-288GB_aarch64x72_TRT"
    # across submitters the best of each is paired: GB300's best deepseek-r1 Offline at 72
    # is Nebius's 689,961, so the ratio falls to 1183326.85 / 689961 = 1.715x
    anyone = results_api.compare_accelerators("GB300", "Vera Rubin", round="v6.1",
                                              benchmark="deepseek-r1", scenario="Offline",
                                              same_submitter=False)
    [p] = anyone.pairs
    assert (p.a.submitter, p.ratio) == ("Nebius", 1183326.8540322022 / 689961.0)


def test_deepseek_r1_on_gb300_nvl72_from_72_to_288():
    off = results_api.scaling_efficiency("deepseek-r1", "Offline", accelerator="GB300",
                              submitter="NVIDIA", round="v6.1", base=72)
    by = {p.accelerators: p for p in off.points}
    # NVIDIA x288 2,705,130 against x72 679,740: 2705130 / (4 x 679740) = 0.99491
    assert by[288].efficiency == pytest.approx(2705130 / (4 * 679740))
    assert round(by[288].efficiency * 100, 1) == 99.5
    assert off.base.row.system_id == "GB300-NVL72_GB300-288GB_aarch64x72_TRT"
    srv = results_api.scaling_efficiency("deepseek-r1", "Server", accelerator="GB300",
                              submitter="NVIDIA", round="v6.1", base=72)
    s288 = next(p for p in srv.points if p.accelerators == 288)
    # 2,028,030 / (4 x 596,944) = 0.84934
    assert s288.efficiency == pytest.approx(2028030 / (4 * 596944))
    assert round(s288.efficiency * 100, 1) == 84.9
    # by default one submitter: GB300 deepseek-r1 Offline of v6.1 has four at 72
    # (NVIDIA, Azure, Nebius, Oracle), and a mix is refused
    with pytest.raises(AnalysisError, match="submitters .*Azure, NVIDIA, Nebius, Oracle"):
        results_api.scaling_efficiency("deepseek-r1", "Offline", accelerator="GB300", round="v6.1")
    mixed = results_api.scaling_efficiency("deepseek-r1", "Offline", accelerator="GB300",
                                round="v6.1", submitter=ANY, base=72)
    assert mixed.submitters == ("Azure", "NVIDIA", "Nebius", "Oracle")


def test_the_record_on_amd_hardware():
    t = results_api.top(accelerator="MI350-series", round="v6.1", limit=3)
    first = t.entries[0]
    # Crusoe 512xMI355X_Crusoe_GPT: 64 nodes x 8 MI355X, gpt-oss-120b Offline 5,749,440
    assert (first.row.submitter, first.row.system_id) == ("Crusoe", "512xMI355X_Crusoe_GPT")
    assert (first.row.benchmark, first.row.scenario, first.row.value) == (
        "gpt-oss-120b", "Offline", 5749440.0)
    assert (first.accelerators, first.row.nodes) == (512, 64)
    assert first.per_accelerator == 5749440.0 / 512                     # 11,229.4
    # the heterogeneous systems with MI350-series parts are counted, not ranked: v6.1
    # Cisco H200 + MI350X (8 LLM entries) and Dell_MangoBoost MI300X + MI355X (2)
    assert t.left_out == (("heterogeneous, not only MI350-series", 10),)
    amd = results_api.top(vendor="amd", round="v6.1", limit=1)
    assert amd.entries[0].row.system_id == "512xMI355X_Crusoe_GPT"
    assert ("heterogeneous, not only amd", 8) in amd.left_out  # the Cisco H200 + MI350X
    crusoe = results_api.top(submitter="Crusoe", round="all")
    # Crusoe's token-rate results of every round: the two 512-GPU systems, then 4 GB200
    # (gpt-oss-120b 50,912.9 and 50,613.5); its qwen3-vl results are in other units
    assert [e.row.value for e in crusoe.entries] == [5749440.0, 5392930.0, 2901950.0,
                                                     2405310.0, 50912.9, 50613.5]
    assert crusoe.left_out == (("in Queries/s, not Tokens/s", 4),
                               ("in Samples/s, not Tokens/s", 2))


def test_amds_partners_on_the_same_amd_platforms():
    groups = {(g.benchmark, g.scenario, g.accelerators): g
              for g in results_api.reproducibility(round="v6.1", vendor="amd")}
    g = groups[("llama2-70b-99.9", "Offline", 8)]
    # AMD 8xMI355X_2xEPYC_9575F 106,517; MiTAC 104,904; Dell 103,792; HPE 102,991;
    # Supermicro 102,243; Oracle 101,553
    assert (g.vendor.submitter, g.vendor.value) == ("AMD", 106517.0)
    spread = {p.row.submitter: p.spread for p in g.partners}
    assert spread == pytest.approx({
        "MiTAC": 104904 / 106517 - 1, "Dell": 103792 / 106517 - 1,    # -1.51%, -2.56%
        "HPE": 102991 / 106517 - 1, "Supermicro": 102243 / 106517 - 1,  # -3.31%, -4.01%
        "Oracle": 101553 / 106517 - 1})                                 # -4.66%
    within = {p.row.submitter: abs(p.spread) <= 0.04 for p in g.partners}
    assert within == {"MiTAC": True, "Dell": True, "HPE": True, "Supermicro": False,
                      "Oracle": False}
    # the Cisco H200 + MI350X system is no partner of AMD's MI350X results
    assert not any(p.row.submitter == "Cisco" for g in groups.values() for p in g.partners)


def test_intels_gains_from_software_alone():
    series = {(s.benchmark, s.scenario, s.accelerator): s for s in
              results_api.software_gains("llama3.1-8b", submitter="Intel")}
    xeon = series[("llama3.1-8b", "Offline", "Intel Xeon 6980P (CPU only)")]
    # 1-node-2S-GNR_128C: v5.1 1,232.89, v6.0 1,229.56, v6.1 1,916.74 tokens/s
    assert [(p.round, p.row.value) for p in xeon.points] == [
        ("v5.1", 1232.89), ("v6.0", 1229.56), ("v6.1", 1916.74)]
    assert xeon.points[-1].gain == 1916.74 / 1232.89                     # 1.555x
    assert xeon.accelerators == 2                                         # sockets
    srv = series[("llama3.1-8b", "Server", "Intel Xeon 6980P (CPU only)")]
    assert srv.points[-1].gain == 1139.51 / 450.836                      # 2.528x
    b60 = series[("llama3.1-8b", "Offline", "MS-Intel Arc Pro B60 Dual 48G Turbo")]
    # "[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo" (v5.1) and its v6.0 name, 4 each
    assert [p.row.accelerator_model for p in b60.points] == [
        "[MAXSUN] MS-Intel Arc Pro B60 Dual 48G Turbo", "MS-Intel Arc Pro B60 Dual 48G Turbo"]
    assert b60.points[-1].gain == 6762.3 / 6472.37                       # 1.045x
    assert any("[MAXSUN]" in a.spelling for a in b60.aliases)


def test_the_single_node_and_rack_scale_leaderboards():
    ds = results_api.leaderboard("deepseek-r1", "Offline", round="v6.1")
    # single node: GigaComputing G894-AD3-AAX7 (8 x B300) 72,445.1 leads; rack scale:
    # Crusoe's 512 x MI355X 2,901,950 first, NVIDIA's 288 x GB300 2,705,130 second
    assert ds.multi_node[0].row.value == 2901950.0
    assert ds.multi_node[0].row.submitter == "Crusoe"
    assert ds.multi_node[1].row.value == 2705130.0
    assert (ds.single_node[0].row.submitter, ds.single_node[0].row.value) == (
        "GigaComputing", 72445.1)
    assert all(e.row.tier.value == "single-node" for e in ds.single_node)
    qwen = results_api.leaderboard("qwen3-vl-235b-a22b", "Offline", round="v6.1")
    # rack scale, available: CoreWeave x72 1,135.25 < NVIDIA x72 1,304.99 samples/s
    assert qwen.unit == "Samples/s"
    assert qwen.multi_node[0].row.value == 1304.9852625797
    preview = results_api.leaderboard("qwen3-vl-235b-a22b", "Offline", round="v6.1",
                                      availability=None)
    assert preview.multi_node[0].row.value == 2392.6979194588  # Vera Rubin NVL72


def test_what_a_user_hit_gives_clear_answers():
    runner = CliRunner()
    env = {"COLUMNS": WIDTH}
    none = runner.invoke(app, ["software-gains", "llama3.1-8b", "Offline", "--submitter",
                               "Nobody"], env=env)
    assert none.exit_code == 2 and "no hardware has results" in none.output
    sizes = runner.invoke(app, ["compare", "v6.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT",
                                "v6.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x288_TRT"], env=env)
    assert sizes.exit_code == 2 and "--normalise" in sizes.output
    assert "normalise=True" not in sizes.output
    hetero = runner.invoke(app, ["leaderboard", "llama2-70b-99.9", "Offline", "--round",
                                 "v6.1"], env={"COLUMNS": "400"})
    assert hetero.exit_code == 0
    assert "NVIDIA H200-SXM-141GB + AMD Instinct MI350X 288GB HBM3e (heterogeneous)" in (
        hetero.output)


def _blocks(text: str) -> list[tuple[str, str]]:
    start = text.index(SECTION)
    end = text.index("\n## ", start + 1)
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(text[start:end])]


def _run(command: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"COLUMNS": WIDTH, "TOKENMARK_DB": str(Path(tmp) / "none.db"),
               "XDG_DATA_HOME": tmp, results_api.PUBLISHED_ENV: None}
        res = CliRunner().invoke(app, shlex.split(command)[1:], env=env)
    assert res.exit_code == 0, res.output
    return "\n".join(line.rstrip() for line in res.output.splitlines()) + "\n"


def test_the_readme_shows_real_output():
    blocks = _blocks(README.read_text())
    assert len(blocks) == 8
    for command, shown in blocks:
        assert _run(command) == shown, f"README output of {command!r} is stale"


def _write() -> None:
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + 1)
    part = text[start:end]
    for command, shown in _blocks(text):
        part = part.replace(f"$ {command}\n{shown}", f"$ {command}\n{_run(command)}", 1)
    part = re.sub(r"(\$ (tokenmark [^\n]*)\n)@@OUTPUT@@\n",
                  lambda m: m.group(1) + _run(m.group(2)), part)
    README.write_text(text[:start] + part + text[end:])


if __name__ == "__main__" and "--write" in sys.argv:
    _write()
