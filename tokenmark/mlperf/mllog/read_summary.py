"""Parsing ``mlperf_log_summary.txt`` (tokenmark's and real LoadGen logs since v4.1)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from tokenmark.mlperf.mllog.common import _BANNER, NOTE_PREFIX, MLLogError
from tokenmark.mlperf.mllog.read_detail import _clip

__all__ = [
    "SECTION_ADDITIONAL",
    "SECTION_PARAMETERS",
    "SECTION_PER_QUERY",
    "SECTION_RESULTS",
    "SummaryLine",
    "SummaryLog",
    "parse_summary",
]

# -- parsing the summary ------------------------------------------------------------------

#: Labels older LoadGen versions printed, mapped to 6.0.17's wording.
_LABEL_ALIASES = {
    "Min Time to Output Token (ns)": "Min Time per Output Token (ns)",
    "Max Time to Output Token (ns)": "Max Time per Output Token (ns)",
    "Mean Time to Output Token (ns)": "Mean Time per Output Token (ns)",
}
_HEADLINE = {
    "Completed samples per second": "completed_samples_per_second",
    "Completed tokens per second": "completed_tokens_per_second",
    "Samples per second": "samples_per_second",
    "Tokens per second": "tokens_per_second",
    "Tokens per second (inferred)": "inferred_tokens_per_second",
    "Completed tokens per second (inferred)": "inferred_completed_tokens_per_second",
}
_CRITERIA = {
    "Performance constraints satisfied": "performance_constraints",
    "Min duration satisfied": "min_duration",
    "Min queries satisfied": "min_queries",
    "Early stopping satisfied": "early_stopping",
}
_ES_HEADERS = {
    "Early Stopping Result:": "latency",
    "TTFT Early Stopping Result:": "ttft",
    "TPOT Early Stopping Result:": "tpot",
}
_TARGET_LATENCY = re.compile(r"^(\d+(?:\.\d+)?)th percentile latency \(ns\)$")
_TARGET_TTFT = re.compile(r"^(\d+(?:\.\d+)?)th first token percentile latency \(ns\)$")
_LABEL_VALUE = re.compile(r"^(?P<label>[^:]*[^:\s])\s*: ?(?P<value>.*)$")
_TRAILER_END = r" encountered(?: during test\.|\. See detailed log\.)$"
_WARNINGS = re.compile(r"^(?:No|(\d+)) warnings?" + _TRAILER_END)
_ERRORS = re.compile(r"^(?:No|(\d+)) (?:errors|ERRORS?)" + _TRAILER_END)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

SECTION_RESULTS = "results"
SECTION_ADDITIONAL = "additional_stats"
SECTION_PER_QUERY = "per_query_latency"
SECTION_PARAMETERS = "test_parameters"
_SECTION_TITLES = {
    "MLPerf Results Summary": SECTION_RESULTS,
    "Additional Stats": SECTION_ADDITIONAL,
    "Test Parameters Used": SECTION_PARAMETERS,
}


@dataclass(frozen=True, slots=True)
class SummaryLine:
    """One ``label : value`` line: its 1-based line, section, label as printed, value."""

    lineno: int
    section: str
    label: str
    value: str


@dataclass(frozen=True)
class SummaryLog:
    """A parsed ``mlperf_log_summary.txt``.

    ``fields`` maps a section (``results``, ``additional_stats``,
    ``per_query_latency``, ``test_parameters``) to its ``label -> value`` pairs, labels
    stripped and in LoadGen 6.0.17's wording (older "Time to Output Token" labels are
    mapped); ``lines`` keeps every such line as printed. ``headline`` holds the
    scenario's leading figures as numbers: ``completed_samples_per_second`` and
    ``completed_tokens_per_second`` (Server), ``samples_per_second`` and
    ``tokens_per_second`` (Offline), ``target_latency_ns`` and
    ``target_first_token_latency_ns`` at ``target_percentile`` (SingleStream,
    MultiStream). ``criteria`` maps ``performance_constraints``, ``min_duration``,
    ``min_queries`` and ``early_stopping`` to whether they were satisfied;
    ``early_stopping`` maps ``latency``/``ttft``/``tpot`` to the text under each
    "Early Stopping Result:" header, exactly as printed.
    """

    source: str
    sut_name: str | None = None
    scenario: str | None = None
    mode: str | None = None
    result_validity: str | None = None
    criteria: dict[str, bool] = field(default_factory=dict)
    recommendations: tuple[str, ...] = ()
    early_stopping: dict[str, str] = field(default_factory=dict)
    headline: dict[str, float] = field(default_factory=dict)
    target_percentile: float | None = None
    fields: dict[str, dict[str, str]] = field(default_factory=dict)
    lines: tuple[SummaryLine, ...] = ()
    notes: tuple[str, ...] = ()
    warning_count: int | None = None
    error_count: int | None = None
    tokenmark_note: str | None = None
    skipped: tuple[tuple[int, str], ...] = ()

    @property
    def valid(self) -> bool:
        return self.result_validity == "VALID"

    @property
    def complete(self) -> bool:
        """Whether the errors trailer, LoadGen's last line, was read."""
        return self.error_count is not None

    def get(self, label: str, section: str = SECTION_RESULTS) -> str | None:
        return self.fields.get(section, {}).get(label)

    def number(self, label: str, section: str = SECTION_RESULTS) -> float | None:
        """A ``label``'s value as a float (``None`` when absent)."""
        value = self.get(label, section)
        return None if value is None else _number(value)


