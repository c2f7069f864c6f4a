"""The compliance tests' ``audit.config`` files, as settings tokenmark runs with.

LoadGen applies ``audit.config`` (the file named in ``StartTest``, by default
``audit.config`` in its working directory) over every other setting; the verification
scripts read their own thresholds from the same file (``test07_accuracy_threshold``,
``test09_min/max_output_tokens``), which LoadGen ignores. :data:`AUDITS` holds each LLM
test's file as published in ``mlcommons/inference`` ``compliance/TEST0x/`` (values, not
text, are reproduced), and

* :func:`apply_audit` turns one into a :class:`~tokenmark.mlperf.settings.TestSettings` (the mode
  becomes PerformanceOnly, the seed goes into ``Seeds.accuracy_log``): how tokenmark's
  own load generator runs an audit;
* :func:`audit_config_text` writes it back as an ``audit.config`` file (the official
  file's keys, every one a ``*.*.`` wildcard as published): what the official LoadGen
  reads when ``tokenmark run --loadgen official --audit TEST06`` runs it;
* :func:`read_audit_config` reads any such file with LoadGen's ``model.scenario.key``
  lookup, for tests that have no entry here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Final

from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import Mode, TestSettings

__all__ = ["AUDITS", "Audit", "apply_audit", "audit_config_text",
           "audit_for", "read_audit_config"]

TEST06_SEED: Final = 720381539243781796


@dataclass(frozen=True)
class Audit:
    """One compliance test's settings (``None``: left as the run has it)."""

    test: str
    accuracy_log_rng_seed: int
    accuracy_log_sampling_target: int
    min_query_count: int
    min_duration_ms: int = 0
    sample_concatenate_permutation: bool = False
    performance_issue_unique: bool = False
    #: The verification script's own keys (test07_accuracy_threshold, ...).
    thresholds: MappingProxyType[str, float] = field(
        default_factory=lambda: MappingProxyType({}))


AUDITS: Final = MappingProxyType({
    "TEST06": Audit("TEST06", TEST06_SEED, 100, 100),
    "TEST07": Audit("TEST07", TEST06_SEED, 990, 990, performance_issue_unique=True,
                    thresholds=MappingProxyType({"test07_accuracy_threshold": 60.698})),
    "TEST09": Audit("TEST09", TEST06_SEED, 10000, 6396, performance_issue_unique=True,
                    thresholds=MappingProxyType({"test09_min_output_tokens": 1150.38,
                                                 "test09_max_output_tokens": 1406.02})),
})


def audit_for(test: str) -> Audit:
    key = test.strip().upper()
    if key not in AUDITS:
        raise ConfigError(f"unknown compliance test {test!r}; choose one of: "
                          f"{', '.join(AUDITS)}")
    return AUDITS[key]


def apply_audit(settings: TestSettings, audit: Audit) -> TestSettings:
    """``settings`` with the audit's keys over them, as LoadGen applies ``audit.config``."""
    return replace(
        settings,
        mode=Mode.PERFORMANCE,
        seeds=replace(settings.seeds, accuracy_log=audit.accuracy_log_rng_seed),
        accuracy_log_sampling_target=audit.accuracy_log_sampling_target,
        accuracy_log_probability=0.0,
        min_query_count=audit.min_query_count,
        min_duration_ms=audit.min_duration_ms,
        sample_concatenate_permutation=audit.sample_concatenate_permutation,
        performance_issue_unique=audit.performance_issue_unique,
        performance_issue_same=False,
    )


def audit_config_text(audit: Audit, source: str = "") -> str:
    """``audit``'s ``audit.config``: the keys of the official file, in its order.

    LoadGen reads ``mode``, the accuracy-log seed and sampling target, the minimum query
    count and duration, ``sample_concatenate_permutation`` and ``performance_issue_unique``
    (written only where the test sets it, as in the official files); the verification
    thresholds follow for ``run_verification.py``. :func:`read_audit_config` reads the
    text back to ``audit``.
    """
    lines = ["# The format of this config file is 'key = value'.",
             f"# {audit.test} audit.config" + (f", written by {source}" if source else "")
             + " (values of mlcommons/inference compliance/"
             f"{audit.test}/audit.config)",
             "*.*.mode = 2",
             f"*.*.accuracy_log_rng_seed = {audit.accuracy_log_rng_seed}",
             f"*.*.accuracy_log_sampling_target = {audit.accuracy_log_sampling_target}",
             f"*.*.min_query_count = {audit.min_query_count}",
             f"*.*.min_duration = {audit.min_duration_ms}"]
    if audit.performance_issue_unique:
        lines.append("*.*.performance_issue_unique = 1")
    lines.append(f"*.*.sample_concatenate_permutation = "
                 f"{int(audit.sample_concatenate_permutation)}")
    lines += [f"*.*.{k} = {v:g}" for k, v in audit.thresholds.items()]
    return "\n".join(lines) + "\n"


_LINE: Final = re.compile(r"^\s*([^=#\s]+)\s*=\s*([^#]*?)\s*(?:#.*)?$")


def read_audit_config(path: Path, model: str = "*", scenario: str = "*",
                      test: str = "custom") -> Audit:
    """An ``audit.config`` file as an :class:`Audit` (LoadGen's key lookup order)."""
    kv: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m:
            kv[m.group(1)] = m.group(2)

    def get(key: str) -> str | None:
        for k in (f"{model}.{scenario}.{key}", f"*.{scenario}.{key}", f"{model}.*.{key}",
                  f"*.*.{key}"):
            if k in kv:
                return kv[k]
        return None

    def num(key: str, default: float = 0.0) -> float:
        v = get(key)
        try:
            return default if v is None else float(v)
        except ValueError:
            raise ConfigError(f"{path}: {key} = {v!r} is not a number") from None

    def integer(key: str, default: int = 0) -> int:
        v = get(key)
        try:  # seeds are 64-bit: a float would round them
            return default if v is None else int(v, 0)
        except ValueError:
            return int(num(key, default))

    mode = get("mode")
    if mode is not None and int(num("mode")) != 2:
        raise ConfigError(f"{path}: mode = {mode}; tokenmark runs audits in performance "
                          "mode (2) only")
    thresholds = {k.rsplit(".", 1)[-1]: float(v) for k, v in kv.items()
                  if k.rsplit(".", 1)[-1].startswith(("test07_", "test09_"))}
    return Audit(
        test=test,
        accuracy_log_rng_seed=integer("accuracy_log_rng_seed"),
        accuracy_log_sampling_target=integer("accuracy_log_sampling_target"),
        min_query_count=integer("min_query_count", 100),
        min_duration_ms=integer("min_duration"),
        sample_concatenate_permutation=num("sample_concatenate_permutation") != 0,
        performance_issue_unique=num("performance_issue_unique") != 0,
        thresholds=MappingProxyType(thresholds),
    )
