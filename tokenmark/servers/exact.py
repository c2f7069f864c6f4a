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

Every generation request leaves a :class:`Truth` row: when the request was read, when
the first and last tokens were written, when the response ended, and (``truth_tokens``)
every token's write time, all from ``time.perf_counter_ns`` (CLOCK_MONOTONIC, the clock
tokenmark's records use), keyed by the client's ``X-Request-Id`` header. Tests and
``bench/`` compare client records with these rows.

Faults (``faults``, cycled by the order requests arrive in) produce each failure a
client must classify:

=================  ==========================================================
``ok``             a normal answer
``status:N``       HTTP status ``N`` with a JSON error body
``reset``          the connection is reset before any response
``reset_mid:K``    reset after ``K`` tokens
``close_mid:K``    a clean close after ``K`` tokens (no chunk terminator)
``end_mid:K``      a well-framed body that ends after ``K`` tokens (no finish, no [DONE])
``no_done``        a complete stream without ``data: [DONE]`` (as transformers serve)
``malformed``      a 200 event stream whose events are not JSON
``bad_chunk``      broken chunked framing
``error_event``    an ``{"error": ...}`` event after the first token
``stall``          the request is read and never answered
``stall_mid:K``    ``K`` tokens, then silence
``usage:D``        usage reports ``D`` more completion tokens than were streamed
``echo_auth``      HTTP 401 quoting the request's ``Authorization`` header
=================  ==========================================================

``exit_after=N`` makes the server die (every connection reset, the listener closed) when
request ``N + 1`` arrives; run as a process (``python -m tokenmark.servers.exact``), it
exits instead. Loopback only; standard library only.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import socket
import ssl
import struct
from array import array
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import cast

from tokenmark.servers.render import (
    HEAD_CLOSE,
    HEAD_SSE,
    StreamBody,
    json_response,
    render_full,
    render_stream,
)

__all__ = ["ExactConfig", "ExactServer", "Truth"]

_LINGER_RST = struct.pack("ii", 1, 0)
_MAX_HEAD = 65536


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


@dataclass(slots=True)
class Truth:
    """What the server did for one generation request (perf_counter_ns times)."""

    rid: str
    ordinal: int
    fault: str
    recv_ns: int
    prompt_tokens: int
    tokens: int = 0  # tokens written
    first_ns: int = -1
    last_ns: int = -1
    done_ns: int = -1
    token_ns: array[int] | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {
            "rid": self.rid, "ordinal": self.ordinal, "fault": self.fault,
            "recv_ns": self.recv_ns, "prompt_tokens": self.prompt_tokens,
            "tokens": self.tokens, "first_ns": self.first_ns, "last_ns": self.last_ns,
            "done_ns": self.done_ns,
        }
        if self.token_ns is not None:
            d["token_ns"] = self.token_ns.tolist()
        if self.headers:
            d["headers"] = self.headers
        return d


