"""The emulated server: an OpenAI-compatible API whose timing is the performance model's.

:class:`EmulatedServer` answers on loopback what vLLM's OpenAI server answers:

- ``POST /v1/completions`` and ``POST /v1/chat/completions``, streamed (server-sent
  events, one token per event, ``stream_options.include_usage``) or not, with ``usage``
  (shapes: :mod:`tokenmark.servers.emulated_body`);
- prompts are counted with the built-in tokenizer (text) or are token ids; a chat
  message's images (``image_url`` parts holding data URLs) become image tokens by the
  model's rule, their size read from the image header (:mod:`tokenmark.perfmodel.vision`;
  a text-only model refuses images with HTTP 400, as vLLM does), and their encoder work
  is charged to the prefill; ``usage.prompt_tokens`` counts them and
  ``prompt_tokens_details.image_tokens`` reports them apart;
- the output length (:mod:`tokenmark.perfmodel.outputs`): exactly ``max_tokens`` /
  ``max_completion_tokens`` (default 16; ``finish_reason: "length"``) unless the
  request may stop earlier (no ``ignore_eos``) and there is a length to stop at: the
  server's ``--stop-lengths`` distribution, or the request's
  ``tokenmark_reference_output_tokens`` (the reference answer's length, which tokenmark
  sends only to its own emulator); then ``min(L, max_tokens)`` tokens and ``stop`` when
  shorter. A reasoning model (DeepSeek-R1, gpt-oss) answers chat requests with its
  reasoning first (``delta.reasoning_content`` or ``delta.reasoning``), then the answer,
  and ``usage.completion_tokens_details.reasoning_tokens`` counts the reasoning part;
- ``return_token_ids: true`` (vLLM's option) adds each event's token ids;
- a request longer than the model's context or than the whole KV cache is refused with
  HTTP 400, as vLLM does; a request whose client goes away is aborted, freeing its batch
  slot and KV cache at the next step;
- ``GET /v1/models`` (the served model, with ``tokenmark_profile``), ``GET /health``;
- ``GET /metrics``: Prometheus text with vLLM's names (``vllm:num_requests_running``,
  ``vllm:num_requests_waiting``, ``vllm:gpu_cache_usage_perc`` and
  ``vllm:kv_cache_usage_perc`` per replica, ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``, ``vllm:request_success_total`` by finished reason)
  plus tokenmark's own (the profile, requests received, faults injected, steps, the
  step-delivery lag).

Every answer carries the header ``x-tokenmark-profile: emulated H200 x1, llama3.1-8b,
bf16`` (the profile), so nothing measured against it passes for hardware.

Timing comes from :class:`~tokenmark.engines.emulated.Emulator` on the real clock: a
request joins its replica's queue when it has been read; its first token is written
when the step that finished its prefill ends, and each later token when the next
decode step ends. Faults (:mod:`tokenmark.servers.faults`) are drawn per request by
seeded fractions; ``exit_after=N`` makes the server die (every connection reset, the
listener closed; the process exits with code 70) when request ``N + 1`` arrives.

``python -m tokenmark.servers.emulated --accelerator H200 --model llama3.1-8b --port 0``
serves in its own process and prints ``READY <url>`` once it listens (what ``tokenmark
run`` starts when it is given no target); ``tokenmark serve`` is the same server in the
foreground. Standard library only, besides tokenmark's own model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from tokenmark import __version__
from tokenmark.clock import Clock, MonotonicClock
from tokenmark.engines.emulated import Emulator, EmulatorSpec
from tokenmark.errors import BadInputError
from tokenmark.perfmodel import Deployment
from tokenmark.perfmodel.outputs import OutputPlan, OutputPlanner, output_model, prompt_key
from tokenmark.perfmodel.vision import PromptImage, prompt_image, vision_encoder
from tokenmark.servers.emulated_body import EmulatedBody, full_body, usage_event, usage_object
from tokenmark.servers.faults import CUT, ENDED, OK, Fault, FaultPlan, OutStream, Truth
from tokenmark.servers.http_base import Conn, Head, error_body, json_dumps
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = ["EXIT_DIED", "REFERENCE_FIELD", "EmulatedConfig", "EmulatedServer", "main",
           "serve_emulated"]

#: The exit code of a server process that died by ``exit_after``.
EXIT_DIED = 70
#: The request field with the reference answer's length (tokenmark's own extension: its
#: client sends it only to this emulator, where the emulated model stops there).
REFERENCE_FIELD = "tokenmark_reference_output_tokens"

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}


@dataclass(frozen=True)
class EmulatedConfig:
    """The server's options beyond the emulated deployment."""

    served_model: str = ""  # "" = the model's benchmark name (llama3.1-8b)
    #: ``(fault, fraction)`` pairs (:class:`~tokenmark.servers.faults.FaultPlan`).
    faults: tuple[tuple[str, float], ...] = ()
    #: A fixed plan cycled in arrival order instead of fractions (tests).
    fault_cycle: tuple[str, ...] = ()
    fault_seed: int = 0
    exit_after: int = 0
    api_key: str = ""
    #: Keep a :class:`~tokenmark.servers.faults.Truth` row per request (tests; memory
    #: grows with the requests served).
    keep_truth: bool = False
    #: Where answers may stop before ``max_tokens``: "" (never: exact lengths),
    #: ``published`` (the benchmark's published output lengths) or a length
    #: distribution (:class:`~tokenmark.dataset.LengthDistribution`).
    stop_lengths: str = ""
    #: Seed of the output-length draws (:mod:`tokenmark.perfmodel.outputs`).
    output_seed: int = 0


