"""``results.json``: one versioned document per run, with one writer and one reader.

:class:`ResultsDocument` is the document; :meth:`ResultsDocument.of_run` builds it (the
main job, the simulator and the official-LoadGen path each add their sections),
:func:`write_results` writes it and :func:`read_results` /
:meth:`ResultsDocument.from_json` read it back, from this version or any earlier one.
Every reader (the importer, the reports, the web UI, reproduce and compare, scoring,
packaging, bundles) goes through them.

Schema :data:`SCHEMA` (a new field is a minor change; a renamed or removed one bumps the
number). Top-level keys:

- ``schema``, ``tokenmark_version``, ``label`` (always ``"unverified"``) and
  ``label_note`` (:data:`~tokenmark.resultrows.UNVERIFIED_NOTE`: not reviewed by
  MLCommons), ``profile_note`` (set for knowingly short runs such as ``demo``);
- ``run``: start time (UTC, ISO 8601), round, benchmark, scenario, mode, a title, the
  system under test and what it is (``sut``), dataset name and fingerprint, whether it
  was interrupted (:class:`RunInfo`);
- ``settings``: ``layers`` (what each layer set), ``requested`` and ``effective``;
- ``summary``: counts, LoadGen's figures (samples/s, tokens/s, run facts) and tokenmark's
  (token throughput, goodput), latency distributions in ms;
- ``verdicts``: ``mlperf`` and ``tokenmark``, each with its validity and findings
  (:class:`~tokenmark.findings.Finding` as JSON);
- ``files``: the other files of the results folder;
- sections a run adds (:attr:`ResultsDocument.sections`): ``manifest``, ``environment``,
  ``client_monitor``, ``server_metrics``, ``capacity``, ``lengths``, ``accuracy_log``,
  ``distributed`` (the main job and its watchers), ``simulation`` (a simulated run),
  ``loadgen`` (a run the official LoadGen drove).

Earlier versions (fixtures of each in ``tests/data/results_versions``, made by the code
of the commit they are named after) lack what came later, and the reader fills it in:
findings without ``level`` are ``fail`` findings (before 75be6a7), a run without
``title`` is titled by its benchmark and scenario (before 2720340), a summary without
``reasoning`` and ``latency_ms.ttfat`` had no reasoning records (before 0c36e69).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from tokenmark import __version__
from tokenmark.config.layering import DEMO_MAX_OUTPUT_TOKENS, LayeredSettings
from tokenmark.errors import BadInputError
from tokenmark.findings import Finding
from tokenmark.inputs import MIB, json_loads, read_bounded
from tokenmark.metrics.stats import Distribution
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Verdict, Verdicts
from tokenmark.mlperf.settings import EffectiveSettings, TestSettings
from tokenmark.resultrows import UNVERIFIED_NOTE

__all__ = [
    "LABEL",
    "RESULTS_FILE",
    "SCHEMA",
    "SCHEMA_PREFIX",
    "ResultsDocument",
    "ResultsError",
    "RunInfo",
    "effective_json",
    "read_results",
    "requested_json",
    "summary_json",
    "verdicts_json",
    "write_json_atomic",
    "write_results",
]

SCHEMA_PREFIX: Final = "tokenmark.results/"
SCHEMA: Final = SCHEMA_PREFIX + "1"
RESULTS_FILE: Final = "results.json"
#: results.json larger than this is refused unread (a real one is well under 1 MiB).
RESULTS_MAX_BYTES: Final = 64 * MIB
#: Every run tokenmark writes is unverified (not reviewed by MLCommons).
LABEL: Final = "unverified"
_MS = 1e-6


class ResultsError(BadInputError):
    """A file that is not a ``results.json`` this tokenmark can read: ``where`` it is and
    what is wrong (``problem``, which names the fix)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True)
