"""Parsing reads later (:class:`tokenmark.adapters.http1.ReadQueue`) changes nothing an
exchange sees: the same calls, with the same bytes and the same read times, in the same
order across every connection, as parsing each read where it lands (the reference: a
:class:`Connection` without a queue).

Hypothesis drives several keep-alive connections at once, each with a few responses
(chunked, Content-Length, close-delimited, broken framing, a reset or a clean close in
the middle), split into reads at random places and interleaved at random; the queue is
drained at random moments while a timed send is due or not, and sometimes caught up at
once (a stop, a timeout). Each read's time comes from one counter, so a read parsed with
another read's time would show.
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.adapters.http1 import Connection, ReadQueue
from tokenmark.clock import NEVER, SendGate


class FakeTransport(asyncio.Transport):
    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def write(self, data):
        pass

    def abort(self):
        self.log.append(("abort",))

    def close(self):
        self.log.append(("close",))

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self):
        return False


class Ex:
    """An exchange that writes every call into one log shared by all connections."""

    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def on_head(self, status, headers, t):
        self.log.append((self.name, "head", status, tuple(sorted(headers.items())), t))

    def on_body(self, data, t):
        self.log.append((self.name, "body", data, t))

    def on_end(self, t):
        self.log.append((self.name, "end", t))

    def on_error(self, error, detail, t):
        self.log.append((self.name, "error", error, detail, t))


class Pool:
    """Gives a released connection its next request at once, as the client does."""

    def __init__(self, log: list, todo: dict) -> None:
        self.log, self.todo = log, todo

    def release(self, conn):
        self.log.append(("release", conn.cid))
        nxt = self.todo[conn.cid]
        if nxt:
            conn.send(b"GET / HTTP/1.1\r\n\r\n", Ex(self.log, nxt.pop(0)))

    def forget(self, conn):
        self.log.append(("forget", conn.cid))


def chunked(parts: list[bytes]) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n")


def response(kind: int, parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    if kind == 0:
        return chunked(parts)
    if kind == 1:
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    if kind == 2:
        return b"HTTP/1.1 429 Too Many\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    if kind == 3:
        return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"  # broken
    return b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + body  # close-delimited


class _Cid(Connection):
    __slots__ = ("cid",)


def run(conns_spec, order, steps, deferred: bool) -> list:
    log: list = []
    clock = iter(range(1, 1_000_000))
    now = clock.__next__
    gate = SendGate()
    perf = [0]
    soon: list = []
    reads = ReadQueue(gate=gate, call_soon=soon.append, now=lambda: perf[0]) if (
        deferred) else None
    todo = {i: [f"c{i}r{k}" for k in range(1, len(spec[0]))] for i, spec in
            enumerate(conns_spec)}
    pool = Pool(log, todo)
    conns = []
    for i, (responses, _cuts, _end) in enumerate(conns_spec):
        c = _Cid(pool, now, reads)
        c.cid = i
        c.connection_made(FakeTransport(log))
        c.send(b"GET / HTTP/1.1\r\n\r\n", Ex(log, f"c{i}r0"))
        raw = b"".join(response(k, p) for k, p in responses)
        cuts = sorted({x % (len(raw) + 1) for x in _cuts} | {0, len(raw)})
        pieces = [raw[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
        conns.append([c, pieces, _end])
    # the interleaving: ``order`` picks which connection delivers its next piece
    k = 0
    while any(p for _, p, _ in conns):
        live = [c for c in conns if c[1]]
        c, pieces, _ = live[order[k % len(order)] % len(live)] if order else live[0]
        k += 1
        c.data_received(pieces.pop(0))
        if deferred:  # the loop turns: maybe a send is due, maybe the queue runs
            step = steps[k % len(steps)] if steps else 0
            if step == 1:
                gate.due_ns = perf[0] + 100  # a send due now: parsing waits
            elif step == 2:
                gate.due_ns = NEVER
            elif step == 3:
                reads.flush()
            perf[0] += 50 * (step + 1)
            if step in (0, 2):  # one loop iteration: what was ready runs
                for cb in [soon.pop(0) for _ in range(len(soon))]:
                    cb()
    for c, _, end in conns:
        if end == 1:
            c.connection_lost(None)
        elif end == 2:
            c.connection_lost(ConnectionResetError("reset"))
    if deferred:
        gate.due_ns = NEVER
        while soon:
            soon.pop(0)()
        assert len(reads) == 0
        assert all(c._queued == 0 for c, _, _ in conns)
    return log


payload = st.lists(st.binary(min_size=0, max_size=40), max_size=5)
conn_spec = st.tuples(
    st.lists(st.tuples(st.integers(0, 4), payload), min_size=1, max_size=3),
    st.lists(st.integers(0, 4000), max_size=12),
    st.integers(0, 2))


@settings(max_examples=300, deadline=None)
@given(conns=st.lists(conn_spec, min_size=1, max_size=4),
       order=st.lists(st.integers(0, 10), max_size=40),
       steps=st.lists(st.integers(0, 3), max_size=40))
def test_deferred_parsing_is_parsing_where_the_bytes_land(conns, order, steps):
    want = run(conns, order, steps, deferred=False)
    got = run(conns, order, steps, deferred=True)
    assert got == want


def test_parsing_waits_while_a_send_is_due_and_not_longer():
    gate = SendGate()
    soon: list = []
    perf = [0]
    reads = ReadQueue(gate=gate, call_soon=soon.append, now=lambda: perf[0])
    log: list = []
    c = _Cid(Pool(log, {0: []}), lambda: 7, reads)
    c.cid = 0
    c.connection_made(FakeTransport(log))
    c.send(b"GET / HTTP/1.1\r\n\r\n", Ex(log, "r0"))
    gate.due_ns = 1_000_000  # a send due at 1 ms
    perf[0] = 1_000_000 - reads.guard_ns  # inside the guard: hold
    c.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    soon.pop(0)()
    assert log == [] and len(reads) == 1 and soon  # held, and it comes back
    perf[0] = 1_000_000 + reads.hold_ns  # the send is overdue past the hold: parse anyway
    soon.pop(0)()
    assert [e[1] for e in log if e[0] == "r0"] == ["head", "body", "end"]
    assert all(e[-1] == 7 for e in log if e[0] == "r0")  # the read's own time
