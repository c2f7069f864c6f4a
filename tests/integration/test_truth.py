"""Truth against real servers: every token, length and error equal to the server's own.

Two kinds of server, each with its own ground truth:

- the exact server in its adversarial mode: answers whose token texts are drawn to break
  a byte scanner (``else``, ``return``, ``"error": {``, ``data: [DONE]``, quotes,
  backslashes, ``\\u`` escapes, every first letter), several events written together
  at each step so one socket read holds many events, 16 streams in flight. Its truth
  rows hold each answer's text and token count;
- llama.cpp's server (``llama-cpp-python``) and ``transformers serve`` on the tiny
  random Llama (its byte-level BPE vocabulary, trained on Python's standard library,
  has words starting with every letter), 128-token answers, 16 in flight. Their ground
  truth: llama.cpp's own log (``eval time = ... / N runs`` per request: N + 1 tokens
  generated) and the logprobs entry it streams with each token; ``transformers serve``'s
  usage (its own count); both logs free of errors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import tinymodel
from tests.fixtures.servers import ThirdPartyServer, free_port, require_or_skip
from tests.integration.openai_support import closed, truth_rows
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.api.run import RunResult, run_benchmark
from tokenmark.clock import Clock
from tokenmark.config.layering import LayeredSettings
from tokenmark.dataset import Dataset, LengthDistribution, SyntheticDataset
from tokenmark.output.records import read_records
from tokenmark.records import ErrorClass, RequestRecord, TokenSource
from tokenmark.servers.process import ServerProcess
from tokenmark.sut import SystemUnderTest

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false"}


class _Capture:
    """Passes a handle's calls through, keeping the answer's text."""

    def __init__(self, h: Any, texts: dict[int, str | None], seq: int) -> None:
        self._h, self._texts, self._seq = h, texts, seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self._h, name)

    def complete(self, *a: Any, text: str | None = None, **kw: Any) -> None:
        self._texts[self._seq] = text
        self._h.complete(*a, text=text, **kw)


class TextSUT(OpenAIHttpSUT):
    """The HTTP client, keeping each answer's text (``keep_text``) for the checks."""

    def __init__(self, clock: Clock, config: OpenAIConfig) -> None:
        super().__init__(clock, config)
        self.texts: dict[int, str | None] = {}

    def issue(self, query: Any, handle: Any) -> None:
        super().issue(query, _Capture(handle, self.texts, query.seq))


def run(tmp: Path, layered: LayeredSettings, ds: Dataset, cfg: OpenAIConfig
        ) -> tuple[RunResult, list[RequestRecord], TextSUT]:
    suts: list[TextSUT] = []

    def factory(clock: Clock) -> SystemUnderTest:
        suts.append(TextSUT(clock, cfg))
        return suts[0]

    res = run_benchmark(layered, ds, factory, tmp, drain_timeout_s=60)
    return res, list(read_records(tmp / "records.jsonl")), suts[0]


def findings(res: RunResult) -> dict[str, Any]:
    return {f.rule: f for f in res.verdicts.tokenmark.findings}


# -- the exact server, adversarial ------------------------------------------------------


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_adversarial_texts_many_events_per_read_are_counted_exactly(tmp_path, api):
    n_tokens, n = 128, 48
    with ServerProcess(["--itl-ms", "2", "--ttft-ms", "5", "--step-tokens", "8",
                        "--adversarial"], truth=tmp_path / "truth.jsonl") as srv:
        cfg = OpenAIConfig(urls=(srv.url,), api=api, max_tokens=n_tokens, keep_text=True)
        ds = SyntheticDataset(16, LengthDistribution.parse("8"),
                              LengthDistribution.parse(str(n_tokens)))
        res, recs, sut = run(tmp_path / "run", closed(n, 16), ds, cfg)
        srv.stop()
        truth = truth_rows(tmp_path / "truth.jsonl")
    truth.pop("", None)  # the prompt probes sent before the run carry no request id
    assert len(recs) == len(truth) == n and res.summary.failed == 0
    first = {t["text"][:1] for t in truth.values()}
    assert {"e", "r", '"', "\\"} <= set("".join(t["text"] for t in truth.values()))
    assert len(first) > 5  # answers begin with many different characters
    many = 0
    for r in recs:
        t = truth[sut.request_id(r.seq)]
        assert r.ok and r.error is None, r.error_detail
        assert r.output_tokens == r.stream_tokens == sum(r.chunk_tokens) == t["tokens"] == \
            n_tokens
        assert r.token_basis == "events" and r.token_source is TokenSource.USAGE
        assert r.finish_reason == "length" and r.reasoning_tokens == -1
        assert sut.texts[r.seq] == t["text"]  # every event parsed: the exact text
        many += max(r.chunk_tokens) > 1
    assert many >= n // 2  # reads held several events (the case that broke the scanner)
    assert res.verdicts.valid or not any(
        f.blocks and f.rule not in ("client_saturation", "client_overhead")
        for f in res.verdicts.tokenmark.findings)
    assert "stream_usage_agreement" in findings(res)
    assert findings(res)["stream_usage_agreement"].passed


