"""The report and comparison pages in a real browser (Chromium through Playwright): every
plot drawn, nothing that reads badly.

Pages come from real runs (the virtual-clock sweep of ``conftest``: 10, 30 and 60
queries/s, the last over its TTFT limit; and the 30 q/s run with two requests failed).
Each page is checked for what users complained about (issue 27 item 5): no console
errors; every plot drawn and inked; tick labels short and round (1-2-5 per decade on
log axes); the latency axes of a comparison logarithmic; the limits drawn; legends that
name two or more series with no empty value cells; y axes wide enough for their tick
labels (so axis titles never overlap them); titles, plots and legends that do not
overlap one another; no errors plot when nothing failed. Full-page screenshots go to
``tests/artifacts/report/`` (``$TOKENMARK_ARTIFACTS`` overrides; git ignores it).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.faces.conftest import copy_with_failures, make_offline_run, make_run
from tests.faces.test_browser import Page, browser  # noqa: F401 - the fixture
from tokenmark.report import (
    comparison_data,
    find_runs,
    load_results,
    write_comparison,
    write_report,
)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("TOKENMARK_ARTIFACTS") or ROOT / "tests" / "artifacts") / "report"
pytestmark = pytest.mark.browser

_LABEL = re.compile(r"^-?(\d+)(\.\d+)?([kM]?)$")

# what the page reports about each drawn plot: ticks per axis, the scale kinds, the
# widest tick label against the axis' room, and the boxes of titles, plots and legends
_INSPECT = """() => {
  const out = [];
  for (const div of document.querySelectorAll('div.plot[data-plot]')) {
    const u = div.tmPlot;
    if (!u) { out.push({kind: div.dataset.plot, drawn: false}); continue; }
    const ctx = document.createElement('canvas').getContext('2d');
    const axes = u.axes.map((a, i) => {
      ctx.font = a.font[0];
      const widest = Math.max(0, ...(a._values || []).map(v => ctx.measureText(String(v)).width))
                     / uPlot.pxRatio;
      return {side: a.side, scale: a.scale, distr: u.scales[a.scale].distr,
              values: (a._values || []).map(String), splits: a._splits || [],
              room: a._size - a.ticks.size - a.gap, widest: widest, label: a.label};
    });
    const legend = div.querySelector('.u-legend');
    out.push({kind: div.dataset.plot, metric: div.dataset.metric || '', drawn: true,
      title: u.root.querySelector('.u-title').textContent, axes: axes,
      legend: legend ? [...legend.querySelectorAll('.u-series')].map(e => e.textContent.trim())
                     : null,
      values: legend ? legend.querySelectorAll('.u-value').length : 0,
      boxes: [u.root.querySelector('.u-title'), u.root.querySelector('.u-wrap'), legend]
        .filter(e => e).map(e => { const r = e.getBoundingClientRect();
                                   return [r.left, r.top, r.right, r.bottom]; })});
  }
  return out;
}"""


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:  # noqa: F811 - the imported fixture
    p = Page(browser)
    yield p
    p.close()


def _label_value(s: str) -> float:
    m = _LABEL.match(s)
    assert m, f"tick label {s!r} is not a short number"
    return float(m.group(1) + (m.group(2) or "")) * {"": 1, "k": 1e3, "M": 1e6}[m.group(3)]


def _check_plots(p: Page, name: str) -> list[dict[str, Any]]:
    """Assert the readability properties of every plot on the page; returns them."""
    plots: list[dict[str, Any]] = p.page.evaluate(_INSPECT)
    assert plots and all(x["drawn"] for x in plots), plots
    drawn, total = p.plots_drawn()
    assert drawn == total == len(plots)
    assert p.page.locator("div.plot[data-empty], div.plot[data-error]").count() == 0
    boxes = []
    for plot in plots:
        where = f"{name}: {plot['title']}"
        for ax in plot["axes"]:
            vals = [_label_value(v) for v in ax["values"] if v]
            assert len(vals) >= 2, (where, ax)
            for v in vals:  # at most 3 significant digits: round
                digits = re.sub(r"[^0-9]", "", f"{abs(v):.6g}".lstrip("0.")).rstrip("0")
                assert len(digits) <= 3, (where, ax["values"])
            if ax["distr"] == 3:  # log: 1-2-5 per decade (or round linear steps)
                mant = {round(v / 10 ** math.floor(math.log10(v)), 6) for v in vals}
                steps = {round(b - a, 9) for a, b in zip(vals, vals[1:], strict=False)}
                assert mant <= {1.0, 2.0, 5.0} or len(steps) == 1, (where, ax["values"])
            if ax["side"] in (1, 3):  # y axes: room for the widest label, title outside
                assert ax["widest"] <= ax["room"] + 0.5, (where, ax)
        # a legend names two or more series, with no empty value cells
        if plot["legend"] is not None:
            assert len(plot["legend"]) >= 2 and all(plot["legend"]), (where, plot["legend"])
            assert plot["values"] == 0, where
        boxes += [(where, b) for b in plot["boxes"]]
    for i, (w1, a) in enumerate(boxes):  # titles, plot areas and legends never overlap
        for w2, b in boxes[i + 1:]:
            wide = min(a[2], b[2]) - max(a[0], b[0])
            high = min(a[3], b[3]) - max(a[1], b[1])
            assert not (wide > 1 and high > 1), (w1, a, w2, b)
    assert p.problems == [], p.problems
    return plots


def _shot(p: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    p.page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def test_run_report_reads_well(page: Page, run_dir: Path) -> None:
    report = write_report(run_dir)
    page.go(report.as_uri(), plots=True)
    plots = _check_plots(page, "report")
    kinds = [(x["kind"], x["metric"]) for x in plots]
    assert kinds.count(("time", "")) == 2  # throughput, send lag: no errors plot
    assert page.page.locator("#no-errors").inner_text().startswith("No errors")
    assert "bins of 0.5 s" in page.page.locator("main").inner_text()  # 28 s run: 56 bins
    ttft = next(x for x in plots if x["title"].startswith("Time to first token - CDF"))
    assert ttft["axes"][0]["distr"] == 3  # 40 ms to the 2 s limit: log
    assert {"50", "100", "200", "500", "1k", "2k"} <= set(ttft["axes"][0]["values"])
    _shot(page, "report-no-errors")


def test_report_with_errors_draws_them(page: Page, run_dir: Path, tmp_path: Path) -> None:
    failed = copy_with_failures(run_dir, tmp_path / "failed",
                                {10: "timeout", 11: "timeout", 500: "timeout"})
    page.go(write_report(failed).as_uri(), plots=True)
    plots = _check_plots(page, "report-errors")
    errors = next(x for x in plots if x["title"] == "Errors by class")
    assert errors["legend"] is None  # one class: no legend
    assert page.page.locator("#no-errors").count() == 0
    _shot(page, "report-with-errors")


def test_comparison_reads_well(page: Page, runs_root: Path, tmp_path: Path) -> None:
    out = write_comparison(find_runs([runs_root]), tmp_path / "comparison.html")
    page.go(out.as_uri(), plots=True)
    plots = _check_plots(page, "comparison")
    _shot(page, "comparison-sweep")
    assert sorted({x["kind"] for x in plots}) == ["latency-rate", "pareto", "rate"]
    for x in plots:
        if x["kind"] in ("pareto", "latency-rate"):
            y = x["axes"][1]
            assert y["distr"] == 3 and "log" in y["label"], x["title"]  # log latency
    ttft = next(x for x in plots if x["kind"] == "pareto" and x["metric"] == "ttft")
    # 40 ms to 17.8 s (range x1.15 either side), the 2 s limit inside: every 1-2-5 value
    assert ttft["axes"][1]["values"] == ["50", "100", "200", "500", "1k", "2k", "5k", "10k",
                                        "20k"]
    assert ttft["legend"] is None  # one sweep: one series, no legend
    rate = next(x for x in plots if x["kind"] == "latency-rate" and x["metric"] == "ttft")
    assert rate["legend"] == ["p50", "p90", "p99"]


def test_comparison_of_two_systems(page: Page, runs_root: Path, tmp_path: Path) -> None:
    """The sweep beside a slower system at 30 q/s (TTFT 120 ms, TPOT 12 ms): one curve
    each, and the slower run off the Pareto front of TTFT (about the same tokens/s as the
    sweep's 30 q/s run, more latency)."""
    # in a thread of its own: Playwright's loop runs on this one
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(make_run, tmp_path / "slow" / "qps030", 30, ttft_ms=120.0,
                           tpot_ms=12.0).result()
    doc = json.loads((slow / "results.json").read_text())
    doc["run"]["sut"]["name"] = "slower-server"
    (slow / "results.json").write_text(json.dumps(doc))
    folders = find_runs([runs_root, slow])
    cmp = comparison_data([(str(f), None, load_results(f)) for f in folders])
    assert len(cmp["groups"]) == 2
    slow_point = next(p for p in cmp["points"] if p["group"].startswith("slower-server"))
    assert slow_point["front"]["ttft"] is False
    out = write_comparison(folders, tmp_path / "comparison.html")
    page.go(out.as_uri(), plots=True)
    plots = _check_plots(page, "comparison-two-systems")
    _shot(page, "comparison-two-systems")
    ttft = next(x for x in plots if x["kind"] == "pareto" and x["metric"] == "ttft")
    assert ttft["legend"] == cmp["groups"]


def test_offline_report_reads_well(page: Page, tmp_path: Path) -> None:
    """An Offline run: every query at once, so no send lag over time (said in words)."""
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs on this thread
        run = pool.submit(make_offline_run, tmp_path / "offline").result()
    page.go(write_report(run).as_uri(), plots=True)
    plots = _check_plots(page, "report-offline")
    assert [x["title"] for x in plots if x["kind"] == "time"] == [
        "Throughput and requests in flight"]
    assert page.page.locator("#no-send-lag").count() == 1
    _shot(page, "report-offline")