@dataclass
class _Counters:
    received: int = 0
    success: Counter[str] = field(default_factory=Counter)  # answers written whole, by finish
    faults: Counter[str] = field(default_factory=Counter)
    refused: Counter[int] = field(default_factory=Counter)  # 4xx by status


class EmulatedServer:
    """``await start()``, then use :attr:`url`; ``await stop()`` at the end."""

    def __init__(self, spec: EmulatorSpec, config: EmulatedConfig = EmulatedConfig(), *,
                 host: str = "127.0.0.1", port: int = 0, clock: Clock | None = None,
                 deployment: Deployment | None = None) -> None:
        self.spec = spec
        self.config = config
        self.deployment = deployment or spec.deployment()
        self.label = spec.label(self.deployment)
        d = self.deployment
        self.model = config.served_model or (d.model.benchmarks[0] if d.model.benchmarks
                                             else d.model.name)
        self.host = host
        self.port = port
        self.clock: Clock = clock or MonotonicClock()
        self.emulator = Emulator(d, self.clock, stream=True, time_scale=spec.time_scale)
        self.vision = vision_encoder(d.model)
        bench = d.model.benchmarks[0] if d.model.benchmarks else d.model.name
        om = output_model(bench)
        self.outputs = OutputPlanner(om, stop=om.stop_lengths(config.stop_lengths),
                                     seed=config.output_seed)
        self._keyed = om.reasons or self.outputs.stop is not None
        self.plan = FaultPlan(config.fault_cycle, config.faults, seed=config.fault_seed)
        self.counters = _Counters()
        self.truth: list[Truth] = []
        self.died = False
        self.conns: set[Conn] = set()
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tok = BuiltinTokenizer()
        prof = self.label.encode("ascii", "replace")
        # "server: tokenmark/..." tells the client that each event carries one token
        self._hdr = (b"server: tokenmark/%s (emulated)\r\nx-tokenmark-profile: "
                     % __version__.encode() + prof + b"\r\n")
        self._head_sse = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; "
                          b"charset=utf-8\r\ncache-control: no-cache\r\n" + self._hdr
                          + b"transfer-encoding: chunked\r\n\r\n")
        self._models = self._json(200, {"object": "list", "data": [{
            "id": self.model, "object": "model", "created": 0,
            "owned_by": "tokenmark-emulator", "max_model_len": d.model.max_context,
            "tokenmark_profile": self.label,
            "tokenmark_efficiency": d.efficiency.source}]})

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: Conn(self), self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.emulator.stop()
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            c.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    def die(self) -> None:
        """Reset every connection and stop listening, as a crashed server would."""
        self.died = True
        self.emulator.stop()
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            c.reset()

    # -- responses ---------------------------------------------------------------------------
    def _json(self, status: int, obj: object) -> bytes:
        body = json_dumps(obj)
        return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n%scontent-length: "
                b"%d\r\n\r\n" % (status, _REASONS.get(status, "Error").encode(), self._hdr,
                                  len(body))) + body

    def _refuse(self, conn: Conn, status: int, message: str) -> None:
        self.counters.refused[status] += 1
        conn.finish(self._json(status, error_body(message, status)))

    # -- requests ----------------------------------------------------------------------------
    def handle(self, conn: Conn, method: str, path: str, headers: Head, body: bytes,
               t_recv: int) -> None:
        route = path.rstrip("/")
        if method == "GET":
            if route == "/metrics":
                text = self.metrics_text().encode()
                conn.finish(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4; "
                            b"charset=utf-8\r\n%scontent-length: %d\r\n\r\n%s"
                            % (self._hdr, len(text), text))
                return
            if route == "/health":
                conn.finish(b"HTTP/1.1 200 OK\r\n%scontent-length: 0\r\n\r\n" % self._hdr)
                return
            if route == "/v1/models":
                if not self._authorized(headers):
                    self._refuse(conn, 401, "invalid API key")
                else:
                    conn.finish(self._models)
                return
        chat = route == "/v1/chat/completions"
        if method != "POST" or not (chat or route == "/v1/completions"):
            self._refuse(conn, 404, f"no route {method} {path}")
            return
        if not self._authorized(headers):
            self._refuse(conn, 401, "invalid API key")
            return
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
            ask = self._read(req, chat)
        except (RecursionError, ValueError, TypeError) as e:
            self._refuse(conn, 400, f"bad request: {e}")
            return
        except BadInputError as e:
            self._refuse(conn, 400, str(e))
            return
        if req.get("model", self.model) != self.model:
            self._refuse(conn, 404, f"The model `{req.get('model')}` does not exist.")
            return
        n = ask.max_tokens
        if n < 1:
            self._refuse(conn, 400, f"max_tokens must be at least 1, got {n}.")
            return
        prompt = ask.prompt
        ctx = self.deployment.model.max_context
        if prompt + n > ctx:
            self._refuse(conn, 400, (
                f"This model's maximum context length is {ctx} tokens. However, you "
                f"requested {prompt + n} tokens ({prompt} in the messages, {n} in the "
                "completion)."))
            return
        plan = ask.plan = self.outputs.plan(ask.key, n, ignore_eos=ask.ignore_eos,
                                            reference=ask.reference, split=chat)
        if not self.emulator.fits(prompt, plan.total):
            self._refuse(conn, 400, (
                f"{prompt} + {plan.total} tokens exceed the emulated KV cache "
                f"({self.emulator.kv_capacity_tokens:,} tokens)"))
            return
        c = self.counters
        ordinal = c.received
        c.received += 1
        if self.config.exit_after and ordinal >= self.config.exit_after:
            self.die()
            return
        fault = self.plan.pick(ordinal) if self.plan.active else OK
        if fault.kind != "ok":
            c.faults[fault.text] += 1
        truth = Truth(headers.get("x-request-id", ""), ordinal, fault.text, t_recv, prompt)
        if self.config.keep_truth:
            self.truth.append(truth)
        kind = fault.kind
        if kind == "status":
            code = fault.arg
            conn.finish(self._json(code, error_body(f"injected status {code}", code)))
            return
        if kind == "echo_auth":
            auth = headers.get("authorization", "")
            conn.finish(self._json(401, error_body(f"invalid credentials {auth!r}", 401)))
            return
        if kind == "reset":
            conn.reset()
            return
        if kind == "stall":
            return  # never answered, never queued
        if kind == "slow_head":
            loop = self._loop
            assert loop is not None
            loop.call_later(fault.arg / 1000, lambda: self._answer(conn, ask, fault, truth))
            return
        self._answer(conn, ask, fault, truth)

    def _authorized(self, headers: Head) -> bool:
        key = self.config.api_key
        return not key or headers.get("authorization", "") == f"Bearer {key}"

    def _read(self, req: dict[str, Any], chat: bool) -> _Ask:
        """What a generation request asks for: its prompt (text tokens plus image
        tokens), its images' encoder work, its length options and the key of its
        output draws. ValueError/TypeError or BadInputError (images) on bad input."""
        tok = self._tok
        keyed = self._keyed
        parts: list[bytes] = []
        total = images = 0
        flops = 0.0
        if chat:
            msgs = req["messages"]
            if not isinstance(msgs, list):
                raise ValueError("messages must be a list")
            for m in msgs:
                content = m.get("content") if isinstance(m, dict) else None
                if isinstance(content, str):
                    total += tok.count(content)
                    if keyed:
                        parts.append(content.encode())
                elif isinstance(content, list):
                    for part in content:
                        if not isinstance(part, dict):
                            continue
                        text = part.get("text")
                        if isinstance(text, str):
                            total += tok.count(text)
                            if keyed:
                                parts.append(text.encode())
                        elif part.get("type") == "image_url" or "image_url" in part:
                            img = self._image(part.get("image_url"))
                            images += img.tokens
                            flops += img.flops
                            parts.append(img.key)
        else:
            p = req["prompt"]
            if isinstance(p, str):
                total = tok.count(p)
                if keyed:
                    parts.append(p.encode())
            elif isinstance(p, list) and all(isinstance(x, int) for x in p):
                total = len(p)
                if keyed:
                    parts.append(json_dumps(p))
            else:
                raise ValueError("prompt must be a string or a list of token ids")
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        ref = req.get(REFERENCE_FIELD, -1)
        opts = req.get("stream_options")
        return _Ask(chat=chat, prompt=max(1, total + images), image_tokens=images,
                    encoder_flops=flops, max_tokens=n,
                    key=prompt_key(*parts) if keyed else "",
                    ignore_eos=bool(req.get("ignore_eos")),
                    reference=ref if isinstance(ref, int) else -1,
                    stream=bool(req.get("stream")),
                    include_usage=bool(opts.get("include_usage"))
                    if isinstance(opts, dict) else False,
                    ids=bool(req.get("return_token_ids")))

    def _image(self, spec: object) -> PromptImage:
        """One ``image_url`` part (``{"url": ...}`` or the URL itself)."""
        url = spec.get("url") if isinstance(spec, dict) else spec
        if not isinstance(url, str):
            raise ValueError("an image_url part needs a url")
        return prompt_image(self.vision, url, self.model)

    def _answer(self, conn: Conn, ask: _Ask, fault: Fault, truth: Truth) -> None:
        if conn.closed or self.died:
            return
        plan = ask.plan
        assert plan is not None
        extra = fault.arg if fault.kind == "usage" else 0
        reasoning = plan.reasoning if ask.chat and self.outputs.model.reasons else -1
        usage = usage_object(ask.prompt, plan.total + extra, image_tokens=ask.image_tokens,
                             reasoning=reasoning)
        em = self.emulator
        if not ask.stream:
            full = _Full(self, conn, ask, usage, truth)
            full.rid = em.submit(ask.prompt, plan.total, full,
                                 encoder_flops=ask.encoder_flops, stream=False)
            conn.on_lost = full.lost
            return
        field = self.outputs.model.reasoning_field
        body = EmulatedBody(chat=ask.chat, model=self.model, include_usage=ask.include_usage,
                            finish=plan.finish, reasoning=plan.reasoning,
                            reasoning_field=field, ids=ask.ids)
        tail = usage_event(ask.chat, self.model, usage) if ask.include_usage else b""
        st = OutStream(conn, body, plan.total, truth, tail, fault)
        if not st.open(self._head_sse, self._head_sse):
            return
        streamed = _Streamed(self, st, plan.finish)
        streamed.rid = em.submit(ask.prompt, plan.total, streamed,
                                 encoder_flops=ask.encoder_flops)
        conn.on_lost = streamed.lost

    # -- /metrics ----------------------------------------------------------------------------
    def metrics_text(self) -> str:
        """Prometheus text exposition, with vLLM's metric names where vLLM has them."""
        em = self.emulator
        c = self.counters
        model = _label(self.model)
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str,
                   samples: Sequence[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")
            for labels, value in samples:
                lines.append(f"{name}{{{labels}}} {_num(value)}")

        per = [(f'engine="{e}",model_name="{model}"', e) for e in range(em.replicas)]
        metric("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.",
               [(lab, em.running(e)) for lab, e in per])
        metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be "
               "processed.", [(lab, em.waiting(e)) for lab, e in per])
        for name in ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"):
            metric(name, "gauge", "KV-cache usage. 1 means 100 percent usage.",
                   [(lab, em.kv_usage(e)) for lab, e in per])
        base = f'model_name="{model}"'
        metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               [(base, em.prompt_tokens)])
        metric("vllm:generation_tokens_total", "counter",
               "Number of generation tokens processed.", [(base, em.generation_tokens)])
        metric("vllm:request_success_total", "counter",
               "Count of successfully processed requests (answers written whole).",
               [(f'{base},finished_reason="{r}"', c.success[r]) for r in ("length", "stop")])
        metric("tokenmark:emulator_info", "gauge",
               "The emulated profile (modelled timing, not a measurement of hardware).",
               [(f'{base},profile="{_label(self.label)}",'
                 f'efficiency="{_label(self.deployment.efficiency.source)}"', 1)])
        metric("tokenmark:requests_received_total", "counter",
               "Generation requests accepted (faults included).", [(base, c.received)])
        metric("tokenmark:requests_refused_total", "counter",
               "Generation requests refused before queueing (bad input), by status.",
               [(f'{base},status="{s}"', v) for s, v in sorted(c.refused.items())]
               or [(f'{base},status="400"', 0)])
        metric("tokenmark:faults_injected_total", "counter", "Faults injected, by fault.",
               [(f'{base},fault="{f}"', v) for f, v in sorted(c.faults.items())]
               or [(f'{base},fault="none"', 0)])
        metric("tokenmark:requests_finished_total", "counter",
               "Requests the engine finished generating.", [(base, em.finished)])
        metric("tokenmark:requests_aborted_total", "counter",
               "Requests dropped because their client went away (slot and KV cache freed).",
               [(base, em.aborted)])
        metric("tokenmark:engine_steps_total", "counter", "Engine steps run.",
               [(base, em.steps)])
        lag = em.lag
        metric("tokenmark:step_lag_seconds_max", "gauge", "Largest delay of a step's "
               "delivery behind the model's timeline (the emulator's own lag).",
               [(base, lag.max_ns / 1e9)])
        metric("tokenmark:step_lag_seconds_sum", "counter", "Sum of step-delivery delays.",
               [(base, lag.total_ns / 1e9)])
        metric("tokenmark:step_lag_seconds_count", "counter", "Late step deliveries.",
               [(base, lag.count)])
        metric("tokenmark:step_lag_over_1ms_total", "counter",
               "Step deliveries more than 1 ms late.", [(base, lag.over_1ms)])
        return "\n".join(lines) + "\n"


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


