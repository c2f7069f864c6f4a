"""The analyses the industry reads, as pure functions over :class:`ResultRow` sequences.

The CLI, the Python API and the web UI call these same functions on rows loaded from
the results database (or built any other way): no SQL, no files, no printing here.
Every result carries the rows it used, so a figure can always be traced to its sources.

Which accelerator count each analysis uses (see :mod:`tokenmark.resultrows`):

=======================  =====================================================
analysis                 count
=======================  =====================================================
leaderboard              tiers from nodes and accelerators per node; shows both
                         ``total_accelerators`` and ``accelerators_used``; the
                         derived per-accelerator column divides by *used*
reproducibility          groups by accelerator model and *used* count
generation over gen.     refuses unequal *used* counts unless ``normalise``; then
                         compares per-accelerator figures (*used*)
scaling efficiency       N and base are *used* counts
software gains           same accelerator model and *used* count across rounds
=======================  =====================================================

Direction: for throughputs higher is better; for latencies (``Latency (ms)``) lower is.
Ratios, spreads and gains are oriented so that a value above 1 (or a positive spread)
always means "better", and say so in their docstrings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenmark.errors import AnalysisError
from tokenmark.resultrows import (
    Label,
    ResultRow,
    Tier,
    accelerator_key,
    accelerator_vendor,
    round_order,
)

__all__ = [
    "DERIVED_NOTE",
    "REPRODUCIBILITY_TOLERANCE",
    "Comparison",
    "GainPoint",
    "GainSeries",
    "Leaderboard",
    "LeaderboardEntry",
    "Ratio",
    "ReproGroup",
    "Reproduction",
    "ScalingCurve",
    "ScalingPoint",
    "SystemRef",
    "compare",
    "leaderboard",
    "reproducibility",
    "scaling",
    "software_gains",
]

DERIVED_NOTE = ("per-accelerator figures are derived by tokenmark (result / accelerators "
                "used) and are not MLPerf results")
#: "Partners within 4%": the spread a reproduction is usually held to.
REPRODUCIBILITY_TOLERANCE = 0.04


def _better(a: ResultRow, b: ResultRow) -> bool:
    """Whether ``a`` beats ``b`` (same unit)."""
    return a.value > b.value if a.higher_is_better else a.value < b.value


def _best(rows: Iterable[ResultRow]) -> ResultRow:
    best: ResultRow | None = None
    for r in rows:
        if best is None or _better(r, best):
            best = r
    if best is None:
        raise AnalysisError("no result rows to choose from")
    return best


def _speedup(new: float, old: float, higher_is_better: bool) -> float:
    """How many times better ``new`` is than ``old`` (> 1: better)."""
    return new / old if higher_is_better else old / new


def _match(row: ResultRow, benchmark: str | None, scenario: str | None,
           division: str | None, round_: str | None) -> bool:
    return ((benchmark is None or row.benchmark == benchmark)
            and (scenario is None or row.scenario.lower() == scenario.lower())
            and (division is None or row.division == division)
            and (round_ is None or row.round == round_))


# -- leaderboard ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderboardEntry:
    """One place on a tier's board. ``per_accelerator`` is derived (see DERIVED_NOTE)."""

    rank: int
    row: ResultRow
    per_accelerator: float | None


@dataclass(frozen=True, slots=True)
class Leaderboard:
    """The ranked results of one benchmark and scenario, per tier.

    ``excluded`` lists rows that matched the benchmark, scenario, division,
    availability and round but were left off, each with the reason (an INVALID result,
    a unit different from the board's).
    """

    benchmark: str
    scenario: str
    division: str | None
    availability: str | None
    rounds: tuple[str, ...]
    unit: str
    single_node: tuple[LeaderboardEntry, ...]
    multi_node: tuple[LeaderboardEntry, ...]
    excluded: tuple[tuple[ResultRow, str], ...]
    derived_note: str = DERIVED_NOTE

    def tier(self, tier: Tier) -> tuple[LeaderboardEntry, ...]:
        return self.single_node if tier is Tier.SINGLE_NODE else self.multi_node


