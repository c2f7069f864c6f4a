"""Accuracy mode and the audits on a real model's token streams.

The tiny Llama of ``tests/fixtures/tinymodel.py`` (built locally, random weights) runs
in process (:class:`~tokenmark.engines.hf.HFEngine`), behind tokenmark's own
OpenAI-compatible front, and under ``transformers serve``. Needs torch and transformers
(``make test`` installs them; ``TOKENMARK_REQUIRE=hf`` turns a skip into a failure).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.accuracy.support import run_real
from tests.accuracy.test_compliance import official
from tests.fixtures import tinymodel
from tests.fixtures.servers import ThirdPartyServer, free_port, require_or_skip
from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.clock import MonotonicClock
from tokenmark.compliance.audit import apply_audit, audit_for
from tokenmark.compliance.own import caching_audit, stream_equivalence_audit
from tokenmark.compliance.verify import verify_test06, write_test06
from tokenmark.config.layering import build_settings
from tokenmark.engines.base import GenerationRequest
from tokenmark.mlperf.accuracylog import parse_accuracy_log
from tokenmark.mlperf.settings import Mode, Scenario, effective
from tokenmark.records import Sample
from tokenmark.scoring.evaluate import evaluate
from tokenmark.sources.references import References

pytestmark = pytest.mark.realserver
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "2",
           "TOKENIZERS_PARALLELISM": "false"}
PROMPTS = ["def parse(self, text):", "import os\nimport sys\n", "class Node:\n    def",
           "for i in range(10):", "return self._cache[key]", "with open(path) as f:",
           "raise ValueError(", "    # the loop below", "x = [", "if __name__ ==",
           "async def main():", "try:\n    import"]


@pytest.fixture(scope="module")
def model():
    if importlib.util.find_spec("torch") is None or \
            importlib.util.find_spec("transformers") is None:
        require_or_skip("hf", 'the hf engine needs: pip install torch==2.13.0 transformers')
    if tinymodel.missing():
        require_or_skip("hf", f"the tiny model needs: pip install {tinymodel.missing()}")
    for k, v in OFFLINE.items():
        os.environ.setdefault(k, v)
    return tinymodel.build()


@pytest.fixture(scope="module")
def engine(model):
    from tokenmark.engines.hf import HFEngine

    return HFEngine(model.hf_dir, name="tiny")


class Prompts:
    """Text prompts; the engine tokenizes them (no ids from another vocabulary)."""

    name = "tiny-prompts"
    fingerprint = "tiny-prompts-1"

    def __init__(self, out: int = 8) -> None:
        self.out = out

    def __len__(self) -> int:
        return len(PROMPTS)

    def sample(self, i: int) -> Sample:
        return Sample(i, PROMPTS[i], len(PROMPTS[i].split()), self.out)


def acc_settings(mode=Mode.ACCURACY, audit=None):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, overrides={
        "target_qps": 200.0, "total_sample_count": len(PROMPTS),
        "performance_sample_count": 5, "min_duration_ms": 0, "min_query_count": 24})
    s = layered.settings.with_(mode=mode)
    if audit:
        s = apply_audit(s, audit_for(audit)).with_(min_query_count=24)
    return effective(s, len(PROMPTS))


def test_engine_streams_greedy_tokens_equal_to_generate(engine):
    import torch

    ids = engine.encode("def parse(self, text):")

    async def collect():
        out = []
        async for chunk in engine.generate(GenerationRequest(tuple(ids), 12)):
            out.extend(chunk)
        return out

    got = asyncio.run(collect())
    want = engine.model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)
    assert got == want[0].tolist()[len(ids):]


def test_accuracy_mode_logs_every_sample_and_passes_test06(engine, tmp_path):
    from tokenmark.adapters.engine_sut import EngineSUT

    eff = acc_settings()
    run = run_real(eff, EngineSUT(engine), tmp_path / "acc", len(PROMPTS), ds=Prompts())
    entries = parse_accuracy_log(run.path.read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(len(PROMPTS)))
    assert all(e["token_count"] == 8 for e in entries)
    assert verify_test06(entries, "Server").passed
    # scoring the model against its own outputs is perfect; against others', not
    texts = [engine.decode(__import__("tokenmark.mlperf.accuracylog").mlperf.accuracylog.decode_ids(
        e["data"])) for e in sorted(entries, key=lambda e: e["qsl_idx"])]
    own = evaluate("llama3.1-8b", entries, References("own", tuple(texts), ("",) * 12),
                   engine.decode)
    assert own.metrics["rouge1"] == 100.0
    other = evaluate("llama3.1-8b", entries,
                     References("shifted", tuple(texts[1:] + texts[:1]), ("",) * 12),
                     engine.decode)
    assert other.metrics["rouge1"] < 100.0


def test_official_test06_accepts_the_real_models_audit_log(engine, tmp_path):
    from tokenmark.adapters.engine_sut import EngineSUT

    eff = acc_settings(Mode.PERFORMANCE, audit="TEST06")
    run = run_real(eff, EngineSUT(engine), tmp_path / "run", len(PROMPTS), ds=Prompts())
    entries = parse_accuracy_log(run.path.read_text())
    assert entries and run.recorder.stats.derived_first_tokens == 0
    ours = verify_test06(entries, "Server", eos_token_id=engine.eos_token_id)
    assert ours.passed
    write_test06(tmp_path / "ours", ours, run.path)
    script = official("compliance/TEST06/run_verification.py", tmp_path)
    subprocess.run([sys.executable, str(script), "-c", str(run.path.parent), "-o",
                    str(tmp_path / "theirs"), "-s", "Server"], check=True,
                   capture_output=True, timeout=60)
    name = "TEST06/verify_accuracy.txt"
    assert (tmp_path / "theirs" / name).read_text() == (tmp_path / "ours" / name).read_text()


class CachingEngine:
    """A cheating engine: a repeated prompt is answered from a response cache at once."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.cache: dict[tuple[int, ...], list[int]] = {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def generate(self, req):
        hit = self.cache.get(req.prompt_ids)
        if hit is not None:
            for t in hit:
                yield [t]
            return
        out = []
        async for chunk in self.inner.generate(req):
            out.extend(chunk)
            yield chunk
        self.cache[req.prompt_ids] = out