class _Stream:
    """One streamed answer in progress."""

    __slots__ = ("body", "conn", "cut", "cut_kind", "k", "n", "truth", "usage")

    def __init__(self, conn: _Conn, body: StreamBody, n: int, truth: Truth,
                 usage: bytes, cut: int, cut_kind: str) -> None:
        self.conn = conn
        self.body = body
        self.n = n
        self.k = 0
        self.truth = truth
        self.usage = usage
        self.cut = cut  # token index at which a fault cuts the stream (-1: none)
        self.cut_kind = cut_kind


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
        self._conns: set[_Conn] = set()
        self._heap: list[tuple[int, int, _Stream]] = []
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
            lambda: _Conn(self), self.host, self.port, ssl=self._ssl, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.close()
        if self._server is not None:
            await self._server.wait_closed()

    def die(self) -> None:
        """Reset every connection and stop listening, as a crashed server would."""
        self.died = True
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.reset()
        self._heap.clear()

    # -- requests ----------------------------------------------------------------------
    def _authorized(self, headers: Head) -> bool:
        key = self.config.api_key
        return not key or headers.get("authorization", "") == f"Bearer {key}"

    def handle(self, conn: _Conn, method: str, path: str, headers: Head, body: bytes,
               t_recv: int) -> None:
        if method == "GET" and path.rstrip("/") == "/v1/models":
            if not self._authorized(headers):
                conn.finish(json_response(401, _err("invalid API key", 401)))
            else:
                conn.finish(self._models)
            return
        chat = path == "/v1/chat/completions"
        if method != "POST" or not (chat or path == "/v1/completions"):
            conn.finish(json_response(404, _err(f"no route {method} {path}", 404)))
            return
        if not self._authorized(headers):
            conn.finish(json_response(401, _err("invalid API key", 401)))
            return
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            conn.finish(json_response(400, _err("the body is not a JSON object", 400)))
            return
        ordinal = self._ordinal
        self._ordinal += 1
        cfg = self.config
        if cfg.exit_after and ordinal >= cfg.exit_after:
            self.die()
            return
        if req.get("model") != cfg.model:
            conn.finish(json_response(
                404, _err(f"The model `{req.get('model')}` does not exist.", 404)))
            return
        fault = cfg.faults[ordinal % len(cfg.faults)] if cfg.faults else "ok"
        truth = Truth(headers.get("x-request-id", ""), ordinal, fault, t_recv,
                      _prompt_tokens(req, chat))
        if cfg.truth_tokens:
            truth.token_ns = array("q")
        for name in cfg.record_headers:
            if name in headers:
                truth.headers[name] = headers.get(name)
        self.truth.append(truth)
        kind, _, arg = fault.partition(":")
        if kind == "status":
            code = int(arg)
            conn.finish(json_response(code, _err(f"injected status {code}", code)))
            return
        if kind == "echo_auth":  # a careless server that quotes the key back
            auth = headers.get("authorization", "")
            conn.finish(json_response(401, _err(f"invalid credentials {auth!r}", 401)))
            return
        if kind == "reset":
            conn.reset()
            return
        if kind == "stall":
            return  # never answered
        n = cfg.output_tokens or int(req.get("max_tokens") or
                                     req.get("max_completion_tokens") or 16)
        n = max(1, n)
        extra = int(arg) if kind == "usage" else 0
        usage = {"prompt_tokens": truth.prompt_tokens, "completion_tokens": n + extra,
                 "total_tokens": truth.prompt_tokens + n + extra}
        if not req.get("stream"):
            self._answer_full(conn, chat, n, usage, truth)
            return
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        chunked = cfg.framing == "chunked"
        reasoning = min(cfg.reasoning_tokens, n) if chat else 0
        sb = render_stream(chat, n, cfg.model, include_usage, cfg.sep, chunked, reasoning)
        usage_ev = (sb.usage_event(truth.prompt_tokens, n + extra, cfg.cached_tokens,
                                   reasoning) if include_usage else b"")
        cut = int(arg) if kind in ("reset_mid", "close_mid", "stall_mid", "end_mid") else -1
        if kind == "error_event":
            cut = 1
        st = _Stream(conn, sb, n, truth, usage_ev, min(cut, n), kind)
        head = (HEAD_SSE if chunked else HEAD_CLOSE) + sb.prologue
        if kind == "malformed":
            conn.write(head + _maybe_chunk(b"data: {not json\n\n", chunked))
        elif kind == "bad_chunk":
            conn.write(HEAD_SSE + b"zz\r\ndata: {}\n\n\r\n")
        else:
            conn.write(head)
        if kind in ("malformed", "bad_chunk"):
            conn.stream_ended(st, close=True)
            return
        first_due = t_recv + cfg.ttft_ns
        if first_due <= perf_counter_ns() and cfg.itl_ns == 0:
            self._advance(st, first_due)  # zero delays: the whole answer in one write
        else:
            self._push(first_due, st)

    def _answer_full(self, conn: _Conn, chat: bool, n: int, usage: dict[str, int],
                     truth: Truth) -> None:
        cfg = self.config
        pre, post = render_full(chat, n, cfg.model)
        body = pre + json.dumps(usage, separators=(",", ":")).encode() + post
        resp = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n" % len(body)) + body
        due = truth.recv_ns + cfg.ttft_ns + (n - 1) * cfg.itl_ns

        def send() -> None:
            t = perf_counter_ns()
            truth.first_ns = truth.last_ns = truth.done_ns = t
            truth.tokens = n
            conn.finish(resp)

        loop = self._loop
        assert loop is not None
        if due <= perf_counter_ns():
            send()
        else:
            loop.call_at(due / 1e9, send)

    # -- timing ------------------------------------------------------------------------
    def _push(self, due: int, st: _Stream) -> None:
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

    def _advance(self, st: _Stream, now: int) -> None:
        """Write every token of ``st`` due by ``now`` (one write), then re-queue it."""
        if st.conn.closed:
            return
        cfg = self.config
        truth = st.truth
        tokens = st.body.tokens
        first_due = truth.recv_ns + cfg.ttft_ns
        itl = cfg.itl_ns
        k = st.k
        n = st.n
        stop = st.cut if st.cut >= 0 else n
        end = k
        while end < stop and first_due + end * itl <= now:
            end += 1
        if itl == 0:
            end = stop
        t = perf_counter_ns()
        if end > k:
            data = b"".join(tokens[k:end]) if end - k > 1 else tokens[k]
            if truth.first_ns < 0:
                truth.first_ns = t
            truth.last_ns = t
            truth.tokens = end
            if truth.token_ns is not None:
                truth.token_ns.extend([t] * (end - k))
        else:
            data = b""
        st.k = end
        if end < stop:
            st.conn.write(data)
            self._push(first_due + end * itl, st)
            return
        if end == n:  # the whole answer
            tail = st.usage + st.body.done
            if st.cut_kind == "no_done":
                tail = st.usage + (b"0\r\n\r\n" if st.body.chunked else b"")
            truth.done_ns = t  # stamped before the write, like every truth time
            st.conn.write(data + tail)
            st.conn.stream_ended(st, close=not st.body.chunked)
            return
        st.conn.write(data)  # a fault cuts the stream here
        kind = st.cut_kind
        if kind == "reset_mid":
            st.conn.reset()
        elif kind == "close_mid":
            st.conn.close()
        elif kind == "end_mid":
            st.conn.write(b"0\r\n\r\n" if st.body.chunked else b"")
            truth.done_ns = perf_counter_ns()
            st.conn.stream_ended(st, close=not st.body.chunked)
        elif kind == "error_event":
            err = json.dumps(_err("injected error event", 500)).encode()
            st.conn.write(_maybe_chunk(b"data: " + err + st.body.sep, st.body.chunked))
            st.cut = -1
            self._push(first_due + end * itl, st)
        # stall_mid: nothing more is ever written


