"""A finding: one rule's judgement, with what was observed, what was required and how to
fix a failure. The one type of the rules (:mod:`tokenmark.mlperf.rules`), the submission
checker (:mod:`tokenmark.submission.check`, which adds where in the tree) and the
results database's rows (:class:`tokenmark.resultrows.RunRecord`).

- ``verdict``: which verdict it belongs to (DESIGN.md: two verdicts, never mixed). The
  MLPerf verdict holds LoadGen's criteria and the official checker's rules; the
  tokenmark verdict tokenmark's own, stricter ones.
- ``level``: ``fail`` (a finding that did not pass makes its verdict INVALID, or a
  submission tree fail its check), ``warn`` (it never does: it says what to distrust)
  or ``info`` (a note).
- ``path``: where in a submission tree (the checker's findings); "" for a run's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = ["LEVELS", "Finding", "VerdictKind"]

#: ``Finding.level`` values, most severe first.
LEVELS: Final = ("fail", "warn", "info")


class VerdictKind(StrEnum):
    MLPERF = "mlperf"
    TOKENMARK = "tokenmark"


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    verdict: VerdictKind
    passed: bool
    observed: str
    required: str
    advice: str = ""
    detail: str = ""  # longer text, e.g. LoadGen's early-stopping lines
    #: ``fail``: not passing makes the verdict INVALID; ``warn``: it never does.
    level: str = "fail"
    path: str = ""

    @property
    def blocks(self) -> bool:
        """Whether this finding makes its verdict INVALID."""
        return not self.passed and self.level == "fail"

    def to_json(self) -> dict[str, object]:
        """The finding as ``results.json`` holds it (``path`` only where there is one)."""
        out: dict[str, object] = {
            "rule": self.rule,
            "verdict": self.verdict.value,
            "passed": self.passed,
            "level": self.level,
            "observed": self.observed,
            "required": self.required,
            "advice": self.advice,
            "detail": self.detail,
        }
        if self.path:
            out["path"] = self.path
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], verdict: str | None = None) -> Finding:
        """A finding as :meth:`to_json` wrote it, by this or an earlier version (one
        without ``level`` is a ``fail`` finding; ``verdict`` names the verdict of a
        finding by the verdict it was listed under). Values of the wrong type read as
        text; an unknown verdict as tokenmark's."""
        level = str(d.get("level") or "fail")
        kind = str(verdict or d.get("verdict") or "")
        return cls(
            rule=str(d.get("rule", "")),
            verdict=VerdictKind(kind) if kind in VerdictKind.__members__.values()
            else VerdictKind.TOKENMARK,
            passed=bool(d.get("passed")),
            observed=str(d.get("observed", "")),
            required=str(d.get("required", "")),
            advice=str(d.get("advice", "")),
            detail=str(d.get("detail", "")),
            level=level if level in LEVELS else "fail",
            path=str(d.get("path", "")),
        )
