"""How long the emulated model answers and how a reasoning model splits its answer.

Ground truth: the published statistics (MLPerf's DeepSeek-R1 reference mean 3886.2274
tokens, max 20000; gpt-oss-120b's TEST09 centre 1278.2, max 10000), the capped-lognormal
mean computed here from its closed form, and the documented seed derivation reproduced
here by hand with numpy."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from tokenmark.dataset import LengthDistribution
from tokenmark.errors import ConfigError, DatasetError
from tokenmark.mlperf.settings import derive_seed
from tokenmark.perfmodel.outputs import OutputPlan, OutputPlanner, output_model, prompt_key


def capped_lognormal_mean(median: float, sigma: float, cap: float) -> float:
    """E[min(X, cap)] for X lognormal (closed form)."""
    n = NormalDist()
    mu = math.log(median)
    return (math.exp(mu + sigma * sigma / 2) * n.cdf((math.log(cap) - mu - sigma * sigma) / sigma)
            + cap * (1 - n.cdf((math.log(cap) - mu) / sigma)))


@pytest.mark.parametrize(("bench", "mean", "cap", "field"), [
    ("deepseek-r1", 3886.2274, 20000, "reasoning_content"),
    ("gpt-oss-120b", 1278.2, 10000, "reasoning"),
])
def test_published_output_lengths(bench, mean, cap, field):
    om = output_model(bench)
    assert om.reasons and om.reasoning_field == field
    assert om.published_mean == mean and om.max_tokens == cap
    assert om.total is not None
    # the stated shape, capped at the benchmark's maximum, has the published mean
    # (deepseek-r1: the dataset's own reference lengths, binned; gpt-oss-120b: a lognormal)
    if om.total.kind == "hist":
        assert max(v for v, _ in om.total.table) <= cap
        assert om.total.mean == pytest.approx(mean, rel=1e-4)
    else:
        assert om.total.kind == "lognormal"
        assert capped_lognormal_mean(om.total.a, om.total.b, cap) == pytest.approx(mean,
                                                                                  rel=1e-4)
    # and so do draws from it (200k draws: the sample mean within 1%)
    draws = np.minimum(om.total.draw(np.random.default_rng(1), 200_000), cap)
    assert draws.mean() == pytest.approx(mean, rel=0.01)
    assert output_model(bench + "-interactive") == om


def test_plain_models_answer_exactly_max_tokens():
    p = OutputPlanner(output_model("llama3.1-8b"))
    assert not p.model.reasons
    assert p.plan("k", 128) == OutputPlan(0, 128, "length")
    # a reference length or a stop distribution is what lets an answer stop early
    assert p.plan("k", 128, reference=40) == OutputPlan(0, 40, "stop")
    assert p.plan("k", 128, reference=400) == OutputPlan(0, 128, "length")
    assert p.plan("k", 128, reference=40, ignore_eos=True) == OutputPlan(0, 128, "length")
    fixed = OutputPlanner(output_model("llama3.1-8b"), stop=LengthDistribution.parse("17"))
    assert fixed.plan("k", 128) == OutputPlan(0, 17, "stop")
    assert fixed.plan("k", 10) == OutputPlan(0, 10, "length")
    assert fixed.plan("k", 128, ignore_eos=True) == OutputPlan(0, 128, "length")


def test_reasoning_split_follows_the_named_seed_derivation():
    om = output_model("deepseek-r1")
    seed = 7
    p = OutputPlanner(om, seed=seed)
    key = prompt_key(b"What is 2 + 2?")
    # by hand: the natural length and the answer length, each the first draw of its
    # stream, then the split in their proportions
    assert om.total is not None and om.answer is not None
    rng_l = np.random.default_rng(derive_seed(seed, f"emulator/length/{key}"))
    rng_a = np.random.default_rng(derive_seed(seed, f"emulator/answer/{key}"))
    # the natural length: a draw from the dataset's binned reference lengths
    assert om.total.kind == "hist"
    values = np.array([v for v, _ in om.total.table])
    weights = np.array([w for _, w in om.total.table])
    length = int(values[rng_l.choice(values.shape[0], size=1, p=weights / weights.sum())[0]])
    answer = min(max(1, int(np.rint(rng_a.lognormal(math.log(om.answer.a), om.answer.b)))),
                 length - 1)
    m = 512
    reasoning = min(m - 1, max(1, round(m * (length - answer) / length)))
    plan = p.plan(key, m)
    assert plan == OutputPlan(reasoning, m - reasoning, "length")
    assert p.plan(key, m) == plan  # the same prompt, the same answer
    # completions (no reasoning parser): every token is answer text
    assert p.plan(key, m, split=False) == OutputPlan(0, m, "length")


def test_reasoning_comes_first_and_a_cut_can_leave_no_answer():
    p = OutputPlanner(output_model("deepseek-r1"))
    plans = [p.plan(prompt_key(str(i).encode()), 20000, reference=3000) for i in range(50)]
    assert all(x.total == 3000 and x.finish == "stop" for x in plans)
    assert all(x.reasoning >= 1 and x.answer >= 1 for x in plans)
    # cut at max_tokens before the reasoning ends: all reasoning, no answer
    cut = [p.plan(prompt_key(str(i).encode()), 100, reference=3000) for i in range(50)]
    assert all(x == OutputPlan(100, 0, "length") for x in cut)
    # exact lengths: at least one reasoning token and one answer token, in the
    # proportions of the natural answer
    exact = [p.plan(prompt_key(str(i).encode()), 1000) for i in range(200)]
    assert all(x.total == 1000 and x.reasoning >= 1 and x.answer >= 1 for x in exact)
    assert all(p.plan(prompt_key(str(i).encode()), 2) == OutputPlan(1, 1, "length")
               for i in range(50))
    share = sum(x.reasoning for x in exact) / sum(x.total for x in exact)
    assert 0.6 < share < 0.99  # answers of ~250 tokens after ~2800 of reasoning
    assert p.plan("k", 1) == OutputPlan(1, 0, "length")


def test_stop_lengths_option():
    om = output_model("deepseek-r1")
    assert om.stop_lengths("") is None
    assert om.stop_lengths("published") == om.total
    assert om.stop_lengths("uniform:10:20") == LengthDistribution.parse("uniform:10:20")
    with pytest.raises(DatasetError, match="cannot read the length distribution"):
        om.stop_lengths("lognormal:x")
    with pytest.raises(ConfigError, match="no published output-length distribution"):
        output_model("llama3.1-8b").stop_lengths("published")
    # published stops: a request asking for the benchmark's maximum stops by itself
    p = OutputPlanner(om, stop=om.total)
    plans = [p.plan(prompt_key(str(i).encode()), 20000) for i in range(2000)]
    assert sum(x.finish == "stop" for x in plans) > 1900
    assert np.mean([x.total for x in plans]) == pytest.approx(3886.2, rel=0.06)
