"""The web UI and the HTML report in a real browser: Playwright driving Debian's Chromium.

The UI runs on 127.0.0.1 at a free port below 32768 over a SQLite database holding the
shared published samples, a sweep of three tokenmark runs and a run with markup in its
names. Each test loads pages, clicks what a person would click, and compares what is
rendered with what :mod:`tokenmark.api.results` says. Screenshots go to
``tests/artifacts/browser/`` (``$TOKENMARK_ARTIFACTS`` overrides; git ignores it).

Needs ``apt-get install -y chromium`` and ``pip install playwright`` (no browser
download); missing, the tests skip, or fail when ``TOKENMARK_REQUIRE`` lists
``browser``. Launch flags: ``ENVIRONMENT.md`` section 7.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faces.conftest import XSS
from tests.fixtures.servers import free_port, require_or_skip
from tokenmark.api import results as results_api
from tokenmark.report import write_report
from tokenmark.resultrows import Tier
from tokenmark.webui import UiConfig, create_app

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TOKENMARK_ARTIFACTS") or ROOT / "tests" / "artifacts") / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run",
               "--disable-quic"]
INSTALL = ("the browser tests need Chromium and Playwright: apt-get install -y chromium "
           "chromium-driver; pip install playwright (no 'playwright install')")
TOKEN = "browser-test-token-0123456789"
pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_or_skip("browser", INSTALL)
    if not Path(CHROMIUM).exists():
        require_or_skip("browser", INSTALL)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(ui_db: str, runs_root: Path) -> Iterator[str]:
    """The UI (uploads on, records of the sweep at hand) in a thread; its base URL."""
    import uvicorn

    port = free_port()
    app = create_app(UiConfig(db=ui_db, upload_token=TOKEN, runs=(runs_root,)))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                        lifespan="off", ws="none"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/api/status", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.05)
    else:
        pytest.fail("the web UI did not start")
    yield base
    srv.should_exit = True
    thread.join(10)


class Page:
    """A browser page that records console errors, page errors and dialogs."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        def console(m: Any) -> None:
            if m.type == "error":
                self.problems.append(m.text)

        self.page.on("console", console)
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))

        def dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", dialog)

    def go(self, url: str, plots: bool = False) -> Any:
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle")
        if plots:
            self.page.wait_for_selector("body[data-plots-ready]", timeout=10_000)
        return self.page

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")

    def plots_drawn(self) -> tuple[int, int]:
        """(plots drawn with non-blank canvases, plots on the page)."""
        found: tuple[int, int] = self.page.evaluate("""() => {
            const plots = [...document.querySelectorAll('div.plot[data-plot]')];
            const inked = plots.filter(div => {
                const c = div.querySelector('canvas');
                if (!div.hasAttribute('data-drawn') || !c || !c.width) return false;
                const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                for (let i = 3; i < px.length; i += 4) if (px[i] > 0) return true;
                return false;
            });
            return [inked.length, plots.length];
        }""")
        return (int(found[0]), int(found[1]))

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.close()


PAGES = [("home", "/"), ("runs", "/runs"), ("results", "/results"),
         ("leaderboard", "/leaderboard"), ("compare", "/compare"),
         ("reproducibility", "/reproducibility?benchmark=llama2-70b-99&scenario=Offline"),
         ("scaling", "/scaling"), ("software-gains", "/software-gains"), ("upload", "/upload")]


def test_every_page_loads_cleanly(page: Page, server: str) -> None:
    for name, url in PAGES:
        page.go(server + url)
        page.shot(f"page-{name}")
        assert page.problems == [], (url, page.problems)  # CSP violations are console errors
        assert page.page.locator("nav.top a.here").count() <= 1


def _board_values(p: Any, tier: str) -> list[tuple[int, float]]:
    rows = p.locator(f"table[data-tier='{tier}'] tr[data-key]")
    return [(int(rows.nth(i).get_attribute("data-rank")),
             float(rows.nth(i).locator("td.result").get_attribute("data-value")))
            for i in range(rows.count())]


def test_leaderboard_filters_tiers_and_numbers(page: Page, server: str, ui_db: str) -> None:
    p = page.go(server + "/leaderboard")
    p.select_option("#f-benchmark", "llama2-70b-99")
    p.select_option("#f-scenario", "Offline")
    p.select_option("#f-round", "all")
    p.select_option("#f-division", "any")
    p.click("#apply")
    p.wait_for_load_state("networkidle")
    assert "benchmark=llama2-70b-99" in p.url and "division=any" in p.url
    board = results_api.leaderboard("llama2-70b-99", "Offline", db=ui_db, division=None,
                                    round="all")
    for tier, entries in ((Tier.SINGLE_NODE, board.single_node),
                          (Tier.MULTI_NODE, board.multi_node)):
        assert _board_values(p, tier.value) == [(e.rank, e.row.value) for e in entries]
    assert board.multi_node, "the samples hold a rack-scale result"
    page.shot("leaderboard-both-tiers")

    p.click("#tier-multi-node")
    p.wait_for_load_state("networkidle")
    assert p.locator("table[data-tier='single-node']").count() == 0
    assert _board_values(p, "multi-node") == [(e.rank, e.row.value) for e in board.multi_node]
    p.click("#tier-single-node")
    p.wait_for_load_state("networkidle")
    assert p.locator("table[data-tier='multi-node']").count() == 0
    page.shot("leaderboard-single-node")

    p.click("#view-per-accelerator")
    p.wait_for_load_state("networkidle")
    cells = p.locator("table[data-tier='single-node'] td.per-acc")
    shown = [float(cells.nth(i).get_attribute("data-value")) for i in range(cells.count())]
    expect = sorted((e.per_accelerator for e in board.single_node
                     if e.per_accelerator is not None), reverse=True)
    assert shown == expect and shown
    page.shot("leaderboard-per-accelerator")

    # the accelerator filter keeps only that accelerator's systems
    options = p.locator("#f-accelerator option")
    model = next(options.nth(i).get_attribute("value") for i in range(options.count())
                 if "MI355X" in (options.nth(i).get_attribute("value") or ""))
    p.select_option("#f-accelerator", model)
    p.click("#apply")
    p.wait_for_load_state("networkidle")
    accs = p.locator("table.board tr[data-key] td:nth-child(6)").all_inner_texts()
    assert accs and all("MI355X" in a for a in accs)
    assert page.problems == []


