"""An OpenAI-compatible server with exact delays: the ground truth for client tests.

:class:`ExactServer` answers ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions`` (streamed or not) after a configured time to first token
and a configured time between tokens, measured from the moment the whole request was
read. It writes pre-rendered bytes (:mod:`tokenmark.servers.render`), so with zero
delays a response of any length is one ``write`` and the server streams as fast as the
client can read. With delays, one timer serves every stream: when it fires, each stream
whose next token is due gets it (several in one write if the server fell behind), and
``spin_ns`` makes the loop busy-wait the last stretch before a deadline instead of
trusting the event loop's millisecond timer.

``POST /tokenize`` and ``/detokenize`` answer as vLLM's do, with tokenmark's built-in
tokenizer (whose words the server counts as prompt tokens).

Every generation request leaves a :class:`Truth` row: when the request was read, when
the first and last tokens were written, when the response ended, and (``truth_tokens``)
every token's write time, all from ``time.perf_counter_ns`` (CLOCK_MONOTONIC, the clock
tokenmark's records use), keyed by the client's ``X-Request-Id`` header. Tests and
``bench/`` compare client records with these rows.

Real servers' write patterns: ``step_tokens`` tokens are written together at each step,
each its own event (several events per client read, as when a batched server's step
outruns the client), and ``adversarial`` draws every token's text from
:func:`~tokenmark.servers.render.adversarial_texts` (the words and bytes that fooled the
old byte scanner; the whole text is kept in the truth row).

Faults (``faults``, cycled by the order requests arrive in) produce each failure a
client must classify; the vocabulary, and what each fault does, is
:mod:`tokenmark.servers.faults` (shared with the emulated server).

``exit_after=N`` makes the server die (every connection reset, the listener closed) when
request ``N + 1`` arrives; run as a process (``python -m tokenmark.servers.exact``), it
exits instead. Loopback only; standard library only.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import ssl
from array import array
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from tokenmark.servers.faults import MORE, Fault, FaultPlan, OutStream, Truth, echo_response
from tokenmark.servers.http_base import Conn, Head, error_body
from tokenmark.servers.render import (
    HEAD_CLOSE,
    HEAD_SSE,
    adversarial_texts,
    json_response,
    render_full,
    render_stream,
)
from tokenmark.tokenizer import BuiltinTokenizer

__all__ = ["ExactConfig", "ExactServer", "Truth"]

_TOKENIZER = BuiltinTokenizer()


@dataclass(frozen=True)
class ExactConfig:
    """How the server answers. Times are integer nanoseconds."""

    ttft_ns: int = 0
    itl_ns: int = 0
    #: Tokens per answer; 0 follows the request's ``max_tokens`` (16 when absent).
    output_tokens: int = 0
    model: str = "exact"
    framing: str = "chunked"  # chunked | close (HTTP/1.0-style close-delimited body)
    sep: bytes = b"\n\n"  # the SSE event separator: b"\n\n" or b"\r\n\r\n"
    cached_tokens: int = -1  # report prompt_tokens_details.cached_tokens when >= 0
    faults: tuple[str, ...] = ()
    exit_after: int = 0
    spin_ns: int = 0
    truth_tokens: bool = False
    api_key: str = ""  # when set, generation and /v1/models need "Bearer <key>"
    #: Request headers (lower-case names) to keep in each request's truth row.
    record_headers: tuple[str, ...] = ()
    #: Chat answers begin with this many ``reasoning_content`` tokens (reasoning models).
    reasoning_tokens: int = 0
    #: Tokens written together at each step (``itl_ns`` apart), each its own event: a
    #: client reads several events per socket read.
    step_tokens: int = 1
    #: Token texts drawn per request from ``render.adversarial_texts`` (seeded by the
    #: request's arrival order; kept in its truth row) instead of plain words.
    adversarial: bool = False


class ExactServer:
    """The server. ``await start()``, then use :attr:`url`; ``await stop()`` at the end."""

    def __init__(self, config: ExactConfig = ExactConfig(), *, host: str = "127.0.0.1",
                 port: int = 0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.config = config
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self.truth: list[Truth] = []
        self.died = False
        self._server: asyncio.Server | None = None
        self.conns: set[Conn] = set()
        self._heap: list[tuple[int, int, _Timed]] = []
        self._plan = FaultPlan(cycle=config.faults)
        self._counter = 0
        self._ordinal = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        models = {"object": "list", "data": [
            {"id": config.model, "object": "model", "created": 0, "owned_by": "tokenmark"}]}
        self._models = json_response(200, models)

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: Conn(self), self.host, self.port, ssl=self._ssl, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            c.close()
        if self._server is not None:
            await self._server.wait_closed()

    def die(self) -> None:
        """Reset every connection and stop listening, as a crashed server would."""
        self.died = True
        if self._server is not None:
            self._server.close()
        for c in list(self.conns):
            c.reset()
        self._heap.clear()

    # -- requests ----------------------------------------------------------------------
    def _authorized(self, headers: Head) -> bool:
        key = self.config.api_key
        return not key or headers.get("authorization", "") == f"Bearer {key}"

    def handle(self, conn: Conn, method: str, path: str, headers: Head, body: bytes,
               t_recv: int) -> None:
        if method == "GET" and path.rstrip("/") == "/v1/models":
            if not self._authorized(headers):
                conn.finish(json_response(401, error_body("invalid API key", 401)))
            else:
                conn.finish(self._models)
            return
        if method == "POST" and path in ("/tokenize", "/detokenize"):
            conn.finish(self._tokenizer(path, body))
            return
        chat = path == "/v1/chat/completions"
        if method != "POST" or not (chat or path == "/v1/completions"):
            conn.finish(json_response(404, error_body(f"no route {method} {path}", 404)))
            return
        if not self._authorized(headers):
            conn.finish(json_response(401, error_body("invalid API key", 401)))
            return
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            conn.finish(json_response(400, error_body("the body is not a JSON object", 400)))
            return
        ordinal = self._ordinal
        self._ordinal += 1
        cfg = self.config
        if cfg.exit_after and ordinal >= cfg.exit_after:
            self.die()
            return
        if req.get("model") != cfg.model:
            conn.finish(json_response(
                404, error_body(f"The model `{req.get('model')}` does not exist.", 404)))
            return
        fault = self._plan.pick(ordinal)
        truth = Truth(headers.get("x-request-id", ""), ordinal, fault.text, t_recv,
                      _prompt_tokens(req, chat))
        if cfg.truth_tokens:
            truth.token_ns = array("q")
        for name in cfg.record_headers:
            if name in headers:
                truth.headers[name] = headers.get(name)
        self.truth.append(truth)
        kind = fault.kind
        if kind == "status":
            code = fault.arg
            resp = json_response(code, error_body(f"injected status {code}", code))
            truth.wrote(resp, "status")
            conn.finish(resp)
            return
        if kind == "echo_auth":  # a careless server that quotes the key back, every way
            resp = echo_response(headers.get("authorization", ""))
            truth.wrote(resp, "status")
            conn.finish(resp)
            return
        if kind == "reset":
            truth.wrote(b"", "reset")
            conn.reset()
            return
        if kind == "stall":
            return  # never answered
        if kind == "slow_head":  # nothing at all for a while, then the answer, as late
            delay = fault.arg * 1_000_000
            loop = self._loop
            assert loop is not None
            loop.call_at((t_recv + delay) / 1e9, lambda: self._answer(
                conn, req, chat, truth, fault, t_recv + delay))
            return
        self._answer(conn, req, chat, truth, fault, t_recv)

    def _tokenizer(self, path: str, body: bytes) -> bytes:
        """vLLM's ``/tokenize`` and ``/detokenize`` with the built-in tokenizer (the one
        whose words the server counts): ``--tokenizer server`` tested without a model."""
        try:
            req = json.loads(body)
            if path == "/tokenize":
                ids = _TOKENIZER.encode(str(req["prompt"]))
                return json_response(200, {"count": len(ids), "max_model_len": 0,
                                           "tokens": ids})
            return json_response(200, {"prompt": _TOKENIZER.decode(
                [int(t) for t in req["tokens"]])})
        except (ValueError, KeyError, TypeError, RecursionError):
            return json_response(400, error_body("bad tokenize request", 400))

    def _answer(self, conn: Conn, req: dict[str, Any], chat: bool, truth: Truth,
                fault: Fault, t_base: int) -> None:
        """Answer a generation request whose timing starts at ``t_base``."""
        if conn.closed:
            return
        cfg = self.config
        n = cfg.output_tokens or int(req.get("max_tokens") or
                                     req.get("max_completion_tokens") or 16)
        n = max(1, n)
        extra = fault.arg if fault.kind == "usage" else 0
        usage = {"prompt_tokens": truth.prompt_tokens, "completion_tokens": n + extra,
                 "total_tokens": truth.prompt_tokens + n + extra}
        if not req.get("stream"):
            self._answer_full(conn, chat, n, usage, truth, t_base)
            return
        opts = req.get("stream_options")
        include_usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
        chunked = cfg.framing == "chunked"
        reasoning = min(cfg.reasoning_tokens, n) if chat else 0
        texts = adversarial_texts(n, truth.ordinal) if cfg.adversarial else None
        if texts is not None:
            truth.text = "".join(texts)
        sb = render_stream(chat, n, cfg.model, include_usage, cfg.sep, chunked, reasoning,
                           texts)
        usage_ev = (sb.usage_event(truth.prompt_tokens, n + extra, cfg.cached_tokens,
                                   reasoning) if include_usage else b"")
        first_due = t_base + cfg.ttft_ns
        st = _Timed(conn, sb, n, truth, usage_ev, fault)
        st.first_due = first_due
        if not st.open(HEAD_SSE if chunked else HEAD_CLOSE, HEAD_SSE):
            return
        if first_due <= perf_counter_ns() and cfg.itl_ns == 0:
            self._advance(st, first_due)  # zero delays: the whole answer in one write
        else:
            self._push(first_due, st)

    def _answer_full(self, conn: Conn, chat: bool, n: int, usage: dict[str, int],
                     truth: Truth, t_base: int) -> None:
        cfg = self.config
        pre, post = render_full(chat, n, cfg.model)
        body = pre + json.dumps(usage, separators=(",", ":")).encode() + post
        resp = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n" % len(body)) + body
        due = t_base + cfg.ttft_ns + (n - 1) * cfg.itl_ns

        def send() -> None:
            t = perf_counter_ns()
            truth.first_ns = truth.last_ns = truth.done_ns = t
            truth.tokens = n
            if not conn.closed:
                truth.wrote(resp, "complete")
            conn.finish(resp)

        loop = self._loop
        assert loop is not None
        if due <= perf_counter_ns():
            send()
        else:
            loop.call_at(due / 1e9, send)

    # -- timing ------------------------------------------------------------------------
    def _push(self, due: int, st: _Timed) -> None:
        self._counter += 1
        heapq.heappush(self._heap, (due, self._counter, st))
        if self._timer is None or due < self._timer_due:
            self._arm(due)

    def _arm(self, due: int) -> None:
        loop = self._loop
        assert loop is not None
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        wake = due - self.config.spin_ns
        if wake <= perf_counter_ns():
            self._timer = loop.call_soon(self._tick)  # type: ignore[assignment]
        else:
            self._timer = loop.call_at(wake / 1e9, self._tick)

    def _tick(self) -> None:
        self._timer = None
        heap = self._heap
        now = perf_counter_ns()
        while heap and heap[0][0] <= now:
            _, _, st = heapq.heappop(heap)
            self._advance(st, now)
        if heap:
            self._arm(heap[0][0])

    def _advance(self, st: _Timed, now: int) -> None:
        """Write every token of ``st`` due by ``now`` (one write), then re-queue it."""
        if st.conn.closed:
            return
        itl = self.config.itl_ns
        step = max(1, self.config.step_tokens)
        first_due = st.first_due
        stop = st.cut if st.cut >= 0 else st.n
        end = st.k
        if itl == 0:
            end = stop
        else:  # token k is due at step k // step
            while end < stop and first_due + (end // step) * itl <= now:
                end += 1
        if st.emit(end) == MORE:
            self._push(first_due + (st.k // step) * itl, st)


class _Timed(OutStream):
    """A stream whose token ``k`` is due at ``first_due + k x itl``."""

    __slots__ = ("first_due",)
    first_due: int


def _prompt_tokens(req: dict[str, object], chat: bool) -> int:
    """Whitespace-separated words: exact for tokenmark's synthetic prompts."""
    if chat:
        msgs = req.get("messages")
        total = 0
        if isinstance(msgs, list):
            for m in msgs:
                if isinstance(m, dict) and isinstance(m.get("content"), str):
                    total += len(m["content"].split())
        return total
    p = req.get("prompt")
    return len(p.split()) if isinstance(p, str) else 0
