"""``--tokenizer server``: prompts built through a server's own tokenize endpoints.

The exact server answers vLLM's ``/tokenize`` and ``/detokenize`` with tokenmark's
built-in tokenizer and counts prompt tokens with it, so the server's ``usage`` is the
ground truth: every prompt built through it must be exactly the planned length.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tokenmark.adapters.server_tokenizer import ServerTokenizer
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.output.records import read_records
from tokenmark.servers.process import ServerProcess
from tokenmark.tokenizer import BuiltinTokenizer, exact_text


def test_the_server_tokenizer_builds_exact_prompts():
    with ServerProcess([]).start() as srv:
        tok = ServerTokenizer(srv.url, "exact")
        assert tok.shape == "vllm" and len(tok.word_ids()) >= 16
        ds = SyntheticDataset(12, LengthDistribution.parse("uniform:5:60"),
                              LengthDistribution.parse("4"), tokenizer=tok)
        builtin = BuiltinTokenizer()
        for i in range(len(ds)):
            s = ds.sample(i)
            assert builtin.count(s.prompt) == s.input_tokens == len(tok.encode(s.prompt))
        before = tok.round_trips
        text, ids = exact_text(tok, list(tok.word_ids())[:5])
        assert len(ids) == 5 and tok.encode(text) == list(ids)
        ds.sample(3)  # rebuilt: the server is not asked again for a text it tokenized
        assert tok.round_trips <= before + 4
        tok.close()


def test_the_cli_builds_prompts_with_the_server_and_warns_only_for_other_servers(tmp_path):
    with ServerProcess([]).start() as srv:
        res = subprocess.run(
            [sys.executable, "-m", "tokenmark", "run", "-s", "closed", "--concurrency", "4",
             "--dataset-size", "12", "--output-len", "4", "--input-len", "uniform:8:40",
             "--url", srv.url, "--tokenizer", "server", "--no-db", "-o",
             str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
        assert res.returncode in (0, 1), res.stderr
        assert "prompts built with the server's tokenizer" in res.stderr
        assert "warning: prompts are measured" not in res.stderr  # a tokenmark server
    recs = list(read_records(tmp_path / "o" / "records.jsonl"))
    assert recs and all(r.server_input_tokens == r.input_tokens for r in recs)
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    names = [f["rule"] for f in doc["verdicts"]["tokenmark"]["findings"]]
    assert "input_length_agreement" in names
    assert doc["run"]["sut"]["name"].startswith("exact on tokenmark/")


def test_a_tokenize_request_nested_100k_deep_is_refused_and_the_server_goes_on():
    import http.client

    deep = '{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with ServerProcess([]).start() as srv:
        host, port = srv.url.split("//")[1].split("/")[0].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            for body, status in ((deep, 400), ('{"prompt": " hello"}', 200)):
                conn.request("POST", "/tokenize", body.encode(),
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                answer = json.loads(resp.read())
                assert resp.status == status, answer
        finally:
            conn.close()
    assert answer["count"] == len(answer["tokens"]) > 0
