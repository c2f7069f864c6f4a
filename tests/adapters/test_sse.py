"""The stream reader equals a plain reference reader, however the bytes are split.

:func:`reference` is the slow, obvious reading of a whole body: line ends made LF, split
on blank lines, each event's ``data:`` lines joined, ``json.loads`` on every payload,
plain dict lookups. Hypothesis generates streams whose texts are any Unicode (mixed with
the words and bytes that fooled the old byte scanner: ``else``, ``return``, ``error``,
``reasoning``, ``content``, ``data: [DONE]``, quotes, backslashes, ``\\u`` escapes, blank
lines), several server styles (separators, ``ensure_ascii``, ``data:`` with or without
its space, LF/CRLF/CR, comments, ``event:``/``id:``/``retry:`` lines, keep-alive events,
token ids and logprobs, several choices), and feeds them in random read sizes; the
reader must agree with the reference on tokens, reasoning tokens, texts, usage, finish
reason, errors and the end. Fuzzing: random and mutated bodies never raise, and end in
one classified state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmark.adapters.sse import StreamReader
from tokenmark.servers.render import render_stream

# -- the reference ---------------------------------------------------------------------


@dataclass
class Ref:
    tokens: int = 0
    reasoning: int = 0
    events: int = 0
    texts: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str = ""
    done: bool = False
    error: str = ""
    bad: bool = False


def reference(body: bytes) -> Ref:
    """The obvious reading of a whole body (see the module docstring)."""
    out = Ref()
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    seen: set[int] = set()
    fin: set[int] = set()
    for ev in text.split(b"\n\n"):
        data: list[bytes] = []
        kind = b""
        for line in ev.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"event":
                kind = value
        if not data:
            continue
        payload = b"\n".join(data)
        if kind == b"error":
            out.error = "x"
            return out
        if payload.strip() == b"[DONE]":
            out.done = True
            return out
        if not payload.strip():
            continue
        try:
            obj = json.loads(payload)
        except ValueError:
            if payload.startswith(b'{"error"'):
                out.error = "x"
            else:
                out.bad = True
            return out
        if not isinstance(obj, dict):
            out.bad = True
            return out
        if obj.get("error") is not None or obj.get("object") == "error":
            out.error = "x"
            return out
        if obj.get("usage") is not None:
            out.usage = obj["usage"]
        for ch in obj.get("choices") or []:
            idx = ch.get("index", 0)
            seen.add(idx)
            if ch.get("finish_reason"):
                fin.add(idx)
                if idx == 0 or not out.finish_reason:
                    out.finish_reason = ch["finish_reason"]
            d = ch.get("delta")
            answer = reasoning = False
            if d is None:
                if ch.get("text"):
                    answer = True
                    out.texts.append(ch["text"])
            else:
                if d.get("content"):
                    answer = True
                    out.texts.append(d["content"])
                elif d.get("tool_calls"):
                    answer = True
                r = d.get("reasoning_content") or d.get("reasoning")
                if r:
                    reasoning = True
                    out.texts.append(r)
            exact = None
            if ch.get("token_ids") is not None:
                exact = len(ch["token_ids"])
            elif isinstance(ch.get("logprobs"), list):
                exact = len(ch["logprobs"])
            elif isinstance(ch.get("logprobs"), dict):
                lp = ch["logprobs"]
                entries = lp.get("content") if lp.get("content") is not None else lp.get(
                    "tokens")
                if entries is not None:
                    exact = len(entries)
            if exact is not None:
                if exact == 0 and not (answer or reasoning):
                    continue
                out.events += 1
                out.tokens += exact
                out.reasoning += (exact if not answer else min(1, exact)) if reasoning else 0
            elif answer or reasoning:
                out.events += 1
                out.tokens += answer + reasoning
                out.reasoning += reasoning
    if seen and seen <= fin:
        out.done = True
    return out


def read(body: bytes, cuts: list[int], *, cap: int = 1 << 20) -> tuple[StreamReader, int, int]:
    """Feed ``body`` split at ``cuts``; return the reader and the summed per-read figures."""
    r = StreamReader(want_text=True, max_event_bytes=cap)
    n = reasoning = 0
    pos = 0
    for c in [*sorted(set(cuts)), len(body)]:
        if c > pos:
            n += r.feed(body[pos:c])
            reasoning += r.reasoning
            pos = c
    n += r.finish()
    reasoning += r.reasoning
    return r, n, reasoning


# -- generated streams ----------------------------------------------------------------

TRICKY = ["else", "each", "end", "return", "error", "reasoning", "content", "text",
          "data: [DONE]\n\n", "data:", '"error":{"message":"x"}', '"', "\\", "\\u0041",
          "\n\n", "\r\n\r\n", "\r", ": ping", '{"choices":[]}', "[DONE]", "é", "语",
          "🙂", "\u2028"]
TEXT = st.lists(st.one_of(st.sampled_from(TRICKY),
                          st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)),
                max_size=4).map("".join)


@st.composite
def event_obj(draw: st.DrawFn, chat: bool, n_choices: int) -> dict[str, Any]:
    choices = []
    for i in range(n_choices):
        t = draw(TEXT)
        field_name = draw(st.sampled_from(
            ["content", "content", "reasoning_content", "reasoning", "role", "tool"]))
        ch: dict[str, Any] = {"index": i}
        if chat:
            if field_name == "role":
                ch["delta"] = {"role": "assistant", "content": ""}
            elif field_name == "tool":
                ch["delta"] = {"tool_calls": [{"index": 0, "function": {"arguments": t}}]}
            else:
                ch["delta"] = {field_name: t}
        else:
            ch["text"] = t
        extra = draw(st.sampled_from(["", "", "ids", "logprobs"]))
        k = draw(st.integers(0, 3))
        if extra == "ids":
            ch["token_ids"] = list(range(k))
        elif extra == "logprobs":
            entries = [{"token": "x", "logprob": -0.5, "top_logprobs": []}] * k
            ch["logprobs"] = {"content": entries} if chat else {
                "tokens": ["x"] * k, "token_logprobs": [-0.5] * k}
        ch["finish_reason"] = None
        choices.append(ch)
    obj: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk" if chat else
                           "text_completion", "choices": choices}
    if draw(st.booleans()):
        obj["usage"] = None
    return obj


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    chat = draw(st.booleans())
    n_choices = draw(st.sampled_from([1, 1, 1, 2]))
    ascii_ = draw(st.booleans())
    seps = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    nl = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    space = draw(st.sampled_from(["data: ", "data:"]))

    def frame(obj: object, extra_lines: tuple[str, ...] = ()) -> str:
        payload = json.dumps(obj, ensure_ascii=ascii_, separators=seps)
        return "".join(line + nl for line in extra_lines) + space + payload + nl + nl

    parts: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["token"] * 6 + ["comment", "fields", "keepalive"]))
        if kind == "comment":
            parts.append(": ping" + nl + nl)
        elif kind == "keepalive":
            parts.append("data:" + nl + nl)
        else:
            lines = ("event: message", "id: 7", "retry: 1000") if kind == "fields" else ()
            parts.append(frame(draw(event_obj(chat, n_choices)), lines))
    end = draw(st.sampled_from(["done", "finish", "none", "error"]))
    if end in ("done", "finish"):
        last = {"choices": [{"index": i, "text": "", "finish_reason": "length"}
                            for i in range(n_choices)],
                "usage": {"prompt_tokens": 3, "completion_tokens": 9}}
        parts.append(frame(last))
    if end == "done":
        parts.append("data: [DONE]" + nl + nl)
    elif end == "error":
        parts.append(frame({"error": {"message": "boom", "code": 500}}))
    return "".join(parts).encode("utf-8")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=streams(), cuts=st.lists(st.integers(0, 100_000), max_size=30))
def test_the_reader_equals_the_reference_however_it_is_split(body, cuts):
    want = reference(body)
    r, n, reasoning = read(body, [c % (len(body) + 1) for c in cuts])
    assert not want.bad and not r.bad, r.bad
    assert (n, reasoning, r.events) == (want.tokens, want.reasoning, want.events) == (
        r.tokens, reasoning, r.events)
    assert r.texts == want.texts
    assert r.usage == want.usage
    assert r.finish_reason == want.finish_reason
    assert bool(r.error) == bool(want.error)
    assert r.done == want.done


@settings(max_examples=200, deadline=None)
@given(body=streams(), size=st.integers(1, 64))
def test_every_read_size_gives_the_same_answer(body, size):
    one, n1, r1 = read(body, [])
    cuts = list(range(size, len(body), size))
    many, n2, r2 = read(body, cuts)
    assert (n1, r1, one.texts, one.usage, one.done) == (n2, r2, many.texts, many.usage,
                                                        many.done)


# -- fuzzing ----------------------------------------------------------------------------


def _classified(r: StreamReader) -> None:
    """At most one ending: complete, malformed, or the server's error (none: truncated)."""
    assert sum([r.done, bool(r.bad), bool(r.error)]) <= 1


