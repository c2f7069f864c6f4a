"""The Python entry points of reproducibility and trust (:mod:`tokenmark.trust`).

- :func:`run_watchers`: what a run records beside its records: the workload manifest and
  issued-request hash, the environment fingerprint, the client monitor, the server's
  Prometheus metrics, and the client-capacity check.
- :func:`apply_manifest` / :func:`load_plan` / :func:`check_workload`: re-run a manifest
  (``tokenmark run --manifest``): settings and workload rebuilt from it (the options the
  user gives beat it), every file and fingerprint checked.
- :func:`calibrate_client`: what this client sustains (cached per machine).
- :func:`make_keys`, :func:`bundle_run`, :func:`verify_bundle`: signed result bundles,
  with the signer recorded in the results database.
- :func:`reproduce`: rerun a result's manifest against another deployment and read the
  difference against a tolerance; :func:`regression_gate`: the CI gate between two runs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenmark.adapters.openai_target import (
    OpenAIConfig,
    api_key,
    auth_headers,
    secrets,
    ssl_context,
)
from tokenmark.api.assemble import WorkloadSpec, build_workload, http_sut_factory
from tokenmark.api.run import RunResult, RunWatcher, run_benchmark
from tokenmark.config.layering import LayeredSettings, Pinned
from tokenmark.config.runspec import RELOCATABLE, ManifestLayer, RunSpec, TrustOptions
from tokenmark.dataset import Dataset
from tokenmark.errors import BadInputError, ConfigError, DatasetError
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.rules import Finding
from tokenmark.mlperf.scenarios import Schedule
from tokenmark.mlperf.settings import EffectiveSettings
from tokenmark.records import RequestRecord
from tokenmark.trust import selfcal
from tokenmark.trust.canonical import file_sha256
from tokenmark.trust.compare import (
    DEFAULT_TOLERANCE,
    Regression,
    Reproduction,
    load_run,
    regression,
    reproduction,
)
from tokenmark.trust.fingerprint import EnvironmentWatcher, ServerProbe
from tokenmark.trust.manifest import (
    Manifest,
    ManifestWatcher,
    Sampling,
    build_content,
    check_dataset,
    check_files,
    load_manifest,
)
from tokenmark.trust.monitor import ClientMonitor
from tokenmark.trust.prometheus import PrometheusWatcher, Tolerances

if TYPE_CHECKING:  # the results store and the signing code load where they are used
    from tokenmark.store.signatures import Signature  # (not on `run`'s path)
    from tokenmark.trust import bundle as _bundle

__all__ = [
    "CapacityCheck",
    "Plan",
    "Reproduced",
    "Signed",
    "apply_manifest",
    "bundle_run",
    "calibrate_client",
    "check_workload",
    "load_plan",
    "make_keys",
    "manifest_layer",
    "regression_gate",
    "reproduce",
    "run_watchers",
    "signers",
    "verify_bundle",
]

PathLike = str | os.PathLike[str]


# -- manifests --------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A manifest turned back into the inputs of a run."""

    manifest: Manifest
    layered: LayeredSettings
    spec: WorkloadSpec
    sampling: Sampling | None


def manifest_layer(path: Path) -> tuple[Manifest, ManifestLayer]:
    """Read a manifest (or a results folder holding one) and its hash: the layer
    :meth:`RunSpec.with_manifest <tokenmark.config.runspec.RunSpec.with_manifest>` puts
    over a spec."""
    m = load_manifest(path)
    spec_d = m.spec
    names = {f.name for f in dataclasses.fields(WorkloadSpec)}
    unknown = sorted(set(spec_d) - names)
    if unknown:
        raise ConfigError(f"{m.source}: unknown workload options {', '.join(unknown)}; run "
                          f"it with the tokenmark version that wrote it ({m.written_by})")
    sampling = m.sampling
    return m, ManifestLayer(
        Pinned(m.settings, f"the manifest {m.source}", m.sha256), spec_d,
        None if sampling is None else dataclasses.asdict(sampling))


def apply_manifest(spec: RunSpec) -> tuple[RunSpec, Manifest | None, list[str]]:
    """``spec`` over its manifest (``spec.trust.manifest``; none: unchanged, None, []):
    :meth:`RunSpec.with_manifest`, the manifest's files that the user did not replace
    found (a moved one beside the manifest) and checked (one that changed is a
    DatasetError naming it), and one line for each file option the user gave that is not
    the manifest's (another file, or the same path with other content): with
    :meth:`RunSpec.manifest_changes`, what makes the run not a re-run."""
    if spec.trust.manifest is None:
        return spec, None, []
    m, layer = manifest_layer(spec.trust.manifest)
    spec = spec.with_manifest(layer)
    given = {role for role in RELOCATABLE if spec.is_given("dataset", role)}
    wl = m.content["workload"]
    files: Mapping[str, Any] = wl.get("files", {})

    def only(keep: bool) -> Manifest:
        return Manifest({**m.content, "workload": {**wl, "files": {
            k: v for k, v in files.items() if (k.split("/", 1)[0] in given) == keep}}},
            source=m.source)

    found = check_files(only(False), {f.name: getattr(spec.dataset, f.name)
                                      for f in dataclasses.fields(WorkloadSpec)})
    changed: list[str] = []
    hashed = {k.split("/", 1)[0] for k in files}
    for role in sorted(given - hashed):
        if found[role] != layer.workload.get(role, getattr(WorkloadSpec(), role)):
            changed.append(f"--{role.replace('_', '-')} {found[role]} (recorded "
                           f"{layer.workload.get(role)})")
    if given & hashed:
        try:
            check_files(only(True), found)
        except DatasetError as e:
            changed.append(str(e).split(";")[0])
    return dataclasses.replace(spec, dataset=WorkloadSpec(**found)), m, changed