def test_usage_that_overstates_the_stream_is_flagged(tmp_path):
    with ServerProcess(["--faults", "ok,usage:5"], truth=tmp_path / "truth.jsonl") as srv:
        cfg = OpenAIConfig(urls=(srv.url,))
        ds = SyntheticDataset(8, LengthDistribution.parse("8"), LengthDistribution.parse("12"))
        res, recs, _ = run(tmp_path / "run", closed(8, 2), ds, cfg)
    f = findings(res)["stream_usage_agreement"]
    assert not f.passed and f.observed.startswith("4 of 8 requests with exact")
    assert sorted(r.output_tokens - r.stream_tokens for r in recs) == [0] * 4 + [5] * 4


# -- llama.cpp and transformers serve -------------------------------------------------------


def _model() -> tinymodel.TinyModel:
    lacking = tinymodel.missing()
    if lacking:
        pytest.skip(f"the tiny model fixture needs: pip install {' '.join(lacking)}")
    return tinymodel.build()


def start(backend: str, tmp: Path, *, interrupt: bool = False) -> ThirdPartyServer:
    port = free_port()
    if backend == "hf":
        exe = Path(sys.executable).parent / "transformers"
        if importlib.util.find_spec("torch") is None or not exe.exists():
            require_or_skip("hf", 'transformers serve is not installed: pip install '
                            'torch==2.13.0 "transformers[serving]"')
        model = _model()
        cmd = [str(exe), "serve", str(model.hf_dir), "--host", "127.0.0.1", "--port",
               str(port), "--device", "cpu", "--continuous-batching"]
    else:
        if importlib.util.find_spec("llama_cpp") is None:
            require_or_skip("llamacpp", 'llama.cpp\'s server is not installed: '
                            'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install '
                            '"llama-cpp-python[server]==0.3.36"')
        model = _model()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model.gguf),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2",
               "--n_ctx", "2048", "--logits_all", "True",
               "--interrupt_requests", str(interrupt)]
    return ThirdPartyServer(cmd, port, tmp / f"{backend}.log", env=OFFLINE).start()


def _letters(texts: list[str | None]) -> set[str]:
    words = " ".join(t or "" for t in texts).split()
    return {w[0].lower() for w in words if w[0].isalpha() and w[0].isascii()}


_EVAL = re.compile(r"eval time =.*/\s+(\d+) runs")


def served_tokens(log: str) -> list[int]:
    """Tokens llama.cpp generated per request, from its own log: ``eval time = ... / N
    runs`` (each run decodes one sampled token; the first comes out of the prompt's
    evaluation and the last is never decoded, so an answer of 128 tokens shows 127)."""
    return [int(m) + 1 for m in _EVAL.findall(log)]