@dataclass(slots=True)
class _Ask:
    """What one generation request asks for (read once, used to plan and to answer)."""

    chat: bool
    prompt: int  # text and image tokens
    image_tokens: int
    encoder_flops: float
    max_tokens: int
    key: str  # names the request's output draws ("" when no draw is needed)
    ignore_eos: bool
    reference: int
    stream: bool
    include_usage: bool
    ids: bool
    plan: OutputPlan | None = None


class _Streamed:
    """A streamed answer fed by the emulator: one event per token, written as the
    steps that made them are delivered."""

    __slots__ = ("finish", "rid", "server", "st")

    def __init__(self, server: EmulatedServer, st: OutStream, finish: str) -> None:
        self.server = server
        self.st = st
        self.finish = finish
        self.rid = -1

    def on_first(self, t_ns: int) -> None:
        return None

    def on_tokens(self, n: int, t_ns: int) -> None:
        st = self.st
        r = st.emit(st.k + n)
        if r == ENDED:
            if st.k == st.n and st.fault.kind != "end_mid":
                self.server.counters.success[self.finish] += 1
        elif r == CUT and st.conn.closed:
            self.lost()  # the client is gone: stop generating for it

    def lost(self) -> None:
        self.server.emulator.abort(self.rid)

    def on_done(self, t_ns: int, later: object) -> None:
        return None

    def on_rejected(self, t_ns: int, reason: str) -> None:
        self.st.conn.close()


