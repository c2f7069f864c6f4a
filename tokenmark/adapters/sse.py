"""Reading an OpenAI-style server-sent-event stream: every event parsed, nothing guessed.

:class:`StreamReader` takes the body of a streamed response one socket read at a time
and parses every event it completes with a typed ``msgspec`` decoder of the chunk's
shape (:class:`Chunk`): only the keys below are read, every other key is skipped in C.
Per event it reads, for each choice, ``text`` (completions), ``delta.content``,
``delta.reasoning_content`` and ``delta.reasoning`` (reasoning models: DeepSeek-R1 style
and gpt-oss style), ``delta.tool_calls``, ``finish_reason``, ``logprobs`` and
``token_ids``; and the event's ``usage`` and ``error``.

Framing follows the SSE specification (WHATWG HTML, "server-sent events"): lines end with
LF, CRLF or CR (a CRLF split between two reads is held back and joined); an event ends at
a blank line; ``data:`` lines are joined with LF, one space after the colon is dropped;
comment lines (``: ping``) and the ``id:`` and ``retry:`` fields are read past; an
``event: error`` event is the server's error. An event may be split over any number of
reads, and one read may hold any number of events. The bytes after the last blank line
wait for the next read as a list of pieces that is joined once, when the event is
complete, so a large event costs time linear in its size; an event larger than
``max_event_bytes`` (``--max-event-bytes``, default 8 MiB) makes the stream malformed.

Tokens. An event carries output when a choice holds a non-empty text field, tool-call
deltas, token ids or logprobs. Its token count comes from ``token_ids`` or the
``logprobs`` entries when the server sends them (exact), else one per non-empty field;
:attr:`StreamReader.basis` says which held for the whole stream (``ids``,
``logprobs``, or ``events`` when any event had neither). Reasoning fields are counted
apart (:attr:`StreamReader.reasoning`, per read).

The end. ``data: [DONE]`` completes the stream (anything after it is ignored). A body
that ends cleanly without it is complete when every choice it carried got a
``finish_reason`` (``transformers serve`` ends its streams that way), else truncated.
A payload that is not JSON, not a JSON object, or not of the chunk's shape (a
``choices`` that is not a list, a ``text`` that is a number...) sets :attr:`bad` with the
decoder's message naming where; an ``error`` key (or a ``message`` without ``choices``:
older vLLM's ``{"object": "error", "message": ...}``), and a payload that begins
``{"error"`` but is not JSON (``transformers serve`` does not escape its error messages),
set :attr:`error`. An event with empty data is a keep-alive and is skipped. A
``finish_reason`` that is an empty string (TGI's completions, before the last token) is
no finish.

Cost, measured by ``bench/sse_parsers.py`` on the project's 2-core machine while other
processes kept 1.75 of its cores busy (CPU time of the process; a quiet machine is
faster, the ratios hold): the typed decoder with the reader's field reads costs 1.8-2.0 µs
per event of vLLM's and llama.cpp's shapes (3.3 µs with OpenAI's per-token logprobs),
against 4.0-4.3 µs for ``msgspec`` to dicts, 4.1-4.3 µs for ``orjson`` and 11.8-12.7 µs
for the standard library's ``json``; the whole reader (framing, parsing, counting) costs
4.6 µs per event with one event per read, 2.7 µs with 8 and 2.1 µs with 64 (the byte
scanner it replaces: about the same per read, and wrong). A 32 MiB event in 64 KiB
reads takes 0.18-0.26 s (the byte scanner: 15.9 s of CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Chunk", "StreamReader", "decode_chunk"]

#: The largest event a stream may carry unless the user allows more.
DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024


class _Logprobs(msgspec.Struct):
    """``logprobs``: chat's ``content`` (one entry per token) or completions' ``tokens``."""

    content: list[msgspec.Raw] | None = None
    tokens: list[msgspec.Raw] | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[msgspec.Raw] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    text: str | None = None
    delta: _Delta | None = None
    finish_reason: str | None = None  # TGI's completions send "" until the end
    logprobs: _Logprobs | list[msgspec.Raw] | None = None
    token_ids: list[int] | None = None


class Chunk(msgspec.Struct):
    """The parts of one streamed event tokenmark reads (all other keys are skipped)."""

    choices: list[_Choice] | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    #: ``{"object": "error", "message": ...}``: how older vLLM streamed an error.
    message: Any = None


#: Parse one event's payload into a :class:`Chunk` (raises ``msgspec.DecodeError``).
decode_chunk = msgspec.json.Decoder(Chunk).decode
#: Parse a JSON array of event payloads (several events of one read, in one call).
decode_chunks = msgspec.json.Decoder(list[Chunk]).decode

_DONE = b"[DONE]"
_SLOW = _Delta()  # a marker: the event needs the full reading of its choices


class StreamReader:
    """The state of one streamed response, fed one read at a time."""

    __slots__ = ("_cap", "_fin", "_held", "_ids", "_pend", "_plen", "_seen", "_stop",
                 "_want_text",
                 "bad", "counted", "done", "error", "events", "finish_reason", "reasoning",
                 "texts", "tokens", "usage", "without_done")

    def __init__(self, want_text: bool = False,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._cap = max_event_bytes
        self._want_text = want_text
        self._pend: list[bytes] = []  # bytes after the last blank line
        self._plen = 0
        self._held = b""  # a CR at the end of a read (maybe the first half of a CRLF)
        self._stop = False  # done, bad or error: later bytes are not read
        self._seen: set[int] = set()  # choice indices that carried anything
        self._fin: set[int] = set()  # choice indices that got a finish_reason
        self._ids = False  # some event carried token ids
        self.done = False
        self.without_done = False  # complete by its finish reasons; no [DONE] was sent
        self.usage: dict[str, Any] | None = None
        self.error = ""  # the server's message, when it reported an error in the stream
        self.bad = ""  # why the stream is malformed, when it is
        self.events = 0  # events that carried output
        self.tokens = 0  # output tokens those events carried (ids/logprobs, else 1 each)
        self.counted = 0  # events whose tokens came from token ids or logprobs
        self.reasoning = 0  # reasoning tokens among the last read's tokens
        self.finish_reason = ""  # the first choice's (n = 1: the answer's)
        self.texts: list[str] = []  # only filled with want_text

    # -- results ------------------------------------------------------------------------
    @property
    def basis(self) -> str:
        """How :attr:`tokens` were counted: ``ids``/``logprobs`` (exact), ``events``."""
        if self.events and self.counted == self.events:
            return "ids" if self._ids else "logprobs"
        return "events"

    @property
    def text(self) -> str:
        return "".join(self.texts)

    # -- feeding --------------------------------------------------------------------------
    def feed(self, data: bytes) -> int:
        """Read one read's bytes; return the output tokens of the events it completed."""
        self.reasoning = 0
        if self._stop:
            return 0
        if self._held or 13 in data:  # an int: a memchr, far faster than bytes in bytes
            data = self._lf(data)
        pend = self._pend
        if pend:
            if not (data[:1] == b"\n" and pend[-1][-1:] == b"\n") and b"\n\n" not in data:
                pend.append(data)
                self._plen += len(data)
                if self._plen > self._cap:
                    self._oversize()
                return 0
            pend.append(data)
            buf = b"".join(pend)
            pend.clear()
            self._plen = 0
        else:
            buf = data
        end = buf.rfind(b"\n\n")
        if end < 0:
            if buf:
                pend.append(buf)
                self._plen = len(buf)
                if self._plen > self._cap:
                    self._oversize()
            return 0
        n = self._events(buf[:end])
        if end + 2 < len(buf) and not self._stop:
            rest = buf[end + 2:]
            pend.append(rest)
            self._plen = len(rest)
            if self._plen > self._cap:
                self._oversize()
        return n

    def finish(self) -> int:
        """The body ended cleanly: read an unterminated last event, and decide the end."""
        self.reasoning = 0
        n = 0
        if not self._stop:
            if self._held:
                self._held = b""
                self._pend.append(b"\n")
            if self._pend:
                tail = b"".join(self._pend)
                self._pend.clear()
                self._plen = 0
                if tail.strip(b"\n"):
                    n = self._events(tail)
                    if self.bad:
                        self.bad = "the body ended inside an unterminated event: " + self.bad
        if not self._stop and self._seen and self._seen <= self._fin:
            self.done = self.without_done = True
            self._stop = True
        return n

    # -- internals ------------------------------------------------------------------------
    def _lf(self, data: bytes) -> bytes:
        """CRLF and lone CR line ends as LF; a CR ending the read waits for the next."""
        if self._held:
            data = self._held + data
            self._held = b""
        if data[-1:] == b"\r":
            self._held = b"\r"
            data = data[:-1]
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _oversize(self) -> None:
        self.bad = (f"an event is larger than {self._cap:,} bytes (raise the limit with "
                    "--max-event-bytes if the server really sends such events)")
        self._stop = True
        self._pend.clear()
        self._plen = 0

    def _events(self, block: bytes) -> int:
        """Read the complete events of ``block`` (events separated by blank lines).

        When every event of the block is one ``data: {...}`` line (what servers send; a
        ``[DONE]`` may end the block), the events are decoded together as one JSON array
        by a single decoder call: each is still parsed in full, only the framing and the
        per-call overhead are shared. Anything else (comments, fields, multi-line data,
        empty data, an event over the cap, a payload that fails to parse) is read event
        by event, which also names the first bad event.
        """
        if block[:7] == b"data: {" and len(block) <= self._cap:
            try:
                if 10 not in block:  # one event (a read per token: the usual case)
                    return self._take([decode_chunk(block[6:])])
                done = block.endswith(b"\n\ndata: [DONE]")
                body = block[:-14] if done else block
                if body.count(b"\n") == 2 * body.count(b"\n\ndata: {"):
                    n = self._take(decode_chunks(
                        b"[" + body[6:].replace(b"\n\ndata: ", b",") + b"]"))
                    if done and not self._stop:
                        self._done()
                    return n
            except (msgspec.MsgspecError, ValueError, RecursionError):
                pass  # read one by one below, to name the bad event
        return self._one_by_one(block)

    def _one_by_one(self, block: bytes) -> int:
        cap = self._cap
        check = len(block) > cap
        chunks: list[Chunk] = []
        for ev in block.split(b"\n\n"):
            if check and len(ev) > cap:
                return self._take(chunks) + self._end(self._oversize)
            if ev[:5] == b"data:" and 10 not in ev:
                payload = ev[6:] if ev[5:6] == b" " else ev[5:]
                kind = b""
            else:
                got, kind = _fields(ev)
                if got is None:
                    continue  # comments, id, retry, blank lines: no event to dispatch
                payload = got
            if kind == b"error":
                return self._take(chunks) + self._end(partial(self._error,
                                                              _message(payload)))
            if payload[:1] != b"{":
                stripped = payload.strip()
                if stripped == _DONE:
                    return self._take(chunks) + self._end(self._done)
                if not stripped:
                    continue  # an event with empty data: a keep-alive
            try:
                chunks.append(decode_chunk(payload))
            except (msgspec.MsgspecError, ValueError, RecursionError) as e:
                if payload.startswith(b'{"error"'):  # an error event its server did not
                    # escape (transformers serve writes f'{{"error": "{msg}"}}')
                    text = payload[:300].decode("utf-8", "replace")
                    return self._take(chunks) + self._end(partial(self._error, text))
                return self._take(chunks) + self._end(partial(self._bad,
                                                              _why_bad(payload, e)))
        return self._take(chunks)

    def _end(self, how: Callable[[], None]) -> int:
        """End the stream ``how`` says, unless the events before already ended it."""
        if not self._stop:
            how()
        return 0

    def _done(self) -> None:
        self.done = self._stop = True

    def _error(self, msg: str) -> None:
        self.error = msg
        self._stop = True

    def _bad(self, why: str) -> None:
        self.bad = why
        self._stop = True

    def _take(self, chunks: list[Chunk]) -> int:
        """Count the output of parsed events, in order; stop at an error event."""
        texts = self.texts if self._want_text else None
        n = r = plain = 0
        seen0 = False
        for c in chunks:
            if c.error is not None or (c.message is not None and c.choices is None):
                self._error(_error_text(c))
                break
            if c.usage is not None:
                self.usage = c.usage
            choices = c.choices
            if not choices:
                continue
            if len(choices) == 1:  # the usual event: one choice, one text, nothing else
                ch = choices[0]
                if (ch.index == 0 and not ch.finish_reason and ch.token_ids is None
                        and ch.logprobs is None):
                    d = ch.delta
                    if d is None:
                        text = ch.text
                    elif d.reasoning_content is None and d.reasoning is None and (
                            d.tool_calls is None):
                        text = d.content
                    else:
                        d = _SLOW
                    if d is not _SLOW:
                        seen0 = True
                        if text:
                            plain += 1
                            if texts is not None:
                                texts.append(text)
                        continue
            for ch in choices:
                k, kr = self._choice(ch)
                n += k
                r += kr
        if seen0:
            self._seen.add(0)
        if plain:
            self.events += plain
            self.tokens += plain
        self.reasoning += r
        return n + plain

    def _choice(self, ch: _Choice) -> tuple[int, int]:
        """Tokens and reasoning tokens one choice of one event carried."""
        self._seen.add(ch.index)
        if ch.finish_reason:  # null, or TGI's "" before the end: not finished
            self._fin.add(ch.index)
            if ch.index == 0 or not self.finish_reason:
                self.finish_reason = ch.finish_reason
        d = ch.delta
        answer = reasoning = False
        if d is None:
            text = ch.text
            if text:
                answer = True
                if self._want_text:
                    self.texts.append(text)
        else:
            text = d.content
            rtext = d.reasoning_content or d.reasoning
            if text:
                answer = True
                if self._want_text:
                    self.texts.append(text)
            elif d.tool_calls:
                answer = True
            if rtext:
                reasoning = True
                if self._want_text:
                    self.texts.append(rtext)
        ids = ch.token_ids
        exact = -1
        if ids is not None:
            exact = len(ids)
            self._ids = True
        else:
            lp = ch.logprobs
            if isinstance(lp, list):  # a bare list: one entry per token
                exact = len(lp)
            elif lp is not None:
                entries = lp.content if lp.content is not None else lp.tokens
                if entries is not None:
                    exact = len(entries)
        if exact >= 0:
            if exact == 0 and not (answer or reasoning):
                return 0, 0
            self.events += 1
            self.counted += 1
            k = exact
            if reasoning:
                kr = k if not answer else min(1, k)
            else:
                kr = 0
            self.tokens += k
            return k, kr
        if not (answer or reasoning):
            return 0, 0
        self.events += 1
        k = answer + reasoning
        self.tokens += k
        return k, int(reasoning)