def leaderboard(
    rows: Iterable[ResultRow],
    benchmark: str,
    scenario: str,
    *,
    division: str | None = "closed",
    availability: str | None = "available",
    round: str | None = None,
    labels: Iterable[Label] = (Label.OFFICIAL, Label.UNVERIFIED),
    category: str | None = None,
) -> Leaderboard:
    """Rank the results of ``benchmark`` / ``scenario`` in the two tiers.

    ``division``, ``availability`` and ``category`` (``datacenter``/``edge``; a system of
    both counts as either) filter exactly (``None``: any). ``round`` names
    one round, ``"all"`` keeps every round, and ``None`` (the default) takes the newest
    round that has a matching result, so a board never mixes rounds by accident.
    Only VALID results are ranked; the board's unit is the most common among the
    matching rows (one benchmark and scenario have one unit per round).
    """
    wanted = set(labels)
    matching = [r for r in rows
                if _match(r, benchmark, scenario, division, None)
                and (availability is None or r.availability == availability)
                and (category is None or category in (r.category or "").split(","))
                and r.label in wanted]
    if round is None and matching:
        newest = max((r.round for r in matching), key=round_order)
        matching = [r for r in matching if r.round == newest]
    elif round not in (None, "all"):
        matching = [r for r in matching if r.round == round]
    excluded: list[tuple[ResultRow, str]] = []
    units: dict[str, int] = defaultdict(int)
    for r in matching:
        units[r.unit] += 1
    unit = max(units, key=lambda u: units[u]) if units else ""
    ranked: dict[Tier, list[ResultRow]] = {Tier.SINGLE_NODE: [], Tier.MULTI_NODE: []}
    for r in matching:
        if r.validity != "VALID":
            excluded.append((r, f"result is {r.validity}"))
        elif r.unit != unit:
            excluded.append((r, f"unit {r.unit!r} differs from the board's {unit!r}"))
        else:
            ranked[r.tier].append(r)

    def board(tier_rows: list[ResultRow]) -> tuple[LeaderboardEntry, ...]:
        sign = -1.0 if not tier_rows or tier_rows[0].higher_is_better else 1.0
        ordered = sorted(tier_rows, key=lambda r: (sign * r.value, r.submitter, r.system_id))
        return tuple(LeaderboardEntry(i + 1, r, r.per_accelerator)
                     for i, r in enumerate(ordered))

    return Leaderboard(
        benchmark=benchmark,
        scenario=scenario,
        division=division,
        availability=availability,
        rounds=tuple(sorted({r.round for r in matching}, key=round_order)),
        unit=unit,
        single_node=board(ranked[Tier.SINGLE_NODE]),
        multi_node=board(ranked[Tier.MULTI_NODE]),
        excluded=tuple(excluded),
    )


# -- reproducibility -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reproduction:
    """A partner's result and its spread against the vendor's: positive is better.

    ``spread = partner / vendor - 1`` for throughputs, ``vendor / partner - 1`` for
    latencies.
    """

    row: ResultRow
    spread: float


@dataclass(frozen=True, slots=True)
class ReproGroup:
    """One accelerator model at one count, one benchmark and scenario, one round.

    ``vendor`` is the accelerator vendor's own best result in the group (the baseline);
    ``vendor_rows`` all of the vendor's results there; ``partners`` every other
    submitter's result with its spread.
    """

    round: str
    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    vendor: ResultRow
    vendor_rows: tuple[ResultRow, ...]
    partners: tuple[Reproduction, ...]

    @property
    def max_abs_spread(self) -> float:
        return max(abs(p.spread) for p in self.partners)

    def within(self, tolerance: float = REPRODUCIBILITY_TOLERANCE) -> bool:
        """Whether every partner lands within ``tolerance`` of the vendor."""
        return self.max_abs_spread <= tolerance


