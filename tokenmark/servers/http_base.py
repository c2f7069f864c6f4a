"""What tokenmark's own servers share: one HTTP/1.1 connection protocol and request heads.

:class:`Conn` is a keep-alive connection that answers one request at a time: it parses
the request head and body as bytes arrive (one shared receive buffer, one timestamp per
read) and hands each whole request to its server's ``handle``; the server answers with
``write``/``finish``, ends a stream with ``stream_ended``, or breaks the connection with
``close`` (a clean FIN) or ``reset`` (an RST, as a crashed server or an aborting proxy
would). A server that keeps work going for a request sets ``on_lost``, called once when
the connection goes away (the client left: the work can be dropped). The exact-delay
server (:mod:`tokenmark.servers.exact`) and the emulated server
(:mod:`tokenmark.servers.emulated`) both run on it. Standard library only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Callable
from time import perf_counter_ns
from typing import Protocol, cast

__all__ = ["Conn", "Handler", "Head", "error_body", "maybe_chunk"]

_LINGER_RST = struct.pack("ii", 1, 0)
_MAX_HEAD = 65536
_MAX_BODY = 64 * 1024 * 1024

#: One receive buffer for all connections (asyncio fills and hands it over back to back);
#: the default read path would allocate 256 KiB per read.
_RECV = memoryview(bytearray(65536))


def error_body(message: str, code: int) -> dict[str, object]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": "error", "code": code}}


def maybe_chunk(data: bytes, chunked: bool) -> bytes:
    """``data`` as one HTTP/1.1 chunk when ``chunked``, else as is."""
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


def json_dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


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


class Handler(Protocol):
    """The server side a :class:`Conn` reports to."""

    conns: set[Conn]

    def handle(self, conn: Conn, method: str, path: str, headers: Head, body: bytes,
               t_recv: int) -> None:
        """Answer one whole request (``t_recv``: perf_counter_ns of the read that ended it)."""
        ...


class Conn(asyncio.BufferedProtocol):
    """One client connection: HTTP/1.1 keep-alive, one request answered at a time."""

    def __init__(self, server: Handler) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        #: Called once when the connection is lost (the request in progress, if any).
        self.on_lost: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.conns.discard(self)
        lost, self.on_lost = self.on_lost, None
        if lost is not None:
            lost()

    def get_buffer(self, sizehint: int) -> memoryview:
        return _RECV

    def buffer_updated(self, nbytes: int) -> None:
        t = perf_counter_ns()
        self.buf += _RECV[:nbytes]
        if len(self.buf) > _MAX_BODY:
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
            try:
                length = int(head.get("content-length") or 0)
            except ValueError:
                self.close()
                return
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

    def stream_ended(self, *, close: bool) -> None:
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
