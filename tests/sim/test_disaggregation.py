"""Prefill/decode disaggregation in the latency search and the planner's candidate grid,
against hand-computed step times (the cost model's own step costs, composed by hand)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.sim.test_driver import EFF, H200, L8B, _timed
from tokenmark.perfmodel import CostModel, Deployment, Precision, ServingPolicy, Topology
from tokenmark.sim.cluster import Cluster, Router
from tokenmark.sim.driver import simulate
from tokenmark.sim.plan import ClusterSpec, candidates
from tokenmark.sim.search import replica_saturated_rate


def _d(replicas: int, prefill: int, **policy: int) -> Deployment:
    return Deployment(H200, L8B, Precision.FP8, replicas=replicas, efficiency=EFF,
                      policy=ServingPolicy(prefill_replicas=prefill, **policy))


def test_a_decode_replica_steps_carry_no_prefill():
    """Request A (100-token prompt, 50 tokens) is decoding when B's 8,000-token prompt
    arrives. Disaggregated, A's decode steps are decode-only (B is prefilled on the
    prefill replica and answers with its first token), so A ends exactly at its
    prefill + KV hand-off + 49 batch-1 decode steps; aggregated, B's prefill shares A's
    steps and A ends later."""
    inp, out = np.array([100, 8000]), np.array([50, 1])
    pd = _d(2, 1)
    cm = CostModel(pd)
    prefill_a = cm.step([(100, 0)], []).total_ns
    cluster = Cluster(pd)
    transfer = cluster.kv_transfer_ns(100, 0, 1)
    decode = sum(cm.step([], [100 + k]).total_ns for k in range(1, 50))
    b_at = prefill_a + transfer + 5 * cm.step([], [101]).total_ns  # A is decoding
    r = simulate(_timed([0, b_at], [0, 1]), inp, out, cluster)
    assert r.first[0] == prefill_a
    assert r.done[0] == prefill_a + transfer + decode
    tpot = (r.done[0] - r.first[0]) / 49
    assert tpot == pytest.approx((transfer + decode) / 49)
    agg = simulate(_timed([0, b_at], [0, 1]), inp, out, Cluster(_d(1, 0)))
    b_prefill = cm.step([(8000, 0)], []).total_ns  # what B's prompt costs alone
    assert agg.done[0] - agg.first[0] > decode + 0.5 * b_prefill


def test_a_disaggregated_unit_completes_at_its_slower_pool_rate():
    """Prefill-bound: 8,192-token prompts (one per step at the 8,192-token budget) with
    2-token answers; the unit completes one request per prefill step per prefill
    replica, whatever the decode pool. Decode-bound: 16-token prompts, 101-token
    answers, 8 sequences a replica: each decode replica completes 8 requests per 100
    batch-8 decode steps (contexts 17 to 116 tokens; the first token comes from the
    prefill replica); more prefill replicas change nothing."""
    prompt = 8192
    cm = CostModel(_d(2, 1))
    per_prefill = 1e9 / cm.step([(prompt, 0)], []).total_ns
    inp, out = np.full(64, prompt), np.full(64, 2)
    for n_pre, n_dec in ((1, 1), (2, 1), (1, 2)):
        d = _d(n_pre + n_dec, n_pre)
        unit = replica_saturated_rate(d, inp, out, requests=600) * d.replicas
        assert unit == pytest.approx(n_pre * per_prefill, rel=0.02)
    inp, out = np.full(64, 16), np.full(64, 101)
    wave_ns = sum(cm.decode_cost(8, 8 * (16 + k)).total_ns for k in range(1, 101))
    per_decode = 8 / (wave_ns / 1e9)
    for n_pre, n_dec in ((1, 1), (2, 1), (1, 2)):
        d = _d(n_pre + n_dec, n_pre, max_num_seqs=8)
        unit = replica_saturated_rate(d, inp, out, requests=1600) * d.replicas
        assert unit == pytest.approx(n_dec * per_decode, rel=0.02)


def test_a_serving_unit_is_the_pools_smallest_repeating_group():
    d = replace(_d(72, 48), topology=Topology(nodes=18, per_node=4, scale_up=72))
    assert d.units == 24
    u = d.serving_unit()
    assert (u.replicas, u.policy.prefill_replicas) == (3, 2)
    assert (u.topo.total, u.topo.domain) == (3, 3)
    assert d.aggregated().policy.prefill_replicas == 0
    assert _d(4, 0).units == 4 and _d(4, 0).serving_unit().replicas == 1
    assert "(48 prefill + 24 decode)" in d.label


def _layouts(spec: ClusterSpec, scenario: str) -> set[tuple[int, int, int, int, int]]:
    return {(p.deployment.tp, p.deployment.dp, p.deployment.ep, p.deployment.replicas,
             p.deployment.policy.prefill_replicas)
            for p in candidates(spec, 2100.0, 43.0, scenario)}


def test_the_latency_candidates_are_the_documented_grid():
    """GB300 NVL72 (18 trays of 4, one 72-GPU domain), Qwen3-VL-235B-A22B: Offline
    keeps the three MoE layouts; Interactive adds tp 4 and tp 8 with ep = tp, and each
    layout whose unit fits the domain split 1:3, 1:2, 1:1, 2:1 where that divides its
    replicas (tp 4's 18 replicas: not 1:3; 9 replicas: 1:2 and 2:1; the rack-wide
    dp 72 replica: none)."""
    spec = ClusterSpec("GB300", "qwen3-vl-235b-a22b", nodes=18, per_node=4,
                       rules_round="v6.1")
    aggregated = {(1, 1, 1, 72, 0), (1, 8, 8, 9, 0), (1, 72, 72, 1, 0)}
    assert _layouts(spec, "Offline") == aggregated
    wider = {(4, 1, 4, 18, 0), (8, 1, 8, 9, 0)}
    split = {(1, 1, 1, 72, p) for p in (18, 24, 36, 48)}
    split |= {(1, 8, 8, 9, p) for p in (3, 6)} | {(8, 1, 8, 9, p) for p in (3, 6)}
    split |= {(4, 1, 4, 18, p) for p in (6, 9, 12)}
    assert _layouts(spec, "Interactive") == aggregated | wider | split
    assert _layouts(spec, "Server") == aggregated | wider | split
    # an 8-GPU board: no domain beyond the node, so no disaggregation; tp 8 still tried
    hgx = ClusterSpec("B200", "qwen3-vl-235b-a22b", rules_round="v6.1")
    got = _layouts(hgx, "Interactive")
    assert (8, 1, 8, 1, 0) in got and not any(p for *_, p in got)
    # a dense model: its own tp and twice it, each also split
    dense = _layouts(ClusterSpec("GB300", "llama2-70b", nodes=18, per_node=4,
                                 rules_round="v6.1"), "Interactive")
    plain = {(1, 1, 1, 72, 0), (2, 1, 1, 36, 0)}
    assert dense == plain | {(t, 1, 1, r, r // k * p) for t, _, _, r, _ in plain
                             for p, k in ((1, 4), (1, 3), (1, 2), (2, 3))}


def test_decode_replicas_run_back_to_back_as_step_by_step():
    """The driver runs a decode replica's steps back to back up to the earliest moment a
    KV hand-off could reach it (round robin); with one replica per pool least-loaded
    routing sends every request to the same replicas but steps one step at a time, so
    both runs must agree to the nanosecond."""
    rng = np.random.default_rng(3)
    inp = rng.integers(50, 3000, size=400)
    out = rng.integers(2, 300, size=400)
    times = np.cumsum(rng.exponential(2e7, size=400)).astype(np.int64)
    sched = _timed(times.tolist(), list(range(400)))
    d = _d(2, 1)
    fast = simulate(sched, inp, out, Cluster(d))
    slow = simulate(sched, inp, out, Cluster(d, Router.LEAST_LOADED))
    assert fast.events < slow.events  # the fast path ran
    for col in ("first", "done", "admitted"):
        assert np.array_equal(getattr(fast, col), getattr(slow, col)), col
