"""The web UI as a visitor walks it (issue 27 item 6), over a database holding the
shared published samples, the user's MLPerf Server runs, a poisson and a closed-loop
run, a sweep, a find-peak search and a scaling run (``series_db``):

- every link reachable from the home page answers 200 (a bounded crawl over loopback);
- the user's runs are apart from published results: never a row of a leaderboard or of
  the published results, listed beside the board as not ranked, each with both verdicts
  and the reasons of an INVALID one;
- times read as ``2026-12-03 20:55 UTC`` (no microseconds, no ``+00:00``) and systems
  by their names;
- sweeps, find-peak searches and scaling runs are stored and drawn as curves.
"""

from __future__ import annotations

import re
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from tokenmark.api import results as results_api
from tokenmark.resultrows import SOURCE_RUN
from tokenmark.webui import UiConfig, create_app
from tokenmark.webui.render import readable_time

MAX_PAGES = 400
ISO_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(\.\d+)?(\+00:00|Z)?")


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in (("a", "href"), ("link", "href"), ("script", "src")) and value:
                self.hrefs.append(value)


def client(db: str) -> TestClient:
    return TestClient(create_app(UiConfig(db=db, allowed_hosts=("testserver",))))


@pytest.fixture(scope="module")
def crawl(series_db: str) -> dict[str, tuple[int, str, str]]:
    """Every same-site URL reachable from ``/``: url -> (status, content type, body)."""
    c = client(series_db)
    seen: dict[str, tuple[int, str, str]] = {}
    todo = deque(["/"])
    while todo and len(seen) < MAX_PAGES:
        url = todo.popleft()
        if url in seen:
            continue
        r = c.get(url)
        kind = r.headers.get("content-type", "")
        seen[url] = (r.status_code, kind, r.text if "text" in kind or "json" in kind else "")
        if r.status_code != 200 or not kind.startswith("text/html"):
            continue
        parser = Links()
        parser.feed(r.text)
        for href in parser.hrefs:
            full = urljoin("http://testserver" + url, href)
            parts = urlsplit(full)
            if parts.netloc != "testserver":
                continue
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if target not in seen:
                todo.append(target)
    assert not todo, f"the crawl stopped at {MAX_PAGES} pages with {len(todo)} to go"
    return seen


def test_every_link_from_home_answers_200(crawl: dict[str, tuple[int, str, str]],
                                          series_db: str) -> None:
    failed = {u: s for u, (s, _, _) in crawl.items() if s != 200}
    assert not failed, failed
    # the crawl reached what the database holds: every run, every series, the boards
    runs = results_api.list_runs(db=series_db)
    series = results_api.list_series(db=series_db)
    assert {r.info("scenario") for r in runs} >= {"Server", "poisson", "closed"}
    assert {s.kind for s in series} == {"sweep", "find-peak", "scaling"}
    for r in runs:
        assert f"/runs/{r.run_hash}" in crawl
    for s in series:
        assert f"/series/{s.series_hash}" in crawl
    boards = [u for u in crawl if u.startswith("/leaderboard?")]
    assert boards and not [u for u in boards if re.search(r"scenario=(poisson|closed)\b", u)]


def test_user_runs_are_never_ranked_among_published_results(series_db: str) -> None:
    c = client(series_db)
    own = results_api.list_runs(db=series_db, benchmark="llama3.1-8b", scenario="Server")
    assert len(own) == 4  # the three of the sweep fixture and the hostile one
    html = c.get("/leaderboard", params={"benchmark": "llama3.1-8b", "scenario": "Server",
                                         "round": "all", "division": "any",
                                         "availability": "any"}).text
    board, _, beside = html.partition('id="own-runs"')
    for r in own:
        assert r.run_hash not in board
        assert f'data-run="{r.run_hash}"' in beside
    assert "local" not in re.findall(r"<td>([^<]*)</td>", board)  # no 'local' submitter
    published = c.get("/results").text
    assert all(r.run_hash not in published for r in results_api.list_runs(db=series_db))
    rows = results_api.list_results(db=series_db)
    shown = len(re.findall(r'<tr data-key=', published))
    assert shown == len([r for r in rows if r.source != SOURCE_RUN]) < len(rows)
    # the JSON API still answers with every row (the CLI's view): nothing is hidden
    assert len(c.get("/api/results").json()) == len(rows)


