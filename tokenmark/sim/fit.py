"""Fitting the efficiency parameters to published Offline throughputs.

In an Offline run every request is queued at time zero, so which requests each engine
step carries does not depend on how long the steps take: a simulated Offline run can
be recorded once, parameter-free, as each step's compute and memory times at 100%
efficiency for its two kernels (the linear layers: matmul FLOPs ``c0`` and weight reads
``m0``; attention: QK/AV FLOPs ``a0`` and KV-cache traffic ``k0``), its communication
time and its sequence count (an :class:`OfflineTrace`), and its throughput under any
parameters is then exact and vectorised:

    time(theta) = sum over steps of max(c0 / mfu, m0 / mbu)
                  + serial_fraction x min(c0 / mfu, m0 / mbu)
                  + max(a0 / mfu, k0 / mbu) + serial_fraction x min(a0 / mfu, k0 / mbu)
                  + comm + step_overhead + seq_overhead x seqs

:func:`fit_efficiency` finds the four parameters of one group (an accelerator family
and software stack) that minimise the mean squared log error of the predicted
throughputs over the group's rows, with a weak prior (``PRIOR``) that keeps the
parameters of a group with few rows near plausible values instead of letting them run
to the edges. The serial fraction (how much of the shorter of compute and memory
time is not overlapped) is held fixed in a fit: Offline steps say little about it, and
the calibration chooses it from the latency-bound rows. The two overheads may be given
and held too: on one model's rows they cannot be told from the compute (both grow with
the batch), so the calibration fits them only on rows of models of different sizes and
hands a group of one model size its next group's
(:func:`~tokenmark.sim.calibration.spans_sizes`). The optimiser is Nelder-Mead
over unconstrained coordinates (logit of the two fractions, log of the two
overheads); four dimensions and vectorised objectives make it fast and dependable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from tokenmark.perfmodel import Efficiency
from tokenmark.perfmodel.deployment import MAX_MFU, REFERENCE_HIDDEN

__all__ = ["PRIOR", "OfflineTrace", "fit_efficiency", "nelder_mead", "predict_rate"]

#: Prior centre and width per coordinate: (logit mfu, logit mbu, log step us, log seq us).
PRIOR = (
    (math.log(0.5 / 0.5), 1.5),
    (math.log(0.75 / 0.25), 1.5),
    (math.log(1500.0), 1.5),
    (math.log(2.0), 2.5),
)
#: Prior centre and width of ``log fp4_mfu``, where a group fits it: as fast as the
#: other precisions unless its rows say otherwise.
FP4_PRIOR = (0.0, 1.0)
PRIOR_WEIGHT = 0.01


class _Roofline:
    """``sum over steps of max(c / mfu, m / mbu) + serial x min(c / mfu, m / mbu)``
    for any parameters, exact in O(log steps): a step is compute-bound when its ratio
    ``c / m >= mfu / mbu``, so with the steps sorted by that ratio and prefix sums kept
    the sum is two look-ups."""

    def __init__(self, c: np.ndarray, m: np.ndarray) -> None:
        ratio = c / np.maximum(m, 1e-12)
        order = np.argsort(ratio, kind="stable")
        self.ratio = ratio[order]
        self._c_suffix = np.concatenate((np.cumsum(c[order][::-1])[::-1], [0.0]))
        self._m_prefix = np.concatenate(([0.0], np.cumsum(m[order])))

    def time(self, mfu: float, mbu: float, serial: float) -> float:
        k = int(np.searchsorted(self.ratio, mfu / mbu, side="left"))
        top = float(self._c_suffix[k]) / mfu + float(self._m_prefix[k]) / mbu
        if serial:  # the sum of the shorter sides is everything less the longer ones
            both = float(self._c_suffix[0]) / mfu + float(self._m_prefix[-1]) / mbu
            top += serial * (both - top)
        return top


class OfflineTrace:
    """One replica's parameter-free Offline run; ``units`` are the tokens (or samples)
    it produced and ``replicas`` how many such replicas the system has.

    Each step's kernels are its linear layers (compute ``compute0 - attn0``, weight
    reads ``memory0 - kv0``) and its attention (compute ``attn0``, KV-cache traffic
    ``kv0``), one after the other, each on its own roofline
    (:func:`~tokenmark.perfmodel.cost.kernel_time`); each part's sum over the steps is
    exact under any parameters (:class:`_Roofline`). ``fp4``: its matmuls run at FP4,
    so they reach ``mfu`` times the parameters' ``fp4_mfu``."""

    #: (a class default, so a trace pickled before the attribute existed reads False)
    fp4: bool = False

    def __init__(self, compute0: np.ndarray, memory0: np.ndarray, comm: np.ndarray,
                 seqs: np.ndarray, units: float, replicas: int, hidden: int,
                 attn0: np.ndarray | None = None, kv0: np.ndarray | None = None,
                 fp4: bool = False) -> None:
        self.fp4 = fp4
        self.units = units
        self.replicas = replicas
        self.hidden = hidden
        self.steps = int(compute0.shape[0])
        attn = np.zeros_like(compute0) if attn0 is None else attn0
        kv = np.zeros_like(memory0) if kv0 is None else kv0
        self._linear = _Roofline(np.maximum(compute0 - attn, 0.0), np.maximum(memory0 - kv, 0.0))
        self._attention = _Roofline(attn, kv)
        self._ratio = np.sort(compute0 / np.maximum(memory0, 1e-12), kind="stable")
        self._comm = float(comm.sum())
        self._seqs = float(seqs.sum())

    def time_ns(self, eff: Efficiency) -> float:
        return self.time_raw(eff.mfu_for(self.hidden, self.fp4), eff.mbu, eff.step_overhead_ns,
                             eff.seq_overhead_ns, eff.serial_fraction)

    def time_raw(self, mfu: float, mbu: float, step_ns: float, seq_ns: float,
                 serial: float = 0.0) -> float:
        top = self._linear.time(mfu, mbu, serial) + self._attention.time(mfu, mbu, serial)
        return top + self._comm + step_ns * self.steps + seq_ns * self._seqs

    def comm_share(self, eff: Efficiency) -> float:
        """The share of the run's time spent communicating under ``eff``."""
        t = self.time_ns(eff)
        return self._comm / t if t > 0 else 0.0

    def compute_bound_share(self, eff: Efficiency) -> float:
        """The share of steps whose compute time is at least their memory time."""
        k = int(np.searchsorted(self._ratio, eff.mfu_for(self.hidden, self.fp4) / eff.mbu,
                                side="left"))
        return 1.0 - k / self.steps if self.steps else 0.0


