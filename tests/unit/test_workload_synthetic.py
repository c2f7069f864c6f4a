"""Synthetic workloads: histograms, shared prefixes, multi-turn conversations, the
Sample contract a client builds requests from."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.dataset import LengthDistribution, SyntheticDataset, describe_dataset
from tokenmark.errors import DatasetError
from tokenmark.records import Message, Sample
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.conversations import ConversationDataset, turn_rows

TOK = BuiltinTokenizer()
L = LengthDistribution.parse


def test_histogram_lengths_follow_their_weights():
    h = L("hist:10=1,100=3")
    assert str(L(str(h))) == str(h) and h.mean == pytest.approx(77.5)
    draws = h.draw(np.random.default_rng(0), 40000)
    assert set(draws) == {10, 100}
    assert (draws == 100).mean() == pytest.approx(0.75, abs=0.01)
    e = LengthDistribution.empirical([5, 5, 7])
    assert e.table == ((5, 2.0), (7, 1.0))


@pytest.mark.parametrize("bad", ["hist:", "hist:0=1", "hist:5=-1", "hist:a=1", "hist:5=0"])
def test_bad_histograms(bad):
    with pytest.raises(DatasetError, match="length distribution"):
        L(bad)


def test_shared_prefixes_are_shared_exactly():
    ds = SyntheticDataset(40, L("uniform:3:30"), L("8"), seed=1, prefix_groups=3,
                          prefix_tokens=16)
    groups: dict[int, tuple[int, ...]] = {}
    for i in range(len(ds)):
        s = ds.sample(i)
        ids = s.token_ids or ()
        assert TOK.count(s.prompt) == s.input_tokens == len(ids) >= 16 + 3
        assert 0 <= s.prefix_group < 3 and s.prefix_tokens == 16
        groups.setdefault(s.prefix_group, ids[:16])
        assert ids[:16] == groups[s.prefix_group]
    assert len(set(groups.values())) == 3
    plain = SyntheticDataset(40, L("uniform:3:30"), L("8"), seed=1)
    assert plain.sample(0).prefix_group == -1 and plain.fingerprint != ds.fingerprint
    assert describe_dataset(ds)["prefix_groups"] == 3


@pytest.mark.parametrize("groups,tokens", [(2, 0), (0, 5), (-1, 5)])
def test_prefix_options_need_both(groups, tokens):
    with pytest.raises(DatasetError, match="shared prefixes"):
        SyntheticDataset(5, L("5"), L("5"), prefix_groups=groups, prefix_tokens=tokens)


@given(st.integers(1, 12), st.integers(0, 2**32))
@settings(max_examples=25, deadline=None)
def test_conversation_turns_replay_the_history_exactly(conversations, seed):
    ds = ConversationDataset(conversations, L("uniform:1:4"), L("uniform:1:20"),
                             L("uniform:1:9"), seed=seed, system_tokens=3)
    prev: Sample | None = None
    for i in range(len(ds)):
        s = ds.sample(i)
        msgs = s.messages or ()
        assert TOK.count(s.prompt) == s.input_tokens
        assert msgs[0].role == "system" and msgs[-1].role == "user"
        assert s.conversation >= 0 and s.is_chat
        if s.turn:
            assert prev is not None and prev.conversation == s.conversation
            pm = prev.messages or ()
            # the history is the previous request plus the dataset's own answer to it
            assert msgs[:len(pm)] == pm and msgs[len(pm)].role == "assistant"
            assert TOK.count(msgs[len(pm)].content) == prev.output_tokens
            assert s.prefix_group == s.conversation
            assert s.prefix_tokens == s.input_tokens - TOK.count(msgs[-1].content)
        else:
            assert len(msgs) == 2 and s.prefix_tokens == 0
        prev = s
    again = ConversationDataset(conversations, L("uniform:1:4"), L("uniform:1:20"),
                                L("uniform:1:9"), seed=seed, system_tokens=3)
    assert again.fingerprint == ds.fingerprint
    assert again.sample(len(ds) - 1).prompt == ds.sample(len(ds) - 1).prompt


def test_turn_rows_from_a_file_conversation():
    msgs = [Message("system", "s"), Message("user", "u1"), Message("assistant", "a1"),
            Message("user", "u2"), Message("assistant", "a2"), Message("user", "u3")]
    rows = turn_rows(msgs, 7)
    assert [r.reference_text for r in rows] == ["a1", "a2", None]
    assert rows[2].messages == tuple(msgs) and rows[1].messages == tuple(msgs[:4])
    assert [r.turn for r in rows] == [0, 1, 2] and rows[1].prefix_group == 7
    assert len(turn_rows(msgs, 7, first_only=True)) == 1


def test_sample_stays_backwards_compatible_and_builds_chat_requests():
    s = Sample(3, "hi", 1, 5, (9,))
    assert (s.prompt, s.token_ids, s.is_chat, s.messages) == ("hi", (9,), False, None)
    assert s.openai_messages() == [{"role": "user", "content": "hi"}]
    assert s.prefix_group == -1 and s.conversation == -1 and s.expected_output_tokens == -1
    lazy = Sample(0, None, 2, 3, make=lambda: ("a b", (1, 2)))
    assert lazy.token_ids == (1, 2) and lazy.prompt == "a b"
    chat = Sample(1, None, 2, 3, images=1, image_bytes=10,
                  make_chat=lambda: ("t", None, (Message("user", "t", ("data:u",)),)))
    assert chat.is_chat and chat.openai_messages() == [{"role": "user", "content": [
        {"type": "text", "text": "t"}, {"type": "image_url", "image_url": {"url": "data:u"}}]}]
    with pytest.raises(ValueError):
        Sample(0, None, 1, 1)
