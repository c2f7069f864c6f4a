"""Fixtures of the report, progress and web UI tests: real runs (virtual clock) and a
results database holding the shared samples, those runs and a hostile one.

``hostile_run`` is a real run's folder whose ``results.json`` was edited to carry markup
where users can put text (the system under test's name, a finding, the profile note, an
endpoint): every page that shows it must show it as text.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from tests.paths import SAMPLES
from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api import results as results_api
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.cli.app import app
from tokenmark.config.layering import build_settings
from tokenmark.mlperf.settings import Scenario


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives Chromium through Playwright (skipped when missing, failed "
        "when TOKENMARK_REQUIRE lists browser)")


XSS = '<script>alert("tm-xss")</script><img src=x onerror=alert(1)>'


def make_run(out: Path, qps: float, *, ttft_ms: float = 40.0, tpot_ms: float = 8.0) -> Path:
    """A demo-profile llama3.1-8b Server run on the virtual clock (about a second)."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"target_qps": qps})
    sut = SutSpec(model=LatencyModel(ttft_ns=int(ttft_ms * 1e6), tpot_ns=int(tpot_ms * 1e6),
                                     max_batch=48, batch_slope=0.02))
    run_benchmark(layered, default_dataset(layered), sut, out, virtual_time=True)
    return out


def make_offline_run(out: Path) -> Path:
    """An Offline run of the same model on the virtual clock (every query at once)."""
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.OFFLINE, profile="demo")
    sut = SutSpec(model=LatencyModel(ttft_ns=40_000_000, tpot_ns=8_000_000, max_batch=48,
                                     batch_slope=0.02))
    run_benchmark(layered, default_dataset(layered), sut, out, virtual_time=True)
    return out


def copy_with_failures(run: Path, dest: Path, failures: dict[int, str]) -> Path:
    """A copy of the run folder ``run`` whose records number ``i`` failed with error class
    ``failures[i]`` (no answer: no first token, no done time, no chunks)."""
    shutil.copytree(run, dest)
    lines = (dest / "records.jsonl").read_text().splitlines()
    for i, cls in failures.items():
        rec = json.loads(lines[i])
        rec.update(error=cls, done_ns=-1, first_token_ns=-1, chunk_gaps_ns=[])
        lines[i] = json.dumps(rec)
    (dest / "records.jsonl").write_text("\n".join(lines) + "\n")
    return dest


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep: three runs at 10, 30 and 60 queries/s (the last over its TTFT limit)."""
    root = tmp_path_factory.mktemp("sweep")
    for qps in (10, 30, 60):
        make_run(root / f"qps{qps:03d}", qps)
    return root


@pytest.fixture(scope="session")
def run_dir(runs_root: Path) -> Path:
    return runs_root / "qps030"


@pytest.fixture(scope="session")
def hostile_run(runs_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("hostile") / "run"
    shutil.copytree(runs_root / "qps010", dest)
    doc = json.loads((dest / "results.json").read_text())
    doc["run"]["sut"]["name"] = XSS
    doc["profile_note"] = XSS
    doc["verdicts"]["tokenmark"]["findings"][0]["observed"] = XSS
    doc["summary"]["per_endpoint"] = {XSS: {"requests": 1, "completed": 1, "errors": {},
                                            "output_tokens": 2, "ttft_ns": {"p50": 1},
                                            "e2e_ns": {"p50": 2}}}
    (dest / "results.json").write_text(json.dumps(doc))
    return dest


@pytest.fixture(scope="session")
def ui_db(runs_root: Path, hostile_run: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite database with the shared published samples, the sweep and the hostile run."""
    db = str(tmp_path_factory.mktemp("uidb") / "results.db")
    rep = results_api.import_results(SAMPLES, db=db)
    assert rep.written and not rep.errors
    for folder in sorted(runs_root.iterdir()):
        assert results_api.store_run(folder, db=db).written
    assert results_api.store_run(hostile_run, db=db).written
    return db


@pytest.fixture
def cli() -> Iterator[typer.Typer]:
    """The app with ``report`` and ``ui`` registered, as ``tokenmark.cli`` registers them;
    the app's command list is restored afterwards, so a session that has not imported
    :mod:`tokenmark.cli.faces` through ``tokenmark.cli`` sees the same commands as before."""
    before = list(app.registered_commands)
    faces = importlib.import_module("tokenmark.cli.faces")
    present = {c.callback for c in app.registered_commands}
    for command in (faces.report, faces.ui):  # imported earlier, then restored away
        if command not in present:
            app.command()(command)
    yield app
    app.registered_commands[:] = before


@pytest.fixture(scope="session")
def series_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """User runs of non-MLPerf scenarios and series, on the virtual clock, against the
    latency model of ``tests/scale/support.py`` (8 slots: 7.69 requests/s at most):
    a poisson run, a closed-loop run, a rate sweep (4, 6, 10/s: the last over capacity),
    a find-peak search and a scaling run over 1 and 2 replicas."""
    from tests.scale.support import constant_settings, fixed_dataset, model
    from tokenmark.adapters.inprocess import LatencyModelSUT
    from tokenmark.api.scale import find_peak, scaling_run, sweep
    from tokenmark.api.suts import replicated

    root = tmp_path_factory.mktemp("series")
    short = {"min_duration_ms": 20_000}
    for scen, extra in ((Scenario.POISSON, {"target_qps": 4.0}),
                        (Scenario.CLOSED_LOOP, {"concurrency": 4})):
        layered = build_settings("v6.0", "llama3.1-8b", scen, overrides={
            "ttft_latency_ms": 500, "performance_sample_count": 256,
            "total_sample_count": 256, **short, **extra})
        run_benchmark(layered, fixed_dataset(), model(8), root / f"run-{scen.value}",
                      virtual_time=True)
    sweep(constant_settings(duration_s=20), fixed_dataset(), model(8), root / "sweep",
          rates=(4.0, 6.0, 10.0), virtual_time=True)
    find_peak(constant_settings(duration_s=20), fixed_dataset(), model(8), root / "peak",
              start_qps=4.0, tolerance=0.1, virtual_time=True)

    def sut_for(n: int) -> object:
        return replicated(lambda c: LatencyModelSUT(c, model(8).model), n)

    scaling_run(constant_settings(duration_s=20), fixed_dataset(), sut_for, root / "scaling",
                replicas=(1, 2), start_qps=4.0, tolerance=0.1, virtual_time=True)
    return root


@pytest.fixture(scope="session")
def series_db(ui_db: str, series_root: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The UI database plus ``series_root``'s runs and series, each stored by
    :func:`tokenmark.api.results.store_run` (what ``tokenmark run``, ``sweep``,
    ``find-peak`` and ``scaling-run`` call)."""
    db = tmp_path_factory.mktemp("seriesdb") / "results.db"
    db.write_bytes(Path(ui_db).read_bytes())
    for folder in sorted(series_root.iterdir()):
        rep = results_api.store_run(folder, db=str(db))
        assert rep.written and not rep.errors, rep.errors
    return str(db)
