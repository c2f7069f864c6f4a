"""The run spec: everything a benchmark run is given, typed and grouped, with the layering
of its sources in one place (issue 20).

``tokenmark run``, ``find-peak``, ``sweep``, ``scaling-run``, a ``--config`` TOML file,
an MLPerf ``user.conf``, a workload manifest and the Python API all describe a run as a
:class:`RunSpec`:

- ``load``: benchmark, scenario, round, profile and the settings flags (rates, limits,
  lengths of the run, seeds), how the load is driven (load generator, clock, Ray);
- ``dataset``: the workload (:class:`WorkloadSpec`: synthetic lengths, a dataset file,
  tokenizer, images, a trace);
- ``sut``: the built-in system under test (the emulated server, the latency model, null,
  a real model);
- ``target``: an OpenAI-compatible HTTP target and how the client talks to it;
- ``output``: where results go and what is printed;
- ``trust``: manifests, client calibration and watchers.

:meth:`RunSpec.from_options` applies the one rule of the README, "flags override both":
a flag the user gave beats the TOML file's key, even a falsy one; a flag left at its
default gives way to the file; neither gives the default. :data:`TOML_KEYS` says which
option each file key sets. The ``[settings]`` table and ``user.conf`` are layered under
the flags by :func:`~tokenmark.config.layering.build_settings` (:meth:`RunSpec.settings`).
A workload manifest (``--manifest``, :meth:`RunSpec.with_manifest`) is one more layer, in
place of the defaults: the recorded settings, seeds, workload and sampling, each beaten
by the same option given (a flag, a file's key, user.conf, a profile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tokenmark.config.layering import (
    FlagsOverFile,
    LayeredSettings,
    Pinned,
    build_settings,
    default_scenario,
    read_toml,
)
from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import Scenario, Seeds

__all__ = ["TOML_KEYS", "LoadOptions", "ManifestLayer", "OutputOptions", "RunSpec",
           "SutOptions", "TargetOptions", "TrustOptions", "WorkloadSpec", "headers"]


@dataclass(frozen=True)
class LoadOptions:
    """What is run and how the load is driven (``[run]`` table; settings flags)."""

    benchmark: str = "llama3.1-8b"
    scenario: str = ""  # '' = the benchmark's default scenario
    round: str = "v6.0"
    profile: str = ""
    user_conf: Path | None = None
    qps: float | None = None
    concurrency: int | None = None
    max_concurrency: int | None = None
    burstiness: float | None = None
    min_duration: float | None = None  # seconds
    max_duration: float | None = None
    min_queries: int | None = None
    max_queries: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    percentile: float | None = None  # percent
    warmup: float | None = None  # seconds
    cooldown: float | None = None
    send_lag_limit_ms: float | None = None
    error_rate_limit: float | None = None
    seed: int | None = None
    dataset_size: int | None = None
    mode: str | None = None  # None: the file's or the preset's (performance)
    audit: str | None = None
    loadgen: str = "tokenmark"
    find_peak: bool = False
    virtual_time: bool = False
    distributed: str = ""
    ray_address: str | None = None
    ray_workers: int = 2


@dataclass(frozen=True)
class WorkloadSpec:
    """The workload (``[dataset]`` table)."""

    # synthetic (the default)
    size: int | None = None
    input_lengths: str | None = None
    output_lengths: str | None = None
    prefix_groups: int = 0
    prefix_tokens: int = 0
    conversations: int = 0
    turns: str = "3"
    system_tokens: int = 0
    # a dataset file
    dataset: Path | None = None
    fmt: str | None = None
    columns: str = ""
    allow_pickle: bool = False
    sharegpt_turns: str = "first"
    mlperf_output: str = "max"
    limit: int | None = None
    max_context: int | None = None
    skip_long: bool = False
    # tokenizer and chat template
    tokenizer: str = "builtin"
    chat_template: bool = False
    chat_template_file: Path | None = None
    # images
    images_per_request: int = 0
    image_size: str = "512x512"
    image_dir: Path | None = None
    verify_images: bool = False
    # a trace
    trace: Path | None = None
    trace_format: str = "mooncake"
    trace_speedup: float = 1.0
    trace_sort: bool = False
    trace_block_tokens: int = 512
    seed: int = 0


@dataclass(frozen=True)
class SutOptions:
    """The built-in system under test (``[sut]`` table)."""

    #: emulated, latency-model, null or hf; None: the emulated server, or the latency
    #: model when one of its options is given.
    kind: str | None = None
    ttft_ms: float | None = None  # latency model; None: 50
    tpot_ms: float | None = None  # None: 10
    max_batch: int | None = None
    batch_slope: float | None = None
    accelerator: str = ""  # emulated server; '' = H200
    accelerators: int = 0
    tp: int = 0
    replicas: int = 0
    precision: str = ""
    model_dir: Path | None = None  # hf
    pin_cpus: bool = True  # emulated: its process on one CPU, the client on the others

    @property
    def chosen(self) -> str:
        """The kind, or the default: the latency model when one of its options is given,
        else the emulated server."""
        if self.kind:
            return self.kind
        latency = (self.ttft_ms, self.tpot_ms, self.max_batch, self.batch_slope)
        return "latency-model" if any(v is not None for v in latency) else "emulated"


@dataclass(frozen=True)
class TargetOptions:
    """An OpenAI-compatible HTTP target (``[target]`` table)."""

    urls: tuple[str, ...] = ()
    api: str = ""  # '' = chat for images or reasoning models, else completions
    model: str = ""
    stream: bool = True
    include_usage: bool = True
    api_key_env: str = "OPENAI_API_KEY"
    headers: tuple[str, ...] = ()  # 'Name: value'
    ca_file: str = ""
    verify_tls: bool = True
    connect_timeout: float = 30.0
    first_token_timeout: float = 0.0
    request_timeout: float = 0.0
    pool_size: int = 0
    preconnect: int | None = None
    spare_connections: int = 4
    routing: str = "round-robin"
    max_tokens: int = 0
    ignore_eos: bool = False
    temperature: float | None = None
    extra_body: str = ""
    model_check: bool = True
    length_probe: bool = True
    max_event_bytes: int = 8 * 1024 * 1024
    workers: int = 0


@dataclass(frozen=True)
class OutputOptions:
    """Where results go and what is printed."""

    output: Path | None = None
    db: str | None = None
    no_db: bool = False
    progress: str = "auto"
    quiet: bool = False
    json: bool = False


@dataclass(frozen=True)
class TrustOptions:
    """Re-runs of a manifest, client calibration and the run's watchers."""

    manifest: Path | None = None
    calibrate: bool = False
    client_share: float = 0.5
    allow_client_overload: bool = False
    client_watch: bool = True
    metrics_interval: float = 1.0


