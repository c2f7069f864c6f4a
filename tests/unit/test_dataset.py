"""The built-in tokenizer and the synthetic dataset: exact, deterministic token counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import DatasetError
from tokenmark.tokenizer import BuiltinTokenizer

TOK = BuiltinTokenizer()


@given(st.lists(st.sampled_from(list(TOK.word_ids())), max_size=200))
@settings(max_examples=100, deadline=None)
def test_vocabulary_text_round_trips(ids):
    text = TOK.decode(ids)
    assert TOK.encode(text) == ids
    assert TOK.count(text) == len(ids)


def test_unknown_words_fall_back_to_bytes():
    assert TOK.encode("héllo") == list("héllo".encode())
    assert TOK.count("ka héllo") == 1 + len("héllo".encode())
    assert len(set(TOK.words)) == len(TOK.words) == 8000
    assert TOK.fingerprint == BuiltinTokenizer().fingerprint


def test_synthetic_prompts_have_exact_lengths_and_are_reproducible():
    a = SyntheticDataset(50, LengthDistribution.parse("normal:100:30"),
                         LengthDistribution.parse("uniform:5:9"), seed=3)
    b = SyntheticDataset(50, LengthDistribution.parse("normal:100:30"),
                         LengthDistribution.parse("uniform:5:9"), seed=3)
    for i in (0, 17, 49):
        s = a.sample(i)
        assert TOK.count(s.prompt) == s.input_tokens == len(s.token_ids or ())
        assert 5 <= s.output_tokens <= 9
        assert b.sample(i).prompt == s.prompt  # any sample alone, same on any machine
    assert a.fingerprint == b.fingerprint
    c = SyntheticDataset(50, LengthDistribution.parse("normal:100:30"),
                         LengthDistribution.parse("uniform:5:9"), seed=4)
    assert c.fingerprint != a.fingerprint


def test_length_distributions():
    rng = np.random.default_rng(0)
    assert set(LengthDistribution.parse("fixed:7").draw(rng, 10)) == {7}
    u = LengthDistribution.parse("uniform:3:5").draw(rng, 1000)
    assert set(u) == {3, 4, 5}
    n = LengthDistribution.parse("normal:800:200").draw(rng, 20000)
    assert abs(n.mean() - 800) < 10 and n.min() >= 1
    ln = LengthDistribution.parse("lognormal:100:0.5").draw(rng, 20000)
    assert abs(np.median(ln) - 100) < 3


@pytest.mark.parametrize("bad", ["", "abc", "uniform:5", "uniform:9:3", "normal:-1:3",
                                 "fixed:0", "poisson:3:4"])
def test_bad_length_specs(bad):
    with pytest.raises(DatasetError, match="length distribution"):
        LengthDistribution.parse(bad)


def test_empty_dataset_is_rejected():
    with pytest.raises(DatasetError):
        SyntheticDataset(0, LengthDistribution.parse("5"), LengthDistribution.parse("5"))