class RunInfo:
    """``run``: what was measured, and how the run went. ``loadgen`` is ``official`` for
    a run the official LoadGen drove ("" otherwise); ``extra`` keeps keys this version
    does not know (a newer writer's), so nothing read is lost."""

    round: str
    benchmark: str
    scenario: str
    mode: str = ""
    started_utc: str = ""
    clock: str = ""
    title: str = ""
    sut: Mapping[str, Any] = field(default_factory=dict)
    dataset: Mapping[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    interrupt_reason: str = ""
    ran_out_of_generated_queries: bool = False
    wall_anchor_ns: Mapping[str, int] = field(default_factory=dict)
    loadgen: str = ""
    pid: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "started_utc": self.started_utc, "wall_anchor_ns": dict(self.wall_anchor_ns),
            "clock": self.clock, "round": self.round, "benchmark": self.benchmark,
            "scenario": self.scenario, "mode": self.mode,
        }
        if self.loadgen:
            out["loadgen"] = self.loadgen
        out.update({
            "title": self.title or f"{self.benchmark} {self.scenario}",
            "sut": dict(self.sut), "dataset": dict(self.dataset),
            "interrupted": self.interrupted, "interrupt_reason": self.interrupt_reason,
            "ran_out_of_generated_queries": self.ran_out_of_generated_queries,
        })
        if self.pid is not None:
            out["pid"] = self.pid
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str) -> RunInfo:
        for key in ("round", "benchmark", "scenario"):
            if not isinstance(d.get(key), str) or not d.get(key):
                raise ResultsError(where, f"run.{key} is missing; give a results.json "
                                   "tokenmark wrote")
        known = {f.name for f in fields(cls)} - {"extra"}
        sut, dataset, anchor = d.get("sut"), d.get("dataset"), d.get("wall_anchor_ns")
        pid = d.get("pid")
        return cls(
            round=d["round"], benchmark=d["benchmark"], scenario=d["scenario"],
            mode=str(d.get("mode", "")), started_utc=str(d.get("started_utc", "")),
            clock=str(d.get("clock", "")),
            title=str(d.get("title") or f"{d['benchmark']} {d['scenario']}"),
            sut=sut if isinstance(sut, dict) else {},
            dataset=dataset if isinstance(dataset, dict) else {},
            interrupted=bool(d.get("interrupted", False)),
            interrupt_reason=str(d.get("interrupt_reason", "")),
            ran_out_of_generated_queries=bool(d.get("ran_out_of_generated_queries", False)),
            wall_anchor_ns=anchor if isinstance(anchor, dict) else {},
            loadgen=str(d.get("loadgen", "")),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            extra={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class ResultsDocument:
    """One run's ``results.json`` (see the module docstring). ``settings``, ``summary``,
    ``verdicts`` and ``files`` are the JSON forms :func:`settings_json`,
    :func:`summary_json` and :func:`verdicts_json` give; ``sections`` the ones a run adds,
    in the order they are written."""

    run: RunInfo
    settings: Mapping[str, Any]
    summary: Mapping[str, Any]
    verdicts: Mapping[str, Any]
    files: Mapping[str, Any] = field(default_factory=dict)
    profile_note: str = ""
    sections: Mapping[str, Any] = field(default_factory=dict)
    tokenmark_version: str = __version__
    label: str = LABEL
    schema: str = SCHEMA

    @classmethod
    def of_run(cls, layered: LayeredSettings, eff: EffectiveSettings, summary: Summary,
               verdicts: Verdicts, run: RunInfo, *, files: Mapping[str, Any] | None = None,
               sections: Mapping[str, Any] | None = None,
               profile_note: str | None = None) -> ResultsDocument:
        """The document of a run that was judged: its settings, summary and verdicts as
        this module writes them. ``profile_note`` defaults to the demo profile's."""
        if profile_note is None:
            profile_note = DEMO_NOTE if eff.requested.profile == "demo" else ""
        return cls(run=run, settings=settings_json(layered, eff),
                   summary=summary_json(summary), verdicts=verdicts_json(verdicts),
                   files=dict(files or {}), profile_note=profile_note,
                   sections=dict(sections or {}))

    def to_json(self) -> dict[str, Any]:
        """The document as ``results.json`` holds it (plain JSON values)."""
        doc: dict[str, Any] = {
            "schema": self.schema, "tokenmark_version": self.tokenmark_version,
            "label": self.label, "label_note": UNVERIFIED_NOTE,
            "profile_note": self.profile_note, "run": self.run.to_json(),
            "settings": dict(self.settings), "summary": dict(self.summary),
            "verdicts": dict(self.verdicts), "files": dict(self.files),
        }
        for key, value in self.sections.items():
            doc[key] = value
        return doc

    @classmethod
    def from_json(cls, doc: Any, where: str = "results.json") -> ResultsDocument:
        """Read a document of this schema, written by this version or an earlier one;
        :class:`ResultsError` names what is wrong."""
        if not isinstance(doc, dict):
            raise ResultsError(where, "is not a JSON object; give a results.json "
                               "tokenmark wrote")
        schema = doc.get("schema")
        if schema != SCHEMA:
            fix = ("upgrade tokenmark to read it" if isinstance(schema, str)
                   and schema.startswith(SCHEMA_PREFIX) else "give a results.json tokenmark wrote")
            raise ResultsError(where, f"schema {schema!r} is not {SCHEMA!r}, the one this "
                               f"tokenmark reads; {fix}")
        parts = {}
        for key in ("run", "settings", "summary", "verdicts"):
            v = doc.get(key)
            if not isinstance(v, dict):
                raise ResultsError(where, f"has no {key!r} object (schema {SCHEMA}); give a "
                                   "results.json tokenmark wrote")
            parts[key] = v
        for kind in ("mlperf", "tokenmark"):
            if not isinstance(parts["verdicts"].get(kind), dict):
                raise ResultsError(where, f"verdicts.{kind} is missing; give a results.json "
                                   "tokenmark wrote")
        files = doc.get("files")
        known = {"schema", "tokenmark_version", "label", "label_note", "profile_note",
                 "run", "settings", "summary", "verdicts", "files"}
        return cls(
            run=RunInfo.from_json(parts["run"], where),
            settings=parts["settings"],
            summary=_upgrade_summary(parts["summary"]),
            verdicts=_upgrade_verdicts(parts["verdicts"]),
            files=files if isinstance(files, dict) else {},
            profile_note=str(doc.get("profile_note") or ""),
            sections={k: v for k, v in doc.items() if k not in known},
            tokenmark_version=str(doc.get("tokenmark_version", "")),
            label=str(doc.get("label") or LABEL),
            schema=schema,
        )

    def findings(self) -> tuple[Finding, ...]:
        """Every finding of both verdicts (MLPerf's first)."""
        out = []
        for kind in ("mlperf", "tokenmark"):
            for f in self.verdicts[kind].get("findings") or ():
                if isinstance(f, dict):
                    out.append(Finding.from_json(f, verdict=kind))
        return tuple(out)

    def validity(self, kind: str) -> str:
        """The validity of verdict ``kind`` (``mlperf`` or ``tokenmark``)."""
        return str(self.verdicts[kind].get("validity", ""))


#: The profile note of the demo profile (``profile_note`` of its runs).
DEMO_NOTE: Final = ("demo profile: a short run (min duration and dataset cut down, outputs "
                    f"capped at {DEMO_MAX_OUTPUT_TOKENS} tokens), judged by LoadGen's rules but "
                    "not an MLPerf-length run")


def _upgrade_summary(summary: dict[str, Any]) -> dict[str, Any]:
    if "reasoning" in summary:
        return summary
    out = dict(summary)  # before 0c36e69: no reasoning records
    lat = out.get("latency_ms")
    if isinstance(lat, dict) and "ttfat" not in lat:
        out["latency_ms"] = {**lat, "ttfat": None}
    out["reasoning"] = {"requests": 0, "reasoning_tokens": 0,
                        "answer_tokens": (out.get("throughput") or {}).get("output_tokens", 0),
                        "no_answer_requests": 0}
    return out


def _upgrade_verdicts(verdicts: dict[str, Any]) -> dict[str, Any]:
    out = dict(verdicts)
    for kind in ("mlperf", "tokenmark"):
        v = out[kind]
        found = v.get("findings")
        if isinstance(found, list) and any(isinstance(f, dict) and "level" not in f
                                           for f in found):
            # before 75be6a7 every finding was a fail finding
            out[kind] = {**v, "findings": [
                {**f, "level": "fail"} if isinstance(f, dict) and "level" not in f else f
                for f in found]}
    return out


def read_results(path: Path) -> ResultsDocument:
    """The document of a results folder (or of its ``results.json``)."""
    p = path / RESULTS_FILE if path.is_dir() else path
    if not p.is_file():
        raise ResultsError(str(path), f"holds no {RESULTS_FILE}; give a results folder "
                           "'tokenmark run' wrote")
    try:
        doc = json_loads(read_bounded(p, RESULTS_MAX_BYTES))
    except (OSError, UnicodeDecodeError, ValueError) as e:  # not JSON, too deep or too large
        raise ResultsError(str(p), f"cannot be read ({e}); give an intact results.json") \
            from None
    return ResultsDocument.from_json(doc, str(p))


def write_results(folder: Path, doc: ResultsDocument) -> Path:
    """Write ``doc`` as the folder's ``results.json`` (atomically); returns its path."""
    path = folder / RESULTS_FILE
    write_json_atomic(path, doc.to_json())
    return path


def settings_json(layered: LayeredSettings, eff: EffectiveSettings) -> dict[str, Any]:
    """``settings``: the layers that made the run's settings, and both forms of them."""
    return {"layers": layered.layers_json(), "requested": requested_json(eff.requested),
            "effective": effective_json(eff)}


def _plain(v: Any) -> Any:
    if hasattr(v, "value") and not isinstance(v, int | float | str):
        return v.value
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def requested_json(r: TestSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(r):
        v = getattr(r, f.name)
        if f.name == "seeds":
            out["seeds"] = {k: str(x) for k, x in asdict(v).items()}
        elif f.name == "limits":
            out["limits_ns"] = asdict(v)
        else:
            out[f.name] = _plain(v)
    return out


def effective_json(e: EffectiveSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(e):
        if f.name == "requested":
            continue
        v = getattr(e, f.name)
        if f.name == "seeds":
            out["seeds"] = {k: str(x) for k, x in asdict(v).items()}
        elif f.name == "limits":
            out["limits_ns"] = asdict(v)
        else:
            out[f.name] = _plain(v)
    out["send_lag_limit_ns"] = e.send_lag_limit_ns
    return out


def _dist(d: Distribution) -> dict[str, object]:
    return d.to_json(_MS)


def summary_json(s: Summary) -> dict[str, Any]:
    return {
        "counts": {
            "scheduled": s.scheduled,
            "issued": s.issued,
            "queries_issued": s.queries_issued,
            "completed": s.completed,
            "failed": s.failed,
            "measured": s.measured,
            "errors_by_class": s.errors,
            "interrupted": s.interrupted,
            "interrupt_reason": s.interrupt_reason,
            "token_count_disagreements": s.token_disagreements,
        },
        "loadgen": {
            "sample_count": s.sample_count,
            "token_count": s.token_count,
            "samples_per_second": s.samples_per_second,
            "tokens_per_second": s.tokens_per_second,
            "scheduled_samples_per_second": s.scheduled_samples_per_second,
            "max_latency_ns": s.max_latency_ns,
            "final_query_scheduled_ns": s.final_query_scheduled_ns,
            "final_query_issued_ns": s.final_query_issued_ns,
            "final_query_all_samples_done_ns": s.final_query_done_ns,
        },
        "throughput": {
            "window_s": s.window_ns / 1e9,
            "requests_per_second": s.requests_per_second,
            "output_tokens_per_second": s.output_tokens_per_second,
            "input_tokens_per_second": s.input_tokens_per_second,
            "output_tokens": s.output_tokens,
            "input_tokens": s.input_tokens,
            "goodput_requests_per_second": s.goodput_requests_per_second,
            "goodput_fraction": s.goodput_fraction,
        },
        "latency_ms": {
            "ttft": _dist(s.ttft),
            "tpot": _dist(s.tpot),
            "itl": _dist(s.itl),
            "e2e": _dist(s.latency),
            "query": _dist(s.query_latency),
            "send_lag": _dist(s.send_lag),
            "ttfat": None if s.ttfat is None else _dist(s.ttfat),
        },
        "reasoning": {
            "requests": s.reasoning_requests,
            "reasoning_tokens": s.reasoning_tokens,
            "answer_tokens": s.answer_tokens,
            "no_answer_requests": s.no_answer_requests,
        },
    }


def _verdict(v: Verdict) -> dict[str, Any]:
    return {
        "validity": v.validity.value,
        "failed_rules": [f.rule for f in v.failed],
        "findings": [f.to_json() for f in v.findings],
    }


def verdicts_json(v: Verdicts) -> dict[str, Any]:
    return {"mlperf": _verdict(v.mlperf), "tokenmark": _verdict(v.tokenmark)}


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` so that readers see the old file or the new one, never half."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, sort_keys=False, default=_plain)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