class _Full:
    """A non-streamed answer, written whole when the emulator finishes the request."""

    __slots__ = ("ask", "conn", "rid", "server", "truth", "usage")

    def __init__(self, server: EmulatedServer, conn: Conn, ask: _Ask,
                 usage: dict[str, object], truth: Truth) -> None:
        self.server = server
        self.conn = conn
        self.ask = ask
        self.usage = usage
        self.truth = truth
        self.rid = -1

    def on_first(self, t_ns: int) -> None:
        return None

    def on_tokens(self, n: int, t_ns: int) -> None:
        return None

    def lost(self) -> None:
        self.server.emulator.abort(self.rid)

    def on_done(self, t_ns: int, later: object) -> None:
        if self.conn.closed:
            return
        srv = self.server
        ask = self.ask
        plan = ask.plan
        assert plan is not None
        body = full_body(chat=ask.chat, model=srv.model, reasoning=plan.reasoning,
                         answer=plan.answer,
                         reasoning_field=srv.outputs.model.reasoning_field,
                         finish=plan.finish, usage=self.usage, ids=ask.ids)
        t = perf_counter_ns()
        tr = self.truth
        tr.first_ns = tr.last_ns = tr.done_ns = t
        tr.tokens = plan.total
        self.conn.finish(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%s"
                         b"content-length: %d\r\n\r\n%s" % (srv._hdr, len(body), body))
        srv.counters.success[plan.finish] += 1

    def on_rejected(self, t_ns: int, reason: str) -> None:
        self.server._refuse(self.conn, 400, reason)


