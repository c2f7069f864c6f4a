"""The system under test behind an OpenAI-compatible HTTP API (completions or chat).

:class:`OpenAIHttpSUT` turns each query into one ``POST`` on a keep-alive connection
(:mod:`tokenmark.adapters.http1`) to the endpoint the routing picks, and reports to the
run through its :class:`~tokenmark.sut.ResponseHandle`:

- ``sent`` when the request is written (after connecting, if a new connection was
  needed: connecting is part of the measured latency);
- ``token(n, t)`` once per socket read whose events carried ``n`` output tokens (every
  event parsed by :mod:`tokenmark.adapters.sse`; tokens from the event's token ids or
  logprobs when it has them, else one per event), ``t`` being that read's time on the
  run's clock; a handle that also has ``reasoning`` (``tokenmark.sut.ReasoningHandle``)
  gets the reasoning tokens of the read through it, and ``reasoning_usage`` with the
  server's ``completion_tokens_details.reasoning_tokens``;
- ``details`` (a ``tokenmark.sut.DetailsHandle``) before the end: the finish reason,
  the tokens counted from the events and how (``token_basis``: ``ids``, ``logprobs``,
  ``events`` when the server is known to stream one token per event, tokenmark's own
  servers, whose ``Server`` header starts with ``tokenmark/``; ``usage`` when the usage
  is spread over events not known to be one token each; ``chunks`` with nothing to
  spread), and at issue the output length demanded exactly (``ignore_eos``, or
  ``min_tokens`` equal to ``max_tokens`` in the extra body);
- ``complete`` at ``data: [DONE]`` (streamed; or at the clean end of a stream whose last
  event carried a ``finish_reason``) or at the end of the body (not streamed),
  with the output count from the server's ``usage`` (source ``usage``) and the client
  tokenizer's count as the second opinion (``alt_output_tokens``); without usage, the
  tokenizer's count (source ``tokenizer``), else the streamed events (source ``chunks``);
- ``fail`` with one :class:`~tokenmark.records.ErrorClass` otherwise. Nothing is retried.

=========================  =========================================================
failure                    error class
=========================  =========================================================
HTTP 429 / other non-2xx   ``http_429`` / ``http_status`` (detail: status and body)
refused, unreachable, TLS  ``connect_error``
connect took too long      ``timeout_connect`` (``connect_timeout_s``)
no token in time           ``timeout_first_token`` (``first_token_timeout_s``, from issue)
request took too long      ``timeout_request`` (``request_timeout_s``, from issue)
closed/reset before head   ``connection_reset``
reset after the head       ``reset_mid_stream``
closed before the end      ``truncated_stream`` (no ``[DONE]`` and no ``finish_reason``)
not HTTP, not SSE/JSON     ``malformed_stream`` (also: an event over ``max_event_bytes``)
an ``error`` event         ``sut_error`` (the server reported a failure mid-stream)
no output token at all     ``empty_response`` (a stream with no output event; a body
                           whose usage says 0, or with no text and no usage)
=========================  =========================================================

The API key is read once from the environment variable the config names and exists
only in the pre-rendered request head; every error detail has it masked.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from tokenmark import __version__
from tokenmark.adapters.client_tokenizer import ClientTokenizer, load_tokenizer
from tokenmark.adapters.http1 import Connection, ReadQueue, describe_os_error
from tokenmark.adapters.openai_target import (
    OpenAIConfig,
    api_key,
    auth_headers,
    http_name,
    probe,
    secrets,
    ssl_context,
)
from tokenmark.adapters.pool import Endpoint
from tokenmark.adapters.sse import StreamReader
from tokenmark.clock import Clock, FakeClock, MonotonicClock
from tokenmark.errors import ConfigError
from tokenmark.records import ErrorClass, Query, ResponseDetails, Sample, TokenSource
from tokenmark.redact import Redactor
from tokenmark.sut import ResponseHandle

__all__ = ["BodyRenderer", "EndpointStats", "OpenAIHttpSUT", "measure_prompt", "request_id"]

#: A ``Server`` header that starts so belongs to tokenmark's own servers, which stream
#: exactly one token per event: their events count the output exactly.
ONE_PER_EVENT = "tokenmark/"
_ERROR_BODY_CAP = 2048
_JSON_BODY_CAP = 64 * 1024 * 1024


@dataclass
class EndpointStats:
    """What one endpoint did during the run (the per-endpoint breakdown)."""

    label: str
    requests: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    output_tokens: int = 0
    cached_prompt_tokens: int = 0
    max_in_flight: int = 0
    connections: int = 0
    #: Requests that waited for a new connection before they could be sent (their send
    #: lag includes a handshake); spare connections keep this near zero.
    connect_waits: int = 0
    #: Of those, the ones sent while every spare connection was itself still being opened:
    #: more requests came within one handshake than there are spares (a busy machine
    #: bunches sends). A wait outside this count means the spares were not kept up.
    spare_waits: int = 0

    def line(self) -> str:
        errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
        return (f"{self.requests} requests, {self.ok} ok, errors: {errs}; "
                f"{self.output_tokens} output tokens, {self.cached_prompt_tokens} cached "
                f"prompt tokens; {self.connections} connections ({self.connect_waits} "
                f"opened while a request waited{self._spares()}), max {self.max_in_flight} "
                "in flight")

    def _spares(self) -> str:
        if not self.spare_waits:
            return ""
        return f", {self.spare_waits} with every spare still opening"


class OpenAIHttpSUT:
    """An OpenAI-compatible endpoint (or several replicas) as a system under test."""

    def __init__(self, clock: Clock, config: OpenAIConfig, *,
                 tokenizer: ClientTokenizer | None = None, run_id: str = "") -> None:
        if isinstance(clock, FakeClock):
            raise ConfigError("an HTTP target runs in real time; drop --virtual-time")
        self.config = config.validated()
        self._clock = clock
        self._now = clock.now_ns
        self._key = api_key(config)
        self._redactor = Redactor(secrets(config, self._key))
        self._tokenizer = tokenizer or (load_tokenizer(config.tokenizer)
                                        if config.tokenizer else None)
        self._want_text = self._tokenizer is not None or config.keep_text
        ctx = ssl_context(config)
        #: Reads are parsed when no timed send is due (http1.ReadQueue); the environment
        #: variable TOKENMARK_DEFER_READS=0 parses them where they land (to compare).
        self.reads = None if os.environ.get("TOKENMARK_DEFER_READS", "").strip() == "0" \
            else ReadQueue()
        self.endpoints = [Endpoint(u, ssl_context=ctx, max_conns=config.pool_size,
                                   keepalive_s=config.keepalive_s, now=self._now,
                                   reads=self.reads)
                          for u in config.urls]
        self.stats = [EndpointStats(ep.label) for ep in self.endpoints]
        self._rr = 0
        self._least = config.routing == "least-in-flight"
        self._run_id = run_id or os.urandom(4).hex()
        self._checked = not config.check_models
        self._heads: list[bytes] = []
        self.renderer: BodyRenderer
        self._tasks: set[asyncio.Future[None]] = set()
        self._render()

    def _render(self) -> None:
        """Pre-render each endpoint's request head and the constant part of the body."""
        cfg = self.config
        route = "chat/completions" if cfg.api == "chat" else "completions"
        extra = auth_headers(cfg, self._key)
        accept = b"text/event-stream" if cfg.stream else b"application/json"
        self._heads = [
            (f"POST {ep.base.path}/{route} HTTP/1.1\r\nHost: {ep.host_header}\r\n"
             f"User-Agent: tokenmark/{__version__}\r\nContent-Type: application/json\r\n"
             ).encode() + b"Accept: " + accept + b"\r\n" + extra
            for ep in self.endpoints]
        self.renderer = BodyRenderer(cfg)
        self._prepared: tuple[Query, bytes] | None = None  # see prepare

    # -- the SystemUnderTest contract ------------------------------------------------------
    @property
    def name(self) -> str:
        return http_name(self.config)

    def describe(self) -> dict[str, str]:
        cfg = self.config
        d = {
            "kind": "OpenAI-compatible HTTP",
            "api": cfg.api,
            "stream": str(cfg.stream).lower(),
            "model": cfg.model,
            "served_model": cfg.model,
            "server_software": cfg.served_by or "not said",
            "urls": " ".join(ep.label for ep in self.endpoints),
            "routing": cfg.routing,
            "tokenizer": self._tokenizer.name if self._tokenizer else "none",
            "headers": " ".join(name for name, _ in cfg.headers),
        }
        for i, st in enumerate(self.stats):
            d[f"endpoint{i}"] = f"{st.label}: {st.line()}"
        return d

    async def start(self) -> None:
        """Check ``/v1/models`` (unless the caller did or opted out); open ``preconnect``."""
        for ep in self.endpoints:
            ep.closed = False  # a system stopped and started again
        if not self._checked:
            info = await probe(self.config, self._key)
            self._checked = True
            if info.model != self.config.model or (info.software and
                                                    not self.config.served_by):
                self.config = replace(self.config, model=info.model,
                                      served_by=self.config.served_by or info.software)
                self._render()
        await self.preconnect(max(self.config.preconnect, self.config.spare_connections))

    async def preconnect(self, n: int) -> None:
        """Open ``n`` idle connections per endpoint now (failures are left to the run)."""
        limit = self.config.connect_timeout_s or None
        for i, ep in enumerate(self.endpoints):
            k = n - len(ep.idle)
            if ep.max_conns > 0:
                k = min(k, ep.max_conns - ep.open_count)
            if k <= 0:
                continue
            conns = [ep.reserve() for _ in range(k)]
            try:
                async with asyncio.timeout(limit):
                    done = await asyncio.gather(*(ep.connect(c) for c in conns),
                                                return_exceptions=True)
            except TimeoutError:
                continue  # the slots were freed; the run connects on demand
            for conn, res in zip(conns, done, strict=True):
                if res is None:
                    self.stats[i].connections += 1
                    ep.release(conn)

    async def flush(self) -> None:
        return None

    async def stop(self) -> None:
        if self.reads is not None:
            self.reads.flush()
        for task in list(self._tasks):
            task.cancel()
        for ep in self.endpoints:
            ep.close()
        for ep in self.endpoints:
            await ep.closing(1.0)

    def issue(self, query: Query, handle: ResponseHandle) -> None:
        self.issue_to(query, handle, self._route())

    # -- requests ----------------------------------------------------------------------------
    def _route(self) -> int:
        eps = self.endpoints
        n = len(eps)
        i = self._rr
        self._rr = (i + 1) % n if n > 1 else 0
        if self._least and n > 1:
            best = i
            for k in range(1, n):
                j = (i + k) % n
                if eps[j].in_flight < eps[best].in_flight:
                    best = j
            return best
        return i

    def body(self, sample: Sample) -> bytes:
        return self.renderer.body(sample)

    def prepare(self, query: Query) -> None:
        """Render ``query``'s body before its send time (:class:`tokenmark.sut.Preparable`)."""
        self._prepared = (query, self.renderer.body(query.sample))

    def body_for(self, query: Query) -> bytes:
        """``query``'s body: the one :meth:`prepare` rendered, else rendered now."""
        ready = self._prepared
        if ready is not None and ready[0] is query:
            self._prepared = None
            return ready[1]
        return self.renderer.body(query.sample)

    def issue_to(self, query: Query, handle: ResponseHandle, index: int) -> None:
        """Send ``query`` to endpoint ``index``."""
        renderer = self.renderer
        if renderer.exact_output and hasattr(handle, "details"):  # a DetailsHandle
            handle.details(ResponseDetails(
                demanded_output_tokens=renderer.output_tokens(query.sample)))
        self.send(index, query.seq, self.body_for(query), handle)

    def send(self, index: int, seq: int, body: bytes, handle: ResponseHandle) -> None:
        """Send a rendered body to endpoint ``index`` (worker processes get bodies)."""
        ep = self.endpoints[index]
        rid = b"X-Request-Id: %s\r\n" % request_id(self._run_id, seq).encode() if (
            self.config.request_ids) else b""
        data = b"%s%sContent-Length: %d\r\n\r\n%s" % (self._heads[index], rid, len(body), body)
        req = _Request(self, index, handle, data)
        ep.in_flight += 1
        st = self.stats[index]
        st.requests += 1
        if ep.in_flight > st.max_in_flight:
            st.max_in_flight = ep.in_flight
        req.arm()
        conn = ep.take_idle()
        if conn is not None:
            req.send_on(conn)
        elif ep.can_open():
            st.connect_waits += 1
            spare = self.config.spare_connections
            if spare and ep.connecting >= spare:
                st.spare_waits += 1
            self.spawn(req.connect(ep.reserve()))
        else:
            ep.waiters.append(req.on_slot)
        spare = self.config.spare_connections
        if spare:
            self._top_up(index, spare)

    def _top_up(self, index: int, spare: int) -> None:
        """Open connections in the background until ``spare`` are idle or on the way."""
        ep = self.endpoints[index]
        want = spare - ep.prune() - ep.connecting
        while want > 0 and ep.can_open() and not ep.closed:
            ep.connecting += 1
            self.spawn(self._open_spare(index, ep.reserve()))
            want -= 1

    async def _open_spare(self, index: int, conn: Connection) -> None:
        ep = self.endpoints[index]
        try:
            async with asyncio.timeout(self.config.connect_timeout_s or None):
                await ep.connect(conn)
        except (OSError, TimeoutError):
            return  # the requests that need a connection meet the fault and report it
        finally:
            ep.connecting -= 1
        self.stats[index].connections += 1
        ep.release(conn)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task, keeping a reference so it is not collected early."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def request_id(self, seq: int) -> str:
        """The ``X-Request-Id`` sent with the query of sequence number ``seq``."""
        return request_id(self._run_id, seq)

    @property
    def length_probe(self) -> bool:
        """Whether :meth:`prompt_overhead` may send its probe requests."""
        return self.config.length_probe

    async def prompt_overhead(self, text: str, planned: int) -> int | None:
        """The tokens the server adds to a prompt (``tokenmark.sut.PromptProbe``)."""
        served = await measure_prompt(self.config, text)
        return None if served is None else served - planned

    def redact(self, text: str) -> str:
        """``text`` with the API key and header values masked in every form
        (:mod:`tokenmark.redact`)."""
        return self._redactor.text(text)


