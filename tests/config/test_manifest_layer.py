"""A workload manifest (``tokenmark run --manifest``) is one layer of the run spec's
layering, in place of the defaults: every option of ``run`` that a manifest also sets
(test settings, seeds, workload options, what every request carries) takes the manifest's
value when the user gives none, and the user's when given, even a flag given at its
default value. The manifest here records a value off the default (and off the flag's) for
each of them, so each assertion tells the three sources apart.

The command runs for real up to its layered settings (``RunSpec.settings``); the
stand-in records the spec and the settings and stops the command there."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tokenmark.cli.run  # noqa: F401  (registers `run`)
from tests.config.run_params import kind as kind_of
from tests.config.run_params import run_params
from tokenmark.cli.app import app
from tokenmark.config.layering import LayeredSettings, build_settings
from tokenmark.config.runspec import SAMPLING, RunSpec, WorkloadSpec, _field_of
from tokenmark.mlperf.settings import Scenario, Seeds
from tokenmark.trust.canonical import plain
from tokenmark.trust.manifest import Manifest, Sampling, settings_json

# the settings a manifest records, each off the preset's and the flags' below
RECORDED_OVERRIDES = {
    "target_qps": 9.5, "concurrency": 9, "max_concurrency": 19, "burstiness": 2.5,
    "min_duration_ms": 9000, "max_duration_ms": 99000, "min_query_count": 9,
    "max_query_count": 999, "ttft_latency_ms": 900.0, "tpot_latency_ms": 90.0,
    "target_latency_ms": 9000.0, "target_latency_percentile": 0.95, "warmup_ms": 900,
    "cooldown_ms": 900, "send_lag_limit_ms": 9.0, "error_rate_limit": 0.09,
    "performance_sample_count": 9, "total_sample_count": 9, "mode": "accuracy",
}
RECORDED_SEEDS = Seeds(91, 92, 93)
RECORDED_SAMPLING = Sampling(api="chat", stream=False, include_usage=False, max_tokens=99,
                             ignore_eos=True, temperature=0.25, extra_body='{"r": 1}',
                             model="m-recorded")

# each settings flag of `run`: (its value given, what the settings must then hold)
SETTINGS_FLAGS: dict[str, tuple[str, Any]] = {
    "qps": ("3.5", lambda s: s.target_qps == 3.5),
    "concurrency": ("3", lambda s: s.concurrency == 3),
    "max_concurrency": ("4", lambda s: s.max_concurrency == 4),
    "burstiness": ("0.5", lambda s: s.burstiness == 0.5),
    "min_duration": ("2", lambda s: s.min_duration_ms == 2000),
    "max_duration": ("30", lambda s: s.max_duration_ms == 30_000),
    "min_queries": ("3", lambda s: s.min_query_count == 3),
    "max_queries": ("300", lambda s: s.max_query_count == 300),
    "ttft_ms": ("300", lambda s: s.limits.ttft_ns == 300_000_000),
    "tpot_ms": ("30", lambda s: s.limits.tpot_ns == 30_000_000),
    "e2e_ms": ("3000", lambda s: s.limits.e2e_ns == 3_000_000_000),
    "percentile": ("90", lambda s: s.target_latency_percentile == 0.9),
    "warmup": ("0.3", lambda s: s.warmup_ms == 300),
    "cooldown": ("0.3", lambda s: s.cooldown_ms == 300),
    "send_lag_limit_ms": ("3", lambda s: s.send_lag_limit_ns == 3_000_000),
    "error_rate_limit": ("0.03", lambda s: s.error_rate_limit == 0.03),
    "dataset_size": ("5", lambda s: s.performance_sample_count == 5),
    "seed": ("5", lambda s: s.seeds == Seeds(5, 6, 7)),
    # given at its default, it still beats the manifest's accuracy
    "mode": ("performance", lambda s: s.mode.value == "PerformanceOnly"),
}


def _recorded_value(kind: Any, default: Any) -> Any:
    """A recorded workload value off the default and off the flag samples below."""
    base = typing.get_args(kind)[0] if typing.get_args(kind) else kind
    if base is bool:
        return not default
    if base is int:
        return 9
    if base is float:
        return 9.5
    if base is Path:
        return Path("recorded.file")
    return "recorded"


RECORDED_WORKLOAD = {f.name: _recorded_value(t, f.default) for f, t in zip(
    dataclasses.fields(WorkloadSpec), typing.get_type_hints(WorkloadSpec).values(),
    strict=True)}


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LayeredSettings]:
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.POISSON,
                             overrides=RECORDED_OVERRIDES, seeds=RECORDED_SEEDS)
    content = {
        "settings": settings_json(layered.settings),
        "preset": {"round": "v6.0", "benchmark": "llama3.1-8b", "sha256": ""},
        "workload": {"spec": plain(WorkloadSpec(**RECORDED_WORKLOAD)), "files": {}},
        "dataset": {"name": "recorded", "samples": 9, "fingerprint": ""},
        "tokenizer": {}, "sampling": plain(RECORDED_SAMPLING),
        "schedule": {"kind": "timed", "scenario": "Poisson", "samples": 9, "sha256": ""},
    }
    path = tmp_path_factory.mktemp("m") / "manifest.json"
    Manifest(content).write(path)
    return path, layered


class _Stop(Exception):
    pass


_SETTINGS = RunSpec.settings


def _run(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[RunSpec, Any]:
    """`run ARGS` up to its layered settings: the spec and the settings."""
    got: list[tuple[RunSpec, Any]] = []

    def stand_in(self: RunSpec) -> Any:
        got.append((self, _SETTINGS(self).settings))
        raise _Stop

    monkeypatch.setattr(RunSpec, "settings", stand_in)
    res = CliRunner().invoke(app, ["run", *args])
    assert isinstance(res.exception, _Stop), res.output
    return got[0]


def _manifest_fields() -> dict[str, tuple[str, str]]:
    """The options of `run` a manifest also sets, other than the settings flags: the
    workload options and what every request carries."""
    out = {}
    for name in run_params():
        where = _field_of(name)
        if where is None or name in SETTINGS_FLAGS:
            continue
        if where[0] == "dataset" or (where[0] == "target" and where[1] in (
                *SAMPLING, "model")):
            out[name] = where
    return out


def test_the_manifest_beats_the_defaults(monkeypatch, manifest):
    path, layered = manifest
    spec, settings = _run(monkeypatch, ["--manifest", str(path)])
    assert settings == layered.settings  # every setting and seed as recorded
    assert spec.dataset == WorkloadSpec(**RECORDED_WORKLOAD)
    for key in (*SAMPLING, "model"):
        assert getattr(spec.target, key) == getattr(RECORDED_SAMPLING, key), key
    assert spec.load.benchmark == "llama3.1-8b"
    assert Scenario.parse(spec.load.scenario) is Scenario.POISSON


def test_the_options_a_manifest_sets_are_all_covered():
    fields = _manifest_fields()
    assert {"input_len", "dataset", "tokenizer", "max_tokens", "temperature",
            "model"} <= set(fields)
    workload = {attr for group, attr in fields.values() if group == "dataset"}
    # every workload option has a flag of `run` but the seed and size (set by the
    # settings flags --seed and --dataset-size) and the trace's block size
    assert workload | {"seed", "size", "trace_block_tokens"} == {
        f.name for f in dataclasses.fields(WorkloadSpec)}
    assert set(SETTINGS_FLAGS) <= set(run_params())


@pytest.mark.parametrize("name", sorted(SETTINGS_FLAGS))
def test_every_settings_flag_beats_the_manifest(monkeypatch, manifest, name):
    path, layered = manifest
    value, holds = SETTINGS_FLAGS[name]
    opt = run_params()[name].opts[0]
    _, settings = _run(monkeypatch, ["--manifest", str(path), opt, value])
    assert holds(settings)
    assert not holds(layered.settings)  # the manifest recorded another value


def _flag_args(param: Any) -> tuple[Any, list[str]]:
    """The flag given at its default where it has one (it must still beat the manifest),
    else at a value of its type; the value the spec then holds."""
    default, kind = param.default, kind_of(param.name)
    if kind is bool:
        if not param.secondary_opts:  # an on-only flag: given, it is on
            return True, [param.opts[0]]
        return bool(default), [param.opts[0] if default else param.secondary_opts[0]]
    if kind is int:
        value = 3 if default is None else default
        return value, [param.opts[0], str(value)]
    if kind is float:
        value = 3.5 if default is None else default
        return value, [param.opts[0], str(value)]
    value = "flag-value" if default in (None, "") else default
    return value, [param.opts[0], str(value)]


@pytest.mark.parametrize("name", sorted(_manifest_fields()))
def test_every_workload_and_sampling_flag_beats_the_manifest(monkeypatch, manifest, name):
    path, _ = manifest
    group, attr = _manifest_fields()[name]
    value, args = _flag_args(run_params()[name])
    spec, _ = _run(monkeypatch, ["--manifest", str(path), *args])
    seen = getattr(getattr(spec, group), attr)
    seen = str(seen) if isinstance(seen, Path) else seen
    assert seen == value
    recorded = (RECORDED_WORKLOAD[attr] if group == "dataset"
                else getattr(RECORDED_SAMPLING, attr))
    assert seen != (str(recorded) if isinstance(recorded, Path) else recorded)


def test_a_config_file_beats_the_manifest_and_a_flag_beats_both(monkeypatch, manifest,
                                                                 tmp_path):
    path, _ = manifest
    cfg = tmp_path / "run.toml"
    cfg.write_text('[settings]\ntarget_qps = 4.5\n[dataset]\ninput = "40"\n'
                   '[target]\ntemperature = 0.75\n', encoding="utf-8")
    spec, s = _run(monkeypatch, ["--manifest", str(path), "--config", str(cfg)])
    assert (s.target_qps, spec.dataset.input_lengths, spec.target.temperature) == (
        4.5, "40", 0.75)
    assert s.concurrency == RECORDED_OVERRIDES["concurrency"]  # the rest as recorded
    spec, s = _run(monkeypatch, ["--manifest", str(path), "--config", str(cfg), "--qps",
                                 "6", "--input-len", "60", "--temperature", "0"])
    assert (s.target_qps, spec.dataset.input_lengths, spec.target.temperature) == (
        6.0, "60", 0.0)


def test_another_benchmark_or_scenario_than_the_manifests_is_refused(monkeypatch,
                                                                      manifest):
    path, _ = manifest
    for args, what in ((["-b", "llama2-70b-99"], "--benchmark 'llama2-70b-99'"),
                       (["-s", "Server"], "--scenario 'Server'")):
        res = CliRunner().invoke(app, ["run", "--manifest", str(path), *args])
        assert res.exit_code == 2, res.output
        assert what in res.output and "drop --manifest to run another" in res.output
    # restating them is no change
    spec, _ = _run(monkeypatch, ["--manifest", str(path), "-b", "llama3.1-8b", "-s",
                                 "poisson"])
    assert Scenario.parse(spec.load.scenario) is Scenario.POISSON


def test_the_python_spec_layers_the_same_way(manifest):
    """A spec built in Python (no click): a field off its default is given."""
    from tokenmark.api.trust import apply_manifest
    from tokenmark.config.runspec import LoadOptions, TargetOptions, TrustOptions

    path, layered = manifest
    spec, m, _ = apply_manifest(RunSpec(trust=TrustOptions(manifest=path)))
    assert m is not None and spec.settings().settings == layered.settings
    spec, _, _ = apply_manifest(RunSpec(load=LoadOptions(qps=2.0),
                                        target=TargetOptions(max_tokens=5),
                                        trust=TrustOptions(manifest=path)))
    assert spec.settings().settings.target_qps == 2.0 and spec.target.max_tokens == 5
    assert spec.target.temperature == RECORDED_SAMPLING.temperature
