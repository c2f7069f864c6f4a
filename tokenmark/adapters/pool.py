"""Where requests go: a base URL, its keep-alive connection pool, one-off requests.

One :class:`Endpoint` per base URL (a replica) holds idle connections, most recently
used first, so warm connections are reused; ``max_conns`` 0 means one connection per
request in flight (the pool grows to the concurrency). A slot is reserved when a request
is issued, so a burst cannot open more than ``max_conns`` connections between two
awaits; requests beyond them wait for a connection to come back. An idle connection the
server closed is dropped as soon as the event loop sees the close, and one idle longer
than ``keepalive_s`` is not reused (:meth:`Endpoint.prune` closes such ones from the
cold end), so the classic race with a server's keep-alive
timeout is rare; requests are never retried, so when it happens it is reported as an
error, not hidden. TLS uses :mod:`ssl` (certificate checks on unless told otherwise).

:func:`fetch` sends one request on a fresh connection and returns the whole response
(``GET /v1/models`` before a run).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from tokenmark.adapters.http1 import Connection, ReadQueue
from tokenmark.errors import ConfigError
from tokenmark.records import ErrorClass

__all__ = ["BaseUrl", "Endpoint", "Response", "fetch", "parse_base_url"]


@dataclass(frozen=True, slots=True)
class BaseUrl:
    scheme: str
    host: str
    port: int
    path: str  # API prefix without a trailing slash, e.g. "/v1"

    @property
    def label(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.path}"


def parse_base_url(url: str) -> BaseUrl:
    """``http[s]://host[:port][/prefix]``; an empty prefix means ``/v1``."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"cannot use the target URL {url!r}; write it as "
                          "http://HOST:PORT or https://HOST:PORT/v1")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"the target URL {url!r} may not carry a query, fragment or "
                          "credentials; pass the API key through --api-key-env")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ConfigError(f"the target URL {url!r} has a bad port") from None
    path = parts.path.rstrip("/") or "/v1"
    return BaseUrl(parts.scheme, parts.hostname, port, path)


