"""A lean HTTP/1.1 client on asyncio protocols: keep-alive pools and chunked bodies.

Why not aiohttp or httpx: tokenmark must time every streamed token of hundreds of
concurrent responses on one core without becoming the bottleneck, and a generic client
spends several microseconds of Python per SSE line (measured in ``bench/``; the choice
is recorded in the issue report). Here a response is handled where the bytes land:
:meth:`Connection.data_received` takes one timestamp per socket read (everything in one
read arrived together), strips the chunked framing with a few ``bytes.find`` calls per
chunk, and hands the payload of the whole read to the :class:`Exchange` at once.

What it implements, and only that:

- ``POST``/``GET`` with a pre-rendered request head; HTTP/1.1 keep-alive;
  ``Content-Length``, ``chunked`` and close-delimited response bodies; ``1xx`` responses
  skipped; ``Connection: close`` honoured.
- A connection belongs to a :class:`Pool` (:class:`~tokenmark.adapters.pool.Endpoint`):
  it goes back there when its response has ended and it can be reused, and says when
  it is gone.
- TLS is the transport's business (:mod:`ssl`); the protocol sees plain bytes.

Failures reach the exchange as :class:`~tokenmark.records.ErrorClass` values: a connection
that breaks before a response head is ``RESET``; after it, ``RESET_MID_STREAM`` when the
peer reset it and ``TRUNCATED`` when it closed it cleanly before the body's end; framing
that is not HTTP is ``MALFORMED``. Connecting is the pool's job; its errors and timeouts
are classified by the caller.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast

from tokenmark.clock import NEVER, SendGate, send_gate
from tokenmark.records import ErrorClass

__all__ = ["Connection", "Exchange", "Pool", "ReadQueue", "describe_os_error"]

_MAX_HEAD = 64 * 1024
_NONE, _HEAD, _CHUNKED, _LENGTH, _CLOSE = range(5)


class Pool(Protocol):
    """Where a connection goes back when its response has ended, or says it is gone."""

    def release(self, conn: Connection) -> None: ...

    def forget(self, conn: Connection) -> None: ...


class Exchange(Protocol):
    """The receiving side of one request on a connection (called on the event loop)."""

    def on_head(self, status: int, headers: dict[str, str], t: int) -> None: ...

    def on_body(self, data: bytes, t: int) -> None:
        """Body bytes of one socket read, framing removed; ``t`` is that read's time."""
        ...

    def on_end(self, t: int) -> None:
        """The body ended as its framing says (the connection may be reused)."""
        ...

    def on_error(self, error: ErrorClass, detail: str, t: int) -> None:
        """The connection failed before the body ended."""
        ...


#: One receive buffer for every connection of the process. asyncio calls
#: ``get_buffer``, ``recv_into`` and ``buffer_updated`` back to back on its one thread,
#: so a read is copied out of it before any other connection can use it. (The default
#: ``data_received`` path makes asyncio call ``recv(262144)``, which allocates 256 KiB
#: per read: 14 µs each on the project's machine against 1.3 µs for ``recv_into``.)
_RECV_SIZE = 65536
_RECV = memoryview(bytearray(_RECV_SIZE))

#: :class:`ReadQueue` stops parsing this long before a timed send is due (longer than
#: one read's parse with its finished record, tokenizer re-count included) ...
GUARD_NS = 1_000_000
#: ... and holds off at most this long after it (a send that is later than this is held
#: back by something else, e.g. the CPU: parsing goes on rather than piling up).
HOLD_NS = 5_000_000
#: One pass of parsing gives the loop back after this much work, so a timer (a send, the
#: loop-lag watch, a timeout) never waits behind a whole burst of reads.
BUDGET_NS = 500_000