_GROUPS = {"load": LoadOptions, "dataset": WorkloadSpec, "sut": SutOptions,
           "target": TargetOptions, "output": OutputOptions, "trust": TrustOptions}

#: Each option (the CLI's parameter name) -> (group, field). An option not listed has
#: the name of its field in the one group that has it.
OPTION_FIELDS: dict[str, tuple[str, str]] = {
    "round_": ("load", "round"),
    "dataset_size": ("load", "dataset_size"),
    "input_len": ("dataset", "input_lengths"),
    "output_len": ("dataset", "output_lengths"),
    "prefix_len": ("dataset", "prefix_tokens"),
    "system_len": ("dataset", "system_tokens"),
    "dataset_format": ("dataset", "fmt"),
    "skip_long_prompts": ("dataset", "skip_long"),
    "sut": ("sut", "kind"),
    "sut_ttft_ms": ("sut", "ttft_ms"),
    "sut_tpot_ms": ("sut", "tpot_ms"),
    "sut_max_batch": ("sut", "max_batch"),
    "sut_batch_slope": ("sut", "batch_slope"),
    "url": ("target", "urls"),
    "header": ("target", "headers"),
    "progress_mode": ("output", "progress"),
    "json_out": ("output", "json"),
    "client_watch": ("trust", "client_watch"),
}

