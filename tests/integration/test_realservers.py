"""End to end against real third-party servers: ``transformers serve`` and llama.cpp.

A server no one here wrote is the honest test of the client: its own SSE framing,
usage reporting, chat template and model listing. Both serve the same tiny random Llama
(``tests/fixtures/tinymodel.py``, built locally, never downloaded) on CPU.

Needs (``make test`` installs them and sets ``TOKENMARK_REQUIRE=hf,llamacpp`` so a
missing one fails instead of skipping):

- hf: ``pip install torch==2.13.0 "transformers[serving]" tokenizers safetensors gguf``
- llamacpp: ``CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python[server]==0.3.36"
  tokenizers safetensors gguf``
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.fixtures import tinymodel
from tests.fixtures.servers import ThirdPartyServer, free_port, require_or_skip
from tests.integration.openai_support import Run, closed
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.errors import TargetError
from tokenmark.records import TokenSource

pytestmark = pytest.mark.realserver

HF_INSTALL = 'pip install torch==2.13.0 "transformers[serving]"'
LLAMA_INSTALL = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python[server]==0.3.36"'
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false"}


def tiny_model(backend: str) -> tinymodel.TinyModel:
    lacking = tinymodel.missing()
    if lacking:
        require_or_skip(backend, f"the tiny model fixture needs: pip install {' '.join(lacking)}")
    return tinymodel.build()


def start(backend: str, tmp: Path) -> ThirdPartyServer:
    port = free_port()
    if backend == "hf":
        exe = Path(sys.executable).parent / "transformers"
        if importlib.util.find_spec("torch") is None or not exe.exists():
            require_or_skip("hf", f"transformers serve is not installed: {HF_INSTALL}")
        model = tiny_model("hf")
        cmd = [str(exe), "serve", str(model.hf_dir), "--host", "127.0.0.1", "--port",
               str(port), "--device", "cpu"]
    else:
        if importlib.util.find_spec("llama_cpp") is None:
            require_or_skip("llamacpp", f"llama.cpp's server is not installed: {LLAMA_INSTALL}")
        model = tiny_model("llamacpp")
        # interrupt_requests (on by default) would cut a streaming answer short whenever
        # the next request arrives; off, the server answers one request at a time
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model.gguf),
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2",
               "--n_ctx", "2048", "--interrupt_requests", "False"]
    return ThirdPartyServer(cmd, port, tmp / f"{backend}.log", env=OFFLINE).start()


@pytest.fixture(scope="module", params=["hf", "llamacpp"])
def real(request, tmp_path_factory):
    backend = request.param
    srv = start(backend, tmp_path_factory.mktemp(backend))
    try:
        yield backend, srv, tiny_model(backend)
    finally:
        srv.stop()


def check_records(run: Run, max_tokens: int, streamed: bool) -> None:
    assert run.result.summary.failed == 0, [r.error_detail for r in run.records if r.error]
    for r in run.records:
        # a count by the client tokenizer re-encodes the decoded text, which can split
        # differently from the tokens generated (llama.cpp reports no streamed usage)
        assert r.ok and 1 <= r.output_tokens <= 2 * max_tokens
        assert r.token_source in (TokenSource.USAGE, TokenSource.TOKENIZER)
        if r.token_source is TokenSource.USAGE:
            assert r.alt_output_tokens >= 0  # the client tokenizer's second opinion
        assert r.issued_ns <= r.first_token_ns <= r.done_ns
        assert r.chunk_ns == sorted(r.chunk_ns)
        if not streamed:
            assert len(r.chunk_ns) == 1
    if streamed:  # tokens arrive over time (a loaded machine may read a short answer whole)
        spread = [len(r.chunk_ns) >= 2 for r in run.records if r.output_tokens > 2]
        assert sum(spread) >= len(spread) / 2, spread
    # The tokenizer re-encodes the decoded text, which need not give the generated ids
    # back (a random model emits partial UTF-8 that servers decode to U+FFFD); every
    # disagreement is flagged, and only those.
    differ = sum(1 for r in run.records if 0 <= r.alt_output_tokens != r.output_tokens)
    found = {f.rule: f for f in run.result.verdicts.tokenmark.findings}
    if differ:
        assert f"{differ} requests" in found["token_count_agreement"].observed
    else:
        assert "token_count_agreement" not in found


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_streamed_runs_end_to_end(real, tmp_path, api):
    _, srv, model = real
    cfg = check_target(OpenAIConfig(urls=(srv.url,), api=api, tokenizer=str(model.tokenizer),
                                    temperature=0.0))
    run = Run(tmp_path, closed(6, 2), cfg, output=16)
    check_records(run, 16, streamed=True)
    s = run.result.summary
    assert s.ttft.count == 6 and s.ttft.percentiles[0.5] > 0


def test_not_streamed(real, tmp_path):
    _, srv, model = real
    cfg = check_target(OpenAIConfig(urls=(srv.url,), stream=False,
                                    tokenizer=str(model.tokenizer), temperature=0.0))
    run = Run(tmp_path, closed(4, 2), cfg, output=8)
    check_records(run, 8, streamed=False)


def test_the_model_check_names_what_the_server_serves(real):
    _, srv, _ = real
    served = check_target(OpenAIConfig(urls=(srv.url,))).model
    with pytest.raises(TargetError, match=f"it serves: {served}"):
        check_target(OpenAIConfig(urls=(srv.url,), model="no-such-model"))


def test_streamed_events_never_exceed_the_reported_usage(real, tmp_path):
    """No tokenizer: counts come from usage (transformers) or from the events (llama.cpp)."""
    backend, srv, _ = real
    cfg = check_target(OpenAIConfig(urls=(srv.url,), temperature=0.0))
    run = Run(tmp_path, closed(4, 1), cfg, output=12)
    for r in run.records:
        assert r.ok
        if r.token_source is TokenSource.USAGE:
            # events that carried text, never more than the tokens: a token that decodes
            # to no complete character yet (partial UTF-8) is held back by the server and
            # its text sent with a later one, so events can be fewer than tokens
            assert 1 <= sum(r.chunk_tokens) <= r.output_tokens
        else:
            assert r.token_source is TokenSource.CHUNKS
    # the built-in tokenizer's prompts are other lengths to the model: only that fails
    failed = {f.rule for f in run.result.verdicts.tokenmark.failed}
    assert failed == {"input_length_agreement"}, (backend, failed)


def test_both_servers_run_the_same_model(tmp_path):
    """The fixture's promise: one model in two formats, greedy ids equal (in-process)."""
    for backend, module in (("hf", "torch"), ("llamacpp", "llama_cpp")):
        if importlib.util.find_spec(module) is None:
            require_or_skip(backend, f"{module} is not installed: "
                            f"{HF_INSTALL if backend == 'hf' else LLAMA_INSTALL}")
    import llama_cpp
    import torch
    import transformers
    from tokenizers import Tokenizer

    model = tiny_model("hf")
    ids = Tokenizer.from_file(str(model.tokenizer)).encode("def parse(self, text):").ids
    torch.set_num_threads(2)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(model.hf_dir))
    want = hf.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0]
    llm = llama_cpp.Llama(str(model.gguf), n_ctx=256, n_threads=2, verbose=False)
    got = []
    for t in llm.generate(ids, temp=0.0, top_k=1):
        got.append(t)
        if len(got) == 16:
            break
    assert got == want.tolist()[len(ids):]
