"""A benchmark's accuracy from ``mlperf_log_accuracy.json``, as its reference evaluation.

:func:`evaluate` decodes every logged sample (int32 ids, de-duplicated by ``qsl_idx``,
first occurrence kept, as every reference does) with the model's tokenizer, scores it
against :class:`~tokenmark.sources.references.References` and returns the reference's
metrics under the reference's names:

* llama2-70b: ``rouge1``, ``rouge2``, ``rougeL``, ``rougeLsum``, ``gen_len``,
  ``gen_num``, ``gen_tok_len``, ``tokens_per_sample`` (``round(gen_tok_len / gen_num,
  1)``);
* llama3.1-8b(-edge): the four ROUGE scores, ``gen_len`` and ``gen_num``;
* mixtral-8x7b: ROUGE on the OpenOrca samples, ``gsm8k`` (percent correct), ``mbxp``
  (``None``: not evaluated, the reference runs the code), ``gen_len`` (OpenOrca),
  ``gen_num`` (every log entry, duplicates included, as the reference counts),
  ``gen_tok_len``, ``tokens_per_sample``;
* deepseek-r1: ``exact_match`` (mean over samples of 100 or 0), ``tokens_per_sample``
  (mean output tokens), ``num-samples``;
* gpt-oss-120b: ``exact_match`` = sum over datasets of correct / repeats, over the same
  sum of totals, x 100 (repeats: aime25 8, gpqa_diamond 5, livecodebench_v6 3), and
  ``tokens_per_sample``.

Samples no scorer here can judge (LiveCodeBench and MBXP run code) are counted in
``not_evaluated``; a score they belong to is then incomplete, and so is its gate.

:func:`gate` judges the metrics against the round preset's accuracy targets (99% or
99.9% of the reference, and output-length bounds) as the submission checker does;
:func:`accuracy_txt` renders the reference's ``accuracy.txt`` with the checker's
``hash=`` line.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tokenmark.mlperf.accuracylog import decode_ids, token_width
from tokenmark.mlperf.presets import AccuracyTarget
from tokenmark.scoring import answers
from tokenmark.scoring.rouge import rouge
from tokenmark.sources.references import References, family

__all__ = [
    "AccuracyReport",
    "TargetResult",
    "accuracy_txt",
    "evaluate",
    "gate",
]

#: Ids -> text, special tokens skipped (``tokenizer.decode(ids, skip_special_tokens=True)``).
Decoder = Callable[[Sequence[int]], str]

GPTOSS_REPEATS: Final = {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}


@dataclass
class AccuracyReport:
    benchmark: str
    metrics: dict[str, Any]
    samples: int
    not_evaluated: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "metrics": self.metrics,
                "samples": self.samples, "not_evaluated": self.not_evaluated,
                "notes": self.notes}


@dataclass(frozen=True)
class TargetResult:
    """One target judged: ``passed`` is ``None`` when the metric could not be computed."""

    target: AccuracyTarget
    value: float | None
    passed: bool | None

    def to_json(self) -> dict[str, Any]:
        t = self.target
        return {"metric": t.metric, "value": self.value, "lower_bound": t.lower_bound,
                "upper_bound": t.upper_bound, "passed": self.passed}

    def line(self) -> str:
        t = self.target
        lo = f">= {t.lower_bound:.4f}" if t.lower_bound is not None else ""
        hi = f"<= {t.upper_bound:.4f}" if t.upper_bound is not None else ""
        want = " and ".join(x for x in (lo, hi) if x)
        got = "not evaluated" if self.value is None else f"{self.value:g}"
        verdict = {True: "PASS", False: "FAIL", None: "INCOMPLETE"}[self.passed]
        return f"{t.metric}: {got} (required {want}) {verdict}"


def _samples(entries: Sequence[dict[str, Any]]) -> list[tuple[int, list[int]]]:
    seen: set[int] = set()
    out = []
    width = token_width(entries)
    for e in entries:
        idx = int(e["qsl_idx"])
        if idx in seen:
            continue
        seen.add(idx)
        out.append((idx, decode_ids(e["data"], width)))
    return out


def _ref(refs: References, idx: int) -> str:
    if idx >= len(refs):
        raise IndexError(f"qsl_idx {idx} is beyond the {len(refs)} references of "
                         f"{refs.source}")
    return refs.targets[idx] or ""


def evaluate(benchmark: str, entries: Sequence[dict[str, Any]], refs: References,
             decode: Decoder) -> AccuracyReport:
    """Score ``entries`` (a parsed accuracy log) for ``benchmark`` (module docstring)."""
    fam = family(benchmark)
    samples = _samples(entries)
    if fam in ("llama2-70b", "llama3.1-8b"):
        return _rouge_family(benchmark, fam, samples, refs, decode)
    if fam == "mixtral-8x7b":
        return _mixtral(benchmark, entries, samples, refs, decode)
    return _exact(benchmark, fam, samples, refs, decode)


def _rouge_family(benchmark: str, fam: str, samples: list[tuple[int, list[int]]],
                  refs: References, decode: Decoder) -> AccuracyReport:
    preds = [decode(ids) for _, ids in samples]
    result = rouge(preds, [_ref(refs, i) for i, _ in samples])
    metrics: dict[str, Any] = dict(result.scores)
    metrics["gen_len"] = result.gen_len
    metrics["gen_num"] = len(samples)
    if fam == "llama2-70b":
        tok = sum(len(ids) for _, ids in samples)
        metrics["gen_tok_len"] = tok
        metrics["tokens_per_sample"] = round(tok / len(samples), 1) if samples else 0.0
    return AccuracyReport(benchmark, metrics, len(samples),
                          notes=[f"sentence splitter: {result.splitter}"])


def _mixtral(benchmark: str, entries: Sequence[dict[str, Any]],
             samples: list[tuple[int, list[int]]], refs: References,
             decode: Decoder) -> AccuracyReport:
    orca_p: list[str] = []
    orca_r: list[str] = []
    gsm_total = gsm_ok = 0
    mbxp = 0
    tok = 0
    for idx, ids in samples:
        tok += len(ids)
        kind = refs.categories[idx]
        if kind == "GSM8K":
            gsm_total += 1
            gsm_ok += answers.gsm8k_correct(decode(ids), _ref(refs, idx))
        elif kind == "OpenOrca":
            orca_p.append(decode(ids))
            orca_r.append(_ref(refs, idx))
        else:
            mbxp += 1
    metrics: dict[str, Any] = {}
    notes = []
    gen_len = 0
    if orca_p:
        r = rouge(orca_p, orca_r)
        metrics.update(r.scores)
        gen_len = r.gen_len
        notes.append(f"sentence splitter: {r.splitter}")
    metrics["gsm8k"] = 100.0 * gsm_ok / gsm_total if gsm_total else None
    metrics["mbxp"] = None
    metrics.update(gen_len=gen_len, gen_num=len(entries), gen_tok_len=tok,
                   tokens_per_sample=round(tok / len(entries), 1) if entries else 0.0)
    return AccuracyReport(benchmark, metrics, len(samples),
                          not_evaluated={"MBXP": mbxp} if mbxp else {}, notes=notes)


def _exact(benchmark: str, fam: str, samples: list[tuple[int, list[int]]],
           refs: References, decode: Decoder) -> AccuracyReport:
    gptoss = fam == "gpt-oss-120b"
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # dataset -> [correct, total]
    skipped: dict[str, int] = defaultdict(int)
    notes: list[str] = []
    lengths = []
    for idx, ids in samples:
        lengths.append(len(ids))
        kind = refs.categories[idx].lower()
        text = decode(ids)
        truth = _ref(refs, idx)
        if "livecodebench" in kind:
            skipped[kind] += 1
            continue
        per[kind][1] += 1
        per[kind][0] += _correct(kind, text, truth, gptoss)
        if "math500" in kind:
            notes.append("MATH-500 graded by normalised string equality, not PRM800K")
    metrics: dict[str, Any] = {}
    if gptoss:
        score = sum(c / GPTOSS_REPEATS.get(k, 1) for k, (c, _) in per.items())
        best = sum(t / GPTOSS_REPEATS.get(k, 1) for k, (_, t) in per.items())
        metrics["exact_match"] = round(score / best * 100, 3) if best else None
    else:
        total = sum(t for _, t in per.values())
        metrics["exact_match"] = 100.0 * sum(c for c, _ in per.values()) / total \
            if total else None
    metrics["tokens_per_sample"] = sum(lengths) / len(lengths) if lengths else 0.0
    metrics["num-samples"] = len(samples)
    if skipped:
        notes.append("code-execution samples (LiveCodeBench) are not evaluated; "
                     "exact_match covers the others only")
    return AccuracyReport(benchmark, metrics, len(samples), not_evaluated=dict(skipped),
                          notes=sorted(set(notes)))


def _correct(kind: str, text: str, truth: str, gptoss: bool) -> bool:
    choice = answers.choice_gptoss if gptoss else answers.choice_deepseek
    if "gpqa" in kind:
        got = choice(text, "D")
        return got is not None and got in "ABCD" and got == truth.strip().upper()
    if "mmlu" in kind:
        got = choice(text, "J")
        return got is not None and got == truth.strip().upper()
    if "aime" in kind:
        n = answers.aime_answer(text)
        try:
            return n is not None and n == int(truth)
        except ValueError:
            return False
    if "math500" in kind:
        return answers.math_equal(answers.boxed(text), truth)
    raise ValueError(f"no scorer for the dataset {kind!r}")


def gate(report: AccuracyReport, targets: Sequence[AccuracyTarget]) -> list[TargetResult]:
    """Each target judged against the report (the checker's ``>=`` / ``<=``)."""
    out = []
    incomplete = bool(report.not_evaluated)
    for t in targets:
        key = t.reference_key
        v = report.metrics.get(key)
        if v is None:
            out.append(TargetResult(t, None, None))
            continue
        passed: bool | None = t.accepts(float(v))
        if incomplete and key in ("exact_match", "tokens_per_sample", "gen_tok_len"):
            passed = None if passed else False
        out.append(TargetResult(t, float(v), passed))
    return out


def accuracy_txt(report: AccuracyReport, accuracy_json: bytes) -> str:
    """The reference's ``accuracy.txt``: its result dict, then ``hash=<sha256>``."""
    shown = {k: v for k, v in report.metrics.items() if v is not None}
    digest = hashlib.sha256(accuracy_json).hexdigest()
    return f"{shown}\nhash={digest}\n"