def reproducibility(
    rows: Iterable[ResultRow],
    *,
    benchmark: str | None = None,
    scenario: str | None = None,
    accelerator: str | None = None,
    accelerators: int | None = None,
    division: str | None = "closed",
    round: str | None = None,
) -> list[ReproGroup]:
    """Results of the same accelerator model and count from different submitters.

    Rows are grouped by round, benchmark, scenario, accelerator model
    (:func:`~tokenmark.resultrows.accelerator_key`) and accelerators used; a group is
    reported when the vendor (the submitter named as the model's first word, e.g.
    ``AMD`` for "AMD Instinct MI355X") and at least one other submitter have a VALID
    result in it. ``accelerator`` filters by a substring of the model key.
    """
    groups: dict[tuple[str, str, str, str, int], list[ResultRow]] = defaultdict(list)
    needle = accelerator_key(accelerator) if accelerator else None
    for r in rows:
        n = r.accelerators_used
        key = accelerator_key(r.accelerator_model)
        if (not _match(r, benchmark, scenario, division, round) or r.validity != "VALID"
                or not n or not key or (needle and needle not in key)
                or (accelerators is not None and n != accelerators)):
            continue
        groups[(r.round, r.benchmark, r.scenario, key, n)].append(r)
    out: list[ReproGroup] = []
    for (rnd, bench, scen, _key, n), members in groups.items():
        vendor_name = accelerator_vendor(members[0].accelerator_model)
        vendor_rows = [r for r in members if r.submitter.lower() == vendor_name]
        partner_rows = [r for r in members if r.submitter.lower() != vendor_name]
        if not vendor_rows or not partner_rows:
            continue
        base = _best(vendor_rows)
        partners = tuple(sorted(
            (Reproduction(r, _speedup(r.value, base.value, r.higher_is_better) - 1.0)
             for r in partner_rows),
            key=lambda p: (-p.spread, p.row.submitter, p.row.system_id)))
        out.append(ReproGroup(rnd, bench, scen, base.accelerator_model, n, base,
                              tuple(vendor_rows), partners))
    out.sort(key=lambda g: (round_order(g.round), g.benchmark, g.scenario, g.accelerator,
                            g.accelerators))
    return out


# -- generation over generation ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SystemRef:
    """A system as ``[ROUND/][SUBMITTER/]SYSTEM_ID`` (e.g. ``v6.0/AMD/8xMI355X_2xEPYC_9575F``)."""

    system_id: str
    submitter: str | None = None
    round: str | None = None

    @classmethod
    def parse(cls, text: str) -> SystemRef:
        parts = [p for p in text.strip().split("/") if p]
        if not parts or len(parts) > 3:
            raise AnalysisError(f"cannot read system {text!r}: write [ROUND/][SUBMITTER/]"
                                "SYSTEM_ID, e.g. v6.0/AMD/8xMI355X_2xEPYC_9575F")
        system_id = parts[-1]
        rest = parts[:-1]
        rnd = rest.pop(0) if rest and round_order(rest[0]) != (-1, -1) else None
        submitter = rest.pop(0) if rest else None
        if rest:
            raise AnalysisError(f"cannot read system {text!r}: write [ROUND/][SUBMITTER/]SYSTEM_ID")
        if rnd is not None and not rnd.startswith("v"):
            rnd = "v" + rnd
        return cls(system_id, submitter, rnd)

    def select(self, rows: Iterable[ResultRow]) -> list[ResultRow]:
        """This system's rows; :class:`AnalysisError` if none or several systems match."""
        found = [r for r in rows if r.system_id == self.system_id
                 and (self.submitter is None or r.submitter == self.submitter)
                 and (self.round is None or r.round == self.round)]
        systems = sorted({r.system_ref for r in found})
        if not systems:
            raise AnalysisError(f"no results of system {self}; list systems with "
                                "'tokenmark results --benchmark ...'")
        if len(systems) > 1:
            raise AnalysisError(f"system {self} is ambiguous: it matches {', '.join(systems)}; "
                                "name it as ROUND/SUBMITTER/SYSTEM_ID")
        return found

    def __str__(self) -> str:
        return "/".join(p for p in (self.round, self.submitter, self.system_id) if p)


@dataclass(frozen=True, slots=True)
class Ratio:
    """System B against system A on one benchmark and scenario (> 1: B is better).

    ``a_value`` and ``b_value`` are the figures compared: the results themselves, or
    per-accelerator figures (derived) when ``normalised``.
    """

    benchmark: str
    scenario: str
    a: ResultRow
    b: ResultRow
    a_value: float
    b_value: float
    ratio: float
    normalised: bool


