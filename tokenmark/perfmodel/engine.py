"""Continuous batching for one replica, advanced one step at a time by its caller.

The caller (the emulated server in real time, the simulator in virtual time) asks for
the next step, waits ``plan.cost.total_ns`` and then delivers what the step produced;
the engine itself never reads a clock.

Each step decodes one token for every running sequence and spends what is left of the
token budget (``max_batched_tokens`` minus the decode tokens) on prefill chunks: first
the prompts already being prefilled, then new requests in arrival order. Admission
reserves each request's whole KV (prompt + output) up front, so nothing is ever
preempted; it stops at the first request that does not fit (FIFO, no skipping), and
the reason is reported as ``limited_by``: ``kv`` (cache full), ``max_num_seqs``,
``budget`` (no prefill tokens left this step).

Cost per step is O(1) in the batch size: the engine keeps the number of decoding
sequences and the sum of their contexts, and files each sequence under the step in
which it will finish (a decoding sequence makes exactly one token per step), so a
step touches only the requests that start or finish in it. :meth:`ReplicaEngine.advance`
reports those (first token, done); :meth:`ReplicaEngine.step` also lists one ``TOKEN``
event per decoding sequence, for callers that stream every token.

A request may be aborted (:meth:`ReplicaEngine.abort`: its client went away): it leaves
at once, so the next step is planned without it and its sequence slot and KV cache are
free for the requests behind it. A vision-language request carries its images' encoder
work (``encoder_flops``), charged to the step that starts its prefill (with the largest
request's share, which one attention data-parallel group encodes alone:
:meth:`~tokenmark.perfmodel.cost.CostModel.cost`).

Under attention data parallelism a replica can balance its groups' prefills
(:attr:`~tokenmark.perfmodel.ServingPolicy.adp_balance_steps`, TensorRT-LLM's
``attention_dp_config.enable_balance`` with ``timeout_iters``): while it decodes, no new
prefill starts until every group can start one (the queue holds at least ``dp``
requests that fit the free sequence slots and KV cache) or the hold has lasted that many
steps, reported as ``limited_by`` ``balance``; a step that starts one prompt alone would
cost every group that prompt (:meth:`~tokenmark.perfmodel.cost.CostModel.padded_prefill`).

Disaggregated serving uses two modes: ``prefill_only`` engines finish a request with
its first token (its KV cache leaves with it), and requests submitted with
``prefilled=True`` arrive on a decode engine with their prompt's KV already present
and their first token already made, so they only decode.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from tokenmark.perfmodel.cost import BREAKDOWN_KEYS, CostModel, StepCost
from tokenmark.perfmodel.deployment import Deployment

__all__ = ["EngineStats", "Event", "EventKind", "ReplicaEngine", "StepOutcome", "StepPlan"]


class EventKind(StrEnum):
    FIRST = "first"  # the first output token
    TOKEN = "token"  # a later output token
    DONE = "done"  # the request finished (after its last token)
    REJECTED = "rejected"  # it can never fit in the KV cache


@dataclass(frozen=True, slots=True)
class Event:
    rid: int
    kind: EventKind


@dataclass(slots=True)
class _Req:
    rid: int
    prompt: int
    output: int
    remote: bool = False  # prefilled elsewhere (disaggregated decode)
    prefilled: int = 0
    width: int = 1  # sequences it decodes at once (beam search width)
    rate: float = 1.0  # tokens each of its sequences makes per decode step
    fin: int = -1  # the step of its last token, once it decodes
    start: int = -1  # the step of its first decoded token
    enc: float = 0.0  # vision-encoder FLOPs still to run (charged with its first chunk)

    @property
    def need(self) -> int:
        """KV tokens reserved: the shared prompt plus every beam's output."""
        return self.prompt + self.width * self.output