class _Probe:
    """The handle of one probe request: keeps the server's prompt token count."""

    def __init__(self) -> None:
        self.done: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    def sent(self, t_ns: int | None = None) -> None:
        return None

    def token(self, n: int = 1, t_ns: int | None = None) -> None:
        return None

    def complete(self, output_tokens: int | None = None,
                 source: TokenSource = TokenSource.SUT, *, t_ns: int | None = None,
                 input_tokens: int | None = None, alt_output_tokens: int = -1,
                 cached_input_tokens: int = -1, token_ids: Any = None,
                 text: str | None = None, endpoint: str = "") -> None:
        if not self.done.done():
            self.done.set_result(input_tokens)

    def fail(self, error: ErrorClass, detail: str = "", *, t_ns: int | None = None,
             endpoint: str = "") -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"{error.value}: {detail}"))


async def measure_prompt(config: OpenAIConfig, text: str, timeout_s: float = 60.0
                         ) -> int | None:
    """The server's ``prompt_tokens`` for one request of ``text`` (as the run sends it:
    one user message for chat) asking for one token, not streamed, on a connection of
    its own (the run's statistics and pool are untouched). ``None``: no usage came."""
    extra = {k: v for k, v in config.extra_body_dict().items()
             if k not in ("max_tokens", "max_completion_tokens", "min_tokens", "ignore_eos")}
    cfg = replace(config, stream=False, max_tokens=1, ignore_eos=False, preconnect=0,
                  spare_connections=0, check_models=False, request_ids=False,
                  extra_body=json.dumps(extra) if extra else "", tokenizer="",
                  keep_text=False)
    sut = OpenAIHttpSUT(MonotonicClock(), cfg)
    probe = _Probe()
    try:
        await sut.start()
        sut.send(0, 0, sut.renderer.body(Sample(0, text, 0, 1)), probe)
        async with asyncio.timeout(timeout_s):
            return await probe.done
    finally:
        await sut.stop()