#: The options a ``--config`` TOML file may set: option -> (table, key). A flag the user
#: gave beats the key; the key beats the flag's default. (``[settings]`` keys are
#: TestSettings fields, layered by build_settings; ``[target] headers`` add to --header.)
TOML_KEYS: dict[str, tuple[str, str]] = {
    **{name: ("run", name) for name in ("benchmark", "scenario", "profile")},
    "round_": ("run", "round"),
    **{name: ("dataset", name) for name in (
        "prefix_groups", "prefix_len", "conversations", "turns", "system_len", "columns",
        "sharegpt_turns", "mlperf_output", "limit", "max_context", "tokenizer",
        "chat_template", "images_per_request", "image_size", "trace", "trace_format")},
    "dataset": ("dataset", "path"),
    "dataset_size": ("dataset", "size"),
    "input_len": ("dataset", "input"),
    "output_len": ("dataset", "output"),
    "dataset_format": ("dataset", "format"),
    **{name: ("sut", name) for name in (
        "accelerator", "accelerators", "tp", "replicas", "precision", "model_dir",
        "pin_cpus")},
    "sut": ("sut", "kind"),
    "sut_ttft_ms": ("sut", "ttft_ms"),
    "sut_tpot_ms": ("sut", "tpot_ms"),
    "sut_max_batch": ("sut", "max_batch"),
    "sut_batch_slope": ("sut", "batch_slope"),
    **{name: ("target", name) for name in (
        "api", "model", "stream", "api_key_env", "ca_file", "routing", "ignore_eos",
        "temperature", "extra_body")},
    "url": ("target", "urls"),
}

_PATHS = {"dataset", "trace", "model_dir"}


def _field_of(name: str) -> tuple[str, str] | None:
    if name in OPTION_FIELDS:
        return OPTION_FIELDS[name]
    for group, cls in _GROUPS.items():
        if name in {f.name for f in fields(cls)}:
            return group, name
    return None


def _value(name: str, value: Any) -> Any:
    if name in _PATHS and value is not None and not isinstance(value, Path):
        return Path(value)
    if name in ("url", "header"):
        return tuple(value or ())
    if name == "progress_mode":
        return str(getattr(value, "value", value))
    return value


#: Workload options that name files: one given with a manifest is the same workload when
#: its content hashes as the manifest's file did (a file that moved), checked by
#: :func:`tokenmark.api.trust.apply_manifest`.
RELOCATABLE = ("dataset", "trace", "tokenizer", "image_dir", "chat_template_file")
#: What every request carries besides its prompt (the manifest's ``sampling``): target
#: options a manifest records. The model name is where to send, like the URL: the
#: manifest's is used only when none is given, and a different one keeps a re-run.
SAMPLING = ("api", "stream", "include_usage", "max_tokens", "ignore_eos", "temperature",
            "extra_body")
_FLAG_OF = {"fmt": "--format", "size": "--dataset-size", "seed": "--seed",
            "input_lengths": "--input-len", "output_lengths": "--output-len",
            "prefix_tokens": "--prefix-len", "system_tokens": "--system-len",
            "skip_long": "--skip-long-prompts", "round": "--round", "kind": "--sut",
            "urls": "--url", "headers": "--header"}


def flag_of(name: str) -> str:
    """The CLI flag of a spec field (named in errors)."""
    return _FLAG_OF.get(name, "--" + name.replace("_", "-"))


@dataclass(frozen=True)
class ManifestLayer:
    """What a workload manifest records (``tokenmark run --manifest``), read by
    :func:`tokenmark.api.trust.manifest_layer`: the settings exactly as the recorded run
    used them, its workload options (:class:`WorkloadSpec` fields) and what every request
    carried (``sampling``, None for a built-in system). In a spec's layering it stands
    where the defaults stand: everything the user gives beats it."""

    pinned: Pinned
    workload: Mapping[str, Any]
    sampling: Mapping[str, Any] | None = None