def _number(text: str) -> float:
    t = text.strip()
    if t in ("nan", "-nan"):
        return math.nan
    return float(t)


@dataclass
class _SummaryState:
    source: str
    strict: bool
    section: str | None = None
    expect_title: bool = False
    block: str | None = None  # "recommendations" or an early-stopping key
    block_lines: list[str] = field(default_factory=list)
    after_warning: bool = False
    seen_header: bool = False
    out: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, dict[str, str]] = field(default_factory=dict)
    lines: list[SummaryLine] = field(default_factory=list)
    recommendations: list[str] = field(default_factory=list)
    early_stopping: dict[str, str] = field(default_factory=dict)
    criteria: dict[str, bool] = field(default_factory=dict)
    headline: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def bad(self, lineno: int, problem: str) -> None:
        if self.strict:
            raise MLLogError(self.source, lineno, problem + " (strict=False skips such lines)")
        self.skipped.append((lineno, problem))

    def close_block(self) -> None:
        if self.block is None:
            return
        if self.block == "recommendations":
            items: list[str] = []
            for ln in self.block_lines:
                if ln.startswith(" * "):
                    items.append(ln[3:])
                elif items:
                    items[-1] += "\n" + ln.strip()
            self.recommendations.extend(items)
        else:
            self.early_stopping[self.block] = "\n".join(self.block_lines)
        self.block = None
        self.block_lines = []


def parse_summary(
    text: str, source: str = "<summary log>", *, strict: bool = True
) -> SummaryLog:
    """Parse ``mlperf_log_summary.txt`` (LoadGen's, of any round since v4.1, or tokenmark's).

    Reads the header (SUT name, scenario, mode), the headline metric lines, the
    validity and its sub-criteria, recommendations, early-stopping texts, "Additional
    Stats", "Test Parameters Used" and the warnings/errors trailer. An accuracy-mode
    summary (the trailer alone) parses with no scenario. In strict mode a line that
    fits nowhere (garbage, control characters), a header without its scenario, or a
    file that stops before the trailer (truncated) raises :class:`MLLogError` naming
    ``source`` and the line; ``strict=False`` skips such lines (see
    :attr:`SummaryLog.skipped`) and reports truncation as ``complete == False``.
    """
    if not text.strip():
        raise MLLogError(source, None, "the summary is empty")
    st = _SummaryState(source, strict)
    all_lines = text.splitlines()
    for lineno, raw in enumerate(all_lines, start=1):
        _summary_line(st, lineno, raw.rstrip("\r\n"))
    st.close_block()
    out = st.out
    if not st.seen_header and "error_count" not in out:
        raise MLLogError(source, None, "no 'MLPerf Results Summary' header and no "
                         "errors trailer: not an MLPerf LoadGen summary")
    if st.seen_header and "scenario" not in out:
        st.bad(len(all_lines), "the header has no 'Scenario :' line")
    if "error_count" not in out and strict:
        raise MLLogError(source, len(all_lines), "the summary stops before LoadGen's "
                         "errors trailer ('No errors encountered during test.'): "
                         "the file is truncated (strict=False reads what is there)")
    return SummaryLog(
        source=source,
        sut_name=out.get("sut_name"),
        scenario=out.get("scenario"),
        mode=out.get("mode"),
        result_validity=out.get("result_validity"),
        criteria=st.criteria,
        recommendations=tuple(st.recommendations),
        early_stopping=st.early_stopping,
        headline=st.headline,
        target_percentile=out.get("target_percentile"),
        fields=st.fields,
        lines=tuple(st.lines),
        notes=tuple(st.notes),
        warning_count=out.get("warning_count"),
        error_count=out.get("error_count"),
        tokenmark_note=out.get("tokenmark_note"),
        skipped=tuple(st.skipped),
    )