@settings(max_examples=1000, deadline=None)
@given(body=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=8))
def test_random_bytes_never_raise(body, cuts):
    r, _, _ = read(b"data: " + body, cuts)
    _classified(r)


@settings(max_examples=500, deadline=None)
@given(body=streams(), edits=st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3),
                                                st.integers(0, 3)), min_size=1, max_size=6),
       cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_mutated_streams_never_raise_and_a_broken_event_is_classified(body, edits, cuts):
    b = bytearray(body)
    for pos, ins, drop in edits:
        p = pos % (len(b) + 1)
        b[p:p + drop] = ins
    data = bytes(b)
    r, _, _ = read(data, [c % (len(data) + 1) for c in cuts])
    _classified(r)
    try:  # msgspec skips the keys it does not read unchecked, invalid UTF-8 included
        data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if reference(data).bad:  # events are read in order: the first bad one stops both
        assert r.bad


# -- the cases that fooled the byte scanner ---------------------------------------------


def ev(obj: object, sep: str = "\n\n") -> bytes:
    return f"data: {json.dumps(obj)}{sep}".encode()


def chunk(**delta: object) -> dict[str, object]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


@pytest.mark.parametrize("word", ["else", "each", "end", "error", "return", "reasoning"])
def test_answers_starting_with_e_or_r_in_one_read_are_answer_tokens(word):
    """The old scanner took a value's first byte for the key's ("e": error, "r": reasoning)."""
    body = (ev(chunk(role="assistant", content="")) + ev(chunk(content=word))
            + ev(chunk(content=" " + word)) + ev(chunk(content=word)) + b"data: [DONE]\n\n")
    r, n, reasoning = read(body, [])
    assert (n, reasoning, r.done, r.error, r.bad) == (3, 0, True, "", "")