def headers(lines: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``Name: value`` lines as (name, value) pairs; a bad line is a ConfigError."""
    out = []
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"bad header {line!r}; write it as 'Name: value'")
        out.append((name.strip(), value.strip()))
    return tuple(out)


@dataclass(frozen=True)
class RunSpec:
    """Everything a run is given. Build it with :meth:`from_options` (flags and a file),
    or directly (the Python API): ``RunSpec(load=LoadOptions(benchmark=...))``."""

    load: LoadOptions = field(default_factory=LoadOptions)
    dataset: WorkloadSpec = field(default_factory=WorkloadSpec)
    sut: SutOptions = field(default_factory=SutOptions)
    target: TargetOptions = field(default_factory=TargetOptions)
    output: OutputOptions = field(default_factory=OutputOptions)
    trust: TrustOptions = field(default_factory=TrustOptions)
    #: The --config file and its tables (its [settings] table is layered by settings()).
    config: Path | None = None
    file: Mapping[str, Any] = field(default_factory=dict)
    #: The fields ("group.field") the user gave, by a flag or a file (:meth:`from_options`):
    #: with a manifest, a field given beats the manifest's even at its default value.
    #: None (a spec built in Python): the fields off their defaults count as given.
    given: frozenset[str] | None = None
    #: The manifest layer (:meth:`with_manifest`): the recorded run's settings, workload
    #: and sampling, in place of the defaults.
    manifest: ManifestLayer | None = None

    def __post_init__(self) -> None:
        # built in Python: the load's seed and dataset size give the workload's when it
        # gives none, as they do on the command line (from_options)
        ld, ds = self.load, self.dataset
        if self.given is None and ((ld.seed is not None and ds.seed == 0) or (
                ld.dataset_size is not None and ds.size is None)):
            object.__setattr__(self, "dataset", replace(
                ds, seed=ld.seed if ld.seed is not None and ds.seed == 0 else ds.seed,
                size=ds.size if ds.size is not None else ld.dataset_size))

    @classmethod
    def from_options(cls, options: Mapping[str, Any], given: frozenset[str] = frozenset(),
                     file: Mapping[str, Any] | None = None, *,
                     config: Path | None = None) -> RunSpec:
        """The spec of a command's options (by parameter name, as parsed), ``given`` the
        names of those the user gave (click's parameter source), under the TOML ``file``
        (read from ``config`` when not given). An option the spec does not know is
        ignored (a command's own options: --rates, --replicas, ...); a file's key for an
        option not passed applies all the same."""
        if file is None:
            file = read_toml(config) if config is not None else {}
        tables = {t: FlagsOverFile(file.get(t, {}), given) for t in
                  ("run", "dataset", "sut", "target")}
        values: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
        set_by_user: set[str] = set()
        # a file's key for an option the caller does not pass still applies
        absent = {name: None for name, (table, key) in TOML_KEYS.items()
                  if name not in options and key in file.get(table, {})}
        for name, value in {**options, **absent}.items():
            where = _field_of(name)
            if where is None:
                continue
            # the file's [dataset] size sizes the workload (below), not the settings
            if name in TOML_KEYS and name != "dataset_size":
                table, key = TOML_KEYS[name]
                value = tables[table](name, value, key)
                if key in file.get(table, {}):
                    set_by_user.add(f"{where[0]}.{where[1]}")
            if name in given:
                set_by_user.add(f"{where[0]}.{where[1]}")
            values[where[0]][where[1]] = _value(name, value)
        # the file's [target] headers add to the flags'
        extra = tuple(file.get("target", {}).get("headers", ()))
        values["target"]["headers"] = (*values["target"].get("headers", ()), *extra)
        load = values["load"]
        # --mode performance given beats a file's mode; left at its default, the file's
        # [settings] mode (or the preset's) holds
        if load.get("mode") == "performance" and "mode" not in given:
            load["mode"] = None
        for key in ("benchmark", "round"):
            if not load.get(key):
                load.pop(key, None)  # '' = the default
        ds = values["dataset"]
        ds["size"] = FlagsOverFile(file.get("dataset", {}), given)(
            "dataset_size", load.get("dataset_size"), "size")
        ds["seed"] = load.get("seed") or 0
        if "dataset_size" in given or "size" in file.get("dataset", {}):
            set_by_user.add("dataset.size")
        if "seed" in given:
            set_by_user.add("dataset.seed")
        for key in ("turns",):
            if key in ds:
                ds[key] = str(ds[key])
        for key in ("chat_template", "ignore_eos"):
            for group in ("dataset", "target"):
                if key in values[group]:
                    values[group][key] = bool(values[group][key])
        groups = {g: _GROUPS[g](**{k: v for k, v in values[g].items() if v is not None
                                   or _nullable(_GROUPS[g], k)})
                  for g in _GROUPS}
        return cls(**groups, config=config, file=file, given=frozenset(set_by_user))

    def settings(self) -> LayeredSettings:
        """The run's settings: the round's preset (or a manifest's recorded settings,
        :meth:`with_manifest`) < profile < the file's [settings] < user.conf < the flags
        (see :func:`~tokenmark.config.layering.build_settings`)."""
        ld = self.load
        seeds = None
        if ld.seed is not None:
            seeds = Seeds(qsl=ld.seed, sample_index=ld.seed + 1, schedule=ld.seed + 2)
        if self.manifest is not None:
            pinned = self.manifest.pinned
            return build_settings(ld.round, ld.benchmark, pinned.settings.scenario,
                                  profile=ld.profile, toml=dict(self.file),
                                  toml_name=str(self.config or ""), user_conf=ld.user_conf,
                                  overrides=self._overrides(pinned.settings.scenario),
                                  seeds=seeds, pinned=pinned)
        sc = Scenario.parse(ld.scenario) if ld.scenario else None
        if self.dataset.trace is not None:
            if sc not in (None, Scenario.TRACE):
                raise ConfigError(f"--trace replays the trace's own timing; drop --scenario "
                                  f"{sc.value}")
            sc = Scenario.TRACE
        if sc is None:
            sc = default_scenario(ld.round, ld.benchmark)
        return build_settings(ld.round, ld.benchmark, sc, profile=ld.profile,
                              toml=dict(self.file), toml_name=str(self.config or ""),
                              user_conf=ld.user_conf, overrides=self._overrides(sc),
                              seeds=seeds)

    def _overrides(self, sc: Scenario | None) -> dict[str, Any]:
        """The settings the load options give (None: not given)."""
        ld = self.load
        overrides: dict[str, Any] = {
            "min_duration_ms": _ms(ld.min_duration),
            "max_duration_ms": _ms(ld.max_duration),
            "min_query_count": ld.min_queries,
            "max_query_count": ld.max_queries,
            "ttft_latency_ms": ld.ttft_ms,
            "tpot_latency_ms": ld.tpot_ms,
            "target_latency_ms": ld.e2e_ms,
            "target_latency_percentile": None if ld.percentile is None else ld.percentile / 100,
            "concurrency": ld.concurrency,
            "max_concurrency": ld.max_concurrency,
            "burstiness": ld.burstiness,
            "warmup_ms": _ms(ld.warmup),
            "cooldown_ms": _ms(ld.cooldown),
            "send_lag_limit_ms": ld.send_lag_limit_ms,
            "error_rate_limit": ld.error_rate_limit,
        }
        if ld.dataset_size is not None:
            overrides["performance_sample_count"] = ld.dataset_size
            overrides["total_sample_count"] = ld.dataset_size
        if ld.qps is not None:
            overrides["offline_expected_qps" if sc is Scenario.OFFLINE else "target_qps"] = \
                ld.qps
        if ld.mode is not None:
            overrides["mode"] = ld.mode
        return overrides

    def is_given(self, group: str, name: str) -> bool:
        """Whether the user gave ``group.name`` (a flag or a file; in a spec built in
        Python, a field off its default)."""
        if self.given is not None:
            return f"{group}.{name}" in self.given
        f = next(f for f in fields(_GROUPS[group]) if f.name == name)
        default = f.default if f.default_factory is MISSING else f.default_factory()
        return bool(getattr(getattr(self, group), name) != default)

    def with_manifest(self, layer: ManifestLayer) -> RunSpec:
        """This spec over a manifest: the manifest stands where the defaults stand, so
        every option the user gave (a flag, a ``--config`` file, user.conf, a profile)
        beats the recorded one, and every option not given takes the recorded value:
        the workload options, the sampling (:data:`SAMPLING`; the model when none is
        given) and, in :meth:`settings`, the test settings and seeds. The benchmark, the
        round and the scenario are what the manifest recorded; another one given is a
        ConfigError (the recorded settings are another benchmark's). What the manifest
        does not record (the target's URLs and connections, the system under test, where
        results go, how the load is driven) is the spec's. :meth:`manifest_changes` says
        what the user's options changed."""
        name = layer.pinned.name
        s = layer.pinned.settings

        def other(what: str, mine: Any, recorded: Any) -> ConfigError:
            return ConfigError(f"{what} {mine!r} is not {name}'s {recorded!r}: a manifest "
                               "re-runs one benchmark and scenario; drop it, or drop "
                               "--manifest to run another")

        ld = self.load
        if self.is_given("load", "benchmark"):
            from tokenmark.mlperf.presets import resolve

            if resolve(ld.round or s.round, ld.benchmark)[0].name != s.benchmark:
                raise other("--benchmark", ld.benchmark, s.benchmark)
        if self.is_given("load", "round") and ld.round != s.round:
            raise other("--round", ld.round, s.round)
        if self.is_given("load", "scenario") and Scenario.parse(ld.scenario) != s.scenario:
            raise other("--scenario", ld.scenario, s.scenario.value)
        workload = {f.name: getattr(self.dataset, f.name) if self.is_given("dataset", f.name)
                    else layer.workload.get(f.name, f.default) for f in fields(WorkloadSpec)}
        target = self.target
        if layer.sampling is not None:
            sampled: dict[str, Any] = {key: layer.sampling.get(key) for key in SAMPLING
                       if not self.is_given("target", key)}
            if not self.is_given("target", "model"):
                sampled["model"] = layer.sampling.get("model", "")
            target = replace(target, **sampled)
        load = replace(ld, benchmark=s.benchmark, round=s.round, scenario=s.scenario.value)
        return replace(self, load=load, dataset=WorkloadSpec(**workload), target=target,
                       manifest=layer)

    def manifest_changes(self, layered: LayeredSettings) -> list[str]:
        """What this spec's own options change of its manifest's (:meth:`with_manifest`):
        one line per setting, workload option (files by path: their content is the
        caller's to compare) and sampling field, ``[]`` for a faithful re-run."""
        if self.manifest is None:
            return []
        layer = self.manifest
        changes = [f"{key} {mine!r} (recorded {was!r})" for key, mine, was in
                   _diff(_flat(layered.settings), _flat(layer.pinned.settings))]
        for f in fields(WorkloadSpec):
            mine, was = getattr(self.dataset, f.name), layer.workload.get(f.name, f.default)
            if f.name not in RELOCATABLE and mine != was:
                changes.append(f"{flag_of(f.name)} {mine!r} (recorded {was!r})")
        if layer.sampling is not None:
            for key in SAMPLING:
                mine, was = getattr(self.target, key), layer.sampling.get(key)
                if mine != was:
                    changes.append(f"{flag_of(key)} {mine!r} (recorded {was!r})")
        return changes

    def with_load(self, **changes: Any) -> RunSpec:
        """This spec with some load options changed."""
        return replace(self, load=replace(self.load, **changes))


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _nullable(cls: type, name: str) -> bool:
    """Whether ``cls.name`` may be None (its default is None)."""
    return any(f.name == name and f.default is None for f in fields(cls))


def _flat(settings: Any) -> dict[str, Any]:
    """A settings dataclass as ``{"field": value, "limits.ttft_ns": value, ...}``."""
    out: dict[str, Any] = {}
    for f in fields(settings):
        value = getattr(settings, f.name)
        if hasattr(value, "__dataclass_fields__"):
            out.update({f"{f.name}.{k}": v for k, v in _flat(value).items()})
        else:
            out[f.name] = getattr(value, "value", value)
    return out


def _diff(mine: Mapping[str, Any], was: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(k, mine.get(k), was.get(k)) for k in sorted(set(mine) | set(was))
            if mine.get(k) != was.get(k)]
