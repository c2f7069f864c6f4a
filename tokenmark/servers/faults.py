"""Faults tokenmark's servers inject, and the streamed answer that carries them out.

One vocabulary for both servers (:mod:`~tokenmark.servers.exact` cycles a fixed plan,
:mod:`~tokenmark.servers.emulated` draws faults by seeded fractions). Each fault
produces one failure a client must classify (the client's error class in brackets):

=================  ==========================================================
``ok``             a normal answer
``status:N``       HTTP status ``N`` with a JSON error body (``http_status``, or
                   ``http_429`` for 429)
``reset``          the connection is reset before any response (``connection_reset``)
``reset_mid:K``    reset after ``K`` tokens (``reset_mid_stream``)
``close_mid:K``    a clean close after ``K`` tokens, no chunk terminator (``truncated_stream``)
``end_mid:K``      a well-framed body that ends after ``K`` tokens, no finish and no
                   ``[DONE]`` (``truncated_stream``)
``no_done``        a complete stream without ``data: [DONE]``, as ``transformers serve``
                   ends them (complete: the last event has a ``finish_reason``)
``malformed``      a 200 event stream whose events are not JSON (``malformed_stream``)
``bad_chunk``      broken chunked framing (``malformed_stream``)
``error_event``    an ``{"error": ...}`` event after the first token (``sut_error``)
``stall``          the request is read and never answered (``timeout_first_token``)
``stall_mid:K``    ``K`` tokens, then silence (``timeout_request``)
``usage:D``        usage reports ``D`` more completion tokens than were streamed
                   (complete; the token-count agreement rule catches it)
``echo_auth``      HTTP 401 quoting the request's ``Authorization`` header (the exact
                   server: as sent, JSON-escaped, ``repr``-quoted, URL-encoded and
                   base64 in Basic auth, one per line)
``slow_head:MS``   nothing, not even the response head, for ``MS`` ms; then a normal
                   answer (slow first byte: complete, with a longer TTFT)
``oversize:B``     the first token's event carries ``B`` bytes of padding, one chunk
                   over many socket reads (complete, one token)
=================  ==========================================================

:class:`OutStream` writes one streamed answer token by token (whatever decides when a
token is due: exact delays or the performance model's steps) and cuts it as its fault
says; :class:`Truth` is the server's own log of what it wrote and when.
"""

from __future__ import annotations

import base64
import json
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Protocol
from urllib.parse import quote

from tokenmark.errors import ConfigError
from tokenmark.servers.http_base import Conn, error_body, maybe_chunk

__all__ = ["CUT", "ENDED", "FAULT_KINDS", "MORE", "OK", "Fault", "FaultPlan", "OutStream",
           "StreamBody", "Truth", "echo_response", "parse_fault"]

#: Every fault kind and its argument's default (None: the kind takes no argument).
FAULT_KINDS: dict[str, int | None] = {
    "ok": None, "status": 500, "reset": None, "reset_mid": 1, "close_mid": 1, "end_mid": 1,
    "no_done": None, "malformed": None, "bad_chunk": None, "error_event": None,
    "stall": None, "stall_mid": 1, "usage": 1, "echo_auth": None, "slow_head": 500,
    "oversize": 1 << 20,
}
_CUTS = ("reset_mid", "close_mid", "stall_mid", "end_mid")


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    arg: int = 0

    @property
    def text(self) -> str:
        return self.kind if FAULT_KINDS[self.kind] is None else f"{self.kind}:{self.arg}"


OK = Fault("ok")


def parse_fault(text: str) -> Fault:
    """``kind`` or ``kind:N`` of :data:`FAULT_KINDS`; ConfigError names the choices."""
    kind, sep, arg = text.strip().partition(":")
    if kind not in FAULT_KINDS:
        raise ConfigError(f"unknown fault {text!r}; choose one of: {', '.join(FAULT_KINDS)}")
    default = FAULT_KINDS[kind]
    if default is None:
        if sep:
            raise ConfigError(f"fault {kind!r} takes no argument (got {text!r})")
        return Fault(kind)
    if not sep:
        return Fault(kind, default)
    try:
        n = int(arg)
    except ValueError:
        raise ConfigError(f"fault {text!r}: the argument after ':' must be an integer"
                          ) from None
    if n < 0 or (kind == "status" and not 100 <= n <= 599):
        raise ConfigError(f"fault {text!r}: argument out of range")
    return Fault(kind, n)