def test_a_truncated_last_event_is_not_a_token():
    body = ev(chunk(content="a")) + b'data: {"choices":[{"index":0,"text":"x'
    r, n, _ = read(body, [])
    assert n == 1 and not r.done and "unterminated" in r.bad


def test_vllm_shaped_streams_of_the_exact_server_count_one_token_per_event():
    for chat in (False, True):
        sb = render_stream(chat, 20, "m", True, b"\r\n\r\n", False)
        body = sb.prologue + b"".join(sb.tokens) + sb.usage_event(11, 20, 4) + sb.done
        r, n, _ = read(body, list(range(7, len(body), 13)))
        assert n == 20 and r.done and r.finish_reason == "length" and r.basis == "events"
        assert r.usage == {"prompt_tokens": 11, "total_tokens": 31, "completion_tokens": 20,
                           "prompt_tokens_details": {"cached_tokens": 4}}


def test_token_ids_and_logprobs_count_several_tokens_per_event():
    ids = {"choices": [{"index": 0, "text": "ab", "token_ids": [5, 6]}]}
    lp = {"choices": [{"index": 0, "delta": {"content": "cde"}, "logprobs": {"content": [
        {"token": "c"}, {"token": "d"}, {"token": "e"}]}}]}
    r, n, _ = read(ev(ids) + ev(ids) + b"data: [DONE]\n\n", [])
    assert (n, r.events, r.basis) == (4, 2, "ids")
    r, n, _ = read(ev(lp) + b"data: [DONE]\n\n", [])
    assert (n, r.events, r.basis) == (3, 1, "logprobs")
    r, n, _ = read(ev(lp) + ev(chunk(content="x")) + b"data: [DONE]\n\n", [])
    assert (n, r.basis) == (4, "events")


