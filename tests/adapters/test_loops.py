"""The event loop: uvloop by default, the standard loop on request, and the HTTP client's
transport paths behaving the same on both.

The client runs on uvloop when it is installed (:mod:`tokenmark.adapters.eventloop`);
uvloop's transports are libuv's, not asyncio's, so every way a response can arrive over a
real loopback socket is run on both loops against a scripted server: chunked bodies in
reads of a few bytes, keep-alive reuse, a close-delimited body, ``Connection: close``,
a server that half-closes (EOF) or resets mid-body, and reads parked in a
:class:`~tokenmark.adapters.http1.ReadQueue`.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

import pytest

from tokenmark.adapters import eventloop
from tokenmark.adapters.http1 import ReadQueue
from tokenmark.adapters.pool import Endpoint, fetch
from tokenmark.errors import ConfigError
from tokenmark.records import ErrorClass

uvloop = pytest.importorskip("uvloop") if sys.platform != "win32" else None
LOOPS = ["asyncio", "uvloop"] if uvloop is not None else ["asyncio"]


# -- which loop ---------------------------------------------------------------------------
def test_uvloop_is_the_default(monkeypatch):
    monkeypatch.delenv("TOKENMARK_EVENT_LOOP", raising=False)
    assert eventloop.loop_factory() is uvloop.new_event_loop
    assert eventloop.run(_loop_type()) is uvloop.Loop


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_asyncio_opts_out(monkeypatch, value):
    monkeypatch.setenv("TOKENMARK_EVENT_LOOP", value)
    assert eventloop.loop_factory() is None
    assert not issubclass(eventloop.run(_loop_type()), uvloop.Loop)


@pytest.mark.parametrize("value", ["uvloop", "UVLOOP", ""])
def test_uvloop_asked_for(monkeypatch, value):
    monkeypatch.setenv("TOKENMARK_EVENT_LOOP", value)
    assert eventloop.loop_factory() is uvloop.new_event_loop


def test_an_unknown_loop_names_the_choices(monkeypatch):
    monkeypatch.setenv("TOKENMARK_EVENT_LOOP", "trio")
    with pytest.raises(ConfigError, match="'trio'.*uvloop or asyncio"):
        eventloop.run(_loop_type())


def test_without_uvloop_the_standard_loop_unless_insisted_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    monkeypatch.delenv("TOKENMARK_EVENT_LOOP", raising=False)
    assert eventloop.loop_factory() is None
    monkeypatch.setenv("TOKENMARK_EVENT_LOOP", "uvloop")
    with pytest.raises(ConfigError, match="uvloop is not installed: pip install uvloop"):
        eventloop.loop_factory()


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


# -- the client's transport paths on both loops -------------------------------------------
HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n")
PARTS = [b"data: {\"i\": %d, \"t\": \"%s\"}\n\n" % (i, b"x" * (i % 7)) for i in range(40)]
BODY = b"".join(PARTS)


def _chunked(parts: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


async def _dribble(writer: asyncio.StreamWriter, raw: bytes, step: int) -> None:
    """``raw`` a few bytes at a time, each piece its own segment (the client reads it
    before the next is written: the loop is shared and each write yields)."""
    for i in range(0, len(raw), step):
        writer.write(raw[i:i + step])
        await writer.drain()
        await asyncio.sleep(0.0005)


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1]
            if path == b"/chunked":  # keep-alive: the next request may follow
                await _dribble(writer, HEAD_CHUNKED + _chunked(PARTS), 5)
                continue
            if path == b"/close-delimited":
                await _dribble(writer, b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
                               b"\r\n" + BODY, 7)
            elif path == b"/length-close":
                await _dribble(writer, b"HTTP/1.1 200 OK\r\nconnection: close\r\n"
                               b"content-length: %d\r\n\r\n%s" % (len(BODY), BODY), 11)
            elif path == b"/eof-mid-body":  # half-close: EOF while the body is unfinished
                await _dribble(writer, HEAD_CHUNKED + _chunked(PARTS)[:300], 5)
                writer.write_eof()
                await reader.read()  # until the client closes its side
            elif path == b"/reset-mid-body":
                await _dribble(writer, HEAD_CHUNKED + _chunked(PARTS)[:300], 5)
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
            return
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


class _Wait:
    """An exchange that keeps everything and resolves a future at the end."""

    def __init__(self) -> None:
        self.fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.status = 0
        self.body = b""
        self.reads = 0
        self.ended = False
        self.error: tuple[ErrorClass, str] | None = None

    def on_head(self, status, headers, t):
        self.status = status

    def on_body(self, data, t):
        self.body += data
        self.reads += 1

    def on_end(self, t):
        self.ended = True
        self.fut.set_result(None)

    def on_error(self, error, detail, t):
        self.error = (error, detail)
        self.fut.set_result(None)


async def _until(cond, limit_s: float = 30.0) -> None:
    end = time.monotonic() + limit_s
    while not cond() and time.monotonic() < end:
        await asyncio.sleep(0.001)


async def _scenarios(queued: bool) -> dict[str, object]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reads = ReadQueue() if queued else None
    ep = Endpoint(f"http://127.0.0.1:{port}", ssl_context=None, max_conns=0,
                  keepalive_s=30, now=time.perf_counter_ns, reads=reads)
    out: dict[str, object] = {}

    async def request(path: str, conn=None):
        conn = conn or await ep.open()
        ex = _Wait()
        conn.send(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode(), ex)
        await asyncio.wait_for(ex.fut, 30)
        return conn, ex

    try:
        conn, ex = await request("/chunked")
        out["chunked"] = (ex.status, ex.body == BODY, ex.ended, ex.error, ex.reads > 10)
        assert ep.take_idle() is conn  # back in the pool after its last chunk
        conn2, ex = await request("/chunked", conn)  # reused
        out["reused"] = (conn2 is conn, ex.body == BODY, ex.ended)
        ep.release(conn)
        for path in ("/close-delimited", "/length-close", "/eof-mid-body",
                     "/reset-mid-body"):
            conn, ex = await request(path)
            await _until(lambda c=conn: c.transport is None or not c.alive)
            await _until(lambda c=conn: c not in ep._live)
            out[path] = (ex.status, ex.body, ex.ended, ex.error and ex.error[0],
                         conn in ep._live, conn in ep.idle)
        resp = await fetch(ep, b"GET /length-close HTTP/1.1\r\n")
        out["fetch"] = (resp.status, resp.body == BODY)
    finally:
        ep.close()
        await ep.closing(5)
        server.close()
        await server.wait_closed()
    return out


@pytest.mark.parametrize("queued", [False, True], ids=["inline", "queued"])
@pytest.mark.parametrize("loop", LOOPS)
def test_responses_over_loopback_read_the_same_on_both_loops(loop, queued):
    factory = uvloop.new_event_loop if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        got = runner.run(_scenarios(queued))
    chunked_cut = _chunked(PARTS)[:300]
    sent_payload = b"".join(PARTS)[:len(_dechunk(chunked_cut))]
    assert got["chunked"] == (200, True, True, None, True)
    assert got["reused"] == (True, True, True)
    # a close-delimited body ends at the server's close; Connection: close is honoured
    assert got["/close-delimited"] == (200, BODY, True, None, False, False)
    assert got["/length-close"] == (200, BODY, True, None, False, False)
    # EOF or a reset before the last chunk: what came is kept, the request is an error
    assert got["/eof-mid-body"] == (200, sent_payload, False, ErrorClass.TRUNCATED,
                                    False, False)
    assert got["/reset-mid-body"][:4] == (200, sent_payload, False,
                                          ErrorClass.RESET_MID_STREAM)
    assert got["/reset-mid-body"][4:] == (False, False)
    assert got["fetch"] == (200, True)


def _dechunk(raw: bytes) -> bytes:
    """The payload of a (possibly cut) chunked body: the plain reference."""
    out = b""
    while raw:
        line, sep, rest = raw.partition(b"\r\n")
        if not sep:
            break
        size = int(line, 16)
        if size == 0:
            break
        out += rest[:size]
        raw = rest[size + 2:]
    return out