def test_validity_and_reasons_wherever_a_run_appears(series_db: str) -> None:
    c = client(series_db)
    bad = next(r for r in results_api.list_runs(db=series_db)
               if r.mlperf_validity == "INVALID" and r.info("scenario") == "Server")
    fail = next(f for f in bad.findings if f.blocks)  # an MLPerf rule: both verdicts fail
    for url in ("/runs", "/leaderboard?benchmark=llama3.1-8b&scenario=Server"
                "&round=all&division=any&availability=any"):
        html = c.get(url).text
        row = html[html.index(f'data-run="{bad.run_hash}"'):]
        row = row[:row.index("</tr>")]
        assert 'class="badge INVALID"' in row, url
        assert row.count(f"<li>{fail.rule}: ") == 2 and "unverified" in row, url
    # published rows carry their validity column
    assert 'class="badge VALID"' in c.get("/results").text


def test_times_and_names_people_read(crawl: dict[str, tuple[int, str, str]],
                                     series_db: str) -> None:
    assert readable_time("2026-12-03T20:55:12.123456+00:00") == "2026-12-03 20:55 UTC"
    assert readable_time("2026-12-03T21:55:12+01:00") == "2026-12-03 20:55 UTC"
    assert readable_time("not a time") == "not a time" and readable_time("") == "-"
    pages = {u: body for u, (_, kind, body) in crawl.items() if kind.startswith("text/html")}
    for url, body in pages.items():
        text = re.sub(r"<script.*?</script>", "", body, flags=re.S)  # data, not prose
        assert not ISO_TIME.search(re.sub(r"\d{2}:\d{2} UTC", "", text)), url
    runs = results_api.list_runs(db=series_db)
    home = pages["/"]
    assert readable_time(runs[0].started_utc) in home
    # published systems by name, their id on hover
    row = next(r for r in results_api.list_results(db=series_db)
               if r.system_name and r.source != SOURCE_RUN)
    results = client(series_db).get("/results", params={"submitter": row.submitter}).text
    assert f'title="{row.system_id}">{row.system_name}</td>' in results.replace("&#34;", '"')


def test_series_are_stored_and_drawn_as_curves(series_db: str) -> None:
    c = client(series_db)
    by_kind = {}
    for s in results_api.list_series(db=series_db):
        by_kind.setdefault(s.kind, s)
    sweep = by_kind["sweep"]
    assert [p.data["value"] for p in sweep.points] == [4.0, 6.0, 10.0]
    assert all(p.run_hash for p in sweep.points)
    html = c.get(f"/series/{sweep.series_hash}").text
    # the report's throughput-latency chart (the comparison's Pareto plots), one point a run
    assert 'data-plot="pareto"' in html
    assert html.count('data-run="rate ') == 3
    assert "rate 10/s" in html and 'class="badge INVALID"' in html  # over capacity
    peak = by_kind["find-peak"]
    html = c.get(f"/series/{peak.series_hash}").text
    assert 'id="peak"' in html and "confirmed VALID" in html
    scaling = by_kind["scaling"]
    assert [p.data["replicas"] for p in scaling.points] == [1, 2]
    html = c.get(f"/series/{scaling.series_hash}").text
    assert 'data-plot="scaling-efficiency"' in html and "2 replicas" in html
    # the API answers the same series
    api = c.get(f"/api/series/{scaling.series_hash[:10]}").json()
    assert api["points"][1]["data"]["efficiency"] == scaling.points[1].data["efficiency"]
    assert c.get("/series/zz").status_code == 400
    # a point's run page names its series
    run_page = c.get(f"/runs/{sweep.points[2].run_hash}").text
    assert f'rate 10/s of the <a href="/series/{sweep.series_hash}">' in run_page
