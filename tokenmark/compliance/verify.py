"""TEST06, TEST07 and TEST09 verdicts, with the files the submission checker looks for.

Each ``verify_*`` function applies the official verification script's checks
(``compliance/TEST0x/run_verification.py`` in ``mlcommons/inference``; behaviour
reproduced, not code) to a parsed accuracy log, and each ``write_*`` lays the verdict
folder out as the script does under ``<output_dir>/TEST0x/``.

TEST06 (``verify_accuracy.txt``), the three checks on the token ids (int32, the script's
default ``--dtype``, or int64 where the log holds 8-byte ids: the width is read from the
log, :func:`~tokenmark.mlperf.accuracylog.token_width`):

* first token (every scenario but Offline, where the line says ``Skipped``): each
  entry's ``token_data`` equals the start of its ``data`` (compared over the shorter of
  the two, as the script's ``zip`` does);
* EOS: no output ends with two or more EOS tokens (the script counts trailing EOS ids
  from the end, never looking at position 0);
* sample length: ``len(data) == token_count`` for every entry.

The script's quirk is kept out: passed ``-e`` on its command line, the EOS id arrives
as a string and the EOS check can never fail; :func:`verify_test06` takes an integer.

TEST07 (``verify_accuracy.txt`` ending ``TEST PASS``/``TEST FAIL``): the accuracy
score of the performance-mode log (every sample logged) is at least the threshold
(gpt-oss-120b: exact match 60.698 on the GPQA compliance set).

TEST09 (``verify_output_len.txt``): the mean output length of every logged sample
lies within ``[min, max]`` (gpt-oss-120b: 1150.38 to 1406.02 tokens).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmark.mlperf.accuracylog import ACCURACY_LOG_FILE, decode_ids, token_width

__all__ = [
    "Test06Result",
    "Test07Result",
    "Test09Result",
    "verify_test06",
    "verify_test07",
    "verify_test09",
    "write_test06",
    "write_test07",
    "write_test09",
]

DEFAULT_EOS = 2
_RULE = "=" * 80


@dataclass(frozen=True)
class Test06Result:
    first_token: bool | None  # None: skipped (Offline)
    eos: bool
    length: bool
    #: seq_ids of the first failing entries of each check (for the report), at most 10
    first_token_failures: tuple[int, ...] = ()
    eos_failures: tuple[int, ...] = ()
    length_failures: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return self.first_token is not False and self.eos and self.length

    def text(self) -> str:
        """``verify_accuracy.txt``, line for line as the official script writes it."""
        ft = "Skipped" if self.first_token is None else str(self.first_token)
        return (f"First token check pass: {ft}\n"
                f"EOS check pass: {self.eos}\n"
                f"Sample length check pass: {self.length}\n"
                + ("TEST06 verification complete\n" if self.passed
                   else "TEST06 verification failed\n"))


def _trailing_eos(ids: Sequence[int], eos: int) -> int:
    n = 0
    i = len(ids) - 1
    while i > 0 and ids[i] == eos:
        n += 1
        i -= 1
    return n


def verify_test06(entries: Sequence[dict[str, Any]], scenario: str,
                  eos_token_id: int = DEFAULT_EOS, width: int | None = None) -> Test06Result:
    """TEST06's three checks over a parsed accuracy log (see the module docstring);
    ``width`` is the ids' byte width (None: read from the log)."""
    w = token_width(entries) if width is None else width
    need_first = scenario != "Offline"
    bad_first: list[int] = []
    bad_eos: list[int] = []
    bad_len: list[int] = []
    for e in entries:
        data = decode_ids(e["data"], w)
        seq = int(e["seq_id"])
        if _trailing_eos(data, eos_token_id) >= 2:
            bad_eos.append(seq)
        if len(data) != int(e.get("token_count", -1)):
            bad_len.append(seq)
        if need_first:
            first = decode_ids(e.get("token_data", ""), w)
            if any(a != b for a, b in zip(data, first, strict=False)):
                bad_first.append(seq)
    return Test06Result(
        first_token=(not bad_first) if need_first else None, eos=not bad_eos,
        length=not bad_len, first_token_failures=tuple(bad_first[:10]),
        eos_failures=tuple(bad_eos[:10]), length_failures=tuple(bad_len[:10]))


