"""The web UI over HTTP (no browser): the JSON API equals the results API, the pages
escape what users wrote, and the security measures hold (read-only default, upload
token, size limits, validation, headers, Host check)."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.faces.conftest import XSS, make_run
from tokenmark.api import results as results_api
from tokenmark.errors import BadInputError
from tokenmark.store import Store
from tokenmark.webui import UiConfig, create_app
from tokenmark.webui.app import CSP
from tokenmark.webui.server import allowed_hosts_for
from tokenmark.webui.upload import kind_of

TOKEN = "t0ken-for-the-tests-0123456789"
PAGES = ["/", "/runs", "/results", "/leaderboard", "/reproducibility", "/compare",
         "/scaling", "/software-gains", "/upload",
         "/leaderboard?benchmark=llama2-70b-99&scenario=Offline&round=all&division=any",
         "/reproducibility?benchmark=llama2-70b-99&scenario=Offline&round=v6.0",
         "/software-gains?benchmark=llama2-70b-99&scenario=Offline"]


def client(db: str, **kw: object) -> TestClient:
    cfg = UiConfig(db=db, allowed_hosts=("testserver",), **kw)  # type: ignore[arg-type]
    return TestClient(create_app(cfg))


@pytest.fixture
def fresh_db(tmp_path: Path, ui_db: str) -> str:
    """A private copy of the UI database (for tests that write)."""
    dest = tmp_path / "results.db"
    dest.write_bytes(Path(ui_db).read_bytes())
    return str(dest)


@pytest.mark.parametrize("url", PAGES)
def test_every_page_answers_with_the_security_headers(ui_db: str, url: str) -> None:
    r = client(ui_db).get(url)
    assert r.status_code == 200, r.text
    assert r.headers["content-security-policy"] == CSP
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert "<script>" not in r.text  # no inline script: the CSP would block it anyway


def test_json_api_equals_the_results_api(ui_db: str) -> None:
    c = client(ui_db)
    board = results_api.leaderboard("llama2-70b-99", "Offline", db=ui_db, division=None,
                                    round="all")
    got = c.get("/api/leaderboard", params={"benchmark": "llama2-70b-99",
                                            "scenario": "Offline", "division": "any",
                                            "round": "all"}).json()
    for tier, entries in (("single_node", board.single_node), ("multi_node", board.multi_node)):
        assert [(e["rank"], e["row"]["system_id"], e["row"]["value"], e["per_accelerator"])
                for e in got[tier]] == [(e.rank, e.row.system_id, e.row.value,
                                         e.per_accelerator) for e in entries]
    assert got["multi_node"] and got["single_node"]  # the samples have both tiers
    rows = c.get("/api/results").json()
    assert sorted((r["system_id"], r["value"]) for r in rows) == sorted(
        (r.system_id, r.value) for r in results_api.list_results(db=ui_db))
    runs = c.get("/api/runs").json()
    assert [r["run_hash"] for r in runs] == [r.run_hash for r in results_api.list_runs(db=ui_db)]
    one = c.get(f"/api/runs/{runs[0]['run_hash'][:12]}").json()
    assert one["summary"] == results_api.get_run(runs[0]["run_hash"], db=ui_db).summary
    plots = c.get(f"/api/runs/{runs[0]['run_hash']}/report-data").json()
    assert plots["records"] is False and len(plots["distributions"]) == 4
    repro = c.get("/api/reproducibility", params={"benchmark": "llama2-70b-99",
                                                  "scenario": "Offline"}).json()
    assert [g["max_abs_spread"] for g in repro] == [g.max_abs_spread for g in (
        results_api.reproducibility(db=ui_db, benchmark="llama2-70b-99", scenario="Offline"))]


def test_openapi_schema_lists_the_api(ui_db: str) -> None:
    c = client(ui_db)
    spec = c.get("/api/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/api/results", "/api/runs", "/api/runs/{run_hash}", "/api/leaderboard",
            "/api/reproducibility", "/api/compare", "/api/scaling", "/api/software-gains",
            "/api/upload", "/api/status"} <= paths
    assert "LeaderboardOut" in spec["components"]["schemas"]
    assert c.get("/docs").status_code == 404  # the docs pages would load a CDN


def test_bad_input_is_400_and_escaped(ui_db: str) -> None:
    c = client(ui_db)
    r = c.get("/api/leaderboard", params={"benchmark": "llama2-70b-99", "scenario": "No<b>"})
    assert r.status_code == 400 and "No<b>" in r.json()["detail"]
    page = c.get("/leaderboard", params={"benchmark": "llama2-70b-99", "scenario": XSS})
    assert page.status_code == 400
    assert "<script>alert" not in page.text and "&lt;script&gt;alert" in page.text
    miss = c.get("/runs/<script>x")
    assert miss.status_code == 400 and "<script>x" not in miss.text
    assert c.get("/api/runs/00000000").status_code == 400


def test_hostile_run_is_shown_as_text(ui_db: str) -> None:
    c = client(ui_db)
    hostile = next(r for r in results_api.list_runs(db=ui_db) if r.row.system_id == XSS)
    for url in ("/runs", f"/runs/{hostile.run_hash}", "/results", "/",
                f"/runs/compare?run={hostile.run_hash}&run="
                f"{results_api.list_runs(db=ui_db)[0].run_hash}"):
        html = c.get(url).text
        assert "<script>alert" not in html and "<img src=x" not in html, url
        assert "&lt;script&gt;alert(&#34;tm-xss&#34;)" in html, url


def test_read_only_by_default(fresh_db: str, run_dir: Path) -> None:
    c = client(fresh_db)
    r = c.post("/api/upload", content=(run_dir / "results.json").read_bytes())
    assert r.status_code == 403 and "--upload-token" in r.json()["detail"]
    assert "read-only" in c.get("/upload").text


def test_upload_needs_the_token(fresh_db: str, run_dir: Path) -> None:
    before = Store.open(fresh_db).fingerprint()
    c = client(fresh_db, upload_token=TOKEN)
    body = (run_dir / "results.json").read_bytes()
    assert c.post("/api/upload", content=body).status_code == 401
    assert c.post("/api/upload", content=body,
                  headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert c.post("/api/upload", content=body,
                  headers={"Authorization": TOKEN}).status_code == 401  # no scheme
    assert Store.open(fresh_db).fingerprint() == before


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_upload_size_limit(fresh_db: str) -> None:
    c = client(fresh_db, upload_token=TOKEN, max_upload_bytes=1000)
    r = c.post("/api/upload", content=b"{" + b" " * 2000 + b"}", headers=auth())
    assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(10):
            yield b"x" * 500

    assert c.post("/api/upload", content=chunks(), headers=auth()).status_code == 413


def test_upload_is_validated_and_strict(fresh_db: str, run_dir: Path) -> None:
    before = Store.open(fresh_db).fingerprint()
    c = client(fresh_db, upload_token=TOKEN)
    assert c.post("/api/upload", content=b"MZ\x90\x00 not a result",
                  headers=auth()).status_code == 415
    doc = json.loads((run_dir / "results.json").read_text())
    doc["schema"] = "something/9"
    r = c.post("/api/upload", content=json.dumps(doc).encode(), headers=auth())
    assert r.status_code == 400 and "schema" in r.json()["detail"]
    # an archive with a path escaping its folder: refused, nothing stored
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = (run_dir / "results.json").read_bytes()
        info = tarfile.TarInfo("../../escape/results.json")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    r = c.post("/api/upload", content=buf.getvalue(), headers=auth())
    assert r.status_code == 400 and r.json()["written"] is False
    assert Store.open(fresh_db).fingerprint() == before


def test_upload_stores_a_run_and_an_archive(fresh_db: str, tmp_path: Path) -> None:
    c = client(fresh_db, upload_token=TOKEN)
    new = make_run(tmp_path / "new", 20, ttft_ms=33)
    r = c.post("/api/upload", content=(new / "results.json").read_bytes(), headers=auth())
    assert r.status_code == 200 and r.json()["runs"] == 1 and r.json()["added"] >= 1, r.text
    assert any(x.row.value == pytest.approx(json.loads((new / "results.json").read_text())
                                            ["summary"]["loadgen"]["tokens_per_second"])
               for x in results_api.list_runs(db=fresh_db))
    other = make_run(tmp_path / "other", 25, ttft_ms=31)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(other, arcname="other")
    r = c.post("/api/upload", content=buf.getvalue(), headers=auth())
    assert r.status_code == 200 and r.json()["runs"] == 1, r.text


def test_host_header_must_name_this_server(ui_db: str) -> None:
    app = create_app(UiConfig(db=ui_db))  # loopback names only
    r = TestClient(app, base_url="http://evil.example").get("/api/results")
    assert r.status_code == 400
    ok = TestClient(app, base_url="http://127.0.0.1:8321").get("/api/status")
    assert ok.status_code == 200 and ok.json()["counts"]["runs"] >= 4


def test_static_files_are_a_fixed_list(ui_db: str) -> None:
    c = client(ui_db)
    assert c.get("/static/uPlot.iife.min.js").headers["content-type"].startswith("text/javascript")
    for bad in ("/static/..%2Fapp.py", "/static/app.py", "/static/%2e%2e"):
        assert c.get(bad).status_code == 404


def test_weak_tokens_are_refused() -> None:
    with pytest.raises(BadInputError, match="at least 16"):
        UiConfig(upload_token="short")
    with pytest.raises(BadInputError):
        UiConfig(upload_token=" " + TOKEN)


def test_ui_command_refuses_a_weak_token(cli: typer.Typer, ui_db: str) -> None:
    res = CliRunner().invoke(cli, ["ui", "--db", ui_db, "--upload-token", "short"])
    assert res.exit_code == 2 and "at least 16 characters" in res.output


def test_allowed_hosts_follow_the_bind_address() -> None:
    loopback = allowed_hosts_for("127.0.0.1")
    assert loopback is not None and loopback[:2] == ("127.0.0.1", "localhost")
    assert allowed_hosts_for("0.0.0.0") is None
    assert allowed_hosts_for("0.0.0.0", ("ui.example",)) == ("ui.example",)
    assert allowed_hosts_for("10.1.2.3") == ("10.1.2.3",)


def test_upload_kinds() -> None:
    assert kind_of(b"\x1f\x8b\x08rest") == "upload.tar.gz"
    assert kind_of(b"PK\x03\x04") == "upload.zip"
    assert kind_of(b"  {\"schema\"") == "results.json"
    assert kind_of(b"\x00" * 257 + b"ustar\x00") == "upload.tar"
    assert kind_of(b"<html>") is None
