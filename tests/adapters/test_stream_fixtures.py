"""Streams of real servers (``tests/fixtures/streams.py``) read as their servers meant.

Each fixture is rebuilt from its server's serializer (the module names where); the reader
must find its tokens, reasoning tokens, finish reason, usage, end and errors, read whole
or split at every byte, and agree with the plain reference reader of ``test_sse``.
"""

from __future__ import annotations

import pytest

from tests.adapters.test_sse import read, reference
from tests.fixtures.streams import FIXTURES, StreamFixture


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda f: f.name)
def test_each_servers_stream_is_read_as_it_was_meant(fx: StreamFixture) -> None:
    r, n, reasoning = read(fx.body, [])
    assert (n, reasoning, r.tokens) == (fx.tokens, fx.reasoning, fx.tokens), fx.name
    assert r.finish_reason == fx.finish
    assert r.usage == fx.usage
    assert r.done == fx.done and not r.bad
    assert r.error == fx.error
    assert r.basis == fx.basis
    if fx.text:
        assert r.text == fx.text
    ref = reference(fx.body)
    assert (ref.tokens, ref.reasoning, ref.usage, ref.finish_reason, ref.done,
            bool(ref.error)) == (n, reasoning, r.usage, r.finish_reason, r.done,
                                 bool(r.error))


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda f: f.name)
def test_split_at_every_byte_changes_nothing(fx: StreamFixture) -> None:
    whole, n, reasoning = read(fx.body, [])
    step = max(1, len(fx.body) // 97)  # ~100 split points per fixture, all in one run
    for cut in range(1, len(fx.body), step):
        r, n2, r2 = read(fx.body, [cut, cut + 3, cut + 50])
        assert (n2, r2, r.text, r.usage, r.done, r.error, r.finish_reason) == (
            n, reasoning, whole.text, whole.usage, whole.done, whole.error,
            whole.finish_reason), (fx.name, cut)


def test_the_fixtures_cover_every_server_and_shape() -> None:
    names = " ".join(f.name for f in FIXTURES)
    for server in ("vllm", "sglang", "tgi", "trtllm", "llamacpp", "llama-cpp-python",
                   "transformers", "openai"):
        assert server in names
    for shape in ("completions", "chat", "usage", "reasoning", "tool-calls", "two-choices",
                  "logprobs", "token-ids", "error"):
        assert shape in names, shape
