"""The messages between the parent and its worker processes (one socket pair each).

Each message is a frame: a 4-byte little-endian length, then a kind byte and its fields
(``struct`` formats below; times are each side's own monotonic nanoseconds). Text is
UTF-8. Parent to worker: ``C`` configuration (JSON, first), ``S`` clock ping, ``I``
issue, ``X`` stop. Worker to parent: ``R`` ready (JSON), ``s`` clock pong, ``D`` done
(the send time and the token times of a whole request, in two arrays: one message per
request), ``E`` the details of an answer (finish reason, stream tokens and how they were
counted; sent just before its ``D`` or ``F``), ``F`` failed, ``Z`` final per-endpoint
statistics (JSON).

:class:`FrameReader` splits a byte stream into frames; :func:`frame` builds one.
"""

from __future__ import annotations

import struct
from array import array

from tokenmark.records import ErrorClass, ResponseDetails, TokenSource

__all__ = [
    "BASES",
    "DETAILS",
    "DONE",
    "ERRORS",
    "FAIL",
    "ISSUE",
    "PING",
    "PONG",
    "SOURCES",
    "FrameReader",
    "details_message",
    "done_message",
    "frame",
    "parse_details",
    "parse_done",
]

LEN = struct.Struct("<I")
PING = struct.Struct("<q")
PONG = struct.Struct("<qq")
ISSUE = struct.Struct("<qi")  # seq, endpoint; + the rendered request body
# seq, sent (-1: never), t, output (-1: none), input (-1: none), alt, cached prompt tokens
# (-1: none), source, server's reasoning tokens (-1: none), chunks; then the chunk times
# (int64), the chunk token counts (int32; negative: a chunk of reasoning tokens), and
# b"\x01" + text
DONE = struct.Struct("<qqqiiiiiii")
FAIL = struct.Struct("<qqqi")  # seq, sent, t, error; + detail
DETAILS = struct.Struct("<qii")  # seq, stream tokens, token basis; + finish reason
#: The values of ``RequestRecord.token_basis``, by their index in ``E`` messages.
BASES = ["", "ids", "logprobs", "events", "usage", "chunks"]

SOURCES = list(TokenSource)
ERRORS = list(ErrorClass)


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return LEN.pack(len(payload) + 1) + kind + payload


def done_message(seq: int, sent: int, t: int, output: int | None, source: TokenSource,
                 input_tokens: int | None, alt: int, cached: int, reasoning: int,
                 times: array[int],
                 counts: array[int], text: str | None) -> bytes:
    head = DONE.pack(seq, sent, t, -1 if output is None else output,
                     -1 if input_tokens is None else input_tokens, alt, cached,
                     SOURCES.index(source), reasoning, len(times))
    body = head + times.tobytes() + counts.tobytes()
    if text is not None:
        body += b"\x01" + text.encode("utf-8", "surrogatepass")
    return frame(b"D", body)


def parse_done(payload: memoryview) -> tuple[int, int, int, int | None, TokenSource,
                                              int | None, int, int, int, array[int],
                                              array[int], str | None]:
    seq, sent, t, out, inp, alt, cached, src, reasoning, n = DONE.unpack_from(payload, 0)
    pos = DONE.size
    times = array("q")
    times.frombytes(payload[pos:pos + 8 * n])
    pos += 8 * n
    counts = array("i")
    counts.frombytes(payload[pos:pos + 4 * n])
    pos += 4 * n
    text = bytes(payload[pos + 1:]).decode("utf-8", "surrogatepass") if len(
        payload) > pos else None
    return (seq, sent, t, None if out < 0 else out, SOURCES[src], None if inp < 0 else inp,
            alt, cached, reasoning, times, counts, text)


def details_message(seq: int, d: ResponseDetails) -> bytes:
    return frame(b"E", DETAILS.pack(seq, d.stream_tokens, BASES.index(d.token_basis))
                 + d.finish_reason.encode("utf-8", "replace"))


def parse_details(payload: memoryview) -> tuple[int, ResponseDetails]:
    seq, stream, basis = DETAILS.unpack_from(payload, 0)
    finish = bytes(payload[DETAILS.size:]).decode("utf-8", "replace")
    return seq, ResponseDetails(finish_reason=finish, stream_tokens=stream,
                                token_basis=BASES[basis])


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
