"""The SSE scanner counts exactly the token-carrying events, however the bytes are split.

Streams come from the exact server's renderer (vLLM-shaped events) and from hand-written
edge cases: chat's role-only first event, empty contents, reasoning fields, ``[DONE]`` and
``"error"`` inside generated text, error events, garbage lines, CRLF separators.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.adapters.sse import StreamReader
from tokenmark.servers.render import render_stream


def stream(chat: bool, n: int, *, usage: bool = True, sep: bytes = b"\n\n") -> bytes:
    sb = render_stream(chat, n, "m", usage, sep, False)
    tail = sb.usage_event(11, n, 4) if usage else b""
    return sb.prologue + b"".join(sb.tokens) + tail + sb.done


def scan(data: bytes, cuts: list[int] = (), want_text: bool = False) -> tuple[StreamReader, int]:
    sc = StreamReader(want_text)
    n = 0
    pos = 0
    for c in sorted(set(cuts)) + [len(data)]:
        if c > pos:
            n += sc.feed(data[pos:c])
            pos = c
    n += sc.finish()
    return sc, n


@settings(max_examples=150, deadline=None)
@given(chat=st.booleans(), n=st.integers(1, 40), crlf=st.booleans(), usage=st.booleans(),
       cuts=st.lists(st.integers(0, 12000), max_size=40))
def test_any_split_gives_the_same_count_usage_and_end(chat, n, crlf, usage, cuts):
    data = stream(chat, n, usage=usage, sep=b"\r\n\r\n" if crlf else b"\n\n")
    sc, counted = scan(data, [c % (len(data) + 1) for c in cuts], want_text=True)
    assert counted == n == sc.events
    assert sc.done and not sc.bad and not sc.error
    if usage:
        assert sc.usage == {"prompt_tokens": 11, "total_tokens": 11 + n,
                            "completion_tokens": n, "prompt_tokens_details": {"cached_tokens": 4}}
    else:
        assert sc.usage is None
    assert len(sc.texts) == n and sc.text.split() == [t.strip() for t in sc.texts]


def ev(obj: object, sep: str = "\n\n") -> bytes:
    return f"data: {json.dumps(obj)}{sep}".encode()


def chunk(**delta: object) -> dict[str, object]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}


def test_role_only_empty_and_finish_only_events_carry_no_token():
    data = (ev(chunk(role="assistant", content="")) + ev(chunk(content="Hi")) +
            ev(chunk()) + ev(chunk(content=None)) + ev(chunk(content=" there")) +
            b"data: [DONE]\n\n")
    sc, n = scan(data)
    assert n == 2 and sc.done


def test_reasoning_fields_count_as_output():
    data = (ev(chunk(reasoning_content="think")) + ev(chunk(reasoning="more")) +
            ev(chunk(content="answer")) + b"data: [DONE]\n\n")
    assert scan(data)[1] == 3


def test_json_spacing_of_other_servers_is_understood():
    # Python's json.dumps default (", " and ": "), as some servers write it
    data = (b'data: {"choices": [{"index": 0, "text": "a"}]}\n\n'
            b'data: {"choices": [{"index": 0, "text" : "b"}], "usage": null}\n\n'
            b'data: {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 1}}\n\n'
            b"data:[DONE]\n\n")
    sc, n = scan(data)
    assert n == 2 and sc.done and sc.usage == {"completion_tokens": 2, "prompt_tokens": 1}


def test_generated_text_cannot_fake_the_end_an_error_or_a_token():
    tricky = 'data: [DONE]\n\n"error": {"text":"x"} "content":"y"'
    data = (ev(chunk(content=tricky)) + ev(chunk(content="ok")) + b"data: [DONE]\n\n")
    sc, n = scan(data, want_text=True)
    assert n == 2 and sc.done and not sc.error and not sc.bad
    assert sc.text == tricky + "ok"


def test_an_error_event_is_reported_with_its_message():
    data = ev(chunk(content="a")) + ev({"error": {"message": "out of memory", "code": 500}})
    sc, _ = scan(data)
    assert sc.error == "out of memory" and not sc.done


def test_a_line_that_is_not_json_is_malformed():
    sc, _ = scan(ev(chunk(content="a")) + b"data: oops\n\n" + ev(chunk(content="b")))
    assert "not a JSON object" in sc.bad
    sc, _ = scan(b"data: {not json\n\n")
    assert "not a JSON object" in sc.bad


def test_no_done_and_no_finish_reason_means_not_finished():
    sc, n = scan(ev(chunk(content="a")) + ev(chunk(content="b")))
    assert n == 2 and not sc.done


def test_a_finish_reason_without_done_is_complete_with_its_usage():
    # transformers serve: the last event holds finish_reason and usage, then the body ends
    last = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            "usage": {"completion_tokens": 2, "prompt_tokens": 3}}
    sc, n = scan(ev({"choices": [{"text": "a"}]}) + ev({"choices": [{"text": "b"}]}) + ev(last))
    assert n == 2 and sc.done and sc.without_done and sc.usage["completion_tokens"] == 2


def test_done_followed_by_a_comment_is_still_the_end():
    data = ev(chunk(content="a")) + b"data: [DONE]\n\n" + b": keep-alive " + b"x" * 100 + b"\n\n"
    sc, n = scan(data)
    assert n == 1 and sc.done


def test_unterminated_last_event_is_read_at_the_end():
    sc, n = scan(ev(chunk(content="a")) + b"data: [DONE]")
    assert n == 1 and sc.done