def _fields(ev: bytes) -> tuple[bytes | None, bytes]:
    """An event's data (``None``: nothing to dispatch) and its type, by the spec's rules."""
    data: list[bytes] | None = None
    kind = b""
    for line in ev.split(b"\n"):
        if not line or line[:1] == b":":
            continue
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            if data is None:
                data = [value]
            else:
                data.append(value)
        elif name == b"event":
            kind = value
    if data is None:
        return None, kind
    return (data[0] if len(data) == 1 else b"\n".join(data)), kind


def _why_bad(payload: bytes, e: Exception) -> str:
    if isinstance(e, msgspec.ValidationError):
        what = "not of the OpenAI chunk shape"
    elif isinstance(e, RecursionError):
        what = "nested too deeply"
    else:
        what = "not JSON"
    return f"an event is {what} ({e}): {payload[:80]!r}"


def _message(payload: bytes) -> str:
    """The text of an ``event: error`` event's data."""
    try:
        obj = msgspec.json.decode(payload)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return payload[:300].decode("utf-8", "replace")
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        return str(err)[:300]
    return str(obj)[:300]


def _error_text(chunk: Chunk) -> str:
    err = chunk.error
    if err is None:  # {"object": "error", "message": ...} (older vLLM)
        return str(chunk.message or "error")[:300]
    if isinstance(err, dict):
        return str(err.get("message") or err)[:300]
    return str(err)[:300]
