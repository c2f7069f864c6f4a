"""The table of published LLM results that ships with tokenmark, and its refreshes.

``tokenmark/data/published.csv.gz`` holds every published LLM result of the rounds it
was made from (one row per result, :data:`COLUMNS`), so that the analyses answer about
published rounds on a fresh install, before anything is imported. It is made by
``tokenmark published refresh`` from official summary tables and result trees
(:func:`build`: the tree's row wins where both hold a result) and says how it was made
in ``#`` lines above the CSV header: the date, the tokenmark version, each source file
with its SHA-256 and counts, and the rows per round. Values are written exactly
(``repr`` of each float), so a row read back equals the row written.

Reading is the standard library only (gzip, csv) and takes a few milliseconds per
thousand rows; a refreshed table in the user's data folder, or the file
``$TOKENMARK_PUBLISHED`` names, is read instead of the packaged one by
:mod:`tokenmark.api.results`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tokenmark.resultrows import Label, ResultRow, merge_all, round_order

if TYPE_CHECKING:
    import datetime as dt

__all__ = [
    "COLUMNS",
    "PACKAGED",
    "Build",
    "PublishedTable",
    "build",
    "load",
    "packaged_path",
    "write",
]

#: The packaged file's name inside ``tokenmark/data``.
PACKAGED: Final = "published.csv.gz"
_TITLE: Final = "tokenmark published MLPerf Inference LLM results"


def _opt_s(v: str) -> str | None:
    return v or None


def _opt_i(v: str) -> int | None:
    return int(v) if v else None


def _opt_f(v: str) -> float | None:
    return float(v) if v else None


def _bool(v: str) -> bool:
    return v == "1"


def _acc(v: str) -> dict[str, float]:
    return {str(k): float(x) for k, x in json.loads(v).items()} if v else {}


def _out(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True, separators=(",", ":")) if v else ""
    return str(v)


#: Every column of the table: (ResultRow field, how a cell is read).
COLUMNS: Final[tuple[tuple[str, Callable[[str], Any]], ...]] = (
    ("round", str), ("division", str), ("submitter", str), ("system_id", str),
    ("benchmark", str), ("benchmark_folder", str), ("scenario", str), ("value", float),
    ("unit", str), ("published_unit", str), ("metric", str), ("label", Label),
    ("validity", str), ("inferred", _bool), ("category", _opt_s), ("availability", _opt_s),
    ("system_name", str), ("accelerator_model", str), ("accelerators_per_node", _opt_i),
    ("nodes", _opt_i), ("accelerators_stated", _opt_i), ("accelerator_note", str),
    ("host_processor", str), ("host_processors_per_node", _opt_i),
    ("summary_value", _opt_f), ("table_value", _opt_f), ("power_value", _opt_f),
    ("power_unit", _opt_s), ("accuracy", _acc), ("weight_data_types", str),
    ("framework", str), ("source", str), ("source_path", str), ("quirks", str),
    ("content_hash", str),
)
_NAMES: Final = tuple(name for name, _ in COLUMNS)
_INDEX: Final = {name: i for i, name in enumerate(_NAMES)}


class PublishedTable:
    """A published-results table as read: its ``#`` provenance lines and its rows.

    The cells are parsed when the file is read; a row becomes a :class:`ResultRow` only
    when asked for (:meth:`select` builds just the rows that match, which is what keeps
    a command's start short).
    """

    def __init__(self, path: str, cells: Sequence[Sequence[str]],
                 provenance: Sequence[str]) -> None:
        self.path = path
        self.provenance = tuple(provenance)
        self._cells = cells
        self._built: dict[int, ResultRow] = {}

    def _row(self, i: int) -> ResultRow:
        row = self._built.get(i)
        if row is None:
            cells = self._cells[i]
            try:
                row = ResultRow(**{name: read(cell) for (name, read), cell
                                   in zip(COLUMNS, cells, strict=True)})
            except (ValueError, json.JSONDecodeError) as exc:
                raise ValueError(f"{self.path}: row {i + 1}: {exc}") from None
            self._built[i] = row
        return row

    @property
    def rows(self) -> tuple[ResultRow, ...]:
        return tuple(self._row(i) for i in range(len(self._cells)))

    def __len__(self) -> int:
        return len(self._cells)

    def select(self, filters: Mapping[str, str | None]) -> list[ResultRow]:
        """The rows whose columns equal ``filters`` (``None``: any; ``scenario`` in any
        case); filters on fields that are not columns raise :class:`ValueError`."""
        tests = []
        for name, value in filters.items():
            if value is None:
                continue
            if name not in _INDEX:
                raise ValueError(f"cannot filter published results by {name!r}")
            tests.append((_INDEX[name], str(value).lower() if name == "scenario" else value,
                          name == "scenario"))
        out = []
        for i, cells in enumerate(self._cells):
            if all((cells[j].lower() if fold else cells[j]) == want
                   for j, want, fold in tests):
                out.append(self._row(i))
        return out

    @property
    def made(self) -> str:
        """When it was made (the ``made:`` line), or ``""``."""
        for line in self.provenance:
            if line.startswith("made: "):
                return line.removeprefix("made: ").split(" ", 1)[0]
        return ""

    def benchmarks(self) -> frozenset[str]:
        """The benchmark names the table holds (the checker's names)."""
        return frozenset(cells[_INDEX["benchmark"]] for cells in self._cells)

    def per_round(self) -> dict[str, int]:
        counts = Counter(cells[0] for cells in self._cells)
        return {r: counts[r] for r in sorted(counts, key=round_order)}


def packaged_path() -> Path:
    """The table that ships inside the package (``tokenmark/data``; a file of the
    installed package, found without importlib.resources, which costs a command's
    start 60 ms)."""
    return Path(__file__).resolve().parents[1] / "data" / PACKAGED


def load(path: str | os.PathLike[str]) -> PublishedTable:
    """Read a table written by :func:`write`; :class:`ValueError` naming the line when
    it is not one."""
    p = Path(path)
    with gzip.open(p, "rt", encoding="utf-8", newline="") as f:
        text = f.read()
    provenance: list[str] = []
    body_start = 0
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        provenance.append(line[1:].strip())
        body_start += len(line)
    reader = csv.reader(io.StringIO(text[body_start:]))
    header = next(reader, None)
    if header is None or tuple(header) != _NAMES:
        raise ValueError(f"{p}: not a tokenmark published-results table (its header is not "
                         f"{','.join(_NAMES[:4])},...); rebuild it with 'tokenmark published "
                         "refresh'")
    rows = []
    for n, cells in enumerate(reader, start=len(provenance) + 2):
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{p}: line {n} has {len(cells)} cells, not {len(COLUMNS)}")
        rows.append(cells)
    return PublishedTable(str(p), rows, provenance)


def write(path: str | os.PathLike[str], rows: Iterable[ResultRow],
          provenance: Sequence[str]) -> int:
    """Write ``rows`` (sorted by key) under the ``provenance`` lines; gzip with no
    time stamp, so the same rows and lines give the same bytes. Returns the size."""
    buf = io.StringIO()
    for line in provenance:
        buf.write(f"# {line}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_NAMES)
    for r in sorted(rows, key=lambda r: r.key):
        w.writerow([_out(getattr(r, name)) for name in _NAMES])
    data = gzip.compress(buf.getvalue().encode("utf-8"), compresslevel=9, mtime=0)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(p)
    return len(data)


@dataclass
class Build:
    """What :func:`build` made: the rows to write, their provenance, and what it left
    out (``skipped``: reason -> count) or found different (``differences``)."""

    rows: list[ResultRow]
    provenance: list[str]
    skipped: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Source:
    """One file or folder the table is made from, as read (rows and file counts)."""

    path: str
    rows: Sequence[ResultRow]
    describe: str


def source_line(path: Path, entries: int, rows: int, llm: int, kind: str) -> str:
    """A provenance line for one source: name, SHA-256 (of a file), what it held."""
    import hashlib  # here, not at import: reading the table must start fast

    digest = ""
    if path.is_file():
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest = f" sha256={h.hexdigest()}"
    return (f"source: {path.name}{digest} ({kind}: {entries} entries, {rows} rows, "
            f"{llm} LLM rows kept)")


def build(sources: Sequence[Source], base: PublishedTable | None = None, *, version: str,
          note: str = "", now: dt.datetime | None = None) -> Build:
    """The table's rows from ``base`` (the table being refreshed, or nothing) and the
    rows read from ``sources``: published (official) LLM results only, one per result,
    merged as an import merges them (logs over a table; a newer table over an older).
    The base's ``source:`` lines are kept in the new provenance."""
    import datetime as dt

    skipped: Counter[str] = Counter()
    kept: list[ResultRow] = []
    for src in sources:
        for r in src.rows:
            if r.kind != "published":
                skipped["tokenmark runs"] += 1
            elif r.label is not Label.OFFICIAL:
                skipped["unverified results"] += 1
            elif not r.llm:
                skipped["non-LLM results"] += 1
            else:
                kept.append(r)
    by_key, differences = merge_all(kept, {r.key: r for r in (base.rows if base else ())})
    rows = sorted(by_key.values(), key=lambda r: r.key)
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    per_round = Counter(r.round for r in rows)
    provenance = [
        _TITLE,
        f"made: {when} by tokenmark {version} ('tokenmark published refresh')",
        "rows: " + ", ".join(f"{rnd} {per_round[rnd]}"
                             for rnd in sorted(per_round, key=round_order))
        + f" ({len(rows)} in all)",
        *(line for line in (base.provenance if base else ()) if line.startswith("source: ")),
        *(s.describe for s in sources),
    ]
    if base:
        provenance.append(f"refreshed from {Path(base.path).name} ({len(base.rows)} rows, "
                          f"made {base.made or 'at an unknown date'})")
    if note:
        provenance.append(f"about: {note}")
    return Build(rows, provenance, dict(skipped), differences)
