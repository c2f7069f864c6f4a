"""The 2026 workloads on the emulator: images (Qwen3-VL), reasoning streams (DeepSeek-R1,
gpt-oss), early stops, aborts and token ids.

Timing is checked on a fake clock against :class:`~tokenmark.perfmodel.CostModel`'s
steps and, for the vision encoder, against FLOPs worked out by hand; the HTTP shapes
against the counts the server's own usage gives and the built-in tokenizer's ids. No
assertion depends on the machine's speed."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.emulator.test_timing import Log, run_requests
from tokenmark.api.run import SutSpec, run_benchmark
from tokenmark.clock import FakeClock, run_virtual
from tokenmark.config.layering import build_settings
from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.engines.emulated import Emulator, EmulatorSpec
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.perfmodel import CostModel
from tokenmark.perfmodel.outputs import OutputPlanner, output_model
from tokenmark.servers.emulated import REFERENCE_FIELD, EmulatedConfig, EmulatedServer
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.images import ImageSize, data_url, generate_png, sniff


# -- a plain HTTP client for the server's exact bytes -----------------------------------
async def _post(server: EmulatedServer, path: str, obj: dict[str, Any],
                hold: Callable[[asyncio.StreamWriter], Any] | None = None
                ) -> tuple[int, bytes]:
    """POST ``obj``; the status and the body (chunked framing removed)."""
    r, w = await asyncio.open_connection(server.host, server.port)
    body = json.dumps(obj).encode()
    w.write(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
    head = await r.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    low = head.lower()
    if b"transfer-encoding: chunked" in low:
        out = bytearray()
        while True:
            size = int((await r.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await r.readuntil(b"\r\n")
                break
            out += await r.readexactly(size)
            await r.readexactly(2)
        data = bytes(out)
    else:
        n = int(low.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        data = await r.readexactly(n)
    w.close()
    await w.wait_closed()
    return status, data


def _events(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.split(b"\n")
            if line.startswith(b"data: {")]


def serve(spec: EmulatorSpec, cfg: EmulatedConfig, scenario: Callable[[EmulatedServer], Any]
          ) -> Any:
    async def main() -> Any:
        server = EmulatedServer(spec, cfg)
        await server.start()
        try:
            return await scenario(server)
        finally:
            await server.stop()

    return asyncio.run(main())


# -- images -------------------------------------------------------------------------------
def _png_url(w: int, h: int) -> str:
    png = generate_png(0, 0, ImageSize(w, h))
    return data_url(png, sniff(png))  # type: ignore[arg-type]


def _jpeg_url(w: int, h: int) -> str:
    image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    image.new("RGB", (w, h), (1, 2, 3)).save(buf, "JPEG", exif=b"Exif\x00\x00" + bytes(2000))
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def test_images_become_prompt_tokens_by_the_qwen_rule():
    text = "describe these two products"  # 4 words of the built-in tokenizer? counted below
    n_text = BuiltinTokenizer().count(text)
    msg = {"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": _png_url(512, 512)}},
        {"type": "image_url", "image_url": _jpeg_url(640, 480)}]}  # the plain-string form

    async def scenario(server: EmulatedServer) -> None:
        status, data = await _post(server, "/v1/chat/completions", {
            "messages": [msg], "max_tokens": 3, "stream": True,
            "stream_options": {"include_usage": True}})
        assert status == 200
        usage = _events(data)[-1]["usage"]
        # 512 x 512: 32 x 32 patches, 256 tokens; 640 x 480: 40 x 30 patches, 300 tokens;
        # each with <|vision_start|> and <|vision_end|>
        images = (256 + 2) + (300 + 2)
        assert usage["prompt_tokens_details"] == {"image_tokens": images}
        assert usage["prompt_tokens"] == n_text + images
        assert server.emulator.prompt_tokens == n_text + images  # prefilled: all of them
        status, data = await _post(server, "/v1/chat/completions", {"messages": [
            {"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": "https://x/cat.png"}}]}]})
        assert status == 400 and b"data URLs only" in data

    serve(EmulatorSpec(model="qwen3-vl-235b-a22b", time_scale=0.0), EmulatedConfig(),
          scenario)

    async def text_only(server: EmulatedServer) -> None:
        status, data = await _post(server, "/v1/chat/completions", {"messages": [msg]})
        assert status == 400 and b"not a multimodal model" in data

    serve(EmulatorSpec(time_scale=0.0), EmulatedConfig(), text_only)


def test_the_encoder_is_charged_with_the_prefill():
    """One request of 8000 prompt tokens, with and without a 512 x 512 image's encoder
    work (by hand: 1.0581e12 FLOPs), on the emulated Qwen3-VL: the first token comes
    later by exactly that work at the language model's efficiency (the one the Offline
    trace and the engine both charge it at: perfmodel/cost.py)."""
    spec = EmulatorSpec(model="qwen3-vl-235b-a22b")
    d = spec.deployment()
    flops = 1.058097070080e12
    clock = FakeClock()
    firsts: list[int] = []

    async def main() -> None:
        for enc in (0.0, flops):
            em = Emulator(d, clock, stream=False)
            log = Log()
            t0 = clock.now_ns()
            em.submit(8000, 2, log, encoder_flops=enc)
            while log.done < 0:
                await asyncio.sleep(0.01)
            firsts.append(log.first - t0)

    run_virtual(main(), clock)
    eff = d.efficiency
    mfu_enc = min(max(0.98, eff.mfu), eff.mfu * (4096 / 8192) ** eff.size_exponent)
    peak_ns = d.per_replica * d.accelerator.tflops_at(d.precision) * 1e3  # FLOP/ns
    cm = CostModel(d)
    plain = cm.step([(8000, 0)], [])
    assert plain.compute_ns > plain.memory_ns  # a compute-bound prefill: the work adds up
    assert firsts[0] == plain.total_ns
    assert firsts[1] - firsts[0] == pytest.approx(flops / peak_ns / mfu_enc, abs=2)


# -- reasoning streams --------------------------------------------------------------------
@pytest.mark.parametrize(("model", "field"), [("deepseek-r1", "reasoning_content"),
                                              ("gpt-oss-120b", "reasoning")])
def test_reasoning_streams_first_and_usage_counts_it(model, field):
    async def scenario(server: EmulatedServer) -> None:
        req = {"messages": [{"role": "user", "content": "prove it"}], "max_tokens": 300,
               "stream": True, "stream_options": {"include_usage": True}}
        status, data = await _post(server, "/v1/chat/completions", req)
        assert status == 200
        evs = _events(data)
        deltas = [e["choices"][0]["delta"] for e in evs if e["choices"]][1:]  # after role
        kinds = [next(iter(dl)) for dl in deltas]
        r = kinds.count(field)
        assert 0 < r < 300 and kinds == [field] * r + ["content"] * (300 - r)
        usage = evs[-1]["usage"]
        assert usage["completion_tokens"] == 300
        assert usage["completion_tokens_details"] == {"reasoning_tokens": r}
        assert evs[-2]["choices"][0]["finish_reason"] == "length"
        # the same prompt, not streamed: the same split (a greedy model's answer)
        status, data = await _post(server, "/v1/chat/completions", {**req, "stream": False})
        msg = json.loads(data)["choices"][0]["message"]
        assert len(msg[field].split()) == r and len(msg["content"].split()) == 300 - r
        # completions have no reasoning parser: all of it is text
        status, data = await _post(server, "/v1/completions", {
            "prompt": "prove it", "max_tokens": 30, "stream": True,
            "stream_options": {"include_usage": True}})
        evs = _events(data)
        assert sum(1 for e in evs if e["choices"] and e["choices"][0]["text"]) == 30
        assert "completion_tokens_details" not in evs[-1]["usage"]

    serve(EmulatorSpec(model=model, time_scale=0.0), EmulatedConfig(), scenario)


def test_a_reasoning_run_reports_time_to_first_answer_after_ttft(tmp_path):
    """deepseek-r1 in virtual time: every record reasons, then answers; its first answer
    token is its (reasoning + 1)-th token, one model step after the last reasoning one."""
    layered = build_settings("v6.1", "deepseek-r1", Scenario.CLOSED_LOOP, overrides={
        "concurrency": 4, "min_query_count": 8, "max_query_count": 8, "min_duration_ms": 0})
    ds = SyntheticDataset(8, LengthDistribution.parse("200"), LengthDistribution.parse("64"))
    res = run_benchmark(layered, ds, SutSpec(kind="emulated",
                                             emulator=EmulatorSpec(model="deepseek-r1")),
                        tmp_path, virtual_time=True)
    s = res.summary
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == 8
    for r in recs:
        assert r.output_tokens == 64 and 0 < r.reasoning_tokens < 64
        assert r.first_answer_ns == r.chunk_ns[r.reasoning_tokens] > r.first_token_ns
    assert s.reasoning_tokens == sum(r.reasoning_tokens for r in recs)
    assert s.answer_tokens == 8 * 64 - s.reasoning_tokens
    assert s.ttfat is not None and s.ttfat.percentiles[0.5] > s.ttft.percentiles[0.5]


def test_a_reasoning_run_over_http_counts_reasoning_and_answer(tmp_path):
    layered = build_settings("v6.1", "deepseek-r1", Scenario.CLOSED_LOOP, overrides={
        "concurrency": 4, "min_query_count": 8, "max_query_count": 8, "min_duration_ms": 0})
    ds = SyntheticDataset(8, LengthDistribution.parse("200"), LengthDistribution.parse("24"))
    spec = SutSpec(kind="emulated", emulator=EmulatorSpec(model="deepseek-r1"), api="chat",
                   emulator_in_process=True)
    res = run_benchmark(layered, ds, spec, tmp_path, drain_timeout_s=60)
    recs = list(read_records(tmp_path / "records.jsonl"))
    assert len(recs) == 8 and all(r.ok for r in recs)
    for r in recs:
        assert r.output_tokens == 24 and 0 < r.reasoning_tokens < 24
        assert r.first_answer_ns >= r.first_token_ns
    assert res.summary.reasoning_tokens + res.summary.answer_tokens == 8 * 24


# -- early stops and aborts free capacity -------------------------------------------------
def test_an_early_stop_lets_the_next_request_start_sooner():
    """One sequence at a time: B waits for A. A planned to stop at its reference length
    (10 of max_tokens 100) leaves after 10 tokens, and B's prefill starts right then."""
    spec = EmulatorSpec(max_num_seqs=1)
    cm = CostModel(spec.deployment())
    planner = OutputPlanner(output_model("llama3.1-8b"))
    stop = planner.plan("a", 100, reference=10)
    exact = planner.plan("a", 100)
    assert (stop.total, stop.finish, exact.total, exact.finish) == (10, "stop", 100, "length")
    b_first = []
    for plan in (stop, exact):
        (a, b), _ = run_requests(spec, [(0, 200, plan.total), (0, 300, 5)])
        assert len(a.tokens) == plan.total - 1
        # by the model: B is prefilled in the step after A's last one
        assert b.first == pytest.approx(a.done + cm.step([(300, 0)], []).total_ns, abs=4)
        b_first.append(b.first)
    # 90 decode steps sooner
    gaps = sum(cm.step([], [200 + 1 + k]).total_ns for k in range(9, 99))
    assert b_first[1] - b_first[0] == pytest.approx(gaps, abs=200)


