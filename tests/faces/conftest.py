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
