"""A simulated cluster: the replicas of one deployment, where they sit in the topology,
and how requests reach them.

Replica *i* occupies accelerators ``[i x per_replica, (i + 1) x per_replica)`` in node
order, so its scale-up domain is ``first accelerator // domain size``. With
prefill/decode disaggregation the first ``prefill_replicas`` replicas only prefill and
the rest only decode; a request's KV cache then travels from its prefill replica to a
decode replica, each of the replica's accelerators sending its shard in parallel over
the scale-up link when both replicas share a domain and over the scale-out network
otherwise.

Routers (:class:`Router`):

- ``round-robin``: request *k* goes to replica ``k mod R`` (what MLPerf harnesses do
  with identical replicas, and what makes the per-replica load exactly 1/R);
- ``least-loaded``: fewest requests in flight; among many replicas the least loaded of
  two drawn at random (power of two choices, seeded), so routing stays O(1).

The cluster has no clock; the driver (:mod:`tokenmark.sim.driver`) or the emulated
server's engine (:class:`~tokenmark.engines.emulated.Emulator`) advances its engines.
"""

from __future__ import annotations

import random
from enum import StrEnum

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import Deployment, ReplicaEngine

__all__ = ["Cluster", "Router"]

#: Fixed cost of one KV-cache hand-off (connection set-up, completion signal), ns.
KV_TRANSFER_LATENCY_NS = 20_000
#: Exact least-loaded search up to this many replicas; two random choices beyond it.
_EXACT_LEAST_LOADED = 16


class Router(StrEnum):
    ROUND_ROBIN = "round-robin"
    LEAST_LOADED = "least-loaded"

    @classmethod
    def parse(cls, text: str) -> Router:
        for r in cls:
            if r.value == text.strip().lower():
                return r
        raise ConfigError(
            f"unknown router {text!r}; choose one of: {', '.join(r.value for r in cls)}"
        )


class Cluster:
    """The engines of a deployment's replicas and the routing between them."""

    def __init__(self, d: Deployment, router: Router = Router.ROUND_ROBIN,
                 seed: int = 0) -> None:
        d.check()
        self.d = d
        self.router = router
        n_pre = d.policy.prefill_replicas
        self.disaggregated = n_pre > 0
        self.engines = [ReplicaEngine(d, prefill_only=i < n_pre) for i in range(d.replicas)]
        self.entry = list(range(n_pre)) if n_pre else list(range(d.replicas))
        self.decoders = list(range(n_pre, d.replicas)) if n_pre else []
        self.load = [0] * d.replicas
        self._rr = [0, 0]  # round-robin cursors: entry pool, decode pool
        self._rng = random.Random(seed)
        topo = d.topo
        self._domain = [i * d.per_replica // topo.domain for i in range(d.replicas)]
        up = d.accelerator.scale_up_gb_s_bidir / 2 * d.efficiency.link_efficiency
        out = topo.scale_out_gb_s * d.efficiency.link_efficiency
        self._up_bw = up if up > 0 else out
        self._out_bw = out
        self._kv_per_token_per_acc = d.kv_bytes_per_token / d.per_replica

    @property
    def replicas(self) -> int:
        return len(self.engines)

    def describe(self) -> dict[str, object]:
        d = self.d
        return {
            "replicas": d.replicas,
            "accelerators_per_replica": d.per_replica,
            "prefill_replicas": d.policy.prefill_replicas,
            "decode_replicas": len(self.decoders) if self.disaggregated else d.replicas,
            "router": self.router.value,
        }

    def route(self) -> int:
        """The engine a new request goes to (a prefill engine when disaggregated)."""
        e = self._pick(self.entry, 0)
        self.load[e] += 1
        return e

    def route_decode(self) -> int:
        """The decode engine a prefilled request's KV cache goes to."""
        e = self._pick(self.decoders, 1)
        self.load[e] += 1
        return e

    def finished(self, engine: int) -> None:
        """A request left ``engine`` (done, rejected, or handed over to a decoder)."""
        self.load[engine] -= 1

    def _pick(self, pool: list[int], which: int) -> int:
        if self.router is Router.ROUND_ROBIN or len(pool) == 1:
            k = self._rr[which]
            self._rr[which] = k + 1
            return pool[k % len(pool)]
        load = self.load
        if len(pool) <= _EXACT_LEAST_LOADED:
            return min(pool, key=load.__getitem__)
        a, b = self._rng.sample(pool, 2)
        return a if load[a] <= load[b] else b

    def kv_transfer_ns(self, prompt_tokens: int, src: int, dst: int) -> int:
        """Time to move a prompt's KV cache from replica ``src`` to replica ``dst``."""
        bw = self._up_bw if self._domain[src] == self._domain[dst] else self._out_bw
        return int(prompt_tokens * self._kv_per_token_per_acc / bw) + KV_TRANSFER_LATENCY_NS