def _summary_line(st: _SummaryState, lineno: int, line: str) -> None:
    if _CONTROL.search(line):
        st.bad(lineno, f"control characters in {_clip(line)!r}: not summary text")
        return
    stripped = line.strip()
    if st.block is not None:
        if st.block == "recommendations":
            if line.startswith((" * ", "   ")):
                st.block_lines.append(line)
                return
        elif line.startswith(" "):
            st.block_lines.append(line)
            return
        elif not stripped and not st.block_lines:
            # an empty early-stopping text prints as an empty line
            st.close_block()
            return
        st.close_block()
    if not stripped:
        if st.section == SECTION_PER_QUERY:  # MultiStream's per-query block ends here
            st.section = SECTION_ADDITIONAL
        return
    if stripped == _BANNER:
        if st.expect_title:  # the closing banner of a section title
            st.expect_title = False
        else:
            st.expect_title = True
            st.section = None
        return
    if st.section is None and st.expect_title:
        title = _SECTION_TITLES.get(stripped)
        if title is None:
            st.bad(lineno, f"unknown section title {_clip(stripped)!r}")
            return
        st.section = title
        st.seen_header = st.seen_header or title == SECTION_RESULTS
        st.after_warning = False
        return
    if stripped.startswith(NOTE_PREFIX):
        st.out["tokenmark_note"] = stripped
        return
    m = _WARNINGS.match(stripped)
    if m:
        st.out["warning_count"] = int(m.group(1) or 0)
        return
    m = _ERRORS.match(stripped)
    if m:
        st.out["error_count"] = int(m.group(1) or 0)
        return
    if st.section == SECTION_RESULTS:
        _results_line(st, lineno, stripped)
    elif st.section in (SECTION_ADDITIONAL, SECTION_PER_QUERY):
        if stripped == "Per-query latency:":  # MultiStream prints it with 2 trailing spaces
            st.section = SECTION_PER_QUERY
            return
        _field_line(st, lineno, stripped)
    elif st.section == SECTION_PARAMETERS:
        if stripped.startswith("WARNING"):
            st.after_warning = True
            st.notes.append(line)
            return
        if st.after_warning and ":" not in stripped:
            st.notes.append(line)
            return
        _field_line(st, lineno, stripped)
    else:
        st.bad(lineno, f"text outside any section: {_clip(stripped)!r}")


def _field_line(st: _SummaryState, lineno: int, stripped: str) -> tuple[str, str] | None:
    m = _LABEL_VALUE.match(stripped)
    if m is None or not m.group("value").strip():
        st.bad(lineno, f"expected 'label : value', got {_clip(stripped)!r}")
        return None
    label = m.group("label").strip()
    value = m.group("value").strip()
    section = st.section or SECTION_RESULTS
    st.lines.append(SummaryLine(lineno, section, label, value))
    st.fields.setdefault(section, {}).setdefault(_LABEL_ALIASES.get(label, label), value)
    return label, value


def _results_line(st: _SummaryState, lineno: int, stripped: str) -> None:
    if stripped == "Recommendations:":
        st.block = "recommendations"
        return
    es = _ES_HEADERS.get(stripped)
    if es is not None:
        st.block = es
        return
    got = _field_line(st, lineno, stripped)
    if got is None:
        return
    label, value = got
    out = st.out
    if label == "SUT name":
        out["sut_name"] = value
    elif label == "Scenario":
        out["scenario"] = value
    elif label == "Mode":
        out["mode"] = value
    elif label == "Result is":
        out["result_validity"] = value
    elif label in _CRITERIA:
        st.criteria[_CRITERIA[label]] = value.lower() == "yes"
    else:
        try:
            number = _number(value)
        except ValueError:
            st.bad(lineno, f"{label!r} has no number: {_clip(value)!r}")
            return
        if label in _HEADLINE:
            st.headline[_HEADLINE[label]] = number
        elif m := _TARGET_LATENCY.match(label):
            out["target_percentile"] = float(m.group(1)) / 100
            st.headline["target_latency_ns"] = number
        elif m := _TARGET_TTFT.match(label):
            out["target_percentile"] = float(m.group(1)) / 100
            st.headline["target_first_token_latency_ns"] = number
