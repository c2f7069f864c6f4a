"""The Python API the CLI calls, end to end on an imported database, and its tables."""

from __future__ import annotations

import pytest

from tests.paths import SAMPLES
from tokenmark.api import results as results_api
from tokenmark.api import tables as results_tables
from tokenmark.errors import AnalysisError, BadInputError


@pytest.fixture
def db(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ten sample results in a database, read alone: the published table that ships
    with tokenmark is turned off (``$TOKENMARK_PUBLISHED=0``), so the figures below are
    the database's (test_published.py covers the two together)."""
    monkeypatch.setenv(results_api.PUBLISHED_ENV, "0")
    rep = results_api.import_results(SAMPLES, db=sqlite_db)
    assert rep.ok
    return sqlite_db


def test_leaderboard_from_the_database(db):
    lb = results_api.leaderboard("llama2-70b-99", "offline", db=db)
    assert lb.rounds == ("v6.0",)
    assert [e.row.submitter for e in lb.single_node] == ["AMD", "Dell"]  # 103480 > 100008
    [rack] = lb.multi_node
    assert rack.row.system_id == "87xMI355X_22xEPYC_9575F"
    assert rack.per_accelerator == pytest.approx(1042110.0 / 87)  # used, not 88
    tables = results_tables.leaderboard_tables(lb)
    text = "\n".join(t.text() for t in tables)
    assert "87 (of 88)" in text and "per accelerator (derived)" in text
    assert "not MLPerf results" in text
    alias = results_api.leaderboard("llama3_1-8b-edge", "SingleStream", db=db, division="open")
    assert alias.benchmark == "llama3.1-8b-edge" and len(alias.single_node) == 1


def test_scaling_uses_the_accelerators_used(db):
    s = results_api.scaling_efficiency("llama2-70b-99", "Offline", accelerator="MI355X", db=db,
                            submitter="AMD")
    eff = {p.accelerators: p.efficiency for p in s.points}
    # AMD v6.0: 8 GPUs 103480 tok/s; 87 of 88 GPUs 1.04211e6 tok/s
    assert eff[87] == pytest.approx((1042110 / 87) / (103480 / 8))   # 0.926 (used)
    assert eff[87] == pytest.approx(0.9260, abs=1e-4)
    assert 88 not in eff  # by the total (88) it would read 0.9155
    assert "N counts accelerators used" in results_tables.scaling_table(s).text()


def test_reproducibility_from_the_database(db):
    [g] = results_api.reproducibility(db=db, benchmark="llama2-70b-99", scenario="Offline")
    assert g.vendor.submitter == "AMD" and g.partners[0].row.submitter == "Dell"
    assert g.partners[0].spread == pytest.approx(100008 / 103480 - 1)    # -3.4%
    assert g.within()
    [t] = results_tables.reproducibility_tables([g])
    assert "-3.4%" in t.text() and "yes" in t.text()


def test_compare_and_software_gains(db):
    c = results_api.compare("v5.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT",
                            "v6.0/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x288_TRT", db=db,
                            normalise=True)
    [r] = c.ratios  # deepseek-r1 Offline: 2494310 / 288 against 420659 / 72
    assert r.ratio == pytest.approx((2494310 / 288) / (420659 / 72))
    assert "derived" in results_tables.comparison_table(c).text()
    with pytest.raises(AnalysisError, match="uses 72 accelerators"):
        results_api.compare("v5.1/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x72_TRT",
                            "v6.0/NVIDIA/GB300-NVL72_GB300-288GB_aarch64x288_TRT", db=db)
    with pytest.raises(AnalysisError, match="two or more rounds"):
        results_api.software_gains("llama2-70b-99", "Offline", db=db, accelerator="MI355X")


def test_listing_status_and_bad_names(db):
    rows = results_api.list_results(db=db, benchmark="deepseek-r1")
    assert len(rows) == 3
    table = results_tables.rows_table(rows).text()
    assert "rack-scale (NVL72)" in table and "official" in table
    assert results_api.db_status(db).counts["results"] == 10
    with pytest.raises(BadInputError, match="unknown scenario"):
        results_api.leaderboard("llama2-70b-99", "Sometimes", db=db)
    with pytest.raises(BadInputError, match="unknown label"):
        results_api.list_results(db=db, label="maybe")


def test_import_report_table(tmp_path, sqlite_db):
    rep = results_api.import_results(SAMPLES, db=sqlite_db)
    t = results_tables.import_table(rep)
    assert t.rows[0][:5] == ("10", "10", "0", "0", "10")