def test_errors_in_every_shape_servers_send():
    for body in (ev({"error": {"message": "out of memory", "code": 500}}),
                 ev({"object": "error", "message": "out of memory", "code": 500}),
                 ev({"error": "out of memory", "error_type": "generation"}),
                 b"event: error\ndata: out of memory\n\n"):
        r, _, _ = read(ev(chunk(content="a")) + body, [])
        assert r.error == "out of memory" and not r.done, body


def test_payloads_of_the_wrong_shape_are_malformed_with_the_place_named():
    for body, why in ((b"data: oops\n\n", "not JSON"), (b"data: 5\n\n", "chunk shape"),
                      (b'data: {"choices": {}}\n\n', "$.choices"),
                      (b'data: {"choices": [{"text": 5}]}\n\n', "$.choices[0].text")):
        r, _, _ = read(ev(chunk(content="a")) + body + ev(chunk(content="b")), [])
        assert why in r.bad and not r.done, (body, r.bad)


def test_no_done_and_no_finish_reason_means_not_finished():
    r, n, _ = read(ev(chunk(content="a")) + ev(chunk(content="b")), [])
    assert n == 2 and not r.done and not r.bad


def test_a_finish_reason_without_done_is_complete_with_its_usage():
    # transformers serve: the last event holds finish_reason and usage, then the body ends
    last = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            "usage": {"completion_tokens": 2, "prompt_tokens": 3}}
    r, n, _ = read(ev({"choices": [{"text": "a"}]}) + ev({"choices": [{"text": "b"}]})
                   + ev(last), [])
    assert n == 2 and r.done and r.without_done and r.usage["completion_tokens"] == 2


def test_only_some_choices_finished_is_not_the_end():
    two = {"choices": [{"index": 0, "text": "a"}, {"index": 1, "text": "b"}]}
    one = {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}
    r, n, _ = read(ev(two) + ev(one), [])
    assert n == 2 and not r.done


# -- sizes -----------------------------------------------------------------------------


def test_an_event_over_the_cap_is_malformed_and_reading_stops():
    big = ev({"choices": [{"index": 0, "text": "x" * 5000}]})
    r, n, _ = read(ev(chunk(content="a")) + big + ev(chunk(content="b")),
                   list(range(100, 6000, 100)), cap=4096)
    assert n == 1 and "larger than 4,096 bytes" in r.bad and not r.done
    r, n, _ = read(ev(chunk(content="a")) + big, [], cap=4096)  # one read holds it whole
    assert n == 1 and "larger than" in r.bad


def test_a_large_event_under_the_cap_is_read_in_pieces():
    """32 MB in 64 KiB reads: the pieces are joined once (bench/sse_parsers.py times it)."""
    text = "y" * (32 * 1024 * 1024)
    body = ev({"choices": [{"index": 0, "text": text}]}) + b"data: [DONE]\n\n"
    r = StreamReader(max_event_bytes=64 * 1024 * 1024)
    n = sum(r.feed(body[i:i + 65536]) for i in range(0, len(body), 65536))
    assert n == 1 and r.done and len(r._pend) == 0