def test_caching_audit_catches_a_caching_engine(engine):
    from tokenmark.adapters.engine_sut import EngineSUT

    ds = Prompts(out=24)
    honest = asyncio.run(caching_audit(EngineSUT(engine), ds, range(4)))
    assert honest.passed, honest.observed
    cheat = asyncio.run(caching_audit(EngineSUT(CachingEngine(engine)), ds, range(4)))
    assert not cheat.passed and "10x faster" in cheat.observed


def _http_suts(url: str, model_dir: Path):
    base = dict(urls=(url,), tokenizer=str(model_dir / "tokenizer.json"), keep_text=True,
                temperature=0.0)
    streamed = OpenAIHttpSUT(MonotonicClock(), check_target(OpenAIConfig(**base)))
    plain = OpenAIHttpSUT(MonotonicClock(), check_target(OpenAIConfig(**base, stream=False)))
    return streamed, plain


def _equivalence(url: str, model_dir: Path):
    streamed, plain = _http_suts(url, model_dir)  # checks the target: outside any loop

    async def go():
        await streamed.start()
        await plain.start()
        try:
            return await stream_equivalence_audit(streamed, plain, Prompts(out=10), range(6))
        finally:
            await streamed.stop()
            await plain.stop()

    return asyncio.run(go())


def test_own_front_streams_what_it_answers_plainly(engine, model):
    import threading

    from tokenmark.servers.engine_http import EngineHTTPServer

    server = EngineHTTPServer(engine)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        result = _equivalence(server.url, model.root)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
    assert result.passed, result.detail
    assert server.requests == 12


def test_tokenmark_serve_engine_hf_serves_the_model(model, tmp_path):
    """The command line's front for a real model: ``tokenmark serve --engine hf``."""
    port = free_port()
    cmd = [sys.executable, "-m", "tokenmark", "serve", "--engine", "hf", "--model-dir",
           str(model.hf_dir), "--port", str(port)]
    with ThirdPartyServer(cmd, port, tmp_path / "serve.log", env=OFFLINE) as srv:
        result = _equivalence(srv.url, model.root)
    assert result.passed, result.detail


def test_transformers_serve_streams_what_it_answers_plainly(model, tmp_path):
    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists():
        require_or_skip("hf", 'transformers serve is not installed: pip install '
                              '"transformers[serving]"')
    port = free_port()
    cmd = [str(exe), "serve", str(model.hf_dir), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu"]
    with ThirdPartyServer(cmd, port, tmp_path / "serve.log", env=OFFLINE) as srv:
        result = _equivalence(srv.url, model.root)
    assert result.passed, result.detail


def test_transformers_serve_accuracy_log_is_read_by_the_official_script(model, tmp_path):
    """Over HTTP the output is text: the log holds it re-encoded by the model's tokenizer
    and the server's own token count, so TEST06's length check compares the two."""
    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists():
        require_or_skip("hf", 'transformers serve is not installed')
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model.tokenizer))
    port = free_port()
    cmd = [str(exe), "serve", str(model.hf_dir), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu"]
    with ThirdPartyServer(cmd, port, tmp_path / "serve.log", env=OFFLINE) as srv:
        cfg = check_target(OpenAIConfig(urls=(srv.url,), tokenizer=str(model.tokenizer),
                                        keep_text=True, temperature=0.0))
        run = run_real(acc_settings(), OpenAIHttpSUT(MonotonicClock(), cfg), tmp_path / "acc",
                       len(PROMPTS), encode=lambda t: tok.encode(t).ids, ds=Prompts())
    entries = parse_accuracy_log(run.path.read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(len(PROMPTS)))
    assert run.recorder.stats.encoded_from_text == len(PROMPTS)
    ours = verify_test06(entries, "Server")
    write_test06(tmp_path / "ours", ours, run.path)
    script = official("compliance/TEST06/run_verification.py", tmp_path)
    subprocess.run([sys.executable, str(script), "-c", str(run.path.parent), "-o",
                    str(tmp_path / "theirs"), "-s", "Server"], check=True,
                   capture_output=True, timeout=60)
    name = "TEST06/verify_accuracy.txt"
    assert (tmp_path / "theirs" / name).read_text() == (tmp_path / "ours" / name).read_text()