def load_plan(path: Path, *, relocate: Mapping[str, Path] | None = None) -> Plan:
    """Read a manifest (or a results folder holding one) and check the files it names.

    ``relocate`` gives new paths for files that moved (``dataset``, ``trace``,
    ``chat_template_file``, ``image_dir``, ``tokenizer``); their content is still checked.
    """
    moved: dict[str, Any] = {role: str(p) if role == "tokenizer" else Path(p)
             for role, p in (relocate or {}).items()}
    spec, m, changed = apply_manifest(RunSpec(dataset=WorkloadSpec(**moved),
                                              trust=TrustOptions(manifest=path)))
    assert m is not None
    if changed:
        raise DatasetError(f"{changed[0]}; relocate the file the manifest was made from")
    return Plan(m, spec.settings(), spec.dataset, m.sampling)


def check_workload(plan: Plan, dataset: Dataset) -> None:
    """Raise DatasetError unless ``dataset`` is the manifest's (before any request)."""
    check_dataset(plan.manifest, dataset)


# -- watchers ---------------------------------------------------------------------------


class CapacityCheck:
    """A watcher that judges the planned load against this client's capacity before the
    run (refusing it above ``max_share`` unless ``allow``) and records the judgement."""

    key = "client_capacity"

    def __init__(self, capacity: selfcal.Capacity, dataset: Dataset, *,
                 max_share: float = 0.5, allow: bool = False) -> None:
        self.capacity = capacity
        self.dataset = dataset
        self.max_share = max_share
        self.allow = allow
        self.judgement: selfcal.Judgement | None = None

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        self.judgement = selfcal.judge(eff, schedule, self.dataset, self.capacity,
                                       max_share=self.max_share, allow=self.allow)

    async def start(self, output_dir: Path) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        pass

    async def stop(self) -> None:
        pass

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        assert self.judgement is not None
        return self.judgement.to_json(), []


def run_watchers(
    layered: LayeredSettings,
    spec: WorkloadSpec,
    dataset: Dataset,
    *,
    target: OpenAIConfig | None = None,
    plan: Plan | None = None,
    monitor: bool = True,
    environment: bool = True,
    metrics: bool = True,
    metrics_interval_s: float = 1.0,
    capacity: selfcal.Capacity | None = None,
    max_share: float = 0.5,
    allow_overload: bool = False,
) -> list[RunWatcher]:
    """The watchers of one run (pass them to :func:`tokenmark.api.run.run_benchmark`)."""
    sampling = Sampling.of(target) if target is not None else None
    if plan is not None:
        check_workload(plan, dataset)
        watchers: list[RunWatcher] = [ManifestWatcher(loaded=plan.manifest)]
    else:
        watchers = [ManifestWatcher(build_content(layered, spec, dataset, sampling))]
    if capacity is not None:
        watchers.append(CapacityCheck(capacity, dataset, max_share=max_share,
                                      allow=allow_overload))
    probe = None
    if target is not None:
        key = api_key(target)
        hidden = secrets(target, key)
        lines = auth_headers(target, key)
        ctx = ssl_context(target)
        probe = ServerProbe(target.urls, lines, hidden, ssl_context=ctx,
                            timeout_s=min(target.connect_timeout_s or 2.0, 2.0))
        if metrics:
            watchers.append(PrometheusWatcher(
                target.urls, interval_s=metrics_interval_s, header_lines=lines,
                ssl_context=ctx, secrets=hidden,
                tolerances=Tolerances(check_prompt_tokens=spec.tokenizer not in ("", "builtin"))))
    if environment:
        watchers.append(EnvironmentWatcher(server=probe))
    if monitor:
        watchers.append(ClientMonitor())
    return watchers


# -- self-calibration -------------------------------------------------------------------


def calibrate_client(*, workers: int = 0, duration_s: float = 3.0, concurrency: int = 32,
                     output_tokens: int = 64, force: bool = False,
                     max_age_days: float = 7.0) -> tuple[selfcal.Capacity, bool]:
    """This client's capacity and whether it came from the cache."""
    key = selfcal.cache_key(workers=workers, concurrency=concurrency,
                            output_tokens=output_tokens)
    if not force:
        cap = selfcal.cached(key, max_age_days=max_age_days)
        if cap is not None:
            return cap, True
    cap = selfcal.measure(duration_s=duration_s, concurrency=concurrency,
                          output_tokens=output_tokens, workers=workers)
    if cap.completed == 0:
        raise BadInputError("calibration completed no request against the built-in "
                            "server; check that loopback connections work")
    selfcal.store(cap)
    return cap, False