@pytest.mark.realserver
@pytest.mark.parametrize("backend", ["llamacpp", "hf"])
def test_counts_lengths_and_errors_equal_the_servers_own(tmp_path, backend):
    model = _model()
    srv = start(backend, tmp_path)
    try:
        from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

        tok = load_hf_tokenizer(model.tokenizer)
        ds = SyntheticDataset(16, LengthDistribution.parse("uniform:16:48"),
                              LengthDistribution.parse("128"), tokenizer=tok, seed=3)
        # llama.cpp: logprobs give each streamed token (its streams carry no usage)
        exact = {"logprobs": 1, "min_tokens": 128} if backend == "llamacpp" else {}
        cfg = check_target(OpenAIConfig(
            urls=(srv.url,), temperature=0.0, max_tokens=128,
            extra_body=json.dumps(exact), tokenizer=str(model.tokenizer), keep_text=True))
        res, recs, sut = run(tmp_path / "run", closed(16, 16), ds, cfg)
        log = srv.log.read_text(errors="replace")
    finally:
        srv.stop()
    assert len(recs) == 16 and res.summary.failed == 0, [r.error_detail for r in recs]
    assert "Traceback" not in log and " 500 " not in log  # the server logged no error
    letters = _letters(list(sut.texts.values()))
    assert {"e", "r"} <= letters and len(letters) >= 15  # answers of every kind of word
    overhead = res.document["lengths"]["probe"]["overhead"]
    if backend == "llamacpp":
        # the server's log: the 2 prompt probes (max_tokens 1) and 16 answers of 128
        served = served_tokens(log)
        assert len(served) == 18 and sorted(served)[2:] == [128] * 16, served
        for r in recs:  # no usage in its streams: each token's logprobs entry counts
            assert r.token_basis == "logprobs" and r.stream_tokens == 128
            assert r.demanded_output_tokens == 128 and r.server_input_tokens == -1
            assert r.output_tokens == 128 or r.token_source is TokenSource.TOKENIZER
    else:
        for r in recs:  # usage is the server's own count; events never exceed it
            assert r.token_source is TokenSource.USAGE and r.output_tokens == 128
            assert r.server_input_tokens == r.input_tokens + overhead
            assert 1 <= r.stream_tokens <= r.output_tokens and r.token_basis == "usage"
    assert all(r.finish_reason == "length" for r in recs)
    found = findings(res)
    assert found["input_length_agreement"].passed, found["input_length_agreement"].observed
    assert found["stream_usage_agreement"].passed if "stream_usage_agreement" in found \
        else backend == "llamacpp"
    assert res.document["run"]["sut"]["served_model"] == cfg.model


@pytest.mark.realserver
def test_the_builtin_tokenizer_against_a_real_server_warns_and_fails_the_length_check(
        tmp_path):
    """A planned prompt of built-in words is several times longer to the model: the CLI
    warns before the run, and the finding fails with the numbers."""
    srv = start("llamacpp", tmp_path)
    try:
        res = subprocess.run(
            [sys.executable, "-m", "tokenmark", "run", "-s", "closed", "--concurrency", "2",
             "--dataset-size", "8", "--input-len", "200", "--output-len", "4", "--url",
             srv.url, "--no-db", "-o", str(tmp_path / "o")],
            capture_output=True, text=True, timeout=900, env={**os.environ, **OFFLINE})
    finally:
        srv.stop()
    assert res.returncode == 1, res.stderr
    assert "warning: prompts are measured with tokenmark's built-in" in " ".join(
        res.stderr.split())
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    f = {x["rule"]: x for x in doc["verdicts"]["tokenmark"]["findings"]}
    probe = doc["lengths"]["probe"]["sample0"]
    assert not f["input_length_agreement"]["passed"]
    assert probe["served"] > 1.5 * probe["planned"], probe
    assert "--tokenizer" in f["input_length_agreement"]["advice"]
    assert doc["run"]["title"].startswith("tiny-f32.gguf") or "gguf" in doc["run"]["title"]


@pytest.mark.realserver
def test_answers_cut_short_are_counted_by_finish_reason(tmp_path):
    """llama.cpp's interrupt_requests (its default) ends a stream with [DONE] when the
    next request arrives: the answers are 'complete' but shorter than demanded."""
    model = _model()
    srv = start("llamacpp", tmp_path, interrupt=True)
    try:
        from tokenmark.sources.hf_tokenizer import load_hf_tokenizer

        ds = SyntheticDataset(16, LengthDistribution.parse("16"),
                              LengthDistribution.parse("128"),
                              tokenizer=load_hf_tokenizer(model.tokenizer))
        cfg = check_target(OpenAIConfig(
            urls=(srv.url,), temperature=0.0, max_tokens=128,
            extra_body='{"min_tokens": 128, "logprobs": 1}'))
        res, recs, _ = run(tmp_path / "run", closed(16, 16), ds, cfg)
    finally:
        srv.stop()
    cut = [r for r in recs if r.ok and r.output_tokens < 128]
    assert cut, "llama.cpp cut no answer short"
    assert all(r.demanded_output_tokens == 128 and r.finish_reason == "" for r in cut)
    f = findings(res)["output_length"]
    assert not f.passed and f.observed.startswith(f"{len(cut)} of ")
    assert "no finish_reason" in f.observed
    assert not res.verdicts.valid
    empties = [r for r in recs if r.error is ErrorClass.EMPTY_RESPONSE]
    assert all(r.done_ns >= 0 and not r.chunk_ns for r in empties)


