"""Reading an OpenAI-style server-sent-event stream without parsing every event.

A JSON parse costs about 2.7 µs per event in CPython, more than the whole budget of a
client that must follow 400k tokens/s on one core, so :class:`StreamScanner` works on the
bytes of each socket read with a few C-level scans instead:

- **tokens**: an event carries output when one of its ``text``, ``content``,
  ``reasoning_content`` or ``reasoning`` keys holds a non-empty string. The pattern
  ``"key"\\s*:\\s*"<not a quote>`` finds exactly those: inside a JSON string every quote
  is escaped, so generated text can never look like a key, and an empty string (chat's
  role-only first event, a final event that only carries ``finish_reason``) does not
  match. One event with several non-empty fields (rare) counts once per field. The
  match's second byte tells reasoning (``r``) from answer, so reasoning models' chunks
  are told apart at no extra scan (:attr:`StreamScanner.reasoning`).
- **validity**: every ``data:`` line must hold a JSON object or ``[DONE]``; the first
  event is parsed in full once, so a stream of the wrong shape is caught at once.
- **end**: ``data: [DONE]`` at the start of a line, looked for in the last 64 bytes of
  each read; the ``usage`` object (the event before it) is parsed only then. A body that
  ends cleanly without ``[DONE]`` is complete if its last events carry a
  ``finish_reason`` (``transformers serve`` streams end that way), else truncated.
- **server errors**: an ``"error"`` key anywhere in the read; that event is then parsed.

Events are complete only at a blank line (``\\n\\n`` or ``\\r\\n\\r\\n``); the bytes after
the last one wait for the next read. The text of the output is extracted (one JSON parse
per event) only when ``want_text`` is set: for a client tokenizer, or to keep outputs.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["StreamScanner"]

#: Token-carrying fields, and the ``error`` key (told apart by its second byte, "e").
_FIELDS = re.compile(rb'"(?:text|content|reasoning_content|reasoning|error)"\s*:\s*(?:"[^"]|\{)')
_BAD_LINE = re.compile(rb"\ndata:(?! ?[{\[])")
_DONE = re.compile(rb"\ndata: ?\[DONE\]")
_USAGE = re.compile(rb'"usage"\s*:\s*\{')
_FINISH = re.compile(rb'"finish_reason"\s*:\s*"')
_E = 101  # ord("e"): the "error" key
_R = 114  # ord("r"): "reasoning_content" or "reasoning"
_NL = b"\n"
#: The usage event is the last before ``[DONE]``: it is looked for in this many bytes.
_USAGE_SPAN = 4096


class StreamScanner:
    """The state of one streamed response, fed one read at a time."""

    __slots__ = ("_checked", "_crlf", "_prev", "_tail", "_want_text", "bad", "done",
                 "error", "events", "reasoning", "texts", "usage", "without_done")

    def __init__(self, want_text: bool = False) -> None:
        self._tail = _NL  # a line start is always preceded by a newline
        self._prev = b""  # the previous block: the usage event may end it
        self._crlf: bool | None = None  # which blank line separates events
        self._checked = False
        self._want_text = want_text
        self.done = False
        self.without_done = False  # complete by its finish_reason, no [DONE] was sent
        self.usage: dict[str, Any] | None = None
        self.error = ""  # the server's message, when it reported an error in the stream
        self.bad = ""  # why the stream is malformed, when it is
        self.events = 0  # token-carrying events so far
        self.reasoning = 0  # how many of the last read's token events were reasoning
        self.texts: list[str] = []  # only filled with want_text

    def feed(self, data: bytes) -> int:
        """Scan one read; return how many token-carrying events it completed."""
        buf = self._tail + data
        crlf = self._crlf
        if crlf is None:
            a = buf.rfind(b"\n\n")
            b = buf.rfind(b"\n\r\n")
            if a < 0 and b < 0:
                self._tail = buf
                return 0
            self._crlf = crlf = b > a
            end = b + 3 if crlf else a + 2
        elif crlf:
            end = buf.rfind(b"\n\r\n") + 3
        else:
            end = buf.rfind(b"\n\n") + 2
        if end < 3:
            self._tail = buf
            return 0
        if end == len(buf):  # the read ended on an event boundary (the usual case)
            self._tail = _NL
            return self._scan(buf)
        self._tail = buf[end - 1:]
        return self._scan(buf[:end])

    def finish(self) -> int:
        """The body ended cleanly: scan an unterminated last event, and decide the end.

        The answer is complete with ``[DONE]`` (also when something followed it), or,
        without it, when the last events carry a ``finish_reason`` (``transformers serve``
        ends its streams that way, usage included). Otherwise it is truncated.
        """
        n = 0
        if len(self._tail) > 1 and not self.done:
            n = self.feed(b"\r\n\r\n" if self._crlf else b"\n\n")
        if not self.done and not self.bad and not self.error:
            prev = self._prev
            d = _DONE.search(prev)
            if d is not None:
                self._end(prev, d.start())
            elif _FINISH.search(prev, max(0, len(prev) - _USAGE_SPAN)) is not None:
                self.without_done = True
                self._end(prev, -1)
        return n

    def _scan(self, blk: bytes) -> int:
        if self.done:
            return 0
        if not self._checked and not self._check_first(blk):
            return 0
        size = len(blk)
        d = blk.find(b"[DONE]", size - 64 if size > 64 else 0)
        if d >= 0:
            line = blk.rfind(b"\n", 0, d)
            if _DONE.match(blk, line) is not None:
                blk = blk[:line + 1]
                self._end(blk, -1)
        m = _BAD_LINE.search(blk)
        if m is not None:
            line_end = blk.find(b"\n", m.end())
            self.bad = f"a data line is not a JSON object: {blk[m.start() + 1:line_end][:80]!r}"
            self.done = False
            return 0
        found = _FIELDS.findall(blk)
        n = len(found)
        r = 0
        if n == 1:
            kind = found[0][1]
            error = kind == _E
            r = 1 if kind == _R else 0
        elif n:
            joined = b"".join(found)
            error = b'"e' in joined
            r = joined.count(b'"r')
        else:
            error = False
        if error:
            e = blk.find(b'"error"')
            self.error = _error_message(_line_at(blk, e))
            self.done = False
            # the events before the error event in this read streamed their tokens
            before = [k for k in _FIELDS.findall(blk, 0, blk.rfind(b"\n", 0, e) + 1)
                      if k[1] != _E]
            self.reasoning = sum(k[1] == _R for k in before)
            self.events += len(before)
            return len(before)
        self.reasoning = r
        if self._want_text:
            self._collect(blk)
        if not self.done:
            self._prev = blk
        self.events += n
        return n

    def _check_first(self, blk: bytes) -> bool:
        """Parse the first event in full: is this the stream it should be?"""
        first = _first_event(blk)
        if first is None:
            return True  # comments only so far
        self._checked = True
        if first == b"[DONE]":
            return True
        try:
            obj = json.loads(first)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            self.bad = f"an event is not a JSON object: {first[:80]!r}"
            return False
        return True

    def _end(self, blk: bytes, done_at: int) -> None:
        """``[DONE]`` arrived: take the usage from the last event before it."""
        self.done = True
        for part in (blk, self._prev):
            stop = done_at if done_at >= 0 and part is blk else len(part)
            floor = max(0, stop - _USAGE_SPAN)
            u = part.rfind(b'"usage"', floor, stop)
            while u >= 0 and _USAGE.match(part, u) is None:
                u = part.rfind(b'"usage"', floor, u)
            if u >= 0:
                try:
                    obj = json.loads(_line_at(part, u))
                except (ValueError, RecursionError):
                    self.bad = "the usage event is not JSON"
                    return
                usage = obj.get("usage") if isinstance(obj, dict) else None
                if isinstance(usage, dict):
                    self.usage = usage
                return

    def _collect(self, blk: bytes) -> None:
        for line in blk.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                continue
            try:
                obj = json.loads(payload)
            except (ValueError, RecursionError):
                continue
            choices = obj.get("choices") if isinstance(obj, dict) else None
            if not isinstance(choices, list):
                continue
            for ch in choices:
                if not isinstance(ch, dict):
                    continue
                delta = ch.get("delta")
                src: dict[str, Any] = delta if isinstance(delta, dict) else ch
                for key in ("reasoning_content", "reasoning", "content", "text"):
                    v = src.get(key)
                    if isinstance(v, str) and v:
                        self.texts.append(v)

    @property
    def text(self) -> str:
        return "".join(self.texts)


def _first_event(blk: bytes) -> bytes | None:
    i = blk.find(b"\ndata:")
    if i < 0:
        return None
    j = blk.find(b"\n", i + 6)
    return blk[i + 6:j].strip()


def _line_at(blk: bytes, pos: int) -> bytes:
    """The JSON payload of the ``data:`` line holding byte ``pos``."""
    s = blk.rfind(b"\n", 0, pos) + 1
    e = blk.find(b"\n", pos)
    line = blk[s:e if e >= 0 else len(blk)].strip()
    return line[5:].strip() if line.startswith(b"data:") else line


def _error_message(payload: bytes) -> str:
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        return payload[:200].decode("utf-8", "replace")
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        return str(err)[:300]
    return str(obj)[:300]
