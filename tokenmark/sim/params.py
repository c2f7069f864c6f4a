"""The calibrated efficiency parameters, per accelerator family and software stack.

``data/efficiency.csv`` is written by ``bench/calibrate.py`` (see
:mod:`tokenmark.sim.calibration`): one row per group with published results from at
least two systems, with ``mfu``, ``mbu``, the fixed step and per-sequence overheads,
the global size exponent, the serial fraction (how much of the shorter of a step's
compute and memory time is not overlapped), the systems fitted and the fit's median
error, the FP4 path's own efficiency where the group's rows can tell it (``fp4_mfu``:
FP4 matmuls reach ``mfu`` times it; blank, all of ``mfu``, elsewhere), once per
scenario: ``Offline`` (stage 1, fitted on Offline results), ``Server``
(stage 1's parameters at the vendor's Server speed: ``mfu`` and ``mbu`` times it, the
overheads over it) and ``Interactive`` (the bandwidth efficiency and serial fraction
chosen on its own rows where it has enough). Groups are
(architecture, stack, round) - the round standing for the software
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

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from tokenmark.errors import ConfigError
from tokenmark.perfmodel import Accelerator, Efficiency, accelerators
from tokenmark.perfmodel.hardware import read_data_csv

__all__ = ["STACKS", "EfficiencyRow", "default_stack", "efficiency_for", "efficiency_rows",
           "level_of", "model_levels", "model_speed", "parse_stack", "read_efficiency",
           "read_levels", "round_key"]

STACKS = ("trtllm", "vllm", "sglang", "other")


@dataclass(frozen=True, slots=True)
class EfficiencyRow:
    family: str  # accelerator architecture, a vendor name, or "*"
    stack: str  # one of STACKS or "*"
    round: str  # MLPerf round (software release) or "*"
    efficiency: Efficiency
    rows: int  # systems whose published results the parameters were fitted on
    median_ape: float  # median absolute percentage error of that fit (in sample)
    scenario: str = "*"  # Offline, Server or Interactive ("*": every scenario)


def round_key(name: str) -> tuple[int, ...]:
    """``"v6.1"`` -> ``(6, 1)``, for ordering MLPerf rounds."""
    return tuple(int(x) for x in name.strip().lower().lstrip("v").split(".") if x.isdigit())


def parse_stack(text: str) -> str:
    key = text.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    aliases = {"trt": "trtllm", "tensorrt": "trtllm", "tensorrtllm": "trtllm",
               "vllm": "vllm", "sglang": "sglang", "other": "other"}
    if key in aliases:
        return aliases[key]
    raise ConfigError(f"unknown software stack {text!r}; choose one of: {', '.join(STACKS)}")


def default_stack(acc: Accelerator) -> str:
    return "trtllm" if acc.vendor == "NVIDIA" else "vllm"


def _rows(records: tuple[dict[str, str], ...]) -> tuple[EfficiencyRow, ...]:
    out = []
    for r in records:
        rnd = r.get("round") or "*"
        sc = r.get("scenario") or "*"
        eff = Efficiency(
            mfu=float(r["mfu"]),
            mbu=float(r["mbu"]),
            step_overhead_ns=int(float(r["step_overhead_us"]) * 1000),
            seq_overhead_ns=int(float(r["seq_overhead_us"]) * 1000),
            size_exponent=float(r.get("size_exponent") or 0.0),
            serial_fraction=float(r.get("serial_fraction") or 0.0),
            fp4_mfu=float(r["fp4_mfu"]) if r.get("fp4_mfu") else None,
            source=(f"calibrated: {r['family']}/{r['stack']}/{rnd}"
                    f"{'' if sc == '*' else ' ' + sc} ({r['rows']} systems' "
                    "published results)"),
        )
        out.append(EfficiencyRow(r["family"], r["stack"], rnd, eff, int(r["rows"]),
                                 float(r["median_ape"]), sc))
    return tuple(out)


@cache
def efficiency_rows() -> tuple[EfficiencyRow, ...]:
    """The packaged ``data/efficiency.csv``."""
    return _rows(read_data_csv("efficiency.csv"))


def read_efficiency(path: Path) -> tuple[EfficiencyRow, ...]:
    """An ``efficiency.csv`` written by ``bench/calibrate.py`` elsewhere."""
    with open(path, encoding="utf-8", newline="") as fh:
        return _rows(tuple(csv.DictReader(fh)))


def _predecessor(acc: Accelerator, families: set[str]) -> str | None:
    """For an architecture without rows: its vendor's most capable architecture that
    has some (peak dense compute at the narrowest precision of any of its parts in
    accelerators.csv), the same software on the next generation - if ``acc`` is at
    least as capable, i.e. that architecture's successor (Vera Rubin after Blackwell
    Ultra). A lesser part of a newer line (the RTX PRO 6000, a 2 PFLOPS PCIe card of
    GDDR7, below Blackwell Ultra's 15) is no flagship's successor: its flagship's
    efficiencies, fitted for the flagship's peak, put it 50% low; it takes its vendor's
    pooled parameters (None)."""
    best: tuple[float, str] | None = None
    for a in accelerators().values():
        if a.vendor != acc.vendor or a.architecture not in families:
            continue
        peak = a.tflops_at(a.lowest_precision)
        if best is None or peak > best[0]:
            best = (peak, a.architecture)
    if best is None or acc.tflops_at(acc.lowest_precision) < best[0]:
        return None
    return best[1]


#: A model's level: log speed per (model, stack, round), and the new-model prior.
Levels = tuple[Mapping[tuple[str, str, str], float], float]


def level_of(levels: Levels, model: str, stack: str, round_: str | None = None
             ) -> tuple[float, str]:
    """The log speed of ``model`` on ``stack`` for a row of ``round_`` (None: the
    newest), and where it came from: the model's level in the newest round up to
    ``round_`` on that stack, else on any stack (the mean of that round's levels),
    else the new-model prior (a model without rows: the median level of the earlier
    models in their first round, see :mod:`tokenmark.sim.calibration`)."""
    table, new_model = levels

    def newest(keys: list[tuple[str, str, str]]) -> str | None:
        ok = [k[2] for k in keys if round_ is None or round_key(k[2]) <= round_key(round_)]
        return max(ok, key=round_key) if ok else None

    own = [k for k in table if k[0] == model and k[1] == stack]
    rnd = newest(own)
    if rnd is not None:
        return table[(model, stack, rnd)], f"{model}/{stack}/{rnd}"
    anys = [k for k in table if k[0] == model]
    rnd = newest(anys)
    if rnd is not None:
        vals = [table[k] for k in anys if k[2] == rnd]
        return sum(vals) / len(vals), f"{model}/*/{rnd}"
    return new_model, "new model"


def _levels(records: tuple[dict[str, str], ...]) -> Levels:
    table: dict[tuple[str, str, str], float] = {}
    new_model = 0.0
    for r in records:
        v = math.log(float(r["speed"]))
        if r["model"] == "*":
            new_model = v
        else:
            table[(r["model"], r["stack"], r["round"])] = v
    return table, new_model


@cache
def model_levels() -> Levels:
    """The packaged ``data/model_levels.csv``."""
    return _levels(read_data_csv("model_levels.csv"))


def read_levels(path: Path) -> Levels:
    """A ``model_levels.csv`` written by ``bench/calibrate.py`` elsewhere."""
    with open(path, encoding="utf-8", newline="") as fh:
        return _levels(tuple(csv.DictReader(fh)))


def model_speed(model: str, stack: str, round_: str | None = None,
                levels: Levels | None = None) -> tuple[float, str]:
    """How many times as fast as its group's parameters say ``model`` (models.csv's
    name) runs on ``stack`` (:func:`level_of` over the packaged levels or ``levels``)."""
    v, how = level_of(model_levels() if levels is None else levels, model, stack, round_)
    return math.exp(v), how


def efficiency_for(acc: Accelerator, stack: str | None = None,
                   round_: str | None = None, scenario: str | None = None,
                   rows: tuple[EfficiencyRow, ...] | None = None,
                   model: str | None = None, levels: Levels | None = None) -> Efficiency:
    """The calibrated parameters for ``acc`` under ``stack`` (the vendor's reference
    stack when None) and software round (the newest fitted when None), for a scenario:
    ``Offline`` takes the rows fitted on Offline results, ``Interactive`` its own, and
    everything else (Server, the open-loop patterns, the emulated server: ``None``) the
    Server rows. Falls back (architecture, stack) -> architecture -> (for an
    architecture without rows, as calibration does: the vendor's most capable
    architecture with rows, with the stack, then without, when ``acc`` is at least as
    capable: :func:`_predecessor`) -> vendor -> global; a file
    without a scenario column (``*``) serves every scenario. ``rows``: another table
    than the packaged one (:func:`read_efficiency`). With ``model`` (models.csv's
    name), the parameters at that model's speed on the stack (:func:`model_speed`;
    ``levels``: other levels than the packaged ones)."""
    st = stack or default_stack(acc)
    eff = _group_efficiency(acc, st, round_, scenario, rows)
    if model is None:
        return eff
    speed, how = model_speed(model, st, round_, levels)
    return eff.at_speed(speed, f"{eff.source}; model level {how} x{speed:.3f}")


def _group_efficiency(acc: Accelerator, st: str, round_: str | None, scenario: str | None,
                      rows: tuple[EfficiencyRow, ...] | None) -> Efficiency:
    want = scenario if scenario in ("Offline", "Interactive") else "Server"
    table = efficiency_rows() if rows is None else rows
    rows_ = tuple(r for r in table if r.scenario in (want, "*"))
    own = sorted((r for r in rows_ if r.family == acc.architecture and r.stack == st
                  and r.round != "*" and (round_ is None or r.round == round_)),
                 key=lambda r: (round_key(r.round), r.scenario == want))
    if own:
        return own[-1].efficiency
    levels = [(acc.architecture, st), (acc.architecture, "*")]
    if not any(r.family == acc.architecture for r in rows_):
        pre = _predecessor(acc, {r.family for r in rows_})
        if pre is not None:
            levels += [(pre, st), (pre, "*")]
    for fam, stk in (*levels, (acc.vendor, "*"), ("*", "*")):
        found = [r for r in rows_ if r.family == fam and r.stack == stk and r.round == "*"]
        if found:
            return max(found, key=lambda r: r.scenario == want).efficiency
    return replace(Efficiency(), source="default (no calibrated row)")