class FaultPlan:
    """Which fault request ``ordinal`` gets: a fixed ``cycle`` of faults, or faults drawn
    by ``fractions`` (``(fault, fraction)`` pairs; the rest are ``ok``) from a seeded
    stream in arrival order, so a run with the same requests gets the same faults."""

    def __init__(self, cycle: Sequence[str] = (),
                 fractions: Sequence[tuple[str, float]] = (), seed: int = 0) -> None:
        self.cycle = tuple(parse_fault(f) for f in cycle)
        self.fractions = tuple((parse_fault(f), float(p)) for f, p in fractions)
        for f, p in self.fractions:
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"fault {f.text}: fraction {p:g} must be within [0, 1]")
        total = sum(p for _, p in self.fractions)
        if total > 1.0 + 1e-9:
            raise ConfigError(f"fault fractions add up to {total:g}, over 1")
        self._rng = random.Random(seed)

    @staticmethod
    def parse_fraction(text: str) -> tuple[str, float]:
        """``KIND[:N]=FRACTION`` (a command-line ``--fault``)."""
        kind, sep, frac = text.partition("=")
        if not sep:
            raise ConfigError(f"--fault {text!r}: write it as KIND[:N]=FRACTION, e.g. "
                              "status:500=0.01")
        try:
            p = float(frac)
        except ValueError:
            raise ConfigError(f"--fault {text!r}: {frac!r} is not a fraction") from None
        return parse_fault(kind).text, p

    @property
    def active(self) -> bool:
        return bool(self.cycle) or any(p > 0 for _, p in self.fractions)

    def describe(self) -> str:
        if self.cycle:
            return "cycle " + ",".join(f.text for f in self.cycle)
        return ", ".join(f"{f.text}={p:g}" for f, p in self.fractions if p > 0) or "none"

    def pick(self, ordinal: int) -> Fault:
        if self.cycle:
            return self.cycle[ordinal % len(self.cycle)]
        if self.fractions:
            u = self._rng.random()
            acc = 0.0
            for f, p in self.fractions:
                acc += p
                if u < acc:
                    return f
        return OK


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
    text: str | None = field(default=None, repr=False)  # the answer's text, when kept
    sent_bytes: int = 0  # response bytes written (head included)
    #: How the response ended on the wire (the first ending counts): ``complete`` (the
    #: whole answer with its end), ``status`` (a whole error response), ``error`` (an
    #: error event), ``ended`` (well-framed but cut short: no finish, no ``[DONE]``),
    #: ``closed`` (FIN mid-response), ``reset`` (RST); ``""``: never ended (stalled, or
    #: the server stopped first).
    end: str = ""

    def wrote(self, data: bytes, end: str = "") -> None:
        """Count ``data`` as written for this request; ``end``: how the response ended."""
        self.sent_bytes += len(data)
        if end and not self.end:
            self.end = end

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {
            "rid": self.rid, "ordinal": self.ordinal, "fault": self.fault,
            "recv_ns": self.recv_ns, "prompt_tokens": self.prompt_tokens,
            "tokens": self.tokens, "first_ns": self.first_ns, "last_ns": self.last_ns,
            "done_ns": self.done_ns, "sent_bytes": self.sent_bytes, "end": self.end,
        }
        if self.token_ns is not None:
            d["token_ns"] = self.token_ns.tolist()
        if self.headers:
            d["headers"] = self.headers
        if self.text is not None:
            d["text"] = self.text
        return d


