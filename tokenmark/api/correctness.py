"""Entry points for correctness: scoring a run's accuracy log, MLPerf's compliance
verdicts (TEST06/07/09) on a results folder, tokenmark's own audits against a target, and
serving the tiny real model. The CLI (``tokenmark score``, ``tokenmark audit``,
``tokenmark serve --engine hf``) is a thin layer over these.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenmark.adapters.openai_http import OpenAIHttpSUT
from tokenmark.adapters.openai_target import OpenAIConfig, check_target
from tokenmark.api.suts import hf_sut_factory  # the SUT is built in tokenmark.api.suts
from tokenmark.clock import MonotonicClock
from tokenmark.compliance.own import AuditResult, caching_audit, stream_equivalence_audit
from tokenmark.compliance.verify import (
    verify_test06,
    verify_test07,
    verify_test09,
    write_test06,
    write_test07,
    write_test09,
)
from tokenmark.dataset import Dataset
from tokenmark.engines.hf import HFEngine
from tokenmark.errors import ConfigError, DatasetError
from tokenmark.mlperf.accuracylog import ACCURACY_LOG_FILE, parse_accuracy_log
from tokenmark.mlperf.presets import find_benchmark
from tokenmark.output.results import read_results
from tokenmark.scoring.evaluate import AccuracyReport, TargetResult, accuracy_txt, evaluate, gate
from tokenmark.servers.engine_http import EngineHTTPServer
from tokenmark.sources.hf_tokenizer import load_hf_tokenizer
from tokenmark.sources.references import load_references
from tokenmark.tokenizer import BuiltinTokenizer, Tokenizer

__all__ = [
    "AuditOutcome",
    "ScoreOutcome",
    "audit_results",
    "hf_sut_factory",
    "own_audit",
    "score_results",
    "serve_hf",
]


def _tokenizer(spec: str) -> Tokenizer:
    return BuiltinTokenizer() if spec in ("", "builtin") else load_hf_tokenizer(spec)


def _log(results_dir: Path) -> tuple[Path, list[dict[str, object]]]:
    path = results_dir / ACCURACY_LOG_FILE
    if not path.is_file():
        raise DatasetError(f"{results_dir}: no {ACCURACY_LOG_FILE}; run with --mode accuracy "
                           "(or --audit TEST06) first")
    return path, parse_accuracy_log(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ScoreOutcome:
    report: AccuracyReport
    gates: list[TargetResult]
    accuracy_txt: Path

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)


def score_results(results_dir: Path, references: Path, *, benchmark: str | None = None,
                  tokenizer: str = "builtin", round_name: str | None = None,
                  allow_pickle: bool = False) -> ScoreOutcome:
    """Score a run's ``mlperf_log_accuracy.json`` as the MLPerf reference evaluation does,
    gate it against the round's targets and write ``accuracy.txt`` (with ``hash=``)."""
    run = read_results(results_dir).run  # the one reader of results.json, bounded
    bench = benchmark or run.benchmark
    rnd = round_name or run.round
    preset = find_benchmark(rnd, bench)
    log_path, entries = _log(results_dir)
    refs = load_references(preset.name, references, allow_pickle=allow_pickle)
    tok = _tokenizer(tokenizer)
    report = evaluate(preset.name, entries, refs, tok.decode)
    gates = gate(report, preset.accuracy)
    out = results_dir / "accuracy.txt"
    out.write_text(accuracy_txt(report, log_path.read_bytes()), encoding="utf-8")
    return ScoreOutcome(report, gates, out)


@dataclass(frozen=True)
class AuditOutcome:
    test: str
    passed: bool
    text: str
    folder: Path


def audit_results(test: str, results_dir: Path, *, out: Path | None = None,
                  eos_token_id: int = 2, min_tokens: float | None = None,
                  max_tokens: float | None = None, references: Path | None = None,
                  tokenizer: str = "builtin", threshold: float | None = None) -> AuditOutcome:
    """Judge an audit run's accuracy log as MLPerf's verification script does and write
    the verdict folder in MLPerf's layout (``TEST06/verify_accuracy.txt`` ...)."""
    t = test.upper()
    run = read_results(results_dir).run
    log_path, entries = _log(results_dir)
    dest = out or results_dir
    if t == "TEST06":
        r6 = verify_test06(entries, run.scenario, eos_token_id)
        folder = write_test06(dest, r6, log_path)
        return AuditOutcome(t, r6.passed, r6.text(), folder)
    if t == "TEST09":
        lo = 1150.38 if min_tokens is None else min_tokens
        hi = 1406.02 if max_tokens is None else max_tokens
        r9 = verify_test09(entries, lo, hi)
        folder = write_test09(dest, r9, log_path, results_dir)
        return AuditOutcome(t, r9.passed, r9.text(), folder)
    if t == "TEST07":
        if references is None:
            raise ConfigError("TEST07 scores the run's outputs: give --references FILE (the "
                              "GPQA compliance dataset) and --tokenizer PATH")
        preset = find_benchmark(run.round, run.benchmark)
        refs = load_references(preset.name, references)
        report = evaluate(preset.name, entries, refs, _tokenizer(tokenizer).decode)
        score = report.metrics.get("exact_match")
        r7 = verify_test07(score, 60.698 if threshold is None else threshold,
                           json.dumps(report.metrics))
        folder = write_test07(dest, r7, log_path, results_dir)
        return AuditOutcome(t, r7.passed, r7.text(), folder)
    raise ConfigError(f"unknown audit {test!r}; choose TEST06, TEST07 or TEST09 (or the "
                      "tokenmark audits caching and streaming)")


def own_audit(kind: str, config: OpenAIConfig, dataset: Dataset, samples: int = 8
              ) -> AuditResult:
    """tokenmark's own audits (not MLPerf's) against an OpenAI-compatible target.

    ``caching``: each sample twice in a row; repeats much faster than first answers mean
    a response cache. ``streaming``: streamed and non-streamed answers must be equal.
    """
    if samples < 1:
        raise ConfigError("give at least one sample to audit")
    cfg = check_target(config)
    idx: Sequence[int] = list(range(min(samples, len(dataset))))

    async def main() -> AuditResult:
        clock = MonotonicClock()
        if kind == "caching":
            sut = OpenAIHttpSUT(clock, cfg)
            await sut.start()
            try:
                return await caching_audit(sut, dataset, idx)
            finally:
                await sut.stop()
        if kind == "streaming":
            from dataclasses import replace

            a = OpenAIHttpSUT(clock, replace(cfg, stream=True, keep_text=True))
            b = OpenAIHttpSUT(clock, replace(cfg, stream=False, keep_text=True))
            await a.start()
            await b.start()
            try:
                return await stream_equivalence_audit(a, b, dataset, idx)
            finally:
                await a.stop()
                await b.stop()
        raise ConfigError(f"unknown tokenmark audit {kind!r}; choose caching or streaming")

    return asyncio.run(main())


def serve_hf(model_dir: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve a local Hugging Face model (CPU) over the OpenAI-compatible API until killed."""

    async def main() -> None:
        server = EngineHTTPServer(HFEngine(model_dir), host=host, port=port)
        await server.start()
        print(f"READY {server.url}", flush=True)
        await server.serve_forever()

    asyncio.run(main())