class BodyRenderer:
    """Request bodies: the constant part rendered once, then per sample its length and prompt.

    The constant part holds the model, ``stream`` and ``stream_options``, the sampling
    fields the user set and the extra body (whose keys win over the sampling fields); per
    sample come ``max_tokens`` (the sample's output length, unless the user fixed it) and
    the prompt: the text for completions; for chat, the sample's own messages where it
    has them (multi-turn, images), else one user message.
    """

    def __init__(self, cfg: OpenAIConfig) -> None:
        self.chat = cfg.api == "chat"
        body: dict[str, Any] = {"model": cfg.model, "stream": cfg.stream}
        if cfg.stream and cfg.include_usage:
            body["stream_options"] = {"include_usage": True}
        if cfg.temperature is not None:
            body["temperature"] = cfg.temperature
        if cfg.ignore_eos:
            body["ignore_eos"] = True
        if cfg.max_tokens:
            body["max_tokens"] = cfg.max_tokens
        body.update(cfg.extra_body_dict())
        self.per_sample_max = not ("max_tokens" in body or "max_completion_tokens" in body)
        fixed = body.get("max_tokens", body.get("max_completion_tokens"))
        self.fixed_max = fixed if isinstance(fixed, int) else -1
        #: The server must write exactly max_tokens: ignore_eos, or min_tokens == max.
        self.exact_output = bool(body.get("ignore_eos")) or (
            not self.per_sample_max and body.get("min_tokens") == self.fixed_max)
        self.prefix = json.dumps(body, separators=(",", ":")).encode()[:-1]

    def output_tokens(self, sample: Sample) -> int:
        """The ``max_tokens`` a request for ``sample`` asks for."""
        return max(1, sample.output_tokens) if self.per_sample_max else self.fixed_max

    def body(self, sample: Sample) -> bytes:
        mx = b',"max_tokens":%d' % max(1, sample.output_tokens) if self.per_sample_max else b""
        if self.chat:
            if getattr(sample, "is_chat", False):
                messages = sample.openai_messages()  # type: ignore[attr-defined, unused-ignore]
                msgs = json.dumps(messages, separators=(",", ":")).encode()
                return self.prefix + mx + b',"messages":' + msgs + b"}"
            prompt = json.dumps(sample.prompt).encode()
            return self.prefix + mx + b',"messages":[{"role":"user","content":' + prompt + b"}]}"
        return self.prefix + mx + b',"prompt":' + json.dumps(sample.prompt).encode() + b"}"


