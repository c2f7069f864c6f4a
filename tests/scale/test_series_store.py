"""Issue 27: 'tokenmark sweep' (as find-peak and scaling-run) stores its series and
runs in the results database when it finishes, as 'tokenmark run' stores a run, and
writes records.csv/summary.csv in every point's folder beside index.csv."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from tokenmark.api import results as results_api
from tokenmark.cli import app

FAST = ["-s", "constant", "--min-duration", "10", "--output-len", "100", "--input-len", "200",
        "--dataset-size", "256", "--sut-max-batch", "8", "--virtual-time"]


def test_sweep_stores_its_series_and_runs_and_writes_csv(tmp_path):
    db = str(tmp_path / "results.db")
    out = tmp_path / "sweep"
    res = CliRunner().invoke(app, ["sweep", *FAST, "--rates", "4,6", "-o", str(out),
                                   "--db", db])
    assert res.exit_code == 0, res.output
    index = json.loads((out / "index.json").read_text())
    (series,) = results_api.list_series(db=db)
    assert series.kind == "sweep" and series.doc == index
    runs = {r.run_hash: r for r in results_api.list_runs(db=db)}
    assert [p.run_hash in runs for p in series.points] == [True, True]
    for p, row in zip(series.points, index["points"], strict=True):
        folder = out / row["folder"]
        assert (folder / "records.csv").is_file()
        with (folder / "summary.csv").open() as f:
            (summary,) = list(csv.DictReader(f))
        assert summary["tokenmark_verdict"] == runs[p.run_hash].tokenmark_validity
    with (out / "index.csv").open() as f:
        assert [float(r["value"]) for r in csv.DictReader(f)] == [4.0, 6.0]
    # --no-db stores nothing; a second store of the same folder adds nothing
    again = results_api.store_run(out, db=db)
    assert again.counts is not None and again.counts.series_added == 0
    other = str(tmp_path / "other.db")
    res = CliRunner().invoke(app, ["sweep", *FAST, "--rates", "4", "-o",
                                   str(tmp_path / "s2"), "--db", other, "--no-db"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "other.db").exists()