# -- running it ------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accelerator", default="H200")
    p.add_argument("--model", default="llama3.1-8b")
    p.add_argument("--precision", default="")
    p.add_argument("--tp", type=int, default=0)
    p.add_argument("--replicas", type=int, default=0)
    p.add_argument("--accelerators", type=int, default=0)
    p.add_argument("--stack", default="")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-batched-tokens", type=int, default=8192)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--served-model-name", default="")
    p.add_argument("--fault", action="append", default=[],
                   help="KIND[:N]=FRACTION (repeatable)")
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--fault-cycle", default="", help="comma-separated faults, cycled")
    p.add_argument("--exit-after", type=int, default=0)
    p.add_argument("--api-key-env", default="")
    p.add_argument("--stop-lengths", default="",
                   help="'' (exact lengths), 'published' or a length distribution")
    p.add_argument("--output-seed", type=int, default=0)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)


def from_arguments(args: argparse.Namespace) -> tuple[EmulatorSpec, EmulatedConfig]:
    spec = EmulatorSpec(
        accelerator=args.accelerator, model=args.model, precision=args.precision,
        tp=args.tp, replicas=args.replicas, accelerators=args.accelerators,
        stack=args.stack, max_num_seqs=args.max_num_seqs,
        max_batched_tokens=args.max_batched_tokens, time_scale=args.time_scale)
    cfg = EmulatedConfig(
        served_model=args.served_model_name,
        faults=tuple(FaultPlan.parse_fraction(f) for f in args.fault),
        fault_cycle=tuple(f for f in args.fault_cycle.split(",") if f),
        fault_seed=args.fault_seed, exit_after=args.exit_after,
        api_key=os.environ.get(args.api_key_env, "") if args.api_key_env else "",
        stop_lengths=args.stop_lengths, output_seed=args.output_seed)
    return spec, cfg