@dataclass(frozen=True, slots=True)
class Comparison:
    a: str
    b: str
    ratios: tuple[Ratio, ...]
    only_a: tuple[ResultRow, ...]
    only_b: tuple[ResultRow, ...]
    normalised: bool


def compare(
    rows: Sequence[ResultRow],
    a: SystemRef | str,
    b: SystemRef | str,
    *,
    benchmark: str | None = None,
    scenario: str | None = None,
    normalise: bool = False,
) -> Comparison:
    """The ratio of system B to system A per benchmark and scenario both ran.

    Refuses (:class:`AnalysisError`) systems with different accelerator counts unless
    ``normalise``, which compares per-accelerator figures instead (labelled derived).
    Where a system has several results for one benchmark and scenario (open-division
    variants mapped to one benchmark) its best is used; ``only_a``/``only_b`` list the
    results without a counterpart.
    """
    ra = a if isinstance(a, SystemRef) else SystemRef.parse(a)
    rb = b if isinstance(b, SystemRef) else SystemRef.parse(b)

    def by_key(ref: SystemRef) -> dict[tuple[str, str], ResultRow]:
        sel = [r for r in ref.select(rows) if _match(r, benchmark, scenario, None, None)
               and r.validity == "VALID"]
        grouped: dict[tuple[str, str], list[ResultRow]] = defaultdict(list)
        for r in sel:
            grouped[(r.benchmark, r.scenario)].append(r)
        return {k: _best(v) for k, v in grouped.items()}

    rows_a, rows_b = by_key(ra), by_key(rb)
    common = sorted(set(rows_a) & set(rows_b))
    if not normalise:
        for k in common:
            na, nb = rows_a[k].accelerators_used, rows_b[k].accelerators_used
            if na != nb:
                raise AnalysisError(
                    f"{ra} uses {na} accelerators and {rb} uses {nb}: a ratio of whole "
                    "systems of different sizes misleads; pass normalise=True "
                    "(--normalise) to compare per-accelerator figures (derived)")
    ratios: list[Ratio] = []
    for k in common:
        x, y = rows_a[k], rows_b[k]
        if x.unit != y.unit:
            raise AnalysisError(f"{k[0]} {k[1]}: {ra} reports {x.unit} and {rb} {y.unit}")
        if normalise:
            xv, yv = x.per_accelerator, y.per_accelerator
            if xv is None or yv is None:
                raise AnalysisError(f"{k[0]} {k[1]}: no per-accelerator figure (a latency, or "
                                    "an unknown accelerator count) to normalise")
        else:
            xv, yv = x.value, y.value
        ratios.append(Ratio(k[0], k[1], x, y, xv, yv, _speedup(yv, xv, x.higher_is_better),
                            normalise))
    return Comparison(
        a=str(ra), b=str(rb), ratios=tuple(ratios),
        only_a=tuple(rows_a[k] for k in sorted(set(rows_a) - set(rows_b))),
        only_b=tuple(rows_b[k] for k in sorted(set(rows_b) - set(rows_a))),
        normalised=normalise,
    )


# -- scaling efficiency --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScalingPoint:
    """One system of the family: ``efficiency = (T_N / N) / (T_base / base)``."""

    row: ResultRow
    accelerators: int
    per_accelerator: float
    efficiency: float


@dataclass(frozen=True, slots=True)
class ScalingCurve:
    benchmark: str
    scenario: str
    round: str
    accelerator: str
    base: ScalingPoint
    points: tuple[ScalingPoint, ...]


