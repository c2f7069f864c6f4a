"""How a simulated run describes itself: the deployment as JSON and the human report.

``report_lines`` renders a results document (``results.json`` of a simulated run) as
the ``report.txt`` of its folder: what was simulated, the headline figures, both
verdicts with their findings, and the explanation (where each step's time went, the
queueing, the batch sizes reached and the binding limit).
"""

from __future__ import annotations

from typing import Any

from tokenmark.perfmodel import Deployment

__all__ = ["deployment_json", "report_lines"]

_PART_NAMES = {
    "prefill_compute": "prefill compute",
    "decode_compute": "decode compute",
    "weights_memory": "decode memory: weights",
    "kv_memory": "decode memory: KV cache",
    "communication": "communication",
    "overhead": "fixed overhead",
}


def deployment_json(d: Deployment) -> dict[str, Any]:
    acc = d.accelerator
    eff = d.efficiency
    pol = d.policy
    topo = d.topo
    return {
        "accelerator": acc.name,
        "architecture": acc.architecture,
        "model": d.model.name,
        "precision": d.precision.value,
        "compute_precision": d.compute_dtype.value,
        "kv_cache_precision": d.kv_dtype.value,
        "topology": {"nodes": topo.nodes, "per_node": topo.per_node,
                     "scale_up_domain": topo.domain,
                     "scale_out_gb_s_per_accelerator": topo.scale_out_gb_s,
                     "accelerators": topo.total},
        "parallelism": {"tp": d.tp, "dp": d.dp, "pp": d.pp, "ep": d.ep,
                        "replicas": d.replicas,
                        "accelerators_per_replica": d.per_replica,
                        "tp_spans_scale_up_domains": d.tp_spans_domains,
                        "replica_spans_scale_up_domains": d.replica_spans_domains},
        "speculative_decoding": ({"draft": d.model.draft.kind if d.model.draft else "",
                                  "tokens_drafted": d.spec_tokens,
                                  "tokens_per_step": d.tokens_per_step}
                                 if d.spec_tokens else None),
        "serving_policy": {"max_num_seqs": pol.max_num_seqs,
                           "max_batched_tokens": pol.max_batched_tokens,
                           "gpu_memory_utilization": pol.gpu_memory_utilization,
                           "prefill_replicas": pol.prefill_replicas,
                           "kv_capacity_tokens_per_replica": d.kv_capacity_tokens},
        "efficiency": {"mfu": eff.mfu, "mbu": eff.mbu,
                       # the share of mfu its FP4 matmuls reach (None: all of it)
                       "fp4_mfu": eff.fp4_mfu,
                       "step_overhead_us": eff.step_overhead_ns / 1000,
                       "seq_overhead_us": eff.seq_overhead_ns / 1000,
                       "link_efficiency": eff.link_efficiency,
                       "allreduce_latency_us": eff.allreduce_latency_ns / 1000,
                       "source": eff.source},
    }


def _ms(v: Any) -> str:
    return f"{float(v):,.2f}" if v is not None else "-"


def _at_fp4(dep: dict[str, Any]) -> str:
    """What the matmuls of a deployment computing at FP4 reach where the parameters give
    its FP4 path an efficiency of its own (``fp4_mfu``; absent from older documents)."""
    r4 = dep["efficiency"].get("fp4_mfu")
    if r4 is None or dep.get("compute_precision") != "fp4":
        return ""
    return f" (x{r4:.3f} at fp4: {dep['efficiency']['mfu'] * r4:.3f})"


def report_lines(doc: dict[str, Any]) -> list[str]:
    run = doc["run"]
    sim = doc["simulation"]
    dep = sim["deployment"]
    par = dep["parallelism"]
    topo = dep["topology"]
    ex = sim["explanation"]
    s = doc["summary"]
    lat = s["latency_ms"]
    lines = [
        f"tokenmark {doc['tokenmark_version']} - SIMULATED run (unverified: predicted by a "
        "performance model, not measured)",
        f"{run['benchmark']} {run['scenario']} ({run['round']} preset)",
        "",
        f"cluster: {topo['accelerators']} x {dep['accelerator']} ({topo['nodes']} "
        f"node{'s' if topo['nodes'] != 1 else ''} x {topo['per_node']}, scale-up domain "
        f"{topo['scale_up_domain']})",
        f"model: {dep['model']} at {dep['precision']} (KV cache {dep['kv_cache_precision']})",
        f"parallelism: {par['replicas']} replicas x tp {par['tp']} x dp {par.get('dp', 1)} x "
        f"pp {par['pp']} (ep {par['ep']})"
        + (f"; speculative decoding: {dep['speculative_decoding']['draft']} drafting "
           f"{dep['speculative_decoding']['tokens_drafted']}, "
           f"{dep['speculative_decoding']['tokens_per_step']:.2f} tokens a step"
           if dep.get("speculative_decoding") else ""),
        f"efficiency: mfu {dep['efficiency']['mfu']:.3f}{_at_fp4(dep)}, "
        f"mbu {dep['efficiency']['mbu']:.3f}, "
        f"step {dep['efficiency']['step_overhead_us']:.0f} us, per sequence "
        f"{dep['efficiency']['seq_overhead_us']:.1f} us ({dep['efficiency']['source']})",
    ]
    lines += [f"  plan: {n}" for n in sim["plan_notes"]]
    lg = s["loadgen"]
    lines += [
        "",
        f"tokens/s (LoadGen formula): {lg['tokens_per_second'] or 0:,.1f}",
        f"samples/s (LoadGen formula): {lg['samples_per_second']:,.2f}",
        f"requests completed / failed: {s['counts']['completed']} / {s['counts']['failed']}",
        f"TTFT ms p50/p99: {_ms(lat['ttft']['percentiles'].get('50'))} / "
        f"{_ms(lat['ttft']['percentiles'].get('99'))}",
        f"TPOT ms p50/p99: {_ms(lat['tpot']['percentiles'].get('50'))} / "
        f"{_ms(lat['tpot']['percentiles'].get('99'))}",
        "",
        "why (summed over all replicas' steps):",
        f"  {ex['steps']:,} steps, mean {ex['mean_step_ms']:.3f} ms; "
        f"{ex['compute_bound_share']:.0%} of busy time compute-bound",
    ]
    for k, share in ex["step_time_split"].items():
        per = ex["step_time_ms_per_step"][k]
        lines.append(f"  {_PART_NAMES[k]:<26} {share:6.1%}  ({per:.3f} ms per step)")
    q = ex["queueing_ms"]
    lines += [
        f"  queueing before admission ms: mean {q['mean']:.2f}, p50 {q['p50']:.2f}, "
        f"p99 {q['p99']:.2f}",
        f"  batch: max {ex['batch']['max']}, time-weighted mean "
        f"{ex['batch']['time_weighted_mean']:.1f}; KV cache peak "
        f"{ex['kv_peak_fraction']:.0%}",
        f"  binding limit: {ex['binding_limit']} - {ex['binding_limit_reason']}",
        "",
    ]
    for kind in ("mlperf", "tokenmark"):
        v = doc["verdicts"][kind]
        lines.append(f"{kind} verdict: {v['validity']}")
        for f in v["findings"]:
            mark = "pass" if f["passed"] else "FAIL"
            lines.append(f"  {mark} {f['rule']}: {f['observed']} (required {f['required']})")
    t = sim["timing_s"]
    lines += ["", f"simulated {sim['requests']:,} requests ({sim['events']:,} events) in "
              f"{t.get('simulate_s', 0):.2f} s of host time"]
    return lines
