"""Parsing ``mlperf_log_detail.txt`` (tokenmark's and real LoadGen logs since v4.1)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenmark.mlperf.mllog.common import _NAMESPACE, MARKER, NOTE_KEY, MLLogError

__all__ = [
    "DetailEntry",
    "DetailLog",
    "parse_detail",
]

# -- parsing the detail log ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DetailEntry:
    """One ``:::MLLOG`` line. ``lineno`` is its 1-based line in the parsed file."""

    key: str
    value: Any
    time_ms: float | None
    metadata: Mapping[str, Any]
    lineno: int
    namespace: str = _NAMESPACE
    event_type: str = "POINT_IN_TIME"

    @property
    def is_error(self) -> bool:
        return bool(self.metadata.get("is_error", False))

    @property
    def is_warning(self) -> bool:
        return bool(self.metadata.get("is_warning", False))


@dataclass(frozen=True)
class DetailLog:
    """A parsed detail log: every entry in file order, looked up by key.

    As the submission checker does, a key's value is its first entry's
    (:meth:`get`, ``log[key]``); :meth:`values` gives all of them. ``skipped`` lists
    ``(line, reason)`` for lines a lenient parse left out.
    """

    source: str
    entries: tuple[DetailEntry, ...]
    skipped: tuple[tuple[int, str], ...] = ()
    _by_key: dict[str, list[DetailEntry]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for e in self.entries:
            self._by_key.setdefault(e.key, []).append(e)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __getitem__(self, key: str) -> Any:
        try:
            return self._by_key[key][0].value
        except KeyError:
            raise KeyError(f"{self.source}: no {key!r} in the detail log") from None

    def get(self, key: str, default: Any = None) -> Any:
        found = self._by_key.get(key)
        return found[0].value if found else default

    def values(self, key: str) -> list[Any]:
        return [e.value for e in self._by_key.get(key, ())]

    def keys(self) -> list[str]:
        """Every key, in order of first appearance."""
        return list(self._by_key)

    def as_dict(self) -> dict[str, list[Any]]:
        return {k: [e.value for e in es] for k, es in self._by_key.items()}

    @property
    def errors(self) -> tuple[DetailEntry, ...]:
        return tuple(e for e in self.entries if e.is_error)

    @property
    def warnings(self) -> tuple[DetailEntry, ...]:
        return tuple(e for e in self.entries if e.is_warning)

    @property
    def num_errors(self) -> int:
        """LoadGen's ``num_errors`` where logged, else the error lines counted (v4.1)."""
        n = self.get("num_errors")
        return int(n) if isinstance(n, int) else len(self.errors)

    @property
    def tokenmark_note(self) -> str | None:
        note = self.get(NOTE_KEY)
        return note if isinstance(note, str) else None

    @property
    def has_results(self) -> bool:
        """Whether the run's results were logged (a performance run that finished)."""
        return "result_validity" in self


# LoadGen streams non-finite doubles as the C library prints them, which is not JSON.
_NON_FINITE = re.compile(r'("value": )(-?nan|-?inf)(?=, "time_ms")')
_NON_FINITE_JSON = {"nan": "NaN", "-nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _load_line(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        fixed = _NON_FINITE.sub(lambda m: m.group(1) + _NON_FINITE_JSON[m.group(2)], text)
        if fixed == text:
            raise
        return json.loads(fixed)


def parse_detail(
    lines: Iterable[str] | str, source: str = "<detail log>", *, strict: bool = True
) -> DetailLog:
    """Parse ``mlperf_log_detail.txt`` (LoadGen's, of any round since v4.1, or tokenmark's).

    ``lines`` is the text or an iterable of its lines (an open file). Blank lines are
    ignored. In strict mode any other line that is not a well-formed ``:::MLLOG``
    entry (garbage, a line cut off by a truncated write) raises :class:`MLLogError`
    naming ``source`` and the line; with ``strict=False`` it is skipped and listed in
    :attr:`DetailLog.skipped`. A log with no entry at all raises in both modes.
    """
    if isinstance(lines, str):
        lines = lines.splitlines()
    entries: list[DetailEntry] = []
    skipped: list[tuple[int, str]] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        problem = ""
        entry: DetailEntry | None = None
        if not line.startswith(MARKER):
            problem = f"not a {MARKER} line: {_clip(line)!r}"
        else:
            try:
                obj = _load_line(line[len(MARKER):])
            except (json.JSONDecodeError, RecursionError) as exc:
                problem = (f"the JSON after {MARKER} does not parse ({exc.args[0]}); "
                           "the file may be truncated or edited")
            else:
                entry, problem = _entry(obj, lineno)
        if entry is not None:
            entries.append(entry)
        elif strict:
            raise MLLogError(source, lineno, problem + " (strict=False skips such lines)")
        else:
            skipped.append((lineno, problem))
    if not entries:
        raise MLLogError(source, None, f"no {MARKER} entries: not an MLPerf detail log")
    return DetailLog(source, tuple(entries), tuple(skipped))


def _entry(obj: Any, lineno: int) -> tuple[DetailEntry | None, str]:
    if not isinstance(obj, dict):
        return None, f"the {MARKER} payload is not a JSON object"
    key = obj.get("key")
    if not isinstance(key, str) or "value" not in obj:
        return None, f"the {MARKER} object has no string 'key' and 'value'"
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        return None, "'metadata' is not a JSON object"
    t = obj.get("time_ms")
    time_ms = float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None
    return DetailEntry(
        key=key,
        value=obj["value"],
        time_ms=time_ms,
        metadata=meta,
        lineno=lineno,
        namespace=str(obj.get("namespace", _NAMESPACE)),
        event_type=str(obj.get("event_type", "POINT_IN_TIME")),
    ), ""


def _clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[:n] + "..."


