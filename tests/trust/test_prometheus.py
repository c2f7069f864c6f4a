"""Prometheus scraping: vLLM's metric names parsed, stored beside the records, and
cross-checked against the client's counts (a disagreement is a finding)."""

from __future__ import annotations

import asyncio
import json
import time

from tokenmark.records import RequestRecord, TokenSource
from tokenmark.trust.prometheus import METRICS_FILE, PrometheusWatcher, parse, totals

VLLM_TEXT = """# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="length",model_name="tiny"}} {length}
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="tiny"}} {stop}
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} {prompt}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="tiny"}} {gen}
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="tiny"}} 3.0
vllm:num_requests_running{{model_name="tiny"}} 0.0
process_cpu_seconds_total 12.5
"""


def text(length=0, stop=0, prompt=0, gen=0) -> bytes:
    return VLLM_TEXT.format(length=f"{float(length)}", stop=f"{float(stop)}",
                            prompt=f"{float(prompt)}", gen=f"{float(gen)}").encode()


def test_parse_and_totals():
    samples = {f"{n}{lab}": v for n, lab, v in parse(text(2, 3, 100, 40).decode())}
    assert samples['vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="tiny"}'] == 3
    t = totals(samples)
    assert t["requests"] == ("vllm:request_success_total", 5.0)
    assert t["prompt_tokens"] == ("vllm:prompt_tokens_total", 100.0)
    assert t["generation_tokens"] == ("vllm:generation_tokens_total", 40.0)


def rec(seq: int, inp: int, out: int) -> RequestRecord:
    return RequestRecord(seq=seq, query_id=seq, sample_index=seq, scheduled_ns=0,
                         issued_ns=1, first_token_ns=2, done_ns=3, input_tokens=inp,
                         output_tokens=out, token_source=TokenSource.USAGE)


def scrape_run(loopback, tmp_path, served_after: dict, *, hang: bool = False):
    """Counters start at a baseline (other traffic before the run) and grow by
    ``served_after`` while the client sends 4 requests of 25 prompt / 10 output tokens."""
    state = {"counts": dict(length=7, stop=1, prompt=900, gen=300)}

    async def metrics(path, headers):
        if path != "/metrics":
            return 404, {}, b""
        if hang:
            return None
        return 200, {"content-type": "text/plain"}, text(**state["counts"])

    async def go():
        async with loopback(metrics) as srv:
            w = PrometheusWatcher((srv.url,), interval_s=0.05, timeout_s=0.3)
            t0 = time.monotonic()
            await w.start(tmp_path)
            for i in range(4):
                w.record(rec(i, 25, 10))
            c = state["counts"]
            state["counts"] = {k: c[k] + served_after.get(k, 0) for k in c}
            await asyncio.sleep(0.15)
            await w.stop()
            return w, time.monotonic() - t0

    return asyncio.run(go())


def test_counts_that_agree_pass(loopback, tmp_path):
    w, _ = scrape_run(loopback, tmp_path, {"length": 3, "stop": 1, "prompt": 100, "gen": 40})
    section, [finding] = w.finish(None, tmp_path)  # type: ignore[arg-type]
    assert finding.passed, finding.observed
    assert section["server_delta"]["requests"]["value"] == 4
    assert section["client"] == {"requests": 4, "prompt_tokens": 100, "generation_tokens": 40}
    lines = [json.loads(x) for x in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert len(lines) >= 3  # at the start, during, and after the run
    key = 'vllm:prompt_tokens_total{engine="0",model_name="tiny"}'
    assert lines[0]["samples"][key] == 900 and lines[-1]["samples"][key] == 1000


def test_disagreement_is_a_finding(loopback, tmp_path):
    # the server finished one request more than the client saw, and 8 more tokens
    w, _ = scrape_run(loopback, tmp_path, {"length": 5, "prompt": 100, "gen": 48})
    _, [finding] = w.finish(None, tmp_path)  # type: ignore[arg-type]
    assert not finding.passed and finding.rule == "server_counts_agreement"
    assert "requests: server 5, client 4" in finding.observed
    assert "generation_tokens" in finding.advice


def test_no_metrics_or_a_hanging_endpoint_is_bounded_and_not_judged(loopback, tmp_path):
    w, took = scrape_run(loopback, tmp_path, {}, hang=True)
    section, findings = w.finish(None, tmp_path)  # type: ignore[arg-type]
    assert findings == [] and section["available"] is False
    assert took < 1.5 and "no answer within 0.3 s" in next(iter(section["errors"].values()))
