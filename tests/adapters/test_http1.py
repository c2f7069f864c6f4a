"""The HTTP/1.1 response reader: every framing, split at every possible place.

A :class:`Connection` is fed bytes directly (a fake transport stands in for the socket),
so the tests cover chunked bodies (extensions, trailers, chunks larger than a read),
Content-Length and close-delimited bodies, ``1xx`` responses, keep-alive decisions and
broken framing without a network.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.adapters.http1 import Connection
from tokenmark.adapters.pool import Endpoint, parse_base_url
from tokenmark.errors import ConfigError
from tokenmark.records import ErrorClass


class FakeTransport(asyncio.Transport):
    def __init__(self):
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False
        self.closed = False

    def write(self, data):
        self.written.append(data)

    def abort(self):
        self.aborted = True

    def close(self):
        self.closed = True

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self):
        return self.closed or self.aborted


class Recorder:
    def __init__(self):
        self.status = 0
        self.headers = {}
        self.body = b""
        self.ended = False
        self.error: tuple[ErrorClass, str] | None = None

    def on_head(self, status, headers, t):
        self.status, self.headers = status, headers

    def on_body(self, data, t):
        assert data, "empty body callbacks waste time"
        self.body += data

    def on_end(self, t):
        self.ended = True

    def on_error(self, error, detail, t):
        self.error = (error, detail)


def connection() -> tuple[Connection, Endpoint, FakeTransport]:
    ep = Endpoint("http://127.0.0.1:9", ssl_context=None, max_conns=0, keepalive_s=5,
                  now=lambda: 0)
    conn = Connection(ep, lambda: 0)
    tr = FakeTransport()
    conn.connection_made(tr)
    ep._live.add(conn)
    ep.open_count += 1
    return conn, ep, tr


def feed(raw: bytes, cuts) -> tuple[Recorder, Connection, Endpoint]:
    conn, ep, _ = connection()
    rec = Recorder()
    conn.send(b"GET / HTTP/1.1\r\n\r\n", rec)
    pos = 0
    for c in sorted(set(cuts)) + [len(raw)]:
        if c > pos:
            conn.data_received(raw[pos:c])
            pos = c
    return rec, conn, ep


def chunked(parts: list[bytes], ext: bool = False, trailer: bool = False) -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if ext else b"", p)
                    for p in parts if p)
    return body + b"0\r\n" + (b"X-Trailer: y\r\n" if trailer else b"") + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.binary(min_size=0, max_size=300), max_size=12),
       ext=st.booleans(), trailer=st.booleans(),
       cuts=st.lists(st.integers(0, 5000), max_size=30))
def test_chunked_body_survives_any_split(parts, ext, trailer, cuts):
    raw = HEAD + chunked(parts, ext, trailer)
    rec, conn, ep = feed(raw, [c % (len(raw) + 1) for c in cuts])
    assert rec.status == 200 and rec.body == b"".join(parts)
    assert rec.ended and rec.error is None
    assert ep.idle == [conn]  # back in the pool, ready for the next request


def test_a_chunk_larger_than_the_read_streams_through():
    payload = bytes(range(256)) * 100
    raw = HEAD + chunked([payload])
    rec, _, _ = feed(raw, range(0, len(raw), 1000))
    assert rec.body == payload and rec.ended


def test_content_length_body_and_keep_alive():
    raw = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
    rec, conn, ep = feed(raw, [3, 20, 30])
    assert rec.body == b"hello" and rec.ended and ep.idle == [conn]


def test_connection_close_is_honoured():
    raw = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
    rec, conn, ep = feed(raw, [])
    assert rec.ended and ep.idle == [] and conn.transport.closed


def test_close_delimited_body_ends_at_eof():
    raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: 1\n\n"
    rec, conn, _ = feed(raw, [10])
    assert not rec.ended
    conn.connection_lost(None)
    assert rec.ended and rec.body == b"data: 1\n\n" and rec.error is None


def test_informational_responses_are_skipped():
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    rec, _, _ = feed(raw, [5, 30])
    assert rec.status == 200 and rec.body == b"ok"


@pytest.mark.parametrize("raw, why", [
    (HEAD + b"zz\r\nabc\r\n", "bad chunk size"),
    (HEAD + b"3\r\nabcXY", "not followed by CRLF"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x response"),
])
def test_broken_framing_is_malformed(raw, why):
    rec, conn, _ = feed(raw, [])
    assert rec.error is not None
    assert rec.error[0] is ErrorClass.MALFORMED and why in rec.error[1]
    assert conn.transport.aborted


@pytest.mark.parametrize("exc, got_head, expected", [
    (None, False, ErrorClass.RESET),
    (ConnectionResetError(104, "reset"), False, ErrorClass.RESET),
    (ConnectionResetError(104, "reset"), True, ErrorClass.RESET_MID_STREAM),
    (None, True, ErrorClass.TRUNCATED),
])
def test_a_lost_connection_is_classified(exc, got_head, expected):
    raw = HEAD + b"3\r\nabc\r\n" if got_head else b""
    rec, conn, _ = feed(raw, [])
    conn.connection_lost(exc)
    assert rec.error is not None and rec.error[0] is expected


def test_an_idle_connection_the_server_closed_leaves_the_pool():
    rec, conn, ep = feed(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", [])
    assert ep.idle == [conn]
    conn.connection_lost(None)
    assert ep.idle == [] and ep.open_count == 0 and ep.take_idle() is None


@pytest.mark.parametrize("url, label", [
    ("http://h:8000", "http://h:8000/v1"),
    ("http://h:8000/v1/", "http://h:8000/v1"),
    ("https://api.example.com/openai/v1", "https://api.example.com:443/openai/v1"),
    ("http://[::1]:9", "http://::1:9/v1"),
])
def test_base_urls(url, label):
    assert parse_base_url(url).label == label


@pytest.mark.parametrize("url", ["ftp://h", "h:8000", "http://h:99999", "http://u:p@h/",
                                 "http://h/v1?x=1"])
def test_bad_urls_name_the_fix(url):
    with pytest.raises(ConfigError, match="http"):
        parse_base_url(url)