def predict_rate(trace: OfflineTrace, eff: Efficiency) -> float:
    """Units per second of the whole system (all replicas)."""
    t = trace.time_ns(eff)
    return trace.replicas * trace.units / (t / 1e9) if t > 0 else 0.0


def _efficiency(x: np.ndarray, base: Efficiency, source: str) -> Efficiency:
    return replace(base, mfu=1 / (1 + math.exp(-x[0])), mbu=1 / (1 + math.exp(-x[1])),
                   step_overhead_ns=int(math.exp(x[2]) * 1000),
                   seq_overhead_ns=int(math.exp(x[3]) * 1000), source=source,
                   fp4_mfu=math.exp(x[4]) if x.shape[0] > 4 else None)


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.5,
                iters: int = 600, tol: float = 1e-9) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (standard coefficients 1, 2, 0.5, 0.5)."""
    n = x0.shape[0]
    simplex = [x0.copy()] + [x0 + step * np.eye(n)[i] for i in range(n)]
    vals = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(vals)
        simplex = [simplex[i] for i in order]
        vals = [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        xr = centroid + (centroid - simplex[-1])
        fr = f(xr)
        if vals[0] <= fr < vals[-2]:
            simplex[-1], vals[-1] = xr, fr
            continue
        if fr < vals[0]:
            xe = centroid + 2.0 * (centroid - simplex[-1])
            fe = f(xe)
            simplex[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
            continue
        xc = centroid + 0.5 * (simplex[-1] - centroid)
        fc = f(xc)
        if fc < vals[-1]:
            simplex[-1], vals[-1] = xc, fc
            continue
        best = simplex[0]
        simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
        vals = [vals[0]] + [f(x) for x in simplex[1:]]
    out: np.ndarray = simplex[int(np.argmin(vals))]
    return out


def fit_efficiency(
    rows: Sequence[tuple[OfflineTrace | Sequence[OfflineTrace], float]],
    base: Efficiency,
    source: str,
    size_exponent: float = 0.0,
    mbu: float | None = None,
    serial_fraction: float = 0.0,
    overheads: tuple[float, float] | None = None,
    fp4: bool = False,
) -> tuple[Efficiency, float]:
    """Parameters for one group from ``(traces, published rate)`` pairs, with the global
    ``size_exponent``, the ``serial_fraction`` (and ``mbu``, and the step and
    per-sequence ``overheads`` in ns, when given) held fixed, and the fit's median
    absolute percentage error on those rows. A row may give several traces (the
    planner's candidate deployments): its prediction is the best of them under the
    parameters, as the planner would choose. With ``fp4`` the FP4 path's own
    efficiency ``fp4_mfu`` is fitted too (a fifth coordinate, ``log fp4_mfu``, under
    ``FP4_PRIOR``): the traces whose matmuls run at FP4 (:attr:`OfflineTrace.fp4`)
    reach ``mfu x fp4_mfu``; without it every trace reaches ``mfu``."""
    base = replace(base, size_exponent=size_exponent, serial_fraction=serial_fraction,
                   fp4_mfu=None)
    if not rows:
        return replace(base, source=source), 0.0
    groups = [[t] if isinstance(t, OfflineTrace) else list(t) for t, _ in rows]
    flat = [t for g in groups for t in g]
    owner = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
    sizes = [(t.hidden / REFERENCE_HIDDEN) ** size_exponent for t in flat]
    scale = np.array([t.replicas * t.units for t in flat])
    target = np.log(np.array([a for _, a in rows]))
    prior = (*PRIOR, FP4_PRIOR) if fp4 else PRIOR
    centre = np.array([c for c, _ in prior])
    width = np.array([w for _, w in prior])
    fp4_at = np.array([t.fp4 for t in flat])
    n_rows = len(rows)

    # the coordinates held fixed, by index
    fixed: dict[int, float] = {}
    if mbu is not None:
        fixed[1] = math.log(mbu / (1 - mbu))
    if overheads is not None:
        fixed[2] = math.log(max(overheads[0], 1.0) / 1000)
        fixed[3] = math.log(max(overheads[1], 1.0) / 1000)

    def pin(x: np.ndarray) -> np.ndarray:
        if fixed:
            x = x.copy()
            for i, v in fixed.items():
                x[i] = v
        return x

    def objective(x: np.ndarray) -> float:
        x = pin(x)
        if np.any(np.abs(x) > 30):
            return 1e9
        mfu = 1 / (1 + math.exp(-x[0]))
        mbu = 1 / (1 + math.exp(-x[1]))
        so = math.exp(x[2]) * 1000
        qo = math.exp(x[3]) * 1000
        r4 = math.exp(x[4]) if fp4 else 1.0
        t = np.array([tr.time_raw(min(MAX_MFU, mfu * (r4 if f4 else 1.0) * f), mbu, so, qo,
                                  serial_fraction)
                      for tr, f, f4 in zip(flat, sizes, fp4_at, strict=True)])
        each = np.log(scale / (t / 1e9))
        pred = np.full(n_rows, -np.inf)
        np.maximum.at(pred, owner, each)
        err = float(np.mean((pred - target) ** 2))
        return err + PRIOR_WEIGHT * float(np.sum(((x - centre) / width) ** 2))

    x = nelder_mead(objective, pin(centre))
    x = nelder_mead(objective, x, step=0.2)  # restart: Nelder-Mead can stall early
    eff = _efficiency(pin(x), base, source)
    if overheads is not None:  # exactly as given, not through the log coordinates
        eff = replace(eff, step_overhead_ns=int(overheads[0]),
                      seq_overhead_ns=int(overheads[1]))
    ape = [abs(max(predict_rate(t, eff) for t in g) / a - 1)
           for g, (_, a) in zip(groups, rows, strict=True)]
    return eff, float(np.median(ape))