# -- issue 25 items 7 and 8; records from worker processes ------------------------------


def test_serve_fault_usage_fires_the_usage_finding_through_the_cli(tmp_path):
    """``tokenmark serve --fault usage:5=...``: the emulated server's usage overstates its
    stream by 5 tokens; it names itself ``tokenmark/`` (one token per event), so the
    comparison is exact and the finding fails."""
    port = free_port()
    serve = ThirdPartyServer([sys.executable, "-m", "tokenmark", "serve", "--port", str(port),
                              "--fault", "usage:5=0.5"], port, tmp_path / "serve.log")
    with serve:
        res = subprocess.run(
            [sys.executable, "-m", "tokenmark", "run", "-s", "closed", "--concurrency", "4",
             "--dataset-size", "16", "--input-len", "16", "--output-len", "8",
             "--min-queries", "16", "--max-queries", "16", "--min-duration", "0",
             "--url", serve.url, "--no-db", "-o", str(tmp_path / "o")],
            capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    f = {x["rule"]: x for x in doc["verdicts"]["tokenmark"]["findings"]}
    recs = list(read_records(tmp_path / "o" / "records.jsonl"))
    off = sum(1 for r in recs if r.output_tokens - r.stream_tokens == 5)
    assert off > 0 and all(r.output_tokens - r.stream_tokens in (0, 5) for r in recs)
    assert not f["stream_usage_agreement"]["passed"]
    assert f["stream_usage_agreement"]["observed"].startswith(f"{off} of {len(recs)}")


def test_an_event_over_the_cap_is_a_malformed_stream(tmp_path):
    with ServerProcess(["--faults", "oversize:40000,ok"], truth=tmp_path / "t.jsonl") as srv:
        cfg = OpenAIConfig(urls=(srv.url,), max_event_bytes=16384)
        ds = SyntheticDataset(4, LengthDistribution.parse("8"), LengthDistribution.parse("6"))
        res, recs, _ = run(tmp_path / "run", closed(4, 1), ds, cfg)
        _, big, _ = run(tmp_path / "big", closed(2, 1), ds, OpenAIConfig(urls=(srv.url,)))
    bad = [r for r in recs if r.error is not None]
    assert len(bad) == 2 and all(r.error is ErrorClass.MALFORMED for r in bad)
    assert all("larger than 16,384 bytes" in r.error_detail for r in bad)
    assert sum(r.ok for r in recs) == 2
    assert all(r.ok and r.output_tokens == 6 for r in big)  # under the default cap


def test_records_from_worker_processes_carry_the_new_fields(tmp_path):
    from tokenmark.adapters.workers import WorkerPoolSUT

    with ServerProcess(["--faults", "ok,usage:3"], truth=tmp_path / "t.jsonl") as srv:
        cfg = OpenAIConfig(urls=(srv.url,), ignore_eos=True, max_tokens=12)
        ds = SyntheticDataset(8, LengthDistribution.parse("10"), LengthDistribution.parse("12"))
        res = run_benchmark(closed(8, 4), ds, lambda c: WorkerPoolSUT(c, cfg, workers=1),
                            tmp_path / "w", drain_timeout_s=60)
    recs = list(read_records(tmp_path / "w" / "records.jsonl"))
    assert len(recs) == 8 and res.summary.failed == 0
    for r in recs:
        assert r.finish_reason == "length" and r.stream_tokens == 12
        assert r.token_basis == "events" and r.demanded_output_tokens == 12
        assert r.server_input_tokens == r.input_tokens == 10
    assert sorted(r.output_tokens for r in recs) == [12] * 4 + [15] * 4
    f = findings(res)
    assert not f["stream_usage_agreement"].passed and f["output_length"].passed
