"""The HTML report: its data equal the records and results.json, the file is self-contained
and escaped, the comparison's Pareto front is right, and ``tokenmark report`` writes both."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.faces.conftest import XSS, copy_with_failures, make_offline_run
from tokenmark.output.records import read_records
from tokenmark.report import (
    comparison_data,
    find_runs,
    load_results,
    pareto_front,
    render_comparison,
    render_report,
    run_report_data,
    script_json,
)
from tokenmark.report.bins import LogHistogram, TimeBins, cdf_from_sorted, display_width_ns


def test_series_and_distributions_equal_the_records(run_dir: Path) -> None:
    data = run_report_data(run_dir)
    doc = load_results(run_dir)
    recs = list(read_records(run_dir / "records.jsonl"))
    s = data["series"]
    w = s["bin_s"]
    assert data["records"] and data["record_count"] == len(recs)
    ok = [r for r in recs if r.ok]
    # every output token and every completion is in exactly one bin
    assert sum(s["output_tokens_per_s"]) * w == pytest.approx(sum(r.output_tokens for r in ok))
    assert sum(s["completed_per_s"]) * w == pytest.approx(len(ok))
    assert s["in_flight"][-1] == 0 and max(s["in_flight"]) >= 1
    # in flight at a bin's end, recomputed from the records
    t_end = (np.arange(len(s["t"])) + 1) * w * 1e9
    for i in (len(t_end) // 3, len(t_end) // 2):
        expect = sum(1 for r in recs if r.issued_ns < t_end[i] <= r.done_ns)
        assert s["in_flight"][i] == expect
    lat = doc["summary"]["latency_ms"]
    for d in data["distributions"]:
        exact = lat[d["name"]]
        assert d["count"] == exact["count"] > 0
        assert d["percentiles"] == exact["percentiles"]
        assert sum(d["hist"]["counts"]) == exact["count"]
        if d["name"] != "itl":  # CDFs of per-request values: exact extremes
            assert d["cdf"]["x"][0] == exact["min"] and d["cdf"]["x"][-1] == exact["max"]
        assert d["cdf"]["y"][-1] == pytest.approx(1.0)
    limits = {d["name"]: d["limit"] for d in data["distributions"]}
    assert limits["ttft"] == 2000.0 and limits["tpot"] == 100.0  # the v6.0 preset's


def test_summary_only_data_without_records(run_dir: Path) -> None:
    data = run_report_data(run_dir, records=False)
    assert data["records"] is False and data["series"] is None
    ttft = next(d for d in data["distributions"] if d["name"] == "ttft")
    assert "percentiles" in ttft["cdf"]["source"] and ttft["hist"] is None


def test_report_is_one_self_contained_file(run_dir: Path) -> None:
    html = render_report(run_dir)
    assert "uPlot" in html and 'id="tm-data"' in html
    # nothing is fetched: no external scripts, styles, images or links to resources
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html, re.I)
    assert not re.search(r"https?://(?!github\.com/leeoniya)", html)
    assert "default-src 'none'" in html  # the CSP meta forbids fetching anything
    assert 50_000 < len(html.encode()) < 2_000_000
    block = re.search(r'id="tm-data" type="application/json">(.*?)</script>', html, re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert data["distributions"][0]["name"] == "ttft"


def test_user_strings_are_escaped(hostile_run: Path) -> None:
    html = render_report(hostile_run)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;tm-xss&#34;)&lt;/script&gt;" in html
    # inside the data block too: no "</script>" can end it early
    block = re.search(r'id="tm-data" type="application/json">(.*?)</script>', html, re.S)
    assert block is not None and XSS.replace("<", "") not in block.group(1)
    assert json.loads(block.group(1))["endpoints"] == {XSS: json.loads(
        (hostile_run / "results.json").read_text())["summary"]["per_endpoint"][XSS]}


def test_script_json_cannot_close_its_element() -> None:
    text = str(script_json({"a": "</script><script>x</script>", "b": "\u2028&"}))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><script>x</script>", "b": "\u2028&"}


def test_pareto_front() -> None:
    pts = [(100.0, 50.0), (200.0, 80.0), (150.0, 90.0), (200.0, 70.0), (50.0, 20.0)]
    assert pareto_front(pts) == [True, False, False, True, True]
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)]) == [True, True]  # equal points both stay


def _pareto_brute_force(pts: list[tuple[float, float]]) -> list[bool]:
    """The definition, pairwise: dominated when another point has at least the
    throughput and at most the latency, one of them strictly."""
    return [not any(x2 >= x and y2 <= y and (x2 > x or y2 < y) for x2, y2 in pts)
            for x, y in pts]


_coord = st.one_of(st.integers(0, 4).map(float), st.floats(0, 1e6))  # ties are common


@given(st.lists(st.tuples(_coord, _coord), max_size=40))
def test_pareto_front_equals_the_brute_force_definition(pts: list[tuple[float, float]]) -> None:
    front = pareto_front(pts)
    assert front == _pareto_brute_force(pts)
    if pts:  # the best throughput at its least latency is always on it
        best = max(x for x, _ in pts)
        least = min(y for x, y in pts if x == best)
        assert all(f for f, p in zip(front, pts, strict=True) if p == (best, least))


def test_pareto_front_of_a_saturated_sweep() -> None:
    # (output tokens/s, p99 ms) of a sweep past saturation: the last two runs give less
    # throughput for more latency than the fourth, so they are off the front
    sweep = [(900.0, 40.0), (2600.0, 250.0), (2970.0, 900.0), (3100.0, 5000.0),
             (3050.0, 9000.0), (2800.0, 15000.0)]
    assert pareto_front(sweep) == [True, True, True, True, False, False]


def test_comparison_of_a_sweep(runs_root: Path) -> None:
    folders = find_runs([runs_root])
    assert [f.name for f in folders] == ["qps010", "qps030", "qps060"]
    cmp = comparison_data([(f.name, None, load_results(f)) for f in folders])
    assert [p["target_qps"] for p in cmp["points"]] == [10.0, 30.0, 60.0]
    assert cmp["percentile_label"] == "99" and cmp["metrics"] == ["ttft", "tpot", "e2e"]
    tput = [p["throughput"] for p in cmp["points"]]
    assert tput == sorted(tput)  # more load, more tokens/s
    assert cmp["points"][-1]["front"]["ttft"]  # the highest throughput is always on it
    assert cmp["limits"] == {"ttft": [2000.0], "tpot": [100.0], "e2e": []}  # v6.0 preset
    assert cmp["rates"] is True
    doc = load_results(folders[0])
    rps = doc["summary"]["throughput"]["requests_per_second"]
    first = cmp["points"][0]
    assert first["requests_per_second"] == rps
    assert first["percentiles"]["ttft"] == {
        k: doc["summary"]["latency_ms"]["ttft"]["percentiles"][k] for k in ("50", "90", "99")}
    html = render_comparison(folders)
    assert html.count('data-plot="pareto"') == 3 and "qps060" in html
    assert html.count('data-plot="latency-rate"') == 3 and html.count('data-plot="rate"') == 1


@given(st.lists(st.tuples(st.integers(0, 10**12), st.integers(1, 100)), max_size=300))
def test_time_bins_keep_sums_when_they_widen(events: list[tuple[int, int]]) -> None:
    tb = TimeBins(max_bins=16, first_width_ns=1000)
    for t, w in events:
        tb.add("x", np.array([t]), np.array([float(w)]))
        tb.peak("m", np.array([t]), np.array([float(w)]))
    assert tb.sum_series("x").sum() == sum(w for _, w in events)
    if events:
        assert tb.peak_series("m").max() == max(w for _, w in events)
        assert tb.used <= 16 and max(t for t, _ in events) < tb.used * tb.width_ns


@pytest.mark.parametrize(("span_s", "width_s"), [
    (0.05, 0.0005), (1.0, 0.01), (28.0, 0.5), (60.0, 0.5), (61.0, 1.0), (600.0, 5.0),
    (3600.0, 50.0), (4 * 3600.0, 200.0), (86400.0, 1000.0)])
def test_display_bins_are_round_and_fit_the_runs_length(span_s: float, width_s: float) -> None:
    """Runs of 50 ms to a day: one event per 10 ms (and the last at the end) keep their
    sum, and the bins drawn are one round width (1, 2 or 5 x 10^k s), 48 to 120 of them."""
    end = int(span_s * 1e9)
    t = np.append(np.arange(0, end, max(1, end // 5000), dtype=np.int64), end - 1)
    tb = TimeBins()
    for chunk in np.array_split(t, 7):  # in batches, as the records are read
        tb.add("x", chunk)
    w = tb.coarsen()
    assert w / 1e9 == pytest.approx(width_s)
    assert str(w).strip("0") in {"1", "2", "5"}
    assert 48 <= tb.used <= 120
    assert tb.sum_series("x").sum() == t.size
    assert display_width_ns(end) == w


def test_log_histogram_and_cdf() -> None:
    vals = np.array([1_000_000, 2_000_000, 2_000_000, 50_000_000], dtype=np.int64)
    h = LogHistogram()
    h.add(vals)
    edges, counts = h.display()
    assert sum(counts) == 4 and len(edges) == len(counts) + 1
    assert edges[0] <= 1_000_000 and edges[-1] >= 50_000_000
    x, y = cdf_from_sorted(np.sort(vals))
    assert x == [1e6, 2e6, 2e6, 5e7] and y == [0.25, 0.5, 0.75, 1.0]
    big = np.arange(100_000, dtype=np.int64)
    x, y = cdf_from_sorted(big)
    assert len(x) <= 500 and x[-1] == 99_999 and y[-1] == 1.0
    assert any(q >= 0.9999 for q in y)  # the tail stays drawn


def test_report_command(cli: typer.Typer, runs_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    res = CliRunner().invoke(cli, ["report", str(runs_root), "-o", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("qps010", "qps030", "qps060"):
        assert (runs_root / name / "report.html").stat().st_size > 50_000
    assert "Pareto" in out.read_text()
    bad = CliRunner().invoke(cli, ["report", str(tmp_path / "nothing")])
    assert bad.exit_code == 2 and "no such results folder" in bad.output
    empty = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert empty.exit_code == 2 and "no results.json" in empty.output


def test_errors_plot_only_when_there_are_errors(run_dir: Path, tmp_path: Path) -> None:
    html = render_report(run_dir)
    assert 'data-series="errors"' not in html and 'id="no-errors"' in html
    assert "No errors: every one of the 768 requests was answered" in html
    # the same run with two requests failed (a timeout, a refused connection)
    failed = copy_with_failures(run_dir, tmp_path / "failed", {10: "timeout", 500: "connect"})
    data = run_report_data(failed)
    errors = data["series"]["errors"]
    assert sorted(errors) == ["connect", "timeout"]
    assert [sum(v) for _, v in sorted(errors.items())] == [1.0, 1.0]
    html = render_report(failed)
    assert 'data-series="errors"' in html and 'id="no-errors"' not in html


def test_offline_run_draws_no_send_lag_over_time(tmp_path: Path) -> None:
    """An Offline run schedules every query at once: one bin of send lag, so no plot
    (and the note says why), and its time bins are still round."""
    make_offline_run(tmp_path / "off")
    data = run_report_data(tmp_path / "off")
    assert data["series"]["send_lag_bins"] == 1
    assert str(round(data["series"]["bin_s"] * 1e9)).strip("0") in {"1", "2", "5"}
    html = render_report(tmp_path / "off")
    assert 'data-series="send_lag"' not in html and 'id="no-send-lag"' in html
    assert 'data-series="throughput"' in html and 'id="no-errors"' in html


def test_concurrency_sweep_reads_in_load_order(run_dir: Path) -> None:
    """Closed-loop runs (no target rate) sort by concurrency, and carry it for the labels."""
    base = load_results(run_dir)
    runs = []
    for c, tput in ((16, 2900.0), (1, 300.0), (4, 1100.0)):
        doc = json.loads(json.dumps(base))
        doc["settings"]["effective"].update(target_qps=30.0, concurrency=c)
        doc["summary"]["throughput"]["output_tokens_per_second"] = tput
        runs.append((f"c{c}", None, doc))
    cmp = comparison_data(runs)
    assert [p["name"] for p in cmp["points"]] == ["c1", "c4", "c16"]
    assert [p["concurrency"] for p in cmp["points"]] == [1.0, 4.0, 16.0]
    assert all(p["target_qps"] is None for p in cmp["points"]) and cmp["rates"] is False