class ReadQueue:
    """Reads taken off the sockets at once, parsed in arrival order when no send is due.

    Why (issue 21): a decode step of the server lands as one burst of reads on many
    connections; parsed where they land, every read's framing, SSE events, token counts
    and finished records run before the loop gets to the send whose timer fired in the
    same iteration, so the send is late by the whole burst (the demo's send lag p99 was
    2.5-3.5 ms at 20 queries/s). Here a read is still parsed where it lands while no
    timed send is due and nothing waits in the queue (no cost on that path but one clock
    read). While the runner's next send is due (:class:`tokenmark.clock.SendGate`: from
    ``GUARD_NS`` before it until it is sent, at most ``HOLD_NS`` past it) a read costs
    its copy, one clock read and an append, and every later read queues behind it; a
    ``call_soon`` step parses the queue in order once the send is out, giving the loop
    back after ``BUDGET_NS`` of work. (Queueing every read cost 7 us more per event in
    bench/client_path.py: one ``call_soon`` per read at low rates.)

    Designs considered, not built: sends on a thread of their own would need the SUT's
    connections and handles to be thread-safe (every request's ``sent`` and the record it
    starts), and a woken thread waits for the GIL (switch interval 5 ms by default) while
    the loop's thread parses, so it is not obviously better than the loop's own timer;
    batching per read (one ``on_body`` per read already) leaves the burst where it was.
    Only this design and parsing in place were measured (bench/send_lag.py,
    bench/cli_peers.py ``--variants inline,deferred``). Deferral changes
    nothing that is measured: each read keeps the time it was read, events are parsed in
    the order they arrived, per connection and across connections (one FIFO), and a
    connection's close is queued behind its reads (property test:
    tests/unit/test_read_queue.py, against parsing where the bytes land).
    """

    __slots__ = ("__weakref__", "_call_soon", "_gate", "_items", "_now", "_scheduled",
                 "budget_ns", "guard_ns", "hold_ns")

    def __init__(self, *, gate: SendGate | None = None,
                 call_soon: Callable[[Callable[[], None]], object] | None = None,
                 now: Callable[[], int] = time.perf_counter_ns) -> None:
        self._items: deque[tuple[Connection, bytes | None, Exception | None, int]] = deque()
        self._gate = gate if gate is not None else send_gate()
        self._gate.register(self)
        self._call_soon = call_soon
        self._now = now
        self._scheduled = False
        self.guard_ns = GUARD_NS
        self.hold_ns = HOLD_NS
        self.budget_ns = BUDGET_NS

    def __len__(self) -> int:
        return len(self._items)

    def put(self, conn: Connection, data: bytes | None, exc: Exception | None,
            t: int) -> None:
        """A read (``data``) or the connection's end (``data`` None, ``exc``) at ``t``."""
        self._items.append((conn, data, exc, t))
        conn._queued += 1
        if not self._scheduled:
            self._schedule()

    def _schedule(self) -> None:
        self._scheduled = True
        call_soon = self._call_soon
        if call_soon is None:
            asyncio.get_running_loop().call_soon(self.drain)
        else:
            call_soon(self.drain)

    def held(self) -> bool:
        """Whether a timed send is due now (parsing waits)."""
        due = self._gate.due_ns
        if due == NEVER:
            return False
        now = self._now()
        return due - self.guard_ns <= now < due + self.hold_ns

    def drain(self) -> None:
        """Parse queued reads in order until the queue is empty, a send is due, or the
        pass has used its budget; then come back on the next loop iteration."""
        self._scheduled = False
        items = self._items
        if not items:
            return
        now = self._now
        gate = self._gate
        guard = self.guard_ns
        hold = self.hold_ns
        end = now() + self.budget_ns
        try:
            while items:
                due = gate.due_ns
                t = now()
                if t >= end or (due != NEVER and due - guard <= t < due + hold):
                    break
                self._one(items.popleft())
        finally:
            if items and not self._scheduled:
                self._schedule()

    def flush(self) -> None:
        """Parse everything queued now, send due or not."""
        items = self._items
        while items:
            self._one(items.popleft())

    @staticmethod
    def _one(item: tuple[Connection, bytes | None, Exception | None, int]) -> None:
        conn, data, exc, t = item
        conn._queued -= 1
        if data is None:
            conn._lost(exc, t)
        else:
            conn._received(data, t)