def test_an_abort_frees_the_slot_and_the_kv_cache_at_the_next_step():
    spec = EmulatorSpec(max_num_seqs=2)
    d = spec.deployment()
    cm = CostModel(d)
    clock = FakeClock()
    a, b, c = Log(), Log(), Log()

    async def main() -> Emulator:
        em = Emulator(d, clock, stream=True)
        ra = em.submit(200, 1000, a)
        em.submit(300, 8, b)
        em.submit(100, 4, c)  # waits: two sequences run at once
        while len(a.tokens) < 3:
            await asyncio.sleep(0.001)
        assert em.abort(ra) and not em.abort(ra)
        while c.done < 0:
            await asyncio.sleep(0.01)
        return em

    em = run_virtual(main(), clock)
    eng = em.cluster.engines[0]
    # A and B prefilled together, then decode steps of both; A left after its 4th token
    # (the step in flight when it was aborted still had it)
    assert len(a.tokens) == 3 and a.done < 0 and em.aborted == 1
    t = a.tokens[2] + cm.step([], [204, 304]).total_ns  # the step in flight
    # C is admitted into A's slot at the next step: prefilled beside B's decode
    assert c.first == pytest.approx(t + cm.step([(100, 0)], [305]).total_ns, abs=8)
    # and the books balance: nothing reserved, no context left
    assert eng.kv_usage == 0 and eng.num_running == 0 and eng._ctx == 0 and eng._n_dec == 0


