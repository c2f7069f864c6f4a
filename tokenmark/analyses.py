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
top results              shows *used*; per accelerator divides by *used*
=======================  =====================================================

Which hardware a row is (:func:`tokenmark.hardware.hardware_of`): its accelerator model,
read through the spelling rules and alias table of :mod:`tokenmark.hardware` (so a
renamed accelerator pairs across rounds, and the aliases used are carried on each answer
to be shown), or, for a CPU-only result, its host processors (counted in sockets). A
system with more than one kind of accelerator is *heterogeneous*: it matches an
accelerator filter only when every part does, and it is never counted as one vendor's
(its vendor is ``mixed`` when the parts' vendors differ).

Direction: for throughputs higher is better; for latencies (``Latency (ms)``) lower is.
Ratios, spreads and gains are oriented so that a value above 1 (or a positive spread)
always means "better", and say so in their docstrings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenmark.errors import AnalysisError
from tokenmark.hardware import (
    MIXED,
    Alias,
    Hardware,
    alias_table,
    hardware_of,
    submitter_key,
    system_key,
)
from tokenmark.hardware import accelerator as accelerator_hardware
from tokenmark.resultrows import Label, ResultRow, Tier, round_order

__all__ = [
    "ANY",
    "DERIVED_NOTE",
    "REPRODUCIBILITY_TOLERANCE",
    "AcceleratorComparison",
    "Comparison",
    "GainPoint",
    "GainSeries",
    "Leaderboard",
    "LeaderboardEntry",
    "Pair",
    "Ratio",
    "ReproGroup",
    "Reproduction",
    "ScalingCurve",
    "ScalingPoint",
    "SystemRef",
    "Top",
    "TopEntry",
    "compare",
    "compare_accelerators",
    "leaderboard",
    "reproducibility",
    "scaling_efficiency",
    "software_gains",
    "top",
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
    submitter's result with its spread; ``aliases`` the name aliases that put rows in
    the group.
    """

    round: str
    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    vendor: ResultRow
    vendor_rows: tuple[ResultRow, ...]
    partners: tuple[Reproduction, ...]
    aliases: tuple[Alias, ...] = ()

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
    vendor: str | None = None,
) -> list[ReproGroup]:
    """Results of the same accelerator model and count from different submitters.

    Rows are grouped by round, benchmark, scenario, hardware (:mod:`tokenmark.hardware`:
    aliases applied) and accelerators used; a group is reported when the accelerator's
    vendor (``AMD`` for "AMD Instinct MI355X") and at least one other submitter have a
    VALID result in it. A heterogeneous system of two vendors has no vendor and is never
    a group. ``accelerator`` filters by a piece of the model's name or a family
    (``MI350-series``), ``vendor`` by the accelerator's vendor.
    """
    groups: dict[tuple[str, str, str, str, int], list[tuple[ResultRow, Hardware]]] = (
        defaultdict(list))
    for r in rows:
        hw, n = hardware_of(r)
        if (not _match(r, benchmark, scenario, division, round) or r.validity != "VALID"
                or not n or not hw.key or hw.cpu or hw.vendor in ("", MIXED)
                or (accelerator and not hw.matches(accelerator))
                or (vendor and hw.vendor != vendor.strip().lower())
                or (accelerators is not None and n != accelerators)):
            continue
        groups[(r.round, r.benchmark, r.scenario, hw.key, n)].append((r, hw))
    out: list[ReproGroup] = []
    for (rnd, bench, scen, _key, n), members in groups.items():
        vendor_name = members[0][1].vendor
        vendor_rows = [r for r, _ in members if submitter_key(r.submitter) == vendor_name]
        partner_rows = [r for r, _ in members if submitter_key(r.submitter) != vendor_name]
        if not vendor_rows or not partner_rows:
            continue
        base = _best(vendor_rows)
        partners = tuple(sorted(
            (Reproduction(r, _speedup(r.value, base.value, r.higher_is_better) - 1.0)
             for r in partner_rows),
            key=lambda p: (-p.spread, p.row.submitter, p.row.system_id)))
        out.append(ReproGroup(rnd, bench, scen, base.accelerator_model, n, base,
                              tuple(vendor_rows), partners,
                              tuple(alias_table(hw for _, hw in members))))
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
        found = [r for r in rows
                 if self.system_id in (r.system_id, system_key(r.submitter, r.system_id))
                 and (self.submitter is None
                      or submitter_key(r.submitter) == submitter_key(self.submitter))
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
                    "systems of different sizes misleads; normalise (--normalise) to "
                    "compare per-accelerator figures (derived) instead")
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
    """A family's points; ``submitters`` and ``availabilities`` say what it spans (one
    each unless the caller asked for ``any``), ``aliases`` the name aliases applied."""

    benchmark: str
    scenario: str
    round: str
    accelerator: str
    base: ScalingPoint
    points: tuple[ScalingPoint, ...]
    submitters: tuple[str, ...] = ()
    availabilities: tuple[str, ...] = ()
    aliases: tuple[Alias, ...] = ()


#: Passed as ``submitter`` or ``availability``: mix them on purpose.
ANY = "any"


def _one_of(values: Iterable[str], what: str, option: str) -> None:
    found = sorted(set(values))
    if len(found) > 1:
        raise AnalysisError(f"the family has results of {len(found)} {what}s "
                            f"({', '.join(found)}): name one with {option} (or "
                            f"{option} any to mix them on purpose)")


def scaling_efficiency(
    rows: Iterable[ResultRow],
    benchmark: str,
    scenario: str,
    *,
    accelerator: str,
    submitter: str | None = None,
    round: str | None = None,
    division: str | None = "closed",
    base: int | None = None,
    availability: str | None = None,
) -> ScalingCurve:
    """Scaling efficiency of one system family at different accelerator counts.

    The family is every VALID throughput result of ``benchmark``/``scenario`` whose
    hardware matches ``accelerator`` (a piece of the model's name or a family, every
    part of a heterogeneous system) and of ``submitter``, ``availability``, ``round``,
    ``division`` where given; it must span one accelerator model and one round, and,
    unless ``submitter``/``availability`` is :data:`ANY`, one submitter and one
    availability (software and tuning differ between them). N counts accelerators
    *used*; the base is the best result at the ``base`` count (default: the smallest
    count present). Every result at every count is a point.
    """
    pairs = [(r, hardware_of(r)[0]) for r in rows
             if _match(r, benchmark, scenario, division, round) and r.validity == "VALID"
             and (submitter in (None, ANY)
                  or submitter_key(r.submitter) == submitter_key(submitter or ""))
             and (availability in (None, ANY) or r.availability == availability)
             and r.accelerators_used]
    pairs = [(r, hw) for r, hw in pairs if hw.matches(accelerator) and not hw.cpu]
    family = [r for r, _ in pairs]
    if not family:
        raise AnalysisError(f"no {benchmark} {scenario} results of accelerator {accelerator!r}"
                            + (f" from {submitter}" if submitter not in (None, ANY) else ""))
    models = sorted({hw.key for _, hw in pairs})
    if len(models) > 1:
        names = sorted({hw.name for _, hw in pairs})
        raise AnalysisError(f"accelerator {accelerator!r} matches several models "
                            f"({'; '.join(names)}); name one more precisely")
    rounds = sorted({r.round for r in family}, key=round_order)
    if len(rounds) > 1:
        raise AnalysisError(f"the family has results in {', '.join(rounds)}; name one round "
                            "(software differs between rounds)")
    if not family[0].higher_is_better:
        raise AnalysisError(f"{benchmark} {scenario} reports a latency ({family[0].unit}); "
                            "scaling efficiency needs a throughput")
    if submitter is None:
        _one_of((r.submitter for r in family), "submitter", "--submitter")
    if availability is None:
        _one_of((r.availability or "unknown" for r in family), "availability",
                "--availability")
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
                        point(base_row), points,
                        tuple(sorted({r.submitter for r in family})),
                        tuple(sorted({r.availability or "unknown" for r in family})),
                        tuple(alias_table(hw for _, hw in pairs)))


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
    """One piece of hardware across rounds. ``accelerator`` is its normalised name
    (``(CPU only)``/``(heterogeneous)`` marked), ``aliases`` the name aliases that joined
    its rows (shown with the series)."""

    benchmark: str
    scenario: str
    accelerator: str
    accelerators: int
    points: tuple[GainPoint, ...]
    aliases: tuple[Alias, ...] = ()


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

    Hardware is what :func:`~tokenmark.hardware.hardware_of` says (accelerator model
    through the alias table, or the host processors of a CPU-only system) and its count
    (accelerators used, or sockets); a series is reported where it has VALID results in
    at least two rounds. ``submitter`` narrows to one submitter's results (e.g. the
    vendor's own tuning over time).
    """
    hw_rows: dict[tuple[str, int], dict[str, list[ResultRow]]] = defaultdict(
        lambda: defaultdict(list))
    names: dict[tuple[str, int], list[Hardware]] = defaultdict(list)
    for r in rows:
        hw, n = hardware_of(r)
        if (not _match(r, benchmark, scenario, division, None) or r.validity != "VALID"
                or not hw.key or not n or (accelerator and not hw.matches(accelerator))
                or (accelerators is not None and n != accelerators)
                or (submitter is not None
                    and submitter_key(r.submitter) != submitter_key(submitter))):
            continue
        hw_rows[(hw.key, n)][r.round].append(r)
        names[(hw.key, n)].append(hw)
    out: list[GainSeries] = []
    for (key, n), by_round in hw_rows.items():
        if len(by_round) < 2:
            continue
        ordered = sorted(by_round, key=round_order)
        bests = [_best(by_round[rnd]) for rnd in ordered]
        first = bests[0]
        points = tuple(GainPoint(rnd, b, _speedup(b.value, first.value, b.higher_is_better))
                       for rnd, b in zip(ordered, bests, strict=True))
        hws = names[(key, n)]
        out.append(GainSeries(benchmark, scenario, hws[-1].label, n, points,
                              tuple(alias_table(hws))))
    out.sort(key=lambda s: (s.accelerator, s.accelerators))
    return out


# -- one accelerator against another -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    """One benchmark and scenario: the best of B against the best of A (> 1: B better),
    from one submitter (``submitter``) or, when pairs may cross submitters, ``""``."""

    benchmark: str
    scenario: str
    submitter: str
    a: ResultRow
    b: ResultRow
    a_value: float
    b_value: float
    ratio: float


@dataclass(frozen=True, slots=True)
class AcceleratorComparison:
    """Accelerator B against accelerator A. ``unpaired`` lists best results of either
    that found no partner (another count, another submitter, no result of the other)."""

    a: str
    b: str
    round: str | None
    pairs: tuple[Pair, ...]
    unpaired: tuple[ResultRow, ...]
    same_submitter: bool
    normalised: bool
    aliases: tuple[Alias, ...] = ()


def compare_accelerators(
    rows: Iterable[ResultRow],
    a: str,
    b: str,
    *,
    round: str | None = None,
    benchmark: str | None = None,
    scenario: str | None = None,
    division: str | None = "closed",
    same_submitter: bool = True,
    normalise: bool = False,
) -> AcceleratorComparison:
    """Accelerator B against accelerator A, per benchmark and scenario both ran.

    Each side is the VALID results whose hardware matches ``a`` (or ``b``): every part
    of it, so a heterogeneous system is neither. Pairs are made per benchmark, scenario,
    round and, by default, submitter (the same submitter's software on both), of
    results at the same accelerator count, the best of each side; with ``normalise``
    counts may differ and per-accelerator figures (derived) are compared. Availability
    may differ (a preview system against an available one): it is shown, not judged.
    """
    side: dict[str, list[ResultRow]] = {"a": [], "b": []}
    found: list[Hardware] = []
    for r in rows:
        if not _match(r, benchmark, scenario, division, round) or r.validity != "VALID":
            continue
        hw, n = hardware_of(r)
        if not n or hw.cpu:
            continue
        for name, text in (("a", a), ("b", b)):
            if hw.matches(text):
                side[name].append(r)
                found.append(hw)
    if not side["a"] or not side["b"]:
        missing = a if not side["a"] else b
        raise AnalysisError(f"no results of accelerator {missing!r}"
                            + (f" in {round}" if round else ""))
    overlap = {r.key for r in side["a"]} & {r.key for r in side["b"]}
    if overlap:
        raise AnalysisError(f"{a!r} and {b!r} both match {len(overlap)} results; name the "
                            "accelerators more precisely")

    def group(r: ResultRow) -> tuple[str, str, str, str, int]:
        who = submitter_key(r.submitter) if same_submitter else ""
        return (r.round, r.benchmark, r.scenario, who,
                0 if normalise else (r.accelerators_used or 0))

    best: dict[str, dict[tuple[str, str, str, str, int], ResultRow]] = {"a": {}, "b": {}}
    for name in ("a", "b"):
        grouped: dict[tuple[str, str, str, str, int], list[ResultRow]] = defaultdict(list)
        for r in side[name]:
            grouped[group(r)].append(r)
        best[name] = {k: _best(v) for k, v in grouped.items()}
    pairs: list[Pair] = []
    for k in sorted(set(best["a"]) & set(best["b"]),
                    key=lambda k: (round_order(k[0]), k[1], k[2], k[3], k[4])):
        x, y = best["a"][k], best["b"][k]
        if x.unit != y.unit:
            continue
        if normalise:
            xv, yv = x.per_accelerator, y.per_accelerator
            if xv is None or yv is None:
                continue
        else:
            xv, yv = x.value, y.value
        pairs.append(Pair(k[1], k[2], x.submitter if same_submitter else "", x, y, xv, yv,
                          _speedup(yv, xv, x.higher_is_better)))
    used = {p.a.key for p in pairs} | {p.b.key for p in pairs}
    unpaired = tuple(r for name in ("a", "b") for r in best[name].values()
                     if r.key not in used)
    return AcceleratorComparison(a, b, round, tuple(pairs), unpaired, same_submitter,
                                 normalise, tuple(alias_table(found)))


# -- top results across benchmarks ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopEntry:
    """One of the top results: its rank, row, hardware and per-accelerator figure
    (derived)."""

    rank: int
    row: ResultRow
    hardware: Hardware
    accelerators: int | None
    per_accelerator: float | None


@dataclass(frozen=True, slots=True)
class Top:
    """The largest results in ``unit`` across benchmarks and scenarios.

    ``left_out`` counts matching rows not ranked, by reason (another unit, a
    heterogeneous system that a vendor or accelerator filter cannot count, ...).
    """

    unit: str
    rounds: tuple[str, ...]
    filters: tuple[tuple[str, str], ...]
    entries: tuple[TopEntry, ...]
    left_out: tuple[tuple[str, int], ...]
    aliases: tuple[Alias, ...] = ()
    derived_note: str = DERIVED_NOTE


def top(
    rows: Iterable[ResultRow],
    *,
    vendor: str | None = None,
    accelerator: str | None = None,
    submitter: str | None = None,
    benchmark: str | None = None,
    scenario: str | None = None,
    division: str | None = "closed",
    availability: str | None = None,
    round: str | None = None,
    unit: str = "Tokens/s",
    limit: int = 10,
) -> Top:
    """The largest VALID results across every benchmark and scenario, filtered.

    ``vendor`` is the accelerator vendor (``amd``, ``nvidia``, ``intel``; a CPU-only
    result counts for its processors' vendor); ``accelerator`` a piece of the model's
    name or a family (``MI350-series``); both require every part of a heterogeneous
    system to match, so an ``H200 + MI350X`` system is counted as neither vendor's.
    ``round`` ``None`` takes the newest round with a matching result, ``"all"`` every
    round. Only results in ``unit`` are ranked (figures in different units do not
    compare); the rest are counted in :attr:`Top.left_out`.
    """
    seen: list[tuple[ResultRow, Hardware, int | None, str]] = []
    vend = vendor.strip().lower() if vendor else None
    for r in rows:
        if (not _match(r, benchmark, scenario, division, None) or r.validity != "VALID"
                or (availability is not None and r.availability != availability)
                or (submitter is not None
                    and submitter_key(r.submitter) != submitter_key(submitter))):
            continue
        hw, n = hardware_of(r)
        why = ""
        if vend is not None and hw.vendor != vend:
            if not (hw.vendor == MIXED and any(p.vendor == vend for p in hw.parts)):
                continue
            why = f"heterogeneous, not only {vend}"
        elif accelerator is not None and not hw.matches(accelerator):
            if not (hw.heterogeneous and any(
                    accelerator_hardware(p.name).matches(accelerator) for p in hw.parts)):
                continue
            why = f"heterogeneous, not only {accelerator}"
        elif r.unit != unit:
            why = f"in {r.unit}, not {unit}"
        seen.append((r, hw, n, why))
    if round is None and seen:
        newest = max((k[0].round for k in seen), key=round_order)
        seen = [k for k in seen if k[0].round == newest]
    elif round not in (None, "all"):
        seen = [k for k in seen if k[0].round == round]
    left: dict[str, int] = defaultdict(int)
    ranked = []
    for r, hw, n, why in seen:
        if why:
            left[why] += 1
        else:
            ranked.append((r, hw, n))
    ranked.sort(key=lambda k: (-k[0].value, k[0].submitter, k[0].system_id, k[0].benchmark))
    entries = tuple(TopEntry(i + 1, r, hw, n, r.value / n if n and not hw.cpu else None)
                    for i, (r, hw, n) in enumerate(ranked[:max(limit, 0)]))
    filters = tuple((k, v) for k, v in (
        ("vendor", vendor), ("accelerator", accelerator), ("submitter", submitter),
        ("benchmark", benchmark), ("scenario", scenario), ("division", division),
        ("availability", availability)) if v)
    return Top(unit, tuple(sorted({k[0].round for k in seen}, key=round_order)), filters,
               entries, tuple(sorted(left.items())),
               tuple(alias_table(e.hardware for e in entries)))


# The name before issue 20.
scaling = scaling_efficiency