def echo_response(auth: str) -> bytes:
    """HTTP 401 from a careless server: the ``Authorization`` header it got, quoted in
    each way servers quote things (what a client must never write down)."""
    key = auth.split(" ", 1)[1] if " " in auth else auth
    lines = [
        "invalid credentials",
        f"as sent: {auth}",
        f"json: {json.dumps(auth)[1:-1]}",
        "json, / escaped: " + json.dumps(auth, ensure_ascii=False)[1:-1].replace("/", "\\/"),
        f"repr: {auth!r}",
        f"url: {quote(key, safe='')}",
        f"basic: {base64.b64encode(('user:' + key).encode()).decode()}",
    ]
    body = "\n".join(lines).encode()
    return (b"HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))


class StreamBody(Protocol):
    """Pre-rendered events of one streamed answer (:mod:`tokenmark.servers.render`)."""

    @property
    def prologue(self) -> bytes: ...

    @property
    def done(self) -> bytes: ...

    @property
    def chunked(self) -> bool: ...

    @property
    def sep(self) -> bytes: ...

    def span(self, k: int, end: int, n: int) -> bytes:
        """The framed events of tokens ``k .. end - 1`` of an ``n``-token answer."""
        ...


#: :meth:`OutStream.emit` results: more tokens to come; the answer ended (complete, or
#: cleanly ended by its fault); the fault cut it (reset, closed, stalled).
MORE, ENDED, CUT = 1, 0, -1


def pad_event(framed: bytes, chunked: bool, nbytes: int) -> bytes:
    """One framed ``data: {...}`` event with a ``"pad"`` field of ``nbytes`` bytes."""
    payload = framed[framed.index(b"\r\n") + 2:-2] if chunked else framed
    i = payload.index(b"{") + 1
    padded = payload[:i] + b'"pad":"' + b"x" * nbytes + b'",' + payload[i:]
    return maybe_chunk(padded, chunked)


class OutStream:
    """One streamed answer in progress: its tokens written as they fall due, cut where
    its fault says."""

    __slots__ = ("body", "conn", "cut", "fault", "k", "n", "over", "truth", "usage")

    def __init__(self, conn: Conn, body: StreamBody, n: int, truth: Truth | None,
                 usage: bytes, fault: Fault) -> None:
        self.conn = conn
        self.body = body
        self.n = n
        self.k = 0
        self.truth = truth
        self.usage = usage  # the framed usage event, or b""
        self.fault = fault
        self.over = False  # ended or cut: later calls write nothing (the connection may
        # already carry the next request)
        cut = fault.arg if fault.kind in _CUTS else -1
        if fault.kind == "error_event":
            cut = 1
        self.cut = min(cut, n)  # token index at which the fault cuts the stream (-1: none)

    def open(self, head: bytes, chunked_head: bytes) -> bool:
        """Write the response head (and chat's role event); False when the fault ends
        the answer right there (``malformed``, ``bad_chunk``)."""
        kind = self.fault.kind
        chunked = self.body.chunked
        if kind == "malformed":
            self._write(head + self.body.prologue
                        + maybe_chunk(b"data: {not json\n\n", chunked), "closed")
        elif kind == "bad_chunk":
            self._write(chunked_head + b"zz\r\ndata: {}\n\n\r\n", "closed")
        else:
            self._write(head + self.body.prologue)
            return True
        self.over = True
        self.conn.stream_ended(close=True)
        return False

    def _write(self, data: bytes, end: str = "") -> None:
        """Write ``data`` (nothing once the connection is gone) and count it as truth."""
        if self.truth is not None and not self.conn.closed:
            self.truth.wrote(data, end)
        self.conn.write(data)

    def emit(self, end: int) -> int:
        """Write tokens ``k .. end - 1`` (no further than the cut) in one write, then the
        answer's tail or the fault's cut; returns :data:`MORE`, :data:`ENDED` or
        :data:`CUT`."""
        conn = self.conn
        if conn.closed or self.over:
            self.over = True
            return CUT
        stop = self.cut if self.cut >= 0 else self.n
        if end > stop:
            end = stop
        k = self.k
        t = perf_counter_ns()
        truth = self.truth
        if end > k:
            body = self.body
            if k == 0 and self.fault.kind == "oversize":
                data = pad_event(body.span(0, 1, self.n), body.chunked, self.fault.arg)
                if end > 1:
                    data += body.span(1, end, self.n)
            else:
                data = body.span(k, end, self.n)
            if truth is not None:
                if truth.first_ns < 0:
                    truth.first_ns = t
                truth.last_ns = t
                truth.tokens = end
                if truth.token_ns is not None:
                    truth.token_ns.extend([t] * (end - k))
        else:
            data = b""
        self.k = end
        if end < stop:
            self._write(data)
            return MORE
        chunked = self.body.chunked
        if end == self.n:  # the whole answer
            if self.fault.kind == "no_done":
                tail = self.usage + (b"0\r\n\r\n" if chunked else b"")
            else:
                tail = self.usage + self.body.done
            if truth is not None:
                truth.done_ns = t  # stamped before the write, like every truth time
            self.over = True
            self._write(data + tail, "complete")
            conn.stream_ended(close=not chunked)
            return ENDED
        self._write(data)  # the fault cuts the stream here
        kind = self.fault.kind
        self.over = kind != "error_event"
        if kind == "reset_mid":
            self._write(b"", "reset")
            conn.reset()
        elif kind == "close_mid":
            self._write(b"", "closed")
            conn.close()
        elif kind == "end_mid":
            self._write(b"0\r\n\r\n" if chunked else b"", "ended")
            if truth is not None:
                truth.done_ns = perf_counter_ns()
            conn.stream_ended(close=not chunked)
            return ENDED
        elif kind == "error_event":
            err = json.dumps(error_body("injected error event", 500)).encode()
            self._write(maybe_chunk(b"data: " + err + self.body.sep, chunked), "error")
            self.cut = -1
            return MORE
        # stall_mid: nothing more is ever written
        return CUT