# -- keys and bundles -------------------------------------------------------------------


def make_keys(name: str, *, directory: Path | None = None, passphrase_env: str = "",
              force: bool = False) -> _bundle.KeyPair:
    from tokenmark.trust import bundle as _bundle

    return _bundle.make_keys(name, directory=directory, passphrase_env=passphrase_env,
                             force=force)


@dataclass(frozen=True)
class Signed:
    path: Path
    signer: str
    key_id: str
    run_hash: str
    files: int
    stored_in: str = ""


def _record(db: PathLike | None, run_hash: str, key_id: str, signer: str, signed_utc: str,
            bundle_sha256: str) -> str:
    """Record a verified signer of a run in the results database; returns its URL."""
    from tokenmark.store import Store
    from tokenmark.store.signatures import Signature, add_signature

    with Store.open(db) as st:
        add_signature(st, Signature(run_hash, key_id, signer, signed_utc, True, bundle_sha256))
        return st.url


def bundle_run(run: Path, *, key: Path | None = None, output: Path | None = None,
               passphrase_env: str = "", db: PathLike | None = None,
               store: bool = True) -> Signed:
    """Pack and sign a results folder; record the signer in the results database."""
    from tokenmark.trust import bundle as _bundle

    if not run.is_dir():
        raise BadInputError(f"{run} is not a results folder; give the folder 'tokenmark "
                            "run' wrote")
    key_path = key or _bundle.default_private_key()
    out, doc = _bundle.make_bundle(run, key_path, output=output,
                                   passphrase_env=passphrase_env)
    where = ""
    if store:
        where = _record(db, doc["run_hash"], doc["key_id"], doc["signer"],
                        doc["signed_utc"], file_sha256(out))
    n = sum(1 for p in run.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))
    return Signed(out, doc["signer"], doc["key_id"], doc["run_hash"], n, where)


def verify_bundle(path: Path, *, keys: Sequence[Path] = (), keys_dir: Path | None = None,
                  store: bool = False, db: PathLike | None = None) -> _bundle.Verified:
    """Verify a bundle against the trusted keys; with ``store``, import its result into
    the database with the verified signer."""
    from tokenmark.trust import bundle as _bundle

    trusted = _bundle.trusted_keys(directory=keys_dir, extra=tuple(keys))
    v = _bundle.verify_bundle(path, trusted)
    if store:
        with tempfile.TemporaryDirectory(prefix="tokenmark-verify-") as tmp:
            folder = _bundle.extract_run(path, Path(tmp) / path.name.split(".")[0])
            from tokenmark.api import results as results_api

            report = results_api.store_run(folder, db=db)
            if report.errors:
                raise BadInputError(f"the bundle verified but its result was not stored: "
                                    f"{report.errors[0]}")
        _record(db, v.run_hash, v.key_id, v.signer, v.signed_utc, file_sha256(path))
    return v


def signers(run_hashes: Sequence[str] | None = None, *, db: PathLike | None = None
            ) -> dict[str, list[Signature]]:
    from tokenmark.api import results as results_api

    return results_api.signers(run_hashes, db=db)


# -- reproducing and gating -------------------------------------------------------------


@dataclass(frozen=True)
class Reproduced:
    original: Path
    rerun: Path
    result: RunResult
    reading: Reproduction


def reproduce(
    result: Path,
    target: OpenAIConfig,
    *,
    output: Path | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    workers: int = 0,
    relocate: Mapping[str, Path] | None = None,
    progress: Callable[[Any, float], None] | None = None,
) -> Reproduced:
    """Rerun ``result``'s manifest against ``target`` and read the difference."""
    folder = result.parent if result.is_file() else result
    original = load_run(folder)  # fail early when the original cannot be compared
    plan = load_plan(folder, relocate=relocate)
    cfg = plan.sampling.apply(target) if plan.sampling is not None else target
    workload = build_workload(plan.spec, plan.layered)
    factory = http_sut_factory(cfg, workers=workers)
    watchers = run_watchers(plan.layered, plan.spec, workload.dataset, target=cfg, plan=plan)
    out = output or folder.parent / (
        f"{folder.name}-reproduced-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    trace = None
    if workload.trace_offsets_ns is not None and workload.trace_samples is not None:
        trace = (workload.trace_offsets_ns, workload.trace_samples)
    res = run_benchmark(plan.layered, workload.dataset, factory, out, progress=progress,
                        trace=trace, watchers=watchers)
    reading = reproduction(original, load_run(out), tolerance=tolerance)
    return Reproduced(folder, out, res, reading)


def regression_gate(baseline: Path, run: Path, *, threshold: float) -> Regression:
    """``tokenmark compare BASELINE RUN --max-regression``: which figures regressed."""
    return regression(load_run(baseline), load_run(run), threshold=threshold)


# The name before issue 20 (the simulation API's ``calibrate`` fits the performance model).
calibrate = calibrate_client
