"""The emulated server's pre-rendered events equal events built one by one.

The server writes spans of tokens as slices of a pre-joined 64-event cycle
(:class:`~tokenmark.servers.emulated_body.EmulatedBody`); the reference here builds each
event from scratch with ``json.dumps``, from the documented rule (token ``i`` is word
``i mod 64``, its id that word's built-in id, reasoning first, ``finish_reason`` on the
last), and the two must be byte-identical for every span."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.engines.emulated import OUTPUT_WORDS, OutputIds, output_text
from tokenmark.servers.emulated_body import EmulatedBody, full_body, usage_object
from tokenmark.servers.http_base import maybe_chunk
from tokenmark.tokenizer import BuiltinTokenizer

TOK = BuiltinTokenizer()


def reference_event(i: int, n: int, *, chat: bool, reasoning: int, field: str, ids: bool,
                    finish: str, usage: bool, chunked: bool) -> bytes:
    word = OUTPUT_WORDS[i % 64]
    text = word if i == 0 else " " + word
    choice: dict[str, object] = {"index": 0}
    if chat:
        choice["delta"] = {(field if i < reasoning else "content"): text}
    else:
        choice["text"] = text
    choice["logprobs"] = None
    choice["finish_reason"] = finish if i == n - 1 else None
    if not chat:
        choice["stop_reason"] = None
    if ids:
        choice["token_ids"] = TOK.encode(text)
    obj: dict[str, object] = {
        "id": "chatcmpl-emulated" if chat else "cmpl-emulated",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": 1_700_000_000, "model": "m", "choices": [choice]}
    if usage:
        obj["usage"] = None
    return maybe_chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n",
                       chunked)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 400), data=st.data(), chat=st.booleans(), ids=st.booleans(),
       usage=st.booleans(), chunked=st.booleans(),
       field=st.sampled_from(["reasoning_content", "reasoning"]),
       finish=st.sampled_from(["length", "stop"]))
def test_spans_equal_events_built_one_by_one(n, data, chat, ids, usage, chunked, field,
                                             finish):
    reasoning = data.draw(st.integers(0, n))
    k = data.draw(st.integers(0, n - 1))
    end = data.draw(st.integers(k + 1, n))
    body = EmulatedBody(chat=chat, model="m", include_usage=usage, finish=finish,
                        reasoning=reasoning, reasoning_field=field, ids=ids, chunked=chunked)
    r = reasoning if chat else 0
    want = b"".join(reference_event(i, n, chat=chat, reasoning=r, field=field, ids=ids,
                                    finish=finish, usage=usage, chunked=chunked)
                    for i in range(k, end))
    assert body.span(k, end, n) == want


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300))
def test_text_and_ids_of_a_range(a, b):
    start, end = min(a, b), max(a, b)
    words = [OUTPUT_WORDS[i % 64] if i == 0 else " " + OUTPUT_WORDS[i % 64]
             for i in range(start, end)]
    assert output_text(start, end) == "".join(words)
    assert list(OutputIds(end))[start:end] == [TOK.encode(w)[0] for w in words]
    assert OutputIds(end)[start:end] == [TOK.encode(w)[0] for w in words]


def test_a_whole_body_splits_reasoning_and_counts_it():
    usage = usage_object(10, 40, image_tokens=258, reasoning=30)
    obj = json.loads(full_body(chat=True, model="m", reasoning=30, answer=10,
                               reasoning_field="reasoning_content", finish="stop",
                               usage=usage, ids=True))
    choice = obj["choices"][0]
    msg = choice["message"]
    assert msg["reasoning_content"] + msg["content"] == output_text(0, 40)
    assert len(msg["reasoning_content"].split()) == 30 and choice["finish_reason"] == "stop"
    assert choice["token_ids"] == TOK.encode(output_text(0, 40))
    assert obj["usage"] == {"prompt_tokens": 10, "total_tokens": 50, "completion_tokens": 40,
                            "prompt_tokens_details": {"image_tokens": 258},
                            "completion_tokens_details": {"reasoning_tokens": 30}}