class Connection(asyncio.BufferedProtocol):
    """One keep-alive connection. Not reused until its current response has ended."""

    __slots__ = ("_body_left", "_buf", "_crlf", "_crem", "_endpoint", "_now", "_pend",
                 "_queued", "_reads", "_state", "_status", "_trailer", "alive", "exchange",
                 "idle_since", "keep_alive", "transport")

    def __init__(self, endpoint: Pool, now: Callable[[], int],
                 reads: ReadQueue | None = None) -> None:
        self._endpoint = endpoint
        self._now = now
        #: Where reads wait to be parsed (None: parsed where they land).
        self._reads = reads
        self._queued = 0  # reads (and the close) of this connection still in ``_reads``
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.alive = False
        self.keep_alive = True
        self.idle_since = 0.0
        self._state = _NONE
        self._buf = b""
        self._pend = b""
        self._crem = 0
        self._crlf = False
        self._trailer = False
        self._body_left = 0
        self._status = 0

    # -- asyncio callbacks -----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # any loop's transport (uvloop's are not asyncio.Transport subclasses)
        self.transport = cast(asyncio.Transport, transport)
        self.alive = True
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return _RECV

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(_RECV[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        reads = self._reads
        if reads is not None and (reads._items or (self._state != _NONE and reads.held())):
            if self._state == _NONE and not self._queued:
                self.alive = False  # bytes nobody asked for: not to be taken from the pool
            reads.put(self, data, None, self._now())
        else:
            self._received(data, self._now())

    def _received(self, data: bytes, t: int) -> None:
        state = self._state
        if state == _CHUNKED:
            self._chunked(data, t)
        elif state == _HEAD:
            self._head(data, t)
        elif state == _LENGTH:
            self._length(data, t)
        elif state == _CLOSE:
            ex = self.exchange
            if ex is not None:
                ex.on_body(data, t)
        else:  # bytes nobody asked for: the connection cannot be trusted
            self.abort()

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        reads = self._reads
        if reads is not None and reads._items:
            reads.put(self, None, exc, self._now())  # after the reads before it
        else:
            self._lost(exc, self._now())

    def _lost(self, exc: Exception | None, t: int) -> None:
        self.alive = False
        self._endpoint.forget(self)
        ex = self.exchange
        if ex is None:
            return
        self.exchange = None
        state = self._state
        self._state = _NONE
        if state == _CLOSE and exc is None:
            ex.on_end(t)
        elif state in (_HEAD, _NONE) and not self._buf:
            ex.on_error(ErrorClass.RESET, _why(exc, "before any response"), t)
        elif isinstance(exc, ConnectionResetError | BrokenPipeError) or (
                exc is not None and not isinstance(exc, ssl.SSLError)):
            ex.on_error(ErrorClass.RESET_MID_STREAM, _why(exc, "during the response"), t)
        else:
            ex.on_error(ErrorClass.TRUNCATED, "connection closed by the server before the "
                        "response ended" if exc is None else
                        _why(exc, "before the response ended"), t)

    # -- sending ---------------------------------------------------------------------
    def send(self, data: bytes, exchange: Exchange) -> None:
        """Write one request; the response goes to ``exchange``."""
        assert self.transport is not None and self.exchange is None
        self.exchange = exchange
        self._state = _HEAD
        self._buf = b""
        self.transport.write(data)

    def abort(self) -> None:
        """Drop the connection at once (a timeout, or a response that cannot be read)."""
        self.alive = False
        self.exchange = None
        self._state = _NONE
        if self.transport is not None:
            self.transport.abort()

    # -- parsing -----------------------------------------------------------------------
    def _fail(self, detail: str, t: int) -> None:
        ex = self.exchange
        self.abort()
        if ex is not None:
            ex.on_error(ErrorClass.MALFORMED, detail, t)

    def _head(self, data: bytes, t: int) -> None:
        buf = self._buf + data if self._buf else data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD:
                    self._fail("response head larger than 64 KiB", t)
                else:
                    self._buf = buf
                return
            lines = buf[:end].decode("latin-1").split("\r\n")
            status_line = lines[0].split(" ", 2)
            try:
                version, status = status_line[0], int(status_line[1])
                if not version.startswith("HTTP/1."):
                    raise ValueError(version)
            except (ValueError, IndexError):
                self._fail(f"not an HTTP/1.x response: {lines[0][:80]!r}", t)
                return
            rest = buf[end + 4:]
            if 100 <= status < 200:
                buf = rest
                continue
            break
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._buf = b""
        conn_hdr = headers.get("connection", "").lower()
        self.keep_alive = ("close" not in conn_hdr) if version == "HTTP/1.1" else (
            "keep-alive" in conn_hdr)
        self._status = status
        ex = self.exchange
        assert ex is not None
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNKED
            self._crem = 0
            self._crlf = False
            self._trailer = False
            self._pend = b""
        elif "content-length" in headers:
            try:
                self._body_left = int(headers["content-length"])
            except ValueError:
                self._fail("bad Content-Length", t)
                return
            self._state = _LENGTH
        else:
            self._state = _CLOSE
            self.keep_alive = False
        ex.on_head(status, headers, t)
        if self.exchange is not ex:
            return  # the exchange gave up on this response (it aborted the connection)
        if self._state == _LENGTH and self._body_left == 0:
            self._end(t)
        elif rest:
            self.data_received_body(rest, t)

    def data_received_body(self, data: bytes, t: int) -> None:
        state = self._state
        if state == _CHUNKED:
            self._chunked(data, t)
        elif state == _LENGTH:
            self._length(data, t)
        elif state == _CLOSE and self.exchange is not None:
            self.exchange.on_body(data, t)

    def _length(self, data: bytes, t: int) -> None:
        left = self._body_left
        ex = self.exchange
        if ex is None:
            return
        if len(data) < left:
            self._body_left = left - len(data)
            ex.on_body(data, t)
            return
        extra = len(data) > left
        ex.on_body(data[:left] if extra else data, t)
        self._body_left = 0
        if extra:
            self.keep_alive = False  # bytes after the body: do not trust this connection
        if self.exchange is ex:
            self._end(t)

    def _chunked(self, data: bytes, t: int) -> None:
        """Strip chunked framing from one read and pass the payload on in one call.

        State between reads: ``_crem`` payload bytes of the current chunk still to come,
        ``_crlf`` whether the CRLF after a chunk's payload is still to come, ``_trailer``
        whether the last chunk has been seen, ``_pend`` an incomplete size line.
        """
        if self._pend:
            data = self._pend + data
            self._pend = b""
        n = len(data)
        rem = self._crem
        if rem >= n:  # the whole read is payload of one chunk (large chunks)
            self._crem = rem - n
            self._crlf = self._crem == 0
            ex = self.exchange
            if ex is not None:
                ex.on_body(data, t)
            return
        crlf = self._crlf
        if not rem and not crlf and not self._trailer:
            # The common case at modest rates: the read is exactly one whole chunk.
            i = data.find(b"\r\n", 0, 18)
            if i > 0:
                try:
                    end = i + 2 + int(data[:i], 16)
                except ValueError:
                    end = -1
                if end + 2 == n and end > i + 2 and data[end] == 13 and data[end + 1] == 10:
                    ex = self.exchange
                    if ex is not None:
                        ex.on_body(data[i + 2:end], t)
                    return
        out: list[bytes] = []
        pos = 0
        if rem:
            out.append(data[:rem])
            pos = rem
            rem = 0
            crlf = True
        find = data.find
        done = False
        bad = ""
        trailer = self._trailer
        while pos < n:
            if crlf:  # the CRLF after a chunk's payload
                if n - pos < 2:
                    self._pend = data[pos:]
                    break
                if data[pos] != 13 or data[pos + 1] != 10:
                    bad = "chunk data not followed by CRLF"
                    break
                pos += 2
                crlf = False
                continue
            if trailer:  # after the last chunk: trailer lines, then an empty line
                if n - pos < 2:
                    self._pend = data[pos:]
                    break
                if data[pos] == 13 and data[pos + 1] == 10:
                    pos += 2
                    done = True
                    break
                i = find(b"\r\n", pos)
                if i < 0:
                    self._pend = data[pos:]
                    break
                pos = i + 2
                continue
            i = find(b"\r\n", pos)
            if i < 0:
                if n - pos > 1024:
                    bad = "chunk size line too long"
                else:
                    self._pend = data[pos:]
                break
            line = data[pos:i]
            try:
                size = int(line, 16)
            except ValueError:
                try:  # chunk extensions: "1f;name=value"
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    bad = f"bad chunk size {line[:40]!r}"
                    break
            if size <= 0:
                if size < 0:
                    bad = "negative chunk size"
                    break
                pos = i + 2
                trailer = True
                continue
            pos = i + 2
            end = pos + size
            if end + 2 <= n:  # the common case: a whole chunk and its CRLF
                out.append(data[pos:end])
                if data[end] != 13 or data[end + 1] != 10:
                    bad = "chunk data not followed by CRLF"
                    break
                pos = end + 2
            elif end <= n:
                out.append(data[pos:end])
                pos = end
                crlf = True
            else:
                if pos < n:
                    out.append(data[pos:])
                rem = end - n
                pos = n
        if bad:
            self._fail(bad, t)
            return
        self._crem = rem
        self._crlf = crlf
        self._trailer = trailer
        ex = self.exchange
        if ex is not None and out:
            ex.on_body(out[0] if len(out) == 1 else b"".join(out), t)
        if done and self.exchange is ex:
            if pos < n:
                self.keep_alive = False  # bytes after the response: not reusable
            self._end(t)

    def _end(self, t: int) -> None:
        ex = self.exchange
        self.exchange = None
        self._state = _NONE
        if self.keep_alive and self.alive:
            self._endpoint.release(self)
        else:
            self.alive = False
            if self.transport is not None:
                self.transport.close()
        if ex is not None:
            ex.on_end(t)


def describe_os_error(e: OSError) -> str:
    """A short reason for a failed connect: 'Connection refused', 'TLS: ...'."""
    if isinstance(e, ssl.SSLError):
        return f"TLS: {getattr(e, 'verify_message', '') or e.reason or e}"
    if isinstance(e, socket.gaierror):  # its errno is getaddrinfo's, not the OS's
        return f"the host name did not resolve ({e.strerror or e})"
    why = os.strerror(e.errno) if e.errno else (str(e) or type(e).__name__)
    if e.errno == errno.EMFILE:
        why += " (raise ulimit -n, or cap connections with the pool size)"
    return why


def _why(exc: Exception | None, when: str) -> str:
    if exc is None:
        return f"connection closed {when}"
    return f"{type(exc).__name__}: {exc} ({when})".replace("  ", " ")