def request_id(run_id: str, seq: int) -> str:
    """A UUID-shaped id: the run's 8 random hex digits, then the sequence number in hex.

    Servers may insist on a UUID (llama.cpp's server answers HTTP 400 otherwise); this
    one stays readable: ``7f3a09c1-0000-0000-0000-00000000002a`` is query 42 of run
    ``7f3a09c1``, and matches the server's own logs to tokenmark's records.
    """
    h = f"{run_id[:8]:0>8}{seq:024x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class _Request:
    """One request in flight: the exchange its connection reports to."""

    __slots__ = ("body", "conn", "data", "done", "ep", "handle", "index", "mode",
                 "one_per_event", "scanner", "split", "status", "sut", "t0", "timer",
                 "tokens_seen")

    def __init__(self, sut: OpenAIHttpSUT, index: int, handle: ResponseHandle,
                 data: bytes) -> None:
        self.sut = sut
        self.index = index
        self.ep = sut.endpoints[index]
        self.handle = handle
        # a ReasoningHandle (tokenmark.sut) takes reasoning chunks apart from the answer
        self.split = hasattr(handle, "reasoning")
        self.data = data
        self.conn: Connection | None = None
        self.scanner: StreamReader | None = None
        self.one_per_event = False  # the server is known to stream one token per event
        self.body: list[bytes] | None = None  # non-streamed or error bodies only
        self.mode = 0  # 0: before the head, 1: SSE, 2: JSON body, 3: error body
        self.status = 0
        self.done = False
        self.tokens_seen = False
        self.timer: asyncio.TimerHandle | None = None
        self.t0 = sut._now()

    # -- timing limits -------------------------------------------------------------------
    def arm(self) -> None:
        cfg = self.sut.config
        limit = cfg.first_token_timeout_s or cfg.request_timeout_s
        if cfg.request_timeout_s and cfg.first_token_timeout_s:
            limit = min(cfg.first_token_timeout_s, cfg.request_timeout_s)
        if limit:
            self.timer = asyncio.get_running_loop().call_later(limit, self._timeout)

    def _timeout(self) -> None:
        self.timer = None
        reads = self.sut.reads
        if reads is not None and reads:
            reads.flush()  # what was read before the limit counts
        if self.done:
            return
        cfg = self.sut.config
        now = self.sut._now()
        age = (now - self.t0) / 1e9
        if not self.tokens_seen and cfg.first_token_timeout_s and (
                age >= cfg.first_token_timeout_s - 1e-3):
            self.fail(ErrorClass.TIMEOUT_FIRST_TOKEN,
                      f"no output token within {cfg.first_token_timeout_s:g} s", now)
        elif cfg.request_timeout_s and age >= cfg.request_timeout_s - 1e-3:
            self.fail(ErrorClass.TIMEOUT_REQUEST,
                      f"not finished within {cfg.request_timeout_s:g} s", now)
        elif cfg.request_timeout_s:
            self.timer = asyncio.get_running_loop().call_later(
                max(0.0, cfg.request_timeout_s - age), self._timeout)

    def _first_token(self) -> None:
        self.tokens_seen = True
        cfg = self.sut.config
        if self.timer is not None and cfg.first_token_timeout_s and cfg.request_timeout_s:
            self.timer.cancel()
            left = cfg.request_timeout_s - (self.sut._now() - self.t0) / 1e9
            self.timer = asyncio.get_running_loop().call_later(max(0.0, left), self._timeout)

    # -- getting a connection ----------------------------------------------------------------
    def send_on(self, conn: Connection) -> None:
        self.conn = conn
        self.handle.sent(self.sut._now())
        conn.send(self.data, self)

    async def connect(self, conn: Connection) -> None:
        ep = self.ep
        limit = self.sut.config.connect_timeout_s or None
        try:
            async with asyncio.timeout(limit):
                await ep.connect(conn)
        except TimeoutError:
            self.fail(ErrorClass.TIMEOUT_CONNECT,
                      f"connecting to {ep.label} took over {limit:g} s", self.sut._now())
            return
        except OSError as e:  # refused, unreachable, too many open files, TLS errors
            why = describe_os_error(e)
            self.fail(ErrorClass.CONNECT, f"cannot connect to {ep.label}: {why}",
                      self.sut._now())
            return
        self.sut.stats[self.index].connections += 1
        if self.done:
            ep.release(conn)  # the request timed out meanwhile; keep the connection
        else:
            self.send_on(conn)

    def on_slot(self, conn: Connection | None) -> None:
        if self.done:
            if conn is not None:
                self.ep.release(conn)
            return
        if conn is not None:
            self.send_on(conn)
        else:
            self.sut.stats[self.index].connect_waits += 1
            self.sut.spawn(self.connect(self.ep.reserve()))

    # -- the response (Exchange) -------------------------------------------------------------
    def on_head(self, status: int, headers: dict[str, str], t: int) -> None:
        if self.done:
            return
        self.status = status
        if not 200 <= status < 300:
            self.mode = 3
        elif "event-stream" in headers.get("content-type", ""):
            self.mode = 1
            self.scanner = StreamReader(self.sut._want_text, self.sut.config.max_event_bytes)
            self.one_per_event = headers.get("server", "").startswith(ONE_PER_EVENT)
        else:
            self.mode = 2

    def on_body(self, data: bytes, t: int) -> None:
        if self.done:
            return
        sc = self.scanner
        if sc is not None:
            n = sc.feed(data)
            if n:
                self._tokens(sc, n, t)
            if sc.done:
                self.complete(t)
            elif sc.bad:
                self.fail(ErrorClass.MALFORMED, sc.bad, t)
            elif sc.error:
                self.fail(ErrorClass.SUT_ERROR, f"the server reported: {sc.error}", t)
            return
        body = self.body
        if body is None:
            body = self.body = []
        body.append(data)
        if self.mode == 3 and sum(map(len, body)) > _ERROR_BODY_CAP:
            self.body = [b"".join(body)[:_ERROR_BODY_CAP]]
        elif self.mode == 2 and sum(map(len, body)) > _JSON_BODY_CAP:
            self.fail(ErrorClass.MALFORMED, "response body over 64 MiB", t)

    def _tokens(self, sc: StreamReader, n: int, t: int) -> None:
        """``n`` token events in one read: reasoning ones apart, when the handle can."""
        if not self.tokens_seen:
            self._first_token()
        r = sc.reasoning
        if r and self.split:
            self.handle.reasoning(r, t)  # type: ignore[attr-defined]
            if n > r:
                self.handle.token(n - r, t)
        else:
            self.handle.token(n, t)

    def on_end(self, t: int) -> None:
        if self.done:
            return
        if self.mode == 3:
            # masked before it is cut: a cut inside the key would leave part of it
            text = self.sut.redact(b"".join(self.body or ()).decode("utf-8", "replace")
                                   )[:300].strip()
            err = ErrorClass.RATE_LIMITED if self.status == 429 else ErrorClass.HTTP_STATUS
            self.fail(err, f"HTTP {self.status}: {text}", t)
            return
        sc = self.scanner
        if sc is not None:
            n = sc.finish()
            if n:
                self._tokens(sc, n, t)
            if sc.done:
                self.complete(t)
            else:
                self.fail(ErrorClass.TRUNCATED, sc.bad or sc.error or
                          "the stream ended without data: [DONE] or a finish_reason", t)
            return
        self._complete_json(b"".join(self.body or ()), t)

    def on_error(self, error: ErrorClass, detail: str, t: int) -> None:
        if not self.done:
            self.conn = None  # already broken
            self.fail(error, detail, t)

    # -- endings -----------------------------------------------------------------------------
    def _finish(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.ep.in_flight -= 1

    def complete(self, t: int) -> None:
        sc = self.scanner
        assert sc is not None
        self._report(sc.usage, sc.text if self.sut._want_text else None, sc.finish_reason, t)

    def _complete_json(self, raw: bytes, t: int) -> None:
        try:
            obj = json.loads(raw)
            if isinstance(obj, dict) and "error" in obj and "choices" not in obj:
                err = obj["error"]
                msg = err.get("message", err) if isinstance(err, dict) else err
                self.fail(ErrorClass.SUT_ERROR, f"the server reported: {str(msg)[:300]}", t)
                return
            choices = obj["choices"]
            texts = []
            finish = ""
            tools = False
            for ch in choices:
                msg = ch.get("message") or {}
                texts.append(ch.get("text") or msg.get("content") or
                             msg.get("reasoning_content") or msg.get("reasoning") or "")
                tools = tools or bool(msg.get("tool_calls"))
                if not finish and isinstance(ch.get("finish_reason"), str):
                    finish = ch["finish_reason"]
            usage = obj.get("usage")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            self.fail(ErrorClass.MALFORMED, "not an OpenAI response body: "
                      + self.sut.redact(repr(raw[:2048]))[:90], t)
            return
        text = "".join(str(x) for x in texts)
        if not isinstance(usage, dict):
            usage = None
        self._report(usage, text, finish, t, tools)

    def _basis(self, sc: StreamReader, usage_count: bool) -> str:
        """How the stream's tokens were counted (:attr:`RequestRecord.token_basis`)."""
        basis = sc.basis
        if basis != "events":
            return basis
        if self.one_per_event:
            return "events"
        return "usage" if usage_count else "chunks"

    def _details(self, finish: str, usage_count: bool) -> None:
        if not hasattr(self.handle, "details"):  # a tokenmark.sut.DetailsHandle
            return
        sc = self.scanner
        d = ResponseDetails(finish_reason=finish[:64]) if sc is None else ResponseDetails(
            finish_reason=finish[:64], stream_tokens=sc.tokens,
            token_basis=self._basis(sc, usage_count))
        self.handle.details(d)

    def _report(self, usage: dict[str, Any] | None, text: str | None, finish: str,
                t: int, tools: bool = False) -> None:
        sut = self.sut
        sc = self.scanner
        tok = sut._tokenizer
        counted = tok.count(text) if tok is not None and text is not None else -1
        out: int | None = None
        source = TokenSource.CHUNKS
        alt = -1
        inp: int | None = None
        cached = -1
        reasoning = -1
        if usage is not None and isinstance(usage.get("completion_tokens"), int):
            out = usage["completion_tokens"]
            source = TokenSource.USAGE
            alt = counted
            if isinstance(usage.get("prompt_tokens"), int):
                inp = usage["prompt_tokens"]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                cached = details["cached_tokens"]
            out_details = usage.get("completion_tokens_details")
            if isinstance(out_details, dict) and isinstance(
                    out_details.get("reasoning_tokens"), int):
                reasoning = out_details["reasoning_tokens"]
        elif counted >= 0:
            out = counted
            source = TokenSource.TOKENIZER
        elif sc is None:
            out = 0  # not streamed, no usage, no tokenizer: nothing to count with
            source = TokenSource.NONE
        self._details(finish, source is TokenSource.USAGE)
        if sc is not None:
            empty = sc.tokens == 0
        elif source is TokenSource.USAGE:
            empty = out == 0
        else:
            empty = not text and not tools
        if empty:
            said = f"; usage says {out} completion tokens" if (
                source is TokenSource.USAGE) else ""
            self.fail(ErrorClass.EMPTY_RESPONSE,
                      f"the answer ended (finish_reason {finish or 'not given'}) without "
                      f"an output token{said}", t)
            return
        self._finish()
        st = sut.stats[self.index]
        if cached >= 0:
            st.cached_prompt_tokens += cached
        if reasoning >= 0 and self.split:
            self.handle.reasoning_usage(reasoning)  # type: ignore[attr-defined]
        st.ok += 1
        self.handle.complete(out, source, t_ns=t, input_tokens=inp, alt_output_tokens=alt,
                             cached_input_tokens=cached, text=text, endpoint=self.ep.label)
        if out is None:
            out = sc.tokens if sc is not None else 0
        st.output_tokens += out

    def fail(self, error: ErrorClass, detail: str, t: int) -> None:
        if self.done:
            return
        sc = self.scanner
        if sc is not None and error is not ErrorClass.EMPTY_RESPONSE and sc.events:
            self._details(sc.finish_reason, False)  # what streamed before the failure
        self._finish()
        conn = self.conn
        if conn is not None and conn.exchange is self:
            conn.abort()  # the rest of this response would poison the connection
        self.sut.stats[self.index].errors[error.value] += 1
        self.handle.fail(error, self.sut.redact(detail), t_ns=t, endpoint=self.ep.label)
