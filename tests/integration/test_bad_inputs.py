"""Hostile and broken input on every path that parses it: one clear error, exit 2.

Each case gives one bad flag or file to a command (in process, as the CLI runs it) and
expects exit code 2, an ``error:`` line that names the problem, and no traceback:
non-finite and absurd numbers, JSON and TOML nested 100,000 deep, TOML dotted keys of
100,000 parts (quadratic to parse), files far over any real size, binary where text
belongs. The web UI answers such an upload 400 (413 over its size limit), not 500.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tokenmark.cli import app
from tokenmark.webui import UiConfig, create_app

D = 100_000
DEEP_LIST = "[" * D + "]" * D
DEEP_OBJ = '{"a":' * D + "1" + "}" * D
RUN = ["run", "-b", "llama3.1-8b", "--virtual-time", "--no-db", "--min-duration", "0.2"]
SERVER = [*RUN, "-s", "Server"]


def _run_dir(tmp: Path) -> Path:
    out = tmp / "base"
    if not (out / "results.json").exists():
        res = CliRunner().invoke(app, [*RUN, "-s", "constant", "--qps", "50", "-q", "-o",
                                       str(out)])
        assert res.exit_code == 0, res.output
    return out


def _write(tmp: Path, name: str, data: str | bytes) -> str:
    p = tmp / name
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data)
    return str(p)


def _copy_run(tmp: Path, name: str, file: str, data: str) -> str:
    import shutil

    dest = tmp / name
    shutil.copytree(_run_dir(tmp), dest)
    (dest / file).write_text(data)
    return str(dest)


Case = Callable[[Path], list[str]]
CASES: dict[str, tuple[Case, str]] = {
    # numbers on the command line
    "--qps inf": (lambda t: [*SERVER, "--qps", "inf"], "not a usable number"),
    "--qps 1e308": (lambda t: [*SERVER, "--qps", "1e308"], "not a usable number"),
    "--qps nan": (lambda t: [*SERVER, "--qps", "nan"], "not a usable number"),
    "--qps 1e10": (lambda t: [*SERVER, "--qps", "1e10"], "one per nanosecond"),
    "--min-duration inf": (lambda t: [*SERVER, "--min-duration", "inf"], "--min-duration"),
    "--warmup nan": (lambda t: [*SERVER, "--warmup", "nan"], "--warmup"),
    "--ttft-ms 1e308": (lambda t: [*SERVER, "--ttft-ms", "1e308"], "--ttft-ms"),
    "--sut-ttft-ms inf": (lambda t: [*SERVER, "--sut-ttft-ms", "inf"], "--sut-ttft-ms"),
    "--trace-speedup nan": (lambda t: [*SERVER, "--trace-speedup", "nan"], "--trace-speedup"),
    "huge --min-queries": (lambda t: [*SERVER, "--qps", "5", "--min-queries", str(10**12)],
                           "limit of 100,000,000"),
    "simulate --qps inf": (lambda t: ["simulate", "--qps", "inf"], "--qps"),
    "sweep --min-duration inf": (lambda t: ["sweep", "--rates", "1,2", "--virtual-time",
                                            "--min-duration", "inf"], "--min-duration"),
    "ui --max-upload-mb inf": (lambda t: ["ui", "--max-upload-mb", "inf"], "--max-upload-mb"),
    "reproducibility --tolerance nan": (lambda t: ["reproducibility", "--tolerance", "nan"],
                                        "--tolerance"),
    "calibrate --duration inf": (lambda t: ["calibrate", "--duration", "inf"], "--duration"),
    # --config TOML
    "--config array 100k deep": (lambda t: [*SERVER, "--config", _write(
        t, "a.toml", "x = " + DEEP_LIST + "\n")], "nested deeper than 64 levels"),
    "--config inline table 100k deep": (lambda t: [*SERVER, "--config", _write(
        t, "b.toml", "x = " + "{b=" * D + "1" + "}" * D + "\n")], "nested deeper"),
    "--config dotted key of 100k parts": (lambda t: [*SERVER, "--config", _write(
        t, "c.toml", "[run]\n" + ".".join(["a"] * D) + " = 1\n")], "dotted key"),
    "--config table header of 100k parts": (lambda t: [*SERVER, "--config", _write(
        t, "d.toml", "[" + ".".join(["a"] * D) + "]\n")], "dotted key"),
    "--config 2 MiB": (lambda t: [*SERVER, "--config", _write(
        t, "e.toml", "# " + "x" * (2 << 20) + "\n")], "larger than 1 MiB"),
    "--config binary": (lambda t: [*SERVER, "--config", _write(
        t, "f.toml", os.urandom(4096) + b"\xff")], "not valid TOML"),
    "--config target_qps = inf": (lambda t: ["run", "-b", "llama3.1-8b", "--virtual-time",
                                             "--no-db", "-s", "Server", "--config", _write(
        t, "g.toml", "[settings]\ntarget_qps = inf\n")], "finite number"),
    # user.conf
    "--user-conf binary": (lambda t: [*SERVER, "--user-conf", _write(
        t, "a.conf", os.urandom(4096) + b"\xff")], "not text"),
    "--user-conf NUL": (lambda t: [*SERVER, "--user-conf", _write(
        t, "b.conf", "*.Server.target_qps = 1\x00\n")], "NUL"),
    "--user-conf inf": (lambda t: [*SERVER, "--user-conf", _write(
        t, "c.conf", "*.Server.min_duration = inf\n")], "not a finite number"),
    "--user-conf 1e400": (lambda t: [*SERVER, "--user-conf", _write(
        t, "d.conf", "*.Server.target_qps = 1e400\n")], "not a finite number"),
    "--user-conf 2 MiB": (lambda t: [*SERVER, "--user-conf", _write(
        t, "e.conf", "#" * (2 << 20))], "larger than 1 MiB"),
    # datasets
    "--dataset JSON 100k deep": (lambda t: [*SERVER, "--qps", "5", "--dataset", _write(
        t, "a.json", DEEP_LIST)], "nested deeper"),
    "--dataset JSON element 100k deep": (lambda t: [*SERVER, "--qps", "5", "--dataset", _write(
        t, "b.json", '[{"prompt": ' + DEEP_OBJ + "}]")], "nested deeper"),
    "--dataset JSONL 100k deep": (lambda t: [*SERVER, "--qps", "5", "--dataset", _write(
        t, "c.jsonl", DEEP_OBJ + "\n")], "line 1: nested deeper"),
    # report
    "report: results.json 100k deep": (lambda t: ["report", _copy_run(
        t, "r1", "results.json", DEEP_LIST)], "nested deeper"),
    "report: records line 100k deep": (lambda t: ["report", _copy_run(
        t, "r2", "records.jsonl", DEEP_OBJ + "\n")], "not a tokenmark record"),
    "report: records line not a record": (lambda t: ["report", _copy_run(
        t, "r3", "records.jsonl", '{"seq": "x"}\n')], "not a tokenmark record"),
    # import
    "import: results.json 100k deep": (lambda t: ["import", "--db", str(t / "x.db"), str(
        Path(_copy_run(t, "i1", "results.json", DEEP_OBJ)) / "results.json")],
        "nested deeper"),
    "import --system 100k deep": (lambda t: ["import", "--db", str(t / "x.db"), "--system",
                                             _write(t, "sys.json", DEEP_LIST),
                                             str(_run_dir(t))], "nested deeper"),
    # other JSON the CLI reads
    "--extra-body 100k deep": (lambda t: [*SERVER, "--qps", "5", "--url", "http://127.0.0.1:9",
                                          "--model", "m", "--no-model-check", "--extra-body",
                                          DEEP_LIST], "nested deeper"),
    "--manifest 100k deep": (lambda t: ["run", "--manifest", _write(t, "m.json", DEEP_OBJ)],
                             "nested deeper"),
    "score: accuracy log 100k deep": (lambda t: ["score", _copy_run(
        t, "s1", "mlperf_log_accuracy.json", DEEP_LIST), "--references", _write(
        t, "ref.json", "[]")], "nested deeper"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_clear_error(tmp_path_factory, name):
    make, expected = CASES[name]
    tmp = tmp_path_factory.mktemp("bad")
    args = make(tmp)
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"{name}: {type(res.exception).__name__}: {res.exception}")
    assert res.exit_code == 2, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert errors and expected in " ".join(errors), res.output
    assert "Traceback" not in res.output


@pytest.fixture
def upload_client(tmp_path: Path) -> TestClient:
    cfg = UiConfig(db=str(tmp_path / "ui.db"), allowed_hosts=("testserver",),
                   upload_token="t0ken-for-the-tests-0123456789", max_upload_bytes=1 << 20)
    return TestClient(create_app(cfg))


@pytest.mark.parametrize(("body", "status", "says"), [
    ('{"schema": "tokenmark.results/1", "run": ' + '{"a":' * D + "1" + "}" * D + "}", 400,
     "nested deeper than 64 levels"),
    ('{"schema": "tokenmark.results/1", "run": ' + "[" * 100 + "]" * 100 + "}", 400,
     "nested deeper than 64 levels"),
    ("{" + "[" * 20_000, 400, "not valid JSON"),
    ("{" + "[" * (2 << 20), 413, "larger than the limit"),
])
def test_the_web_ui_refuses_hostile_uploads_with_400_or_413(upload_client, body, status, says):
    r = upload_client.post("/api/upload", content=body.encode(),
                           headers={"Authorization": "Bearer t0ken-for-the-tests-0123456789"})
    assert r.status_code == status, r.text
    assert says in r.json()["detail"]
    if status == 400:
        assert r.json()["written"] is False


def test_a_csv_prompt_over_the_csv_modules_field_limit_is_read(tmp_path):
    data = tmp_path / "long.csv"
    data.write_text('prompt,max_tokens\n"' + "word " * 40_000 + '",4\n')  # 200 kB, > 128 KiB
    res = CliRunner().invoke(app, [*RUN, "-s", "constant", "--qps", "50", "-q", "--dataset",
                                   str(data), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