def _copy_log(accuracy_log: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(accuracy_log, folder / ACCURACY_LOG_FILE)


def write_test06(output_dir: Path, result: Test06Result, accuracy_log: Path) -> Path:
    """``<output_dir>/TEST06/verify_accuracy.txt`` and ``TEST06/accuracy/`` (the log)."""
    out = output_dir / "TEST06"
    _copy_log(accuracy_log, out / "accuracy")
    path = out / "verify_accuracy.txt"
    path.write_text(result.text(), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Test07Result:
    score: float | None
    threshold: float
    evaluation: str  # the evaluation's printed result, written first as the script does

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= self.threshold

    def text(self) -> str:
        lines = [self.evaluation.rstrip("\n"), "", _RULE, "TEST07 Verification Summary",
                 _RULE]
        if self.score is not None:
            lines += [f"Accuracy score: {self.score}", f"Accuracy threshold: {self.threshold}",
                      f"Accuracy check pass: {self.passed}"]
            lines.append("TEST PASS" if self.passed else "TEST FAIL")
        else:
            lines += ["Error: Could not parse accuracy score", "TEST FAIL"]
        return "\n".join(lines) + "\n"


def verify_test07(score: float | None, threshold: float, evaluation: str = "") -> Test07Result:
    return Test07Result(score, threshold, evaluation or f"'exact_match': {score}")


def _performance_copies(run_dir: Path | None, out: Path) -> None:
    perf = out / "performance" / "run_1"
    perf.mkdir(parents=True, exist_ok=True)
    if run_dir is None:
        return
    for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt"):
        if (run_dir / name).exists():
            shutil.copy2(run_dir / name, perf / name)


def write_test07(output_dir: Path, result: Test07Result, accuracy_log: Path,
                 run_dir: Path | None = None) -> Path:
    """``TEST07/verify_accuracy.txt``, ``TEST07/accuracy/`` and ``performance/run_1/``."""
    out = output_dir / "TEST07"
    _copy_log(accuracy_log, out / "accuracy")
    _performance_copies(run_dir, out)
    path = out / "verify_accuracy.txt"
    path.write_text(result.text(), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Test09Result:
    lengths: tuple[int, ...]
    min_tokens: float
    max_tokens: float

    @property
    def mean(self) -> float:
        return sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.lengths) and self.min_tokens <= self.mean <= self.max_tokens

    def text(self) -> str:
        """``verify_output_len.txt`` in the official script's layout."""
        n = len(self.lengths)
        mean = self.mean
        std = (sum((x - mean) ** 2 for x in self.lengths) / n) ** 0.5 if n else 0.0
        ok_min = mean >= self.min_tokens
        ok_max = mean <= self.max_tokens
        lines = [_RULE, "TEST09: Verify Output Token Length in Performance Mode", _RULE, "",
                 "Output Token Length Statistics", "-" * 40, f"Total samples: {n}",
                 f"Mean output tokens: {mean:.2f}",
                 f"Min output tokens: {min(self.lengths) if n else 0}",
                 f"Max output tokens: {max(self.lengths) if n else 0}"]
        if n:
            lines.append(f"Std deviation: {std:.2f}")
        lines += ["", _RULE, "Verification Results", _RULE,
                  f"Mean output tokens: {mean:.2f}", f"Min threshold: {self.min_tokens}",
                  f"Max threshold: {self.max_tokens}", f"Min check pass: {ok_min}",
                  f"Max check pass: {ok_max}", "",
                  "TEST PASS" if ok_min and ok_max and n else "TEST FAIL"]
        return "\n".join(lines) + "\n"


def verify_test09(entries: Sequence[dict[str, Any]], min_tokens: float,
                  max_tokens: float) -> Test09Result:
    """Output lengths of every entry (``data``'s ids at the log's width, empty data
    counting 0)."""
    w = token_width(entries)
    return Test09Result(tuple(len(decode_ids(e.get("data") or "", w)) for e in entries),
                        min_tokens, max_tokens)


def write_test09(output_dir: Path, result: Test09Result, accuracy_log: Path,
                 run_dir: Path | None = None) -> Path:
    """``TEST09/verify_output_len.txt``, ``TEST09/accuracy/`` and ``performance/run_1/``."""
    out = output_dir / "TEST09"
    _copy_log(accuracy_log, out / "accuracy")
    _performance_copies(run_dir, out)
    path = out / "verify_output_len.txt"
    path.write_text(result.text(), encoding="utf-8")
    return path