def test_results_page_shows_the_database(page: Page, server: str, ui_db: str) -> None:
    p = page.go(server + "/results")
    p.select_option("#f-label", "official")
    p.click("#apply")
    p.wait_for_load_state("networkidle")
    rows = results_api.list_results(db=ui_db, label="official")
    cells = p.locator("table#rows tr[data-key] td.num")
    assert sorted(float(cells.nth(i).get_attribute("data-value"))
                  for i in range(cells.count())) == sorted(r.value for r in rows)
    page.shot("results-official")


def test_run_page_draws_every_plot_with_the_databases_numbers(page: Page, server: str,
                                                              ui_db: str) -> None:
    run = next(r for r in results_api.list_runs(db=ui_db) if r.row.system_id != XSS)
    p = page.go(f"{server}/runs/{run.run_hash}", plots=True)
    drawn, total = page.plots_drawn()
    assert total >= 11 and drawn == total  # 4 CDFs, 4 histograms, 3 over-time plots
    assert p.locator("#no-records").count() == 0  # the records were found (--runs)
    cell = p.locator("#latency-table tr[data-metric='ttft'] td[data-p='99']")
    assert float(cell.get_attribute("data-value")) == run.summary["latency_ms"]["ttft"][
        "percentiles"]["99"]
    badge = p.locator("#verdict-tokenmark .badge[data-validity]")
    assert badge.get_attribute("data-validity") == run.tokenmark_validity
    page.shot("run-page")
    assert page.problems == []


def test_compare_ticked_runs(page: Page, server: str, ui_db: str) -> None:
    p = page.go(server + "/runs")
    sweep = [r for r in results_api.list_runs(db=ui_db) if r.row.system_id != XSS][:3]
    for r in sweep:
        p.check(f"tr[data-run='{r.run_hash}'] input[type=checkbox]")
    p.click("#compare-button")
    p.wait_for_selector("body[data-plots-ready]")
    drawn, total = page.plots_drawn()
    assert total == 3 and drawn == 3
    assert p.locator("table#runs tr[data-run]").count() == 3
    page.shot("runs-compare")
    assert page.problems == []


def test_markup_in_names_stays_text(page: Page, server: str, ui_db: str) -> None:
    hostile = next(r for r in results_api.list_runs(db=ui_db) if r.row.system_id == XSS)
    for url in (f"/runs/{hostile.run_hash}", "/runs", "/results"):
        p = page.go(server + url, plots=url.startswith("/runs/"))
        assert XSS in p.locator("main").inner_text(), url
        assert p.locator("main img[src='x']").count() == 0
    page.shot("hostile-run")
    assert page.dialogs == []  # no alert() ran
    assert page.problems == []


def test_upload_without_the_token_is_refused(page: Page, server: str, run_dir: Path,
                                             ui_db: str) -> None:
    before = len(results_api.list_runs(db=ui_db))
    p = page.go(server + "/upload")
    p.set_input_files("#upload-file", str(run_dir / "results.json"))
    p.fill("#upload-token", "not-the-token-0123456789")
    p.click("#upload-button")
    # a locator wait, not wait_for_function: a string predicate is evaluated with eval,
    # which the UI's Content-Security-Policy (script-src 'self') refuses
    p.locator("#upload-result").filter(has_text=re.compile(r"^\d")).wait_for(timeout=30_000)
    assert p.locator("#upload-result").inner_text().startswith("401")
    status = p.evaluate("""() => fetch('/api/upload', {method: 'POST', body: '{}'})
                                 .then(r => r.status)""")
    assert status == 401
    page.shot("upload-refused")
    assert len(results_api.list_runs(db=ui_db)) == before


def test_report_file_draws_offline(page: Page, run_dir: Path) -> None:
    report = write_report(run_dir)
    fetched: list[str] = []

    def block(route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            fetched.append(route.request.url)
            route.abort()

    page.page.route("**/*", block)
    page.go(report.as_uri(), plots=True)
    drawn, total = page.plots_drawn()
    assert total >= 11 and drawn == total
    assert fetched == [] and page.problems == []
    page.shot("report-file")