def test_a_client_that_goes_away_frees_its_slot():
    """Real time, one sequence at a time: A asks for 100,000 tokens (about 12 minutes of
    the model's time) and its client leaves after the first event; B, queued behind A,
    is then served. Without the abort B would wait for A's 100,000 tokens."""

    async def scenario(server: EmulatedServer) -> None:
        r, w = await asyncio.open_connection(server.host, server.port)
        body = json.dumps({"prompt": "long", "max_tokens": 100_000, "stream": True}).encode()
        w.write(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body))
        await r.readuntil(b"\r\n\r\n")
        await r.readuntil(b"data: ")  # A's first token arrived
        b_task = asyncio.ensure_future(_post(server, "/v1/completions",
                                             {"prompt": "short", "max_tokens": 5}))
        await asyncio.sleep(0.05)
        assert server.emulator.waiting(0) == 1  # B waits behind A
        w.close()
        status, data = await asyncio.wait_for(b_task, 60)
        assert status == 200 and json.loads(data)["usage"]["completion_tokens"] == 5
        assert server.emulator.aborted == 1
        assert server.emulator.generation_tokens < 100_000
        text = server.metrics_text()
        assert 'tokenmark:requests_aborted_total{model_name="llama3.1-8b"} 1' in text

    serve(EmulatorSpec(max_num_seqs=1), EmulatedConfig(), scenario)