class Endpoint:
    """One base URL: where to connect, and its pool of keep-alive connections.

    ``in_flight`` is kept by the caller (it routes on it). Waiters are callables queued
    when ``max_conns`` connections are busy; each is called with a released connection,
    or with ``None`` when a slot freed up and it should open its own.
    """

    def __init__(self, url: str, *, ssl_context: ssl.SSLContext | None,
                 max_conns: int, keepalive_s: float, now: Callable[[], int],
                 reads: ReadQueue | None = None) -> None:
        self.base = parse_base_url(url)
        self.label = self.base.label
        self.host_header = (self.base.host if self.base.port in (80, 443)
                            else f"{self.base.host}:{self.base.port}")
        if self.base.scheme == "https" and ssl_context is None:
            ssl_context = ssl.create_default_context()
        self.ssl_context = ssl_context if self.base.scheme == "https" else None
        self.max_conns = max_conns
        self.keepalive_s = keepalive_s
        self.in_flight = 0
        self.open_count = 0
        self.opened_total = 0
        self.idle: list[Connection] = []  # oldest first: ``release`` appends
        self.connecting = 0  # spare connections being opened in the background
        self.waiters: list[Callable[[Connection | None], None]] = []
        self._now = now
        self._reads = reads  # where its connections' reads wait to be parsed (http1)
        self._live: set[Connection] = set()
        self.closed = False

    def take_idle(self) -> Connection | None:
        """The most recently used live connection, if one is idle and fresh enough."""
        idle = self.idle
        if idle and self.prune():
            while idle:
                c = idle.pop()
                if c.alive:
                    return c
        return None

    def prune(self) -> int:
        """Close idle connections too old to reuse (too old to trust: the server may close
        them any moment); return how many fresh ones are idle."""
        idle = self.idle
        cutoff = time.monotonic() - self.keepalive_s
        stale = 0
        while stale < len(idle) and idle[stale].idle_since < cutoff:
            stale += 1
        if stale:
            for c in idle[:stale]:
                if c.alive:
                    c.abort()
            del idle[:stale]
        return len(idle)

    def can_open(self) -> bool:
        return self.max_conns <= 0 or self.open_count < self.max_conns

    def reserve(self) -> Connection:
        """A new, unconnected connection that already holds one of the pool's slots.

        Reserving happens synchronously, when the request is issued, so a burst of
        requests cannot open more than ``max_conns`` connections between two awaits.
        """
        conn = Connection(self, self._now, self._reads)
        self.open_count += 1
        self._live.add(conn)
        return conn

    async def connect(self, conn: Connection) -> None:
        """Connect a reserved connection (and handshake TLS); errors propagate."""
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(
                lambda: conn, self.base.host, self.base.port, ssl=self.ssl_context,
                server_hostname=self.base.host if self.ssl_context is not None else None)
        except BaseException:
            if conn.transport is not None:
                conn.transport.abort()
            self.forget(conn)
            raise
        self.opened_total += 1
        if self.closed:  # the run ended while this connection was being made
            conn.abort()
            raise ConnectionError("the endpoint was closed while connecting")

    async def open(self) -> Connection:
        conn = self.reserve()
        await self.connect(conn)
        return conn

    def release(self, conn: Connection) -> None:
        """A connection finished its response and can take another request."""
        if self.waiters:
            self.waiters.pop(0)(conn)
            return
        conn.idle_since = time.monotonic()
        self.idle.append(conn)

    def forget(self, conn: Connection) -> None:
        """A connection is gone (or never came up): free its slot."""
        if conn not in self._live:
            return
        self._live.discard(conn)
        self.open_count -= 1
        if conn in self.idle:
            self.idle.remove(conn)
        if self.waiters and self.can_open():
            self.waiters.pop(0)(None)

    def close(self) -> None:
        """Close every connection, idle or not (the run is over)."""
        self.closed = True
        for c in list(self._live):
            if c.exchange is not None:
                c.abort()  # its request was abandoned: no callback, no error to count
            elif c.transport is not None:
                c.transport.close()
        self.idle.clear()

    async def closing(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for the closes :meth:`close` began, then abort.

        A TLS close sends its close_notify from the event loop; a loop that closes first
        leaves the transport open (uvloop says so, and cannot close).
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while any(c.transport is not None for c in self._live) and loop.time() < end:
            await asyncio.sleep(0.005)
        for c in list(self._live):
            if c.transport is not None:
                c.transport.abort()
        if self._live:
            await asyncio.sleep(0)  # the aborts' connection_lost callbacks


@dataclass(slots=True)
class Response:
    """A whole (small) response, for one-off requests such as ``GET /v1/models``."""

    status: int
    headers: dict[str, str]
    body: bytes


class _Collect:
    """An exchange that keeps the whole response."""

    def __init__(self, fut: asyncio.Future[Response]) -> None:
        self.fut = fut
        self.status = 0
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []

    def on_head(self, status: int, headers: dict[str, str], t: int) -> None:
        self.status = status
        self.headers = headers

    def on_body(self, data: bytes, t: int) -> None:
        self.parts.append(data)

    def on_end(self, t: int) -> None:
        if not self.fut.done():
            self.fut.set_result(Response(self.status, self.headers, b"".join(self.parts)))

    def on_error(self, error: ErrorClass, detail: str, t: int) -> None:
        if not self.fut.done():
            self.fut.set_exception(ConnectionError(f"{error.value}: {detail}"))


async def fetch(endpoint: Endpoint, head: bytes, body: bytes = b"") -> Response:
    """Send one request on a fresh connection and return the whole response.

    ``head`` is the request line and headers without the blank line; ``Host`` and
    ``Content-Length`` are added here. Bound the wait with :func:`asyncio.timeout`.
    """
    conn = await endpoint.open()
    fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
    data = (head + b"Host: " + endpoint.host_header.encode() + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    conn.send(data, _Collect(fut))
    try:
        return await fut
    finally:
        conn.abort()
