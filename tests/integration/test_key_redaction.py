"""The API key never reaches an output, whatever it holds and however a server quotes it.

A real ``tokenmark run`` (a process, the key in its environment) against the exact
server, which demands the key and answers some requests with a 401 quoting the
``Authorization`` header it got in every way careless servers do (as sent, JSON-escaped,
``/`` escaped, ``repr``-quoted, URL-encoded, base64 in Basic auth). Keys hold a quote, a
backslash, a slash and non-ASCII characters. Then no form of the key may appear in
records.jsonl, results.json, report.html, the manifest, any other file of the run, the
command's output or errors, or a signed bundle of the run; the quotes are kept, masked
(``Bearer ***``). Once in one process and once with ``--workers 2``.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import tarfile
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.test_redact import leaks
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.api.assemble import server_tokenizer
from tokenmark.errors import TargetError
from tokenmark.servers.process import ServerProcess

KEYS = {
    "quote": 'sk-"SECRET789/x-0001',
    "backslash": "sk-back\\slash\\'q-0002",
    "slash and unicode": "sk-ünïcödé/ÿ-0003-\"\\",
}


def _run(tmp: Path, key: str, *extra: str) -> tuple[Path, str]:
    env = {**os.environ, "TM_SECRET": key}
    with ServerProcess(["--api-key-env", "TM_SECRET", "--faults", "ok,echo_auth,echo_auth"],
                       env=env) as srv:
        out = tmp / "out"
        p = subprocess.run(
            [sys.executable, "-m", "tokenmark", "run", "-b", "llama3.1-8b", "-s",
             "closed-loop", "--concurrency", "1", "--min-queries", "9", "--max-queries", "9",
             "--min-duration", "0", "--url", srv.url, "--api-key-env", "TM_SECRET",
             "--no-db", "-o", str(out), *extra],
            env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    return out, p.stdout + p.stderr


def _bundle(tmp: Path, run: Path, env_key: str) -> list[str]:
    keys = tmp / "keys"
    env = {**os.environ, "TM_SECRET": env_key}
    for args in (["keys", "--name", "t", "--dir", str(keys)],
                 ["bundle", str(run), "--key", str(keys / "t.key"), "-o", str(tmp / "b.tar.gz"),
                  "--no-db"]):
        p = subprocess.run([sys.executable, "-m", "tokenmark", *args], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    texts = []
    with tarfile.open(tmp / "b.tar.gz") as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m)
            if f is not None:
                texts.append(f.read().decode("utf-8", "replace"))
    return texts


@pytest.mark.parametrize("name", list(KEYS))
def test_no_form_of_the_key_in_any_output(tmp_path, name):
    key = KEYS[name]
    workers = ("--workers", "2") if name == "slash and unicode" else ()
    run, said = _run(tmp_path, key, *workers)
    files = {p.name: p.read_text(encoding="utf-8", errors="replace")
             for p in run.rglob("*") if p.is_file()}
    assert {"records.jsonl", "results.json", "report.html", "manifest.json"} <= set(files)
    checked = 0
    for fname, text in {**files, "stdout+stderr": said}.items():
        assert not leaks(text, key), (fname, leaks(text, key))
        checked += 1
    # the server's quotes are kept, masked: 6 of the 9 requests were refused
    records = files["records.jsonl"]
    assert records.count("http_status") == 6 and records.count("Bearer ***") >= 6
    for line in ("as sent", "json", "repr", "url", "basic"):
        assert line in records
    for text in _bundle(tmp_path, run, key):
        assert not leaks(text, key)
        checked += 1
    assert checked >= len(files) + 2


class _Quoting(http.server.BaseHTTPRequestHandler):
    """A server that quotes the Authorization header it got in its ``Server`` header and
    when its ``/tokenize`` refuses a prompt: the serving software and tokenize errors
    reach results and messages."""

    def version_string(self) -> str:
        return "echo " + self.headers.get("Authorization", "")

    def _answer(self, status: int, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(200, {"object": "list", "data": [{"id": "m", "owned_by": "someone"}]})

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if req.get("prompt") == " hello":  # the shape probe: a vLLM /tokenize
            self._answer(200, {"tokens": [7], "count": 1})
        else:
            self._answer(400, {"error": "refused " + self.headers.get("Authorization", "")})

    def log_message(self, *args: object) -> None:
        return None


@pytest.mark.parametrize("name", list(KEYS))
def test_the_server_header_and_tokenize_errors_mask_the_key(monkeypatch, name):
    key = KEYS[name]
    monkeypatch.setenv("TM_SECRET", key)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quoting)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        cfg = check_target(OpenAIConfig(urls=(url + "/v1",), api_key_env="TM_SECRET"))
        assert cfg.served_by.startswith("echo Bearer ***"), cfg.served_by
        assert not leaks(cfg.served_by, key)
        with pytest.raises(TargetError) as e:
            server_tokenizer(replace(cfg, tokenizer="server"))
        assert "refused Bearer ***" in str(e.value) and not leaks(str(e.value), key), e.value
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()