def scaling(
    rows: Iterable[ResultRow],
    benchmark: str,
    scenario: str,
    *,
    accelerator: str,
    submitter: str | None = None,
    round: str | None = None,
    division: str | None = "closed",
    base: int | None = None,
) -> ScalingCurve:
    """Scaling efficiency of one system family at different accelerator counts.

    The family is every VALID throughput result of ``benchmark``/``scenario`` whose
    accelerator model key contains ``accelerator`` (and of ``submitter``, ``round``,
    ``division`` where given); it must span one accelerator model and one round.
    N counts accelerators *used*; the base is the best result at the ``base`` count
    (default: the smallest count present). Every result at every count is a point.
    """
    needle = accelerator_key(accelerator)
    family = [r for r in rows
              if _match(r, benchmark, scenario, division, round) and r.validity == "VALID"
              and (submitter is None or r.submitter == submitter)
              and needle and needle in accelerator_key(r.accelerator_model)
              and r.accelerators_used]
    if not family:
        raise AnalysisError(f"no {benchmark} {scenario} results of accelerator {accelerator!r}"
                            + (f" from {submitter}" if submitter else ""))
    models = sorted({accelerator_key(r.accelerator_model) for r in family})
    if len(models) > 1:
        names = sorted({r.accelerator_model for r in family})
        raise AnalysisError(f"accelerator {accelerator!r} matches several models "
                            f"({'; '.join(names)}); name one more precisely")
    rounds = sorted({r.round for r in family}, key=round_order)
    if len(rounds) > 1:
        raise AnalysisError(f"the family has results in {', '.join(rounds)}; name one round "
                            "(software differs between rounds)")
    if not family[0].higher_is_better:
        raise AnalysisError(f"{benchmark} {scenario} reports a latency ({family[0].unit}); "
                            "scaling efficiency needs a throughput")
    counts = sorted({r.accelerators_used or 0 for r in family})
    base_n = counts[0] if base is None else base
    if base_n not in counts:
        raise AnalysisError(f"no result at {base_n} accelerators; counts present: "
                            f"{', '.join(map(str, counts))}")
    base_row = _best(r for r in family if r.accelerators_used == base_n)
    base_per = base_row.value / base_n

    def point(r: ResultRow) -> ScalingPoint:
        n = r.accelerators_used or 0
        return ScalingPoint(r, n, r.value / n, (r.value / n) / base_per)

    points = tuple(sorted((point(r) for r in family),
                          key=lambda p: (p.accelerators, -p.row.value, p.row.system_id)))
    return ScalingCurve(benchmark, scenario, rounds[0], base_row.accelerator_model,
                        point(base_row), points)


# -- software gains ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GainPoint:
    """The best result of the hardware in one round; ``gain`` against the first round
    (> 1: better)."""

    round: str
    row: ResultRow
    gain: float


@dataclass(frozen=True, slots=True)
class GainSeries:
    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    points: tuple[GainPoint, ...]


def software_gains(
    rows: Iterable[ResultRow],
    benchmark: str,
    scenario: str,
    *,
    accelerator: str | None = None,
    accelerators: int | None = None,
    submitter: str | None = None,
    division: str | None = "closed",
) -> list[GainSeries]:
    """The same hardware across rounds: its best result per round against its first.

    Hardware is an accelerator model key and a count of accelerators used; a series is
    reported where it has VALID results in at least two rounds. ``submitter`` narrows
    to one submitter's results (e.g. the vendor's own tuning over time).
    """
    needle = accelerator_key(accelerator) if accelerator else None
    hw: dict[tuple[str, int], dict[str, list[ResultRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key, n = accelerator_key(r.accelerator_model), r.accelerators_used
        if (not _match(r, benchmark, scenario, division, None) or r.validity != "VALID"
                or not key or not n or (needle and needle not in key)
                or (accelerators is not None and n != accelerators)
                or (submitter is not None and r.submitter != submitter)):
            continue
        hw[(key, n)][r.round].append(r)
    out: list[GainSeries] = []
    for (_key, n), by_round in hw.items():
        if len(by_round) < 2:
            continue
        ordered = sorted(by_round, key=round_order)
        bests = [_best(by_round[rnd]) for rnd in ordered]
        first = bests[0]
        points = tuple(GainPoint(rnd, b, _speedup(b.value, first.value, b.higher_is_better))
                       for rnd, b in zip(ordered, bests, strict=True))
        out.append(GainSeries(benchmark, scenario, first.accelerator_model, n, points))
    out.sort(key=lambda s: (s.accelerator, s.accelerators))
    return out