def _err(message: str, code: int) -> dict[str, object]:
    return {"error": {"message": message, "type": "error", "code": code}}


def _maybe_chunk(data: bytes, chunked: bool) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


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


#: One receive buffer for all connections (asyncio fills and hands it over back to back);
#: the default read path would allocate 256 KiB per read.
_RECV = memoryview(bytearray(65536))


class Head:
    """A request head; headers are looked up by name when asked (no dict per request)."""

    __slots__ = ("_lower", "_raw", "request_line")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._lower = raw.lower()
        i = raw.find(b"\r\n")
        self.request_line = (raw if i < 0 else raw[:i]).decode("latin-1")

    def get(self, name: str, default: str = "") -> str:
        key = b"\r\n" + name.encode() + b":"
        i = self._lower.find(key)
        if i < 0:
            return default
        j = self._raw.find(b"\r\n", i + 2)
        return self._raw[i + len(key):j if j >= 0 else len(self._raw)].decode(
            "latin-1").strip()

    def __contains__(self, name: str) -> bool:
        return self._lower.find(b"\r\n" + name.encode() + b":") >= 0


class _Conn(asyncio.BufferedProtocol):
    """One client connection: HTTP/1.1 keep-alive, one request answered at a time."""

    def __init__(self, server: ExactServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server._conns.discard(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return _RECV

    def buffer_updated(self, nbytes: int) -> None:
        t = perf_counter_ns()
        self.buf += _RECV[:nbytes]
        if len(self.buf) > 64 * 1024 * 1024:
            self.close()
            return
        self._process(t)

    def _process(self, t: int) -> None:
        while not self.busy and not self.closed:
            buf = self.buf
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    self.close()
                return
            head = Head(bytes(buf[:end]))
            parts = head.request_line.split(" ", 2)
            if len(parts) != 3:
                self.close()
                return
            length = int(head.get("content-length") or 0)
            if len(buf) < end + 4 + length:
                return
            body = bytes(buf[end + 4:end + 4 + length])
            del buf[:end + 4 + length]
            self.busy = True
            self.server.handle(self, parts[0], parts[1].split("?", 1)[0], head, body, t)

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None and data:
            self.transport.write(data)

    def finish(self, data: bytes) -> None:
        """A whole response was written: the connection takes the next request."""
        self.write(data)
        self.busy = False
        if self.buf:
            self._process(perf_counter_ns())

    def stream_ended(self, st: _Stream, *, close: bool) -> None:
        if close:
            self.close()
        else:
            self.finish(b"")

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()

    def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), as a crash or a proxy abort would."""
        if self.closed or self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
            except OSError:
                pass
        self.closed = True
        self.transport.abort()