@dataclass(frozen=True, slots=True)
class StepPlan:
    cost: StepCost
    batch: int  # sequences in the step
    prefill_tokens: int
    decode_tokens: int
    waiting: int  # requests still queued after admission
    kv_used_tokens: int
    limited_by: str  # what stopped admission this step: "", "kv", "max_num_seqs", "budget"


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One step: its plan and the requests whose first token or end it produced."""

    plan: StepPlan
    first: list[int]
    done: list[int]
    rejected: list[int]
    decoded: list[int] | None = None  # rids that decoded a token (when asked for)
    admitted: tuple[int, ...] = ()  # rids admitted at this step's start


@dataclass
class EngineStats:
    """What a replica spent its time on, accumulated over its steps."""

    steps: int = 0
    busy_ns: int = 0
    breakdown_ns: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(BREAKDOWN_KEYS, 0.0))
    compute_bound_ns: int = 0
    memory_bound_ns: int = 0
    max_batch: int = 0
    batch_ns: float = 0.0  # sum of batch x step time (for a time-weighted mean)
    decode_tokens: float = 0.0  # tokens made by decode steps
    prefill_tokens: int = 0
    waiting_steps: int = 0  # steps after which requests were still queued
    limited_steps: dict[str, int] = field(default_factory=dict)
    kv_peak_tokens: int = 0
    #: per step: its duration and decode tokens (the inter-token gaps it produced)
    step_ns: array[int] = field(default_factory=lambda: array("q"))
    step_decodes: array[int] = field(default_factory=lambda: array("q"))
    #: tokens a sequence makes per decode step (speculative decoding: more than 1, so a
    #: token's mean gap is the step's time over it)
    tokens_per_step: float = 1.0

    def add(self, plan: StepPlan, made: float | None = None) -> None:
        c = plan.cost
        t = c.total_ns
        self.steps += 1
        self.busy_ns += t
        top = float(max(c.compute_ns, c.memory_ns))
        b = self.breakdown_ns
        if c.compute_ns >= c.memory_ns:
            self.compute_bound_ns += t
            b["prefill_compute"] += top * c.prefill_flop_share
            b["decode_compute"] += top * (1.0 - c.prefill_flop_share)
            if c.serial_ns:
                b["kv_memory"] += c.serial_ns * c.kv_byte_share
                b["weights_memory"] += c.serial_ns * (1.0 - c.kv_byte_share)
        else:
            self.memory_bound_ns += t
            b["kv_memory"] += top * c.kv_byte_share
            b["weights_memory"] += top * (1.0 - c.kv_byte_share)
            if c.serial_ns:
                b["prefill_compute"] += c.serial_ns * c.prefill_flop_share
                b["decode_compute"] += c.serial_ns * (1.0 - c.prefill_flop_share)
        b["communication"] += c.comm_ns
        b["overhead"] += c.overhead_ns
        if plan.batch > self.max_batch:
            self.max_batch = plan.batch
        self.batch_ns += plan.batch * t
        made = plan.decode_tokens if made is None else made
        self.decode_tokens += made
        self.prefill_tokens += plan.prefill_tokens
        if plan.waiting:
            self.waiting_steps += 1
            key = plan.limited_by or "other"
            self.limited_steps[key] = self.limited_steps.get(key, 0) + 1
        if plan.kv_used_tokens > self.kv_peak_tokens:
            self.kv_peak_tokens = plan.kv_used_tokens
        self.step_ns.append(t)
        self.step_decodes.append(int(round(made)))

    def add_decode(self, c: StepCost, n_dec: int, kv_used: int) -> None:
        """:meth:`add` for a decode-only step with nothing waiting."""
        t = c.total_ns
        self.steps += 1
        self.busy_ns += t
        b = self.breakdown_ns
        if c.compute_ns >= c.memory_ns:
            self.compute_bound_ns += t
            b["decode_compute"] += c.compute_ns
            mem = c.serial_ns
        else:
            self.memory_bound_ns += t
            b["decode_compute"] += c.serial_ns
            mem = c.memory_ns
        kv = mem * c.kv_byte_share
        b["kv_memory"] += kv
        b["weights_memory"] += mem - kv
        b["communication"] += c.comm_ns
        b["overhead"] += c.overhead_ns
        if n_dec > self.max_batch:
            self.max_batch = n_dec
        self.batch_ns += n_dec * t
        self.decode_tokens += n_dec
        if kv_used > self.kv_peak_tokens:
            self.kv_peak_tokens = kv_used
        self.step_ns.append(t)
        self.step_decodes.append(n_dec)


class ReplicaEngine:
    """Continuous batching for one replica, advanced one step at a time by its caller."""

    def __init__(self, d: Deployment, *, prefill_only: bool = False) -> None:
        d.check()
        self.d = d
        self.cost = CostModel(d)
        self._coef = self.cost.decode_coefficients()
        self._a = d.tokens_per_step  # tokens a decoding sequence makes per step
        self._verify = 1 + d.spec_tokens  # tokens per sequence through the model
        self.capacity = d.kv_capacity_tokens
        self.prefill_only = prefill_only
        self.stats = EngineStats(tokens_per_step=self._a)
        self._waiting: deque[_Req] = deque()
        self._prefilling: deque[_Req] = deque()
        self._decoding: dict[int, _Req] = {}
        self._finish: dict[int, list[_Req]] = {}
        self._n_dec = 0
        self._rate = 0.0  # tokens the decoding sequences make per step
        self._ctx = 0.0  # sum of the decoding sequences' contexts at the next step
        self._reserved = 0
        self.steps = 0
        self._made = 0.0  # tokens made (fractional per step with speculative decoding)
        self._held = 0  # steps in a row new prefills were held back (_hold)
        self.prompt_tokens_in = 0

    # -- state read by /metrics and routers ------------------------------------------------
    @property
    def tokens_out(self) -> int:
        """Output tokens made so far (first tokens and decoded ones)."""
        return int(self._made + 0.5)

    @property
    def num_running(self) -> int:
        return len(self._prefilling) + self._n_dec

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def kv_usage(self) -> float:
        return self._reserved / self.capacity if self.capacity else 0.0

    @property
    def has_work(self) -> bool:
        return bool(self._waiting or self._prefilling or self._n_dec)

    def submit(self, rid: int, prompt_tokens: int, output_tokens: int, *,
               prefilled: bool = False, encoder_flops: float = 0.0) -> None:
        """Queue a request. ``prefilled``: its prompt was prefilled (and its first token
        made) elsewhere and its KV cache has arrived; it only decodes here.
        ``encoder_flops``: its images' vision-encoder work (its prompt counts their
        tokens)."""
        self._waiting.append(_Req(rid, max(1, prompt_tokens), max(1, output_tokens),
                                  prefilled, width=self.d.policy.beams,
                                  enc=0.0 if prefilled else encoder_flops))

    def abort(self, rid: int) -> bool:
        """Remove request ``rid`` wherever it is (queued, prefilling or decoding): it
        frees its sequence slot and KV cache for the next step. False if it is not
        here (finished, or never submitted)."""
        for queue in (self._waiting, self._prefilling):
            for r in queue:
                if r.rid == rid:
                    queue.remove(r)
                    if queue is self._prefilling:
                        self._reserved -= r.need
                    return True
        if rid not in self._decoding:
            return False
        r = self._decoding.pop(rid)
        bucket = self._finish.get(r.fin)
        if bucket is not None:
            bucket.remove(r)
            if not bucket:
                del self._finish[r.fin]
        # its context now: the prompt, the first token and the steps it decoded
        self._ctx -= r.width * (r.prompt + 1 + r.rate * max(0, self.steps - r.start))
        self._n_dec -= r.width
        self._rate -= r.width * r.rate
        self._reserved -= r.need
        if self._n_dec <= 0:  # no drift left behind by fractional rates
            self._ctx = self._rate = 0.0
        return True

    def step(self) -> tuple[StepPlan, list[Event]]:
        """Plan and execute the next step, with one event per token. The caller waits
        ``plan.cost.total_ns`` and then delivers the events (they happen at the step's
        end): ``REJECTED``, then ``FIRST``, ``TOKEN`` and ``DONE`` in that order."""
        out = self.advance(collect_tokens=True)
        events = [Event(r, EventKind.REJECTED) for r in out.rejected]
        events += [Event(r, EventKind.FIRST) for r in out.first]
        events += [Event(r, EventKind.TOKEN) for r in out.decoded or ()]
        events += [Event(r, EventKind.DONE) for r in out.done]
        return out.plan, events

    def advance(self, *, collect_tokens: bool = False) -> StepOutcome:
        """Plan and execute the next step; report only first tokens and completions."""
        if not self._waiting and not self._prefilling:
            return self._decode_step(collect_tokens)
        pol = self.d.policy
        cap = self.capacity
        s = self.steps
        rejected: list[int] = []
        first: list[int] = []
        done: list[int] = []
        budget = pol.max_batched_tokens - self._n_dec * self._verify
        chunks: list[tuple[_Req, int]] = []
        for r in self._prefilling:  # unfinished prefills continue first
            if budget <= 0:
                break
            n = min(r.prompt - r.prefilled, budget)
            chunks.append((r, n))
            budget -= n
        limited = ""
        running = len(self._prefilling) + self._n_dec
        waiting = self._waiting
        admitted: list[int] = []
        enc = 0.0
        enc_max = 0.0  # the largest request's encoder work this step
        if self._hold(running):
            limited = "balance"
            waiting = deque()  # nothing starts this step
        while waiting:
            r = waiting[0]
            need = r.need
            if need > cap:
                waiting.popleft()
                rejected.append(r.rid)
                continue
            if running + r.width > pol.max_num_seqs and running:
                limited = "max_num_seqs"
                break
            if self._reserved + need > cap:
                limited = "kv"
                break
            if not r.remote and budget <= 0:
                limited = "budget"
                break
            waiting.popleft()
            admitted.append(r.rid)
            self._reserved += need
            running += r.width
            if r.remote:
                if r.output <= 1:  # nothing left to decode
                    self._reserved -= need
                    done.append(r.rid)
                    continue
                self._join_decode(r, s)
                continue
            self._prefilling.append(r)
            n = min(r.prompt, budget)
            chunks.append((r, n))
            budget -= n
            if r.enc:
                enc += r.enc
                enc_max = max(enc_max, r.enc)
                r.enc = 0.0
        p_tok = 0
        pairs = 0.0
        p_ctx = 0
        big = 0  # the largest chunk: its tokens and pairs
        big_pairs = 0.0
        for r, n in chunks:
            c = r.prefilled
            p_tok += n
            q = n * c + n * (n + 1) / 2
            pairs += q
            p_ctx += c
            if n > big:
                big = n
            if q > big_pairs:
                big_pairs = q
        n_dec = self._n_dec
        made = self._rate
        cost = self.cost.cost(p_tok, pairs, p_ctx, len(chunks), n_dec, self._ctx, enc,
                              enc_max, big, big_pairs)
        decoded = list(self._decoding) if collect_tokens else None
        # -- apply the step -------------------------------------------------------------
        self._ctx += made
        finished = self._finish.pop(s, None)
        if finished:
            for r in finished:
                done.append(r.rid)
                self._leave_decode(r)
        self.prompt_tokens_in += p_tok
        for r, n in chunks:
            r.prefilled += n
        pre = self._prefilling
        while pre and pre[0].prefilled >= pre[0].prompt:
            r = pre.popleft()
            first.append(r.rid)
            if self.prefill_only or r.output <= 1:
                self._reserved -= r.need
                done.append(r.rid)
            else:
                self._join_decode(r, s + 1)
        self._made += made + len(first)
        self.steps = s + 1
        plan = StepPlan(
            cost=cost,
            batch=n_dec + len(chunks),
            prefill_tokens=p_tok,
            decode_tokens=n_dec,
            waiting=len(self._waiting),
            kv_used_tokens=self._reserved,
            limited_by=limited,
        )
        self.stats.add(plan, made)
        return StepOutcome(plan, first, done, rejected, decoded, tuple(admitted))

    def _hold(self, running: int) -> bool:
        """Whether this step starts no new prefill, to balance the attention data-parallel
        groups (:attr:`~tokenmark.perfmodel.ServingPolicy.adp_balance_steps`): while the
        replica decodes, prefills nothing and fewer than ``dp`` requests could start
        (one per group: the sequence slots free, the queue's length), for at most that
        many steps in a row; then they start together, so one step carries the groups'
        prompts side by side instead of many steps one group's prompt each, which every
        group waits for (:meth:`~tokenmark.perfmodel.cost.CostModel.padded_prefill`)."""
        steps = self.d.policy.adp_balance_steps or 0
        dp = self.d.dp
        if steps <= 0 or dp <= 1 or not self._n_dec or self._prefilling:
            self._held = 0
            return False
        # the requests that could start now, up to dp: sequence slots and KV cache free
        room = self.capacity - self._reserved
        slots = self.d.policy.max_num_seqs - running
        ready = 0
        for r in self._waiting:
            if ready >= dp or r.need > room or r.width > slots:
                break
            room -= r.need
            slots -= r.width
            ready += 1
        if ready >= dp or self._held >= steps:
            self._held = 0
            return False
        self._held += 1
        return True

    def _decode_step(self, collect_tokens: bool) -> StepOutcome:
        """:meth:`advance` when nothing waits and nothing is being prefilled."""
        s = self.steps
        n_dec = self._n_dec
        made = self._rate
        cost = self.cost.decode_cost(n_dec, self._ctx)
        decoded = list(self._decoding) if collect_tokens else None
        self._ctx += made
        done: list[int] = []
        finished = self._finish.pop(s, None)
        if finished:
            for r in finished:
                done.append(r.rid)
                self._leave_decode(r)
        self._made += made
        self.steps = s + 1
        plan = StepPlan(cost, n_dec, 0, n_dec, 0, self._reserved, "")
        self.stats.add(plan, made)
        return StepOutcome(plan, [], done, [], decoded)

    @property
    def decode_only(self) -> bool:
        """Whether the next step can only decode (nothing waits, nothing prefills)."""
        return not self._waiting and not self._prefilling and self._n_dec > 0

    def run_decode(self, start_ns: int, horizon_ns: int) -> tuple[int, list[tuple[int, int]]]:
        """Run back-to-back decode-only steps from ``start_ns`` for as long as each starts
        before ``horizon_ns`` (the caller's next event for this replica) and nothing else
        is left to do; return when the last one ended and ``(time, rid)`` of every
        request that finished. Equivalent to calling :meth:`advance` step by step, but
        without a step object per step: the simulator's fast path."""
        t = start_ns
        finished_at: list[tuple[int, int]] = []
        cost = self.cost
        a, b, w, c, o, q = self._coef
        dp = self.d.dp  # the per-sequence overhead is the busiest attention group's
        sf = cost.serial_fraction
        linear = cost.linear_decode
        parts = cost.decode_parts
        comm_of = cost.comm_ns if cost.has_comm else None
        st = self.stats
        step_ns = st.step_ns
        step_dec = st.step_decodes
        fin = self._finish
        ctx = self._ctx
        n_dec = self._n_dec
        rate = self._rate
        s = self.steps
        # the breakdown's sums, kept in locals for the loop
        d_compute = kv_mem = w_mem = comm_sum = over_sum = 0.0
        cb_ns = mb_ns = busy = 0
        batch_ns = 0.0
        made = 0.0
        max_batch = st.max_batch
        steps0 = s
        while t < horizon_ns and n_dec > 0:
            if linear:
                lin = a * n_dec
                att = b * ctx
                kv = c * (ctx + n_dec)
                w_ns = w
                comm = comm_of(n_dec) if comm_of is not None else 0.0
            else:
                lin, att, w_ns, kv, comm = parts(n_dec, ctx)
            # the linear layers, then attention, each on its own roofline (kernel_time)
            lin_t = lin + sf * w_ns if lin >= w_ns else w_ns + sf * lin
            att_t = att + sf * kv if att >= kv else kv + sf * att
            compute = lin + att
            memory = w_ns + kv
            over = o + q * (n_dec if dp <= 1 else -(-n_dec // dp))
            dt = int(lin_t + att_t + comm + over)
            if compute >= memory:  # the unhidden rest is memory's (StepCost.breakdown)
                cb_ns += dt
                d_compute += compute
                rest = lin_t + att_t - compute
                if rest > 0 and memory > 0:
                    kv_mem += rest * kv / memory
                    w_mem += rest * w_ns / memory
            else:
                mb_ns += dt
                kv_mem += kv
                w_mem += w_ns
                d_compute += lin_t + att_t - memory
            t += dt
            comm_sum += comm
            over_sum += over
            batch_ns += n_dec * dt
            made += rate
            busy += dt
            step_ns.append(dt)
            step_dec.append(int(rate + 0.5))
            if n_dec > max_batch:
                max_batch = n_dec
            ctx += rate
            finished = fin.pop(s, None)
            if finished:
                for r in finished:
                    finished_at.append((t, r.rid))
                    ctx -= r.width * (r.prompt + r.output)
                    n_dec -= r.width
                    rate -= r.width * r.rate
                    self._reserved -= r.need
                    del self._decoding[r.rid]
                if n_dec <= 0:  # no drift left behind by fractional rates
                    ctx = rate = 0.0
            s += 1
        bd = st.breakdown_ns
        bd["decode_compute"] += d_compute
        bd["kv_memory"] += kv_mem
        bd["weights_memory"] += w_mem
        bd["communication"] += comm_sum
        bd["overhead"] += over_sum
        st.compute_bound_ns += cb_ns
        st.memory_bound_ns += mb_ns
        st.busy_ns += busy
        st.batch_ns += batch_ns
        st.decode_tokens += made
        st.max_batch = max_batch
        st.steps += s - steps0
        self._made += made
        self._ctx = ctx
        self._n_dec = n_dec
        self._rate = rate
        self.steps = s
        return t, finished_at

    def _leave_decode(self, r: _Req) -> None:
        self._ctx -= r.width * (r.prompt + r.output)
        self._n_dec -= r.width
        self._rate -= r.width * r.rate
        self._reserved -= r.need
        del self._decoding[r.rid]
        if self._n_dec <= 0:  # no drift left behind by fractional rates
            self._ctx = self._rate = 0.0

    def _join_decode(self, r: _Req, start_step: int) -> None:
        """``r`` has made its first token; it decodes from step ``start_step`` until it
        has made the rest: ``ceil((output - 1) / a)`` steps at ``a`` tokens a step (1
        without speculative decoding), each step advancing it by the same share."""
        left = r.output - 1
        steps = max(1, math.ceil(left / self._a - 1e-9))
        r.rate = left / steps
        self._decoding[r.rid] = r
        finish_step = start_step + steps - 1
        r.start, r.fin = start_step, finish_step
        self._n_dec += r.width
        self._rate += r.width * r.rate
        self._ctx += r.width * (r.prompt + 1)
        bucket = self._finish.get(finish_step)
        if bucket is None:
            self._finish[finish_step] = [r]
        else:
            bucket.append(r)
