"""The simulator's own virtual-time driver: a discrete-event loop over a heap.

It plays a :class:`~tokenmark.mlperf.scenarios.Schedule` against a
:class:`~tokenmark.sim.cluster.Cluster` with the load generator's rules (send at the
scheduled time, or as soon after as a concurrency cap allows; closed schedules send a
stream's next query when its previous one completed, and stop as LoadGen "ends
naturally"), and keeps one row per request: scheduled, issued, first-token and done
times and token counts. It keeps no per-token timestamps: a decoding sequence makes one
token per engine step, so its inter-token gaps are the step times the engines record
(:class:`~tokenmark.perfmodel.EngineStats`).

Events are (time, order, kind, index) on a heap: an engine's step ends (its requests'
first tokens and completions happen then), an engine is kicked to start a step, or a
prefilled request's KV cache reaches a decode replica. Arrivals come from the schedule
through a cursor, never through the heap. At equal times arrivals go first and kicks
after them, so a burst (Offline's single query of every sample) is queued whole before
any engine plans its first step, as a real server receives one ``IssueQuery``.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np

from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.perfmodel import StepOutcome
from tokenmark.sim.cluster import Cluster, Router

__all__ = ["SimResult", "simulate"]

_STEP, _KICK, _KV = 0, 1, 2
_INF = 1 << 62


@dataclass
class SimResult:
    """Per-request columns of a simulated run (row *i* is the *i*-th sample issued;
    times in ns from the run's start, -1 for what never happened)."""

    query_id: np.ndarray
    sample_index: np.ndarray
    scheduled: np.ndarray
    issued: np.ndarray
    first: np.ndarray
    done: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    admitted: np.ndarray  # when the request's first step began (queueing ends)
    rejected: np.ndarray  # bool: could never fit the KV cache
    scheduled_total: int  # samples the schedule holds (closed schedules: issued)
    end_ns: int
    issue_span_ns: int
    ran_out_of_queries: bool
    events: int  # discrete events processed
    wall_s: float  # host seconds the simulation took

    def __len__(self) -> int:
        return int(self.scheduled.shape[0])


def simulate(
    schedule: Schedule,
    input_by_sample: np.ndarray,
    output_by_sample: np.ndarray,
    cluster: Cluster,
    *,
    max_concurrency: int = 0,
    encoder_by_sample: np.ndarray | None = None,
) -> SimResult:
    """Run ``schedule`` against ``cluster``. ``input_by_sample`` / ``output_by_sample``
    give each dataset sample's token counts (the output count is generated exactly; a
    vision-language sample's input counts its image tokens), ``encoder_by_sample`` its
    images' vision-encoder FLOPs (none when omitted)."""
    t_wall = time.perf_counter()
    inp = np.asarray(input_by_sample, dtype=np.int64)
    out = np.asarray(output_by_sample, dtype=np.int64)
    enc = (np.asarray(encoder_by_sample, dtype=np.float64)
           if encoder_by_sample is not None else None)
    if schedule.kind is ScheduleKind.TIMED:
        res = _timed(schedule, inp, out, cluster, max_concurrency, enc)
    else:
        res = _closed(schedule, inp, out, cluster, enc)
    res.wall_s = time.perf_counter() - t_wall
    return res


def _timed(s: Schedule, inp: np.ndarray, out: np.ndarray, cluster: Cluster,
           cap: int, enc: np.ndarray | None = None) -> SimResult:
    n = len(s)
    if s.max_queries:
        n = min(n, s.max_queries)
    sched = s.scheduled_ns[:n].tolist()
    samples = s.sample_index[:n]
    n_in = inp[samples].tolist()
    n_out = out[samples].tolist()
    n_enc = enc[samples].tolist() if enc is not None else None
    max_d = s.max_duration_ns
    first = [-1] * n
    done = [-1] * n
    issued = [-1] * n
    admitted = [-1] * n
    rejected = bytearray(n)
    home = [0] * n
    engines = cluster.engines
    busy = [False] * len(engines)
    kicked = [False] * len(engines)
    pending: list[StepOutcome | None] = [None] * len(engines)
    prefill_only = [e.prefill_only for e in engines]
    heap: list[tuple[int, int, int, int]] = []
    push = heapq.heappush
    pop = heapq.heappop
    order = 0
    inflight = 0
    cursor = 0
    now = 0
    events = 0
    end = 0
    route = cluster.route
    finished = cluster.finished
    n_eng = len(engines)
    # Round-robin routing without a concurrency cap makes each replica's next arrival
    # known (the next schedule index congruent to it), so a replica that only decodes
    # may run its steps back to back up to that arrival (Engine.run_decode). With
    # disaggregation a decode replica's next request comes from a KV hand-off, which no
    # earlier than the next arrival, the next end of a prefill replica's step, or a
    # hand-off already under way can start: it runs back to back up to the earliest.
    fast = cluster.router is Router.ROUND_ROBIN and not cap
    disagg = cluster.disaggregated
    while True:
        if cursor < n and not (cap and inflight >= cap):
            ta = sched[cursor]
            if ta < now:
                ta = now
        else:
            ta = _INF
        th = heap[0][0] if heap else _INF
        if ta == _INF and th == _INF:
            break
        events += 1
        if ta <= th:
            if max_d and ta > max_d:
                cursor = n  # LoadGen stops issuing past max_duration
                continue
            now = ta
            i = cursor
            cursor += 1
            issued[i] = ta
            inflight += 1
            e = route()
            home[i] = e
            if n_enc is None:
                engines[e].submit(i, n_in[i], n_out[i])
            else:
                engines[e].submit(i, n_in[i], n_out[i], encoder_flops=n_enc[i])
            if not busy[e] and not kicked[e]:
                kicked[e] = True
                order += 1
                push(heap, (ta, order, _KICK, e))
            continue
        t, _, kind, e = pop(heap)
        now = t
        if kind == _KICK:
            kicked[e] = False
            if busy[e]:
                continue
        elif kind == _KV:
            i = e  # the request whose KV cache reached its decode replica
            d_e = home[i]
            engines[d_e].submit(i, n_in[i], n_out[i], prefilled=True)
            if not busy[d_e] and not kicked[d_e]:
                kicked[d_e] = True
                order += 1
                push(heap, (t, order, _KICK, d_e))
            continue
        else:  # a step ended: deliver what it produced
            outcome = pending[e]  # None: run_decode recorded its completions already
            for rid in outcome.first if outcome is not None else ():
                first[rid] = t
            for rid in outcome.done if outcome is not None else ():
                finished(e)
                if prefill_only[e] and n_out[rid] > 1:
                    d_e = cluster.route_decode()
                    home[rid] = d_e
                    order += 1
                    push(heap, (t + cluster.kv_transfer_ns(n_in[rid], e, d_e), order, _KV, rid))
                    continue
                done[rid] = t
                inflight -= 1
                end = t
            for rid in outcome.rejected if outcome is not None else ():
                finished(e)
                rejected[rid] = 1
                done[rid] = t
                inflight -= 1
        eng = engines[e]
        if fast and eng.decode_only:
            if disagg:
                horizon = sched[cursor] if cursor < n else _INF
                if max_d and horizon > max_d:
                    horizon = _INF
                for th, _, k, x in heap:
                    if th < horizon and (k == _KV or prefill_only[x]):
                        horizon = th
            else:
                j = cursor + (e - cursor) % n_eng
                horizon = sched[j] if j < n else _INF
                if max_d and horizon > max_d:
                    horizon = _INF
            t_end, fin = eng.run_decode(t, horizon)
            for tf, rid in fin:
                finished(e)
                done[rid] = tf
                inflight -= 1
                if tf > end:
                    end = tf
            if t_end > t:
                pending[e] = None
                busy[e] = True
                order += 1
                push(heap, (t_end, order, _STEP, e))
                continue
        if eng.has_work:
            o = eng.advance()
            for rid in o.admitted:
                if admitted[rid] < 0:
                    admitted[rid] = t
            pending[e] = o
            busy[e] = True
            order += 1
            push(heap, (t + o.plan.cost.total_ns, order, _STEP, e))
        else:
            busy[e] = False
            pending[e] = None
    issued_arr = np.asarray(issued, dtype=np.int64)
    sent = issued_arr >= 0
    span = int(issued_arr[sent].max() - issued_arr[sent].min()) if sent.any() else 0
    return SimResult(
        query_id=s.query_id[:n].copy(),
        sample_index=np.asarray(samples, dtype=np.int64),
        scheduled=np.asarray(sched, dtype=np.int64),
        issued=issued_arr,
        first=np.asarray(first, dtype=np.int64),
        done=np.asarray(done, dtype=np.int64),
        input_tokens=np.asarray(n_in, dtype=np.int64),
        output_tokens=np.asarray(n_out, dtype=np.int64),
        admitted=np.asarray(admitted, dtype=np.int64),
        rejected=np.frombuffer(bytes(rejected), dtype=np.uint8).astype(bool),
        scheduled_total=len(s),
        end_ns=end,
        issue_span_ns=span,
        ran_out_of_queries=False,
        events=events,
        wall_s=0.0,
    )


def _closed(s: Schedule, inp: np.ndarray, out: np.ndarray, cluster: Cluster,
            enc: np.ndarray | None = None) -> SimResult:
    """Closed schedules: each stream sends its next query when the previous completed."""
    spq = s.samples_per_query
    engines = cluster.engines
    busy = [False] * len(engines)
    kicked = [False] * len(engines)
    pending: list[StepOutcome | None] = [None] * len(engines)
    heap: list[tuple[int, int, int, int]] = []
    order = 0
    qid: list[int] = []
    samp: list[int] = []
    issued: list[int] = []
    first: list[int] = []
    done: list[int] = []
    admit: list[int] = []
    n_in: list[int] = []
    n_out: list[int] = []
    rej: list[bool] = []
    stream_of: list[int] = []  # per query
    left: list[int] = []  # per query: samples not yet done
    state = {"next": 0, "issued": 0, "stop": False, "ran_out": False}
    ready: list[int] = []  # streams whose query completed in the step being delivered
    events = 0
    end = 0

    def send(stream: int, t: int) -> None:
        nonlocal order
        q = state["next"]
        base = q * spq
        if not s.endless and base + spq > len(s):
            state["ran_out"] = True
            state["stop"] = True
            return
        state["next"] = q + 1
        stream_of.append(stream)
        left.append(spq)
        for j in range(spq):
            k = s.closed_sample(base + j)
            rid = len(samp)
            qid.append(q)
            samp.append(k)
            issued.append(t)
            first.append(-1)
            done.append(-1)
            admit.append(-1)
            rej.append(False)
            n_in.append(int(inp[k]))
            n_out.append(int(out[k]))
            e = cluster.route()
            engines[e].submit(rid, n_in[rid], n_out[rid],
                              encoder_flops=float(enc[k]) if enc is not None else 0.0)
            if not busy[e] and not kicked[e]:
                kicked[e] = True
                order += 1
                heapq.heappush(heap, (t, order, _KICK, e))
        state["issued"] += 1
        if state["issued"] >= s.min_queries and t >= s.min_duration_ns:
            state["stop"] = True
        if s.max_queries and state["issued"] >= s.max_queries:
            state["stop"] = True
        if s.max_duration_ns and t > s.max_duration_ns:
            state["stop"] = True

    for stream in range(max(1, s.streams)):
        if not state["stop"]:
            send(stream, 0)
    while heap:
        t, _, kind, e = heapq.heappop(heap)
        events += 1
        if kind == _KICK:
            kicked[e] = False
            if busy[e]:
                continue
        else:
            outcome = pending[e]
            assert outcome is not None
            for rid in outcome.first:
                first[rid] = t
            finished_rids = outcome.done + outcome.rejected
            for rid in outcome.rejected:
                rej[rid] = True
            for rid in finished_rids:
                cluster.finished(e)
                done[rid] = t
                end = t
                q = qid[rid]
                left[q] -= 1
                if left[q] == 0:
                    ready.append(stream_of[q])
        eng = engines[e]
        if eng.has_work:
            o = eng.advance()
            for rid in o.admitted:
                admit[rid] = t
            pending[e] = o
            busy[e] = True
            order += 1
            heapq.heappush(heap, (t + o.plan.cost.total_ns, order, _STEP, e))
        else:
            busy[e] = False
            pending[e] = None
        # A stream's next query leaves after its previous one's answer arrived, so it
        # misses the step its replica starts at that instant (as over a real client).
        for stream in ready:
            if not state["stop"]:
                send(stream, t)
        ready.clear()
    iss = np.asarray(issued, dtype=np.int64)
    return SimResult(
        query_id=np.asarray(qid, dtype=np.int64),
        sample_index=np.asarray(samp, dtype=np.int64),
        scheduled=iss.copy(),
        issued=iss,
        first=np.asarray(first, dtype=np.int64),
        done=np.asarray(done, dtype=np.int64),
        input_tokens=np.asarray(n_in, dtype=np.int64),
        output_tokens=np.asarray(n_out, dtype=np.int64),
        admitted=np.asarray(admit, dtype=np.int64),
        rejected=np.asarray(rej, dtype=bool),
        scheduled_total=len(samp),
        end_ns=end,
        issue_span_ns=int(iss.max() - iss.min()) if iss.size else 0,
        ran_out_of_queries=bool(state["ran_out"]),
        events=events,
        wall_s=0.0,
    )