def spec_arguments(spec: EmulatorSpec, cfg: EmulatedConfig = EmulatedConfig()) -> list[str]:
    """The command-line arguments of :func:`main` that serve ``spec`` and ``cfg``."""
    out = ["--accelerator", spec.accelerator, "--model", spec.model,
           "--precision", spec.precision, "--tp", str(spec.tp),
           "--replicas", str(spec.replicas), "--accelerators", str(spec.accelerators),
           "--stack", spec.stack, "--max-num-seqs", str(spec.max_num_seqs),
           "--max-batched-tokens", str(spec.max_batched_tokens),
           "--time-scale", repr(spec.time_scale), "--fault-seed", str(cfg.fault_seed),
           "--exit-after", str(cfg.exit_after)]
    if cfg.served_model:
        out += ["--served-model-name", cfg.served_model]
    for f, p in cfg.faults:
        out += ["--fault", f"{f}={p!r}"]
    if cfg.fault_cycle:
        out += ["--fault-cycle", ",".join(cfg.fault_cycle)]
    if cfg.stop_lengths:
        out += ["--stop-lengths", cfg.stop_lengths]
    if cfg.output_seed:
        out += ["--output-seed", str(cfg.output_seed)]
    return out


def serve_emulated(spec: EmulatorSpec, config: EmulatedConfig = EmulatedConfig(), *,
                   host: str = "127.0.0.1", port: int = 0,
                   on_ready: Callable[[EmulatedServer], None] | None = None) -> int:
    """Serve until SIGTERM/SIGINT (returns 0) or until ``exit_after`` kills the server
    (returns :data:`EXIT_DIED`). Raises BadInputError before listening on bad input."""
    server = EmulatedServer(spec, config, host=host, port=port)

    async def run() -> int:
        await server.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if on_ready is not None:
            on_ready(server)
        try:
            while not stop.is_set() and not server.died:
                try:
                    await asyncio.wait_for(stop.wait(), 0.1)
                except TimeoutError:
                    pass
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        if server.died:
            return EXIT_DIED
        await server.stop()
        return 0

    return asyncio.run(run())


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tokenmark.servers.emulated",
                                description="The emulated OpenAI-compatible server.")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        spec, cfg = from_arguments(args)
        code = serve_emulated(spec, cfg, host=args.host, port=args.port,
                              on_ready=lambda s: print(f"READY {s.url}", flush=True))
    except BadInputError as e:
        print(f"error: {e}", flush=True)
        raise SystemExit(2) from None
    if code == EXIT_DIED:
        os._exit(EXIT_DIED)  # a crash: no orderly shutdown


if __name__ == "__main__":
    main()