def test_stop_lengths_and_reference_lengths_over_http():
    async def scenario(server: EmulatedServer) -> None:
        base = {"prompt": "x y z", "max_tokens": 50, "stream": True,
                "stream_options": {"include_usage": True}}
        _, data = await _post(server, "/v1/completions", base)
        evs = _events(data)
        assert evs[-1]["usage"]["completion_tokens"] == 7  # --stop-lengths 7
        assert evs[-2]["choices"][0]["finish_reason"] == "stop"
        _, data = await _post(server, "/v1/completions", {**base, "ignore_eos": True})
        assert _events(data)[-1]["usage"]["completion_tokens"] == 50
        _, data = await _post(server, "/v1/completions", {**base, "max_tokens": 5})
        assert _events(data)[-2]["choices"][0]["finish_reason"] == "length"
        _, data = await _post(server, "/v1/completions", {**base, REFERENCE_FIELD: 12})
        assert _events(data)[-1]["usage"]["completion_tokens"] == 12
        text = server.metrics_text()
        assert 'finished_reason="stop"} 2' in text and 'finished_reason="length"} 2' in text

    serve(EmulatorSpec(time_scale=0.0), EmulatedConfig(stop_lengths="7"), scenario)


# -- token ids ----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_return_token_ids_are_the_ids_of_the_text(path):
    tok = BuiltinTokenizer()
    chat = path.endswith("chat/completions")
    prompt = ({"messages": [{"role": "user", "content": "hi"}]} if chat
              else {"prompt": "hi"})

    async def scenario(server: EmulatedServer) -> None:
        _, data = await _post(server, path, {**prompt, "max_tokens": 150, "stream": True,
                                             "return_token_ids": True})
        evs = [e for e in _events(data) if e["choices"] and "token_ids" in e["choices"][0]]
        ids = [i for e in evs for i in e["choices"][0]["token_ids"]]
        ch = [e["choices"][0] for e in evs]
        text = "".join(c.get("text") or next(iter(c["delta"].values())) for c in ch)
        assert len(ids) == 150 and ids == tok.encode(text)
        assert all(len(e["choices"][0]["token_ids"]) == 1 for e in evs)  # one per event
        _, data = await _post(server, path, {**prompt, "max_tokens": 150,
                                             "return_token_ids": True})
        choice = json.loads(data)["choices"][0]
        whole = choice.get("text") or ((choice["message"].get("reasoning_content") or "")
                                       + choice["message"]["content"])
        assert choice["token_ids"] == ids == tok.encode(whole)
        # not asked: not sent
        _, data = await _post(server, path, {**prompt, "max_tokens": 3, "stream": True})
        assert b"token_ids" not in data

    serve(EmulatorSpec(model="deepseek-r1", time_scale=0.0), EmulatedConfig(), scenario)
