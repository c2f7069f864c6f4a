"""The calibrated efficiency parameters, per accelerator family and software stack.

``data/efficiency.csv`` is written by ``bench/calibrate.py`` (see
:mod:`tokenmark.sim.calibration`): one row per group with published results from at
least two systems, with ``mfu``, ``mbu``, the fixed step and per-sequence overheads,
the global size exponent, the serial fraction (how much of the shorter of a step's
compute and memory time is not overlapped), the systems fitted and the fit's median
error. Groups are (architecture, stack, round) - the round standing for the software
release, which the results CSV does not name - then (architecture, stack), the
architecture, the vendor, and everything (``*``). A deployment takes the most
specific row for its accelerator and stack (the newest round unless one is asked
for); the chosen row is recorded in
:attr:`~tokenmark.perfmodel.Efficiency.source`, so every result says which parameters
it used and where they came from.

Stacks are named ``trtllm``, ``vllm``, ``sglang``, ``other``; without one, a vendor's
reference stack is assumed (NVIDIA: TensorRT-LLM, which nearly every NVIDIA-based
submission uses; everyone else: vLLM).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import Accelerator, Efficiency
from tokenmark.perfmodel.hardware import read_data_csv

__all__ = ["STACKS", "EfficiencyRow", "default_stack", "efficiency_for", "efficiency_rows",
           "parse_stack"]

STACKS = ("trtllm", "vllm", "sglang", "other")


@dataclass(frozen=True, slots=True)
class EfficiencyRow:
    family: str  # accelerator architecture, a vendor name, or "*"
    stack: str  # one of STACKS or "*"
    round: str  # MLPerf round (software release) or "*"
    efficiency: Efficiency
    rows: int  # systems whose published results the parameters were fitted on
    median_ape: float  # median absolute percentage error of that fit (in sample)


def parse_stack(text: str) -> str:
    key = text.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"trt": "trtllm", "tensorrt": "trtllm", "tensorrtllm": "trtllm",
               "vllm": "vllm", "sglang": "sglang", "other": "other"}
    if key in aliases:
        return aliases[key]
    raise ConfigError(f"unknown software stack {text!r}; choose one of: {', '.join(STACKS)}")


def default_stack(acc: Accelerator) -> str:
    return "trtllm" if acc.vendor == "NVIDIA" else "vllm"


@cache
def efficiency_rows() -> tuple[EfficiencyRow, ...]:
    out = []
    for r in read_data_csv("efficiency.csv"):
        rnd = r.get("round") or "*"
        eff = Efficiency(
            mfu=float(r["mfu"]),
            mbu=float(r["mbu"]),
            step_overhead_ns=int(float(r["step_overhead_us"]) * 1000),
            seq_overhead_ns=int(float(r["seq_overhead_us"]) * 1000),
            size_exponent=float(r.get("size_exponent") or 0.0),
            serial_fraction=float(r.get("serial_fraction") or 0.0),
            source=(f"calibrated: {r['family']}/{r['stack']}/{rnd} ({r['rows']} systems' "
                    "published results)"),
        )
        out.append(EfficiencyRow(r["family"], r["stack"], rnd, eff, int(r["rows"]),
                                 float(r["median_ape"])))
    return tuple(out)


def efficiency_for(acc: Accelerator, stack: str | None = None,
                   round_: str | None = None) -> Efficiency:
    """The calibrated parameters for ``acc`` under ``stack`` (the vendor's reference
    stack when None) and software round (the newest fitted when None), falling back
    (architecture, stack) -> architecture -> vendor -> global."""
    st = stack or default_stack(acc)
    rows = efficiency_rows()
    own = sorted((r for r in rows if r.family == acc.architecture and r.stack == st
                  and r.round != "*" and (round_ is None or r.round == round_)),
                 key=lambda r: r.round)
    if own:
        return own[-1].efficiency
    for fam, stk in ((acc.architecture, st), (acc.architecture, "*"), (acc.vendor, "*"),
                     ("*", "*")):
        for row in rows:
            if row.family == fam and row.stack == stk and row.round == "*":
                return row.efficiency
    return replace(Efficiency(), source="default (no calibrated row)")
