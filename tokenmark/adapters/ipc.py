"""The messages between the parent and its worker processes (one socket pair each).

Each message is a frame: a 4-byte little-endian length, then a kind byte and its fields
(``struct`` formats below; times are each side's own monotonic nanoseconds). Text is
UTF-8. Parent to worker: ``C`` configuration (JSON, first), ``H`` a kind of handle
(:class:`HandleShape`, JSON), ``S`` clock ping, ``I`` issue, ``X`` stop. Worker to
parent: ``R`` ready (JSON), ``s`` clock pong, ``D`` done: every call the request made on
its handle (:class:`CallLog`, one message per request), ``Z`` final per-endpoint
statistics (JSON).

Records travel as the calls that make them, not as fields: the worker's handle has
exactly the methods of the parent's handle (:class:`HandleShape`), the
:class:`~tokenmark.adapters.openai_http.OpenAIHttpSUT` in the worker calls it as it would
call the parent's, and the parent replays the calls on its own handle, in order, with
each ``t_ns`` moved onto the run's clock. So a worker's record is the record the same
calls make in one process: partial streams of failed requests, and any field a later
handle method or argument adds, travel without a change here. Calls of the form
``name(int, t_ns)`` (one per streamed read: ``token``, ``reasoning``) are packed in
arrays; the others (``sent``, ``complete``, ``fail``, ...) are pickled with their place
in the sequence. Pickle is safe here: both ends are this program, over a socket pair
no other process holds.

:class:`FrameReader` splits a byte stream into frames; :func:`frame` builds one.
"""

from __future__ import annotations

import inspect
import itertools
import json
import pickle
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ISSUE",
    "PING",
    "PONG",
    "CallLog",
    "FrameReader",
    "HandleShape",
    "frame",
]

LEN = struct.Struct("<I")
PING = struct.Struct("<q")
PONG = struct.Struct("<qq")
ISSUE = struct.Struct("<qii")  # seq, endpoint, handle shape; + the rendered request body
DONE = struct.Struct("<qi")  # seq, packed calls; + method indexes (uint8), first arguments
# (int64), times (int64), then the pickled other calls

#: The calls a request ends with (the SUT contract: exactly one of them, last).
TERMINAL = frozenset({"complete", "fail"})

_KEYWORD_ONLY = -2
_NO_TIME = -1
_INT64 = (-(1 << 63), 1 << 63)


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return LEN.pack(len(payload) + 1) + kind + payload


