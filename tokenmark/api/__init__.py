"""The Python entry points, one module per command family; the CLI is a thin layer over them.

- :mod:`tokenmark.api.run`: one benchmark run (``tokenmark run``);
  :mod:`tokenmark.api.launch`: a run from a :class:`RunSpec` (``tokenmark run`` itself:
  :func:`prepare` and :meth:`Launch.run`, or :func:`run_spec`);
  :mod:`tokenmark.api.suts`: choosing and building the system under test;
- :mod:`tokenmark.api.assemble`: the workload and the HTTP system under test of a run;
- :mod:`tokenmark.api.scale`: runs of many runs (``find-peak``, ``sweep``, ``scaling-run``);
- :mod:`tokenmark.api.simulation`: the simulator (``tokenmark simulate``);
- :mod:`tokenmark.api.results`: the results database, the importer and the analyses
  (``import``, ``db``, ``leaderboard``, ``compare``, ...); :mod:`tokenmark.api.tables`
  turns their answers into plain tables;
- :mod:`tokenmark.api.trust`: plans, bundles, reproducing and gating;
- :mod:`tokenmark.api.submission`: official-LoadGen runs, packaging and checking a tree;
- :mod:`tokenmark.api.correctness`: accuracy scores, compliance verdicts, audits.

The names below are the curated public API, importable from here. They load on first
use (PEP 562): ``import tokenmark.api`` imports none of the modules above, so a command
pays only for what it calls.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenmark.api.assemble import (
        Workload,
        WorkloadSpec,
        build_workload,
        http_sut_factory,
    )
    from tokenmark.api.correctness import (
        AuditOutcome,
        ScoreOutcome,
        audit_results,
        own_audit,
        score_results,
        serve_hf,
    )
    from tokenmark.api.launch import Launch, Notice, RunSpec, prepare, run_spec
    from tokenmark.api.results import (
        DbStatus,
        ImportReport,
        RefreshReport,
        compare,
        compare_accelerators,
        db_status,
        db_upgrade,
        get_run,
        import_results,
        leaderboard,
        list_results,
        list_runs,
        published_table,
        refresh_published,
        reproducibility,
        scaling_efficiency,
        signers,
        software_gains,
        store_run,
        top,
    )
    from tokenmark.api.run import (
        EXIT_BAD_INPUT,
        EXIT_INTERNAL,
        EXIT_INTERRUPTED,
        EXIT_INVALID,
        EXIT_VALID,
        EmulatedTarget,
        RunResult,
        RunWatcher,
        SutSpec,
        default_dataset,
        make_sut,
        run_benchmark,
    )
    from tokenmark.api.scale import (
        PeakResult,
        ScalingResult,
        SweepResult,
        find_peak,
        scaling_run,
        sweep,
    )
    from tokenmark.api.simulation import (
        SimulationResult,
        fit_perf_model,
        simulate,
        simulate_scaling,
    )
    from tokenmark.api.submission import (
        check_submission,
        package_submission,
        run_official_loadgen,
    )
    from tokenmark.api.trust import (
        Plan,
        Reproduced,
        Signed,
        bundle_run,
        calibrate_client,
        check_workload,
        load_plan,
        make_keys,
        regression_gate,
        reproduce,
        run_watchers,
        verify_bundle,
    )

#: Where each public name lives (module of this package). Each name means one thing:
#: the simulator's ``fit_perf_model`` and ``simulate_scaling``, the trust API's
#: ``calibrate_client`` and the results API's ``scaling_efficiency`` were all
#: ``calibrate`` or ``scaling`` before issue 20 (those names stay in their modules only).
_FROM: dict[str, tuple[str, ...]] = {
    "run": ("EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_INVALID",
            "EXIT_VALID", "EmulatedTarget", "RunResult", "RunWatcher", "SutSpec",
            "default_dataset", "make_sut", "run_benchmark"),
    "assemble": ("Workload", "WorkloadSpec", "build_workload", "http_sut_factory"),
    "launch": ("Launch", "Notice", "RunSpec", "prepare", "run_spec"),
    "scale": ("PeakResult", "ScalingResult", "SweepResult", "find_peak", "scaling_run",
              "sweep"),
    "simulation": ("SimulationResult", "fit_perf_model", "simulate", "simulate_scaling"),
    "results": ("DbStatus", "ImportReport", "RefreshReport", "compare",
                "compare_accelerators", "db_status", "db_upgrade", "get_run",
                "import_results", "leaderboard", "list_results", "list_runs",
                "published_table", "refresh_published", "reproducibility",
                "scaling_efficiency", "signers",
                "software_gains", "store_run", "top"),
    "trust": ("Plan", "Reproduced", "Signed", "bundle_run", "calibrate_client",
              "check_workload", "load_plan",
              "make_keys", "regression_gate", "reproduce", "run_watchers", "verify_bundle"),
    "submission": ("check_submission", "package_submission", "run_official_loadgen"),
    "correctness": ("AuditOutcome", "ScoreOutcome", "audit_results", "own_audit",
                    "score_results", "serve_hf"),
}
_WHERE: dict[str, str] = {name: mod for mod, names in _FROM.items() for name in names}

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_VALID",
    "AuditOutcome",
    "DbStatus",
    "EmulatedTarget",
    "ImportReport",
    "Launch",
    "Notice",
    "PeakResult",
    "Plan",
    "RefreshReport",
    "Reproduced",
    "RunResult",
    "RunSpec",
    "RunWatcher",
    "ScalingResult",
    "ScoreOutcome",
    "Signed",
    "SimulationResult",
    "SutSpec",
    "SweepResult",
    "Workload",
    "WorkloadSpec",
    "audit_results",
    "build_workload",
    "bundle_run",
    "calibrate_client",
    "check_submission",
    "check_workload",
    "compare",
    "compare_accelerators",
    "db_status",
    "db_upgrade",
    "default_dataset",
    "find_peak",
    "fit_perf_model",
    "get_run",
    "http_sut_factory",
    "import_results",
    "leaderboard",
    "list_results",
    "list_runs",
    "load_plan",
    "make_keys",
    "make_sut",
    "own_audit",
    "package_submission",
    "prepare",
    "published_table",
    "refresh_published",
    "regression_gate",
    "reproduce",
    "reproducibility",
    "run_benchmark",
    "run_official_loadgen",
    "run_spec",
    "run_watchers",
    "scaling_efficiency",
    "scaling_run",
    "score_results",
    "serve_hf",
    "signers",
    "simulate",
    "simulate_scaling",
    "software_gains",
    "store_run",
    "sweep",
    "top",
    "verify_bundle",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562); then it is a plain global."""
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'tokenmark.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tokenmark.api.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