@dataclass(frozen=True)
class HandleShape:
    """The public methods of one handle class and where each takes ``t_ns``.

    ``time_at[i]`` is the position of method ``i``'s ``t_ns`` among its positional
    parameters, ``-2`` when ``t_ns`` is keyword-only, ``-1`` when it has none.
    """

    methods: tuple[str, ...]
    time_at: tuple[int, ...]

    @classmethod
    def of(cls, handle_type: type) -> HandleShape:
        names: list[str] = []
        where: list[int] = []
        for name, fn in sorted(inspect.getmembers(handle_type, inspect.isfunction)):
            if name.startswith("_"):
                continue
            params = [p for p in inspect.signature(fn).parameters.values()][1:]  # no self
            at = _NO_TIME
            positional = 0
            for p in params:
                if p.name == "t_ns":
                    at = (positional if p.kind is p.POSITIONAL_OR_KEYWORD else
                          _KEYWORD_ONLY if p.kind is p.KEYWORD_ONLY else _NO_TIME)
                    break
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    positional += 1
            names.append(name)
            where.append(at)
        if len(names) > 255:
            raise ValueError(f"{handle_type.__name__} has over 255 methods")
        return cls(tuple(names), tuple(where))

    def to_json(self) -> bytes:
        return json.dumps({"methods": self.methods, "time_at": self.time_at}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> HandleShape:
        d = json.loads(raw)
        return cls(tuple(d["methods"]), tuple(d["time_at"]))


class CallLog:
    """The calls one request made on its handle in a worker, in order.

    :meth:`call` records one (a missing or ``None`` ``t_ns`` becomes the worker's clock
    now, as the handle would have stamped it); :meth:`encode` makes the ``D`` message;
    :func:`replay` makes the same calls on the parent's handle.
    """

    __slots__ = ("_other", "_shape", "args", "methods", "seq", "times")

    def __init__(self, shape: HandleShape, seq: int) -> None:
        self._shape = shape
        self.seq = seq
        #: The packed calls ``methods[k](args[k], times[k])``; :meth:`call` fills them, or
        #: a caller that knows a call is one (``name(int, int)`` with ``t_ns`` second)
        #: appends to all three.
        self.methods = array("B")
        self.args = array("q")
        self.times = array("q")
        self._other: list[tuple[int, int, tuple[Any, ...], dict[str, Any]]] = []

    def call(self, index: int, args: tuple[Any, ...], kwargs: dict[str, Any],
             now: Callable[[], int]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Log a call of method ``index``; returns its arguments with the time filled."""
        at = self._shape.time_at[index]
        if at >= 0:
            if len(args) > at:
                if args[at] is None:
                    args = (*args[:at], now(), *args[at + 1:])
            elif kwargs.get("t_ns") is None:
                kwargs["t_ns"] = now()
        elif at == _KEYWORD_ONLY and kwargs.get("t_ns") is None:
            kwargs["t_ns"] = now()
        if (at == 1 and len(args) == 2 and not kwargs and type(args[0]) is int
                and type(args[1]) is int and _INT64[0] <= args[0] < _INT64[1]
                and _INT64[0] <= args[1] < _INT64[1]):
            self.methods.append(index)
            self.args.append(args[0])
            self.times.append(args[1])
        else:
            self._other.append((len(self.methods), index, args, dict(kwargs)))
        return args, kwargs

    def encode(self) -> bytes:
        n = len(self.methods)
        body = (DONE.pack(self.seq, n) + self.methods.tobytes() + self.args.tobytes()
                + self.times.tobytes() + pickle.dumps(self._other, pickle.HIGHEST_PROTOCOL))
        return frame(b"D", body)


def done_seq(payload: memoryview) -> int:
    """The sequence number a ``D`` message is about."""
    seq: int = DONE.unpack_from(payload, 0)[0]
    return seq


def replay(payload: memoryview, shape: HandleShape, handle: object, offset_ns: int) -> None:
    """Make the calls of a ``D`` message on ``handle``, each ``t_ns`` minus ``offset_ns``."""
    _, n = DONE.unpack_from(payload, 0)
    pos = DONE.size
    methods = bytes(payload[pos:pos + n])
    pos += n
    args = array("q")
    args.frombytes(payload[pos:pos + 8 * n])
    pos += 8 * n
    times = array("q")
    times.frombytes(payload[pos:pos + 8 * n])
    pos += 8 * n
    other: list[tuple[int, int, tuple[Any, ...], dict[str, Any]]] = pickle.loads(
        payload[pos:])
    bound = [getattr(handle, name) for name in shape.methods]
    time_at = shape.time_at
    packed = zip(methods, args.tolist(), times.tolist(), strict=True)
    done = 0
    for k, index, a, kw in (*other, (n, -1, (), {})):
        if k > done:  # the packed calls before this one, in order
            if offset_ns:
                for m, x, t in itertools.islice(packed, k - done):
                    bound[m](x, t - offset_ns)
            else:
                for m, x, t in itertools.islice(packed, k - done):
                    bound[m](x, t)
            done = k
        if index < 0:
            break
        at = time_at[index]
        if 0 <= at < len(a) and a[at] is not None:
            a = (*a[:at], a[at] - offset_ns, *a[at + 1:])
        elif kw.get("t_ns") is not None:
            kw["t_ns"] -= offset_ns
        bound[index](*a, **kw)


class FrameReader:
    """Collects bytes and yields whole frames as ``(kind, payload)``."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, memoryview]]:
        buf = self._buf
        whole = bytes(buf) + data if buf else data
        buf.clear()
        out: list[tuple[int, memoryview]] = []
        pos = 0
        n = len(whole)
        view = memoryview(whole)
        while n - pos >= 4:
            (size,) = LEN.unpack_from(whole, pos)
            if n - pos - 4 < size:
                break
            out.append((whole[pos + 4], view[pos + 5:pos + 4 + size]))
            pos += 4 + size
        if pos < n:
            buf += whole[pos:]
        return out
