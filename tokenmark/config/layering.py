"""Settings layering: round preset < profile < TOML file < MLPerf ``user.conf`` < CLI flags.

Each layer is a plain mapping of :class:`~tokenmark.mlperf.settings.TestSettings` field names
to values (latencies in ms in files and flags, as LoadGen's config files use), applied in
that order. The layers that were applied are returned with the settings so they can be
logged beside the effective settings.

``user.conf`` is read exactly as LoadGen reads it: ``model.scenario.key = value`` lines,
looked up as ``model.scenario.key``, then ``*.scenario.key``, then ``model.*.key``, then
``*.*.key``; ``#`` starts a comment. Its model is the LoadGen config name the preset
gives for the benchmark and scenario (e.g. ``llama2-70b-interactive``).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenmark.errors import ConfigError
from tokenmark.inputs import MIB, InputLimitError, read_bounded, toml_loads
from tokenmark.mlperf.presets import BenchmarkPreset, mlperf_settings, resolve
from tokenmark.mlperf.settings import (
    LatencyLimits,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
)

__all__ = [
    "DEMO_MAX_OUTPUT_TOKENS",
    "DEMO_PROFILE",
    "PROFILES",
    "FlagsOverFile",
    "Layer",
    "LayeredSettings",
    "Pinned",
    "build_settings",
    "default_scenario",
    "parse_user_conf",
    "read_toml",
    "read_user_conf",
]

#: The demo profile: short, clearly labelled, still judged by LoadGen's rules.
DEMO_PROFILE: dict[str, Any] = {
    "min_duration_ms": 20_000,
    "target_qps": 20.0,
    "offline_expected_qps": 30.0,
    "min_query_count": 256,
    "performance_sample_count": 256,
    "total_sample_count": 256,
    "profile": "demo",
}

PROFILES: dict[str, dict[str, Any]] = {"demo": DEMO_PROFILE, "mlperf": {}}
#: The demo profile's cap on generated output lengths (``max_tokens`` of synthetic and
#: file-backed samples; a reasoning model's reasoning and answer together), so a demo of
#: a long-output benchmark (deepseek-r1: up to 20000 tokens) stays short.
DEMO_MAX_OUTPUT_TOKENS = 512

_LIMIT_KEYS = {
    "ttft_latency_ms": "ttft_ns",
    "tpot_latency_ms": "tpot_ns",
    "target_latency_ms": "e2e_ns",
}
#: Keys a TOML ``[settings]`` table or a flag may set, with their types. Latency limits
#: are given in ms (``ttft_latency_ms`` ...); the rest are TestSettings fields.
_FIELD_TYPES: dict[str, str] = {
    "target_qps": "float",
    "offline_expected_qps": "float",
    "single_stream_expected_latency_ns": "int",
    "multi_stream_expected_latency_ns": "int",
    "multi_stream_samples_per_query": "int",
    "min_duration_ms": "int",
    "max_duration_ms": "int",
    "min_query_count": "int",
    "max_query_count": "int",
    "performance_sample_count": "int",
    "total_sample_count": "int",
    "accuracy_sample_count": "int",
    "sample_concatenate_permutation": "bool",
    "use_token_latencies": "bool",
    "target_latency_percentile": "float",
    "max_async_queries": "int",
    "concurrency": "int",
    "max_concurrency": "int",
    "burstiness": "float",
    "warmup_ms": "int",
    "cooldown_ms": "int",
    "send_lag_limit_ms": "float",
    "error_rate_limit": "float",
    "profile": "str",
    "mode": "str",
    **{k: "float" for k in _LIMIT_KEYS},
}
_MLPERF_LOCKED = {"qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed"}
#: The largest magnitude a number in a config file or user.conf may have (LoadGen keeps
#: counts in 64 bits).
_FILE_NUMBER_MAX = float(2**63)


@dataclass(frozen=True)
class Layer:
    name: str  # e.g. "preset v6.0/llama3.1-8b/Server", "profile demo", "file run.toml"
    values: dict[str, Any]


@dataclass(frozen=True)
class LayeredSettings:
    settings: TestSettings
    preset: BenchmarkPreset
    layers: tuple[Layer, ...]

    def layers_json(self) -> list[dict[str, Any]]:
        return [{"layer": layer.name, "values": layer.values} for layer in self.layers]


@dataclass(frozen=True)
class Pinned:
    """Settings a workload manifest recorded (``tokenmark run --manifest``): the base of
    the layering in place of the round's preset; every later layer (profile, file,
    user.conf, flags, seeds) beats them as it beats the preset."""

    settings: TestSettings
    name: str  # e.g. "the manifest results/x/manifest.json"
    sha256: str = ""


def _coerce(key: str, value: Any, where: str) -> Any:
    kind = _FIELD_TYPES.get(key)
    if kind is None:
        known = ", ".join(sorted(_FIELD_TYPES))
        raise ConfigError(f"{where}: unknown setting {key!r}; known settings: {known}")
    try:
        if kind == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not (math.isfinite(number) and abs(number) < _FILE_NUMBER_MAX):
                raise ConfigError(f"{where}: {key} must be a finite number below 2^63 "
                                  f"(got {value!r})")
            return number
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, int | float) and value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.lower() in ("0", "1", "true", "false"):
                return value.lower() in ("1", "true")
            raise ValueError
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} must be {_article(kind)} (got {value!r})") from None


def _article(kind: str) -> str:
    return {"int": "an integer", "float": "a number", "bool": "true or false"}.get(kind, kind)


@dataclass(frozen=True)
class FlagsOverFile:
    """One table of a TOML file under the command's flags, the README's rule in one place:
    a flag the user gave beats the file's key, even a falsy one (``--prefix-groups 0``,
    ``--no-stream``, ``--tokenizer builtin``); a flag left at its default gives way to the
    file's key; neither gives the flag's default. ``given`` holds the names of the
    parameters the user gave (the CLI reads them from click's parameter source)."""

    table: Mapping[str, Any]
    given: frozenset[str]

    def __call__(self, name: str, value: Any, key: str | None = None) -> Any:
        """The value of parameter ``name`` (``value`` as parsed), whose key in the table
        is ``key`` (default: the parameter's name)."""
        if name in self.given:
            return value
        return self.table.get(name if key is None else key, value)


def read_toml(path: Path) -> dict[str, Any]:
    """A tokenmark TOML config file (``[run]`` and ``[settings]`` tables)."""
    try:
        doc = toml_loads(read_bounded(path, MIB).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check the path") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    except InputLimitError as e:
        raise ConfigError(f"config file {path} is {e}; a tokenmark config is a few "
                          "short tables") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    unknown = set(doc) - {"run", "settings", "dataset", "sut", "target"}
    if unknown:
        raise ConfigError(
            f"{path}: unknown table(s) {', '.join(sorted(unknown))}; "
            "use [run], [settings], [dataset], [sut] and [target]"
        )
    for table in ("run", "settings", "dataset", "sut", "target"):
        if table in doc and not isinstance(doc[table], dict):
            raise ConfigError(f"{path}: '{table}' must be a table ([{table}])")
    settings = doc.get("settings", {})
    for key in settings:
        if key in _MLPERF_LOCKED:
            raise ConfigError(
                f"{path}: {key} cannot be set; the round's preset fixes the seeds"
            )
        _coerce(key, settings[key], str(path))
    return doc


def parse_user_conf(text: str, where: str) -> dict[str, str]:
    """The ``key = value`` lines of a LoadGen ``user.conf`` (comments dropped); a
    ConfigError names the first line that is not one (binary, NUL, not a number)."""
    if "\x00" in text:
        raise ConfigError(f"user.conf {where} is not text (it holds NUL bytes); give "
                          "LoadGen's 'model.scenario.key = value' lines")
    kv: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace("=", " = ", 1).split()
        if len(parts) != 3 or parts[1] != "=":
            raise ConfigError(f"{where}:{n}: expected 'model.scenario.key = value' "
                              f"(got {raw[:80]!r})")
        key, _, value = parts
        if key.count(".") < 2:
            raise ConfigError(f"{where}:{n}: the key {key[:80]!r} must read "
                              "model.scenario.key")
        try:
            number = float(value) if not value.lower().startswith("0x") else int(value, 16)
        except ValueError:
            raise ConfigError(
                f"{where}:{n}: value needs to be integer or double (got {value[:80]!r})"
            ) from None
        if not math.isfinite(number) or abs(number) >= _FILE_NUMBER_MAX:
            raise ConfigError(f"{where}:{n}: {value[:80]!r} is not a finite number below "
                              "2^63; give a real value")
        kv[key] = value
    return kv


def read_user_conf(
    path: Path, model: str, scenario: Scenario
) -> dict[str, Any]:
    """Settings a LoadGen ``user.conf`` gives for ``model`` and ``scenario``."""
    try:
        text = read_bounded(path, MIB).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"user.conf {path} does not exist; check the path") from None
    except UnicodeDecodeError:
        raise ConfigError(f"user.conf {path} is not text (not UTF-8); give LoadGen's "
                          "'model.scenario.key = value' lines") from None
    except (OSError, InputLimitError) as e:
        raise ConfigError(f"cannot read user.conf {path}: {e}") from None
    kv = parse_user_conf(text, str(path))
    lg = scenario.loadgen.value

    def lookup(sc: str, key: str) -> str | None:
        for k in (f"{model}.{sc}.{key}", f"*.{sc}.{key}", f"{model}.*.{key}", f"*.*.{key}"):
            if k in kv:
                return kv[k]
        return None

    for k in kv:
        if k.rsplit(".", 1)[-1] in _MLPERF_LOCKED:
            raise ConfigError(
                f"{path}: {k} sets a seed; seeds come from the round's mlperf.conf and "
                "LoadGen ignores them in user.conf. Remove the line."
            )
    out: dict[str, Any] = {}

    def num(v: str) -> float:
        return float(int(v, 16)) if v.lower().startswith("0x") else float(v)

    for key, field_name, scale in (
        ("min_duration", "min_duration_ms", 1),
        ("max_duration", "max_duration_ms", 1),
        ("min_query_count", "min_query_count", 1),
        ("max_query_count", "max_query_count", 1),
        ("performance_sample_count_override", "performance_sample_count", 1),
        ("accuracy_sample_count_override", "accuracy_sample_count", 1),
    ):
        v = lookup(lg, key)
        if v is not None:
            out[field_name] = int(num(v) * scale)
    v = lookup(lg, "sample_concatenate_permutation")
    if v is not None:
        out["sample_concatenate_permutation"] = num(v) != 0
    v = lookup(lg, "use_token_latencies")
    if v is not None:
        out["use_token_latencies"] = num(v) != 0
    v = lookup(lg, "mode")
    if v is not None:
        out["mode"] = {1: "accuracy", 2: "performance"}.get(int(num(v)), "performance")
    if scenario.loadgen is Scenario.SERVER:
        for key, field_name in (("target_qps", "target_qps"),):
            v = lookup("Server", key)
            if v is not None:
                out[field_name] = num(v)
        for key, limit in (
            ("ttft_latency", "ttft_latency_ms"),
            ("tpot_latency", "tpot_latency_ms"),
        ):
            v = lookup("Server", key)
            if v is not None:
                out[limit] = num(v)
        v = lookup("Server", "target_latency")
        if v is not None and num(v) > 0:
            out["target_latency_ms"] = num(v)
        v = lookup("Server", "target_latency_percentile")
        if v is not None:
            out["target_latency_percentile"] = num(v) / 100
        v = lookup("Server", "max_async_queries")
        if v is not None:
            out["max_async_queries"] = int(num(v))
    elif scenario is Scenario.OFFLINE:
        v = lookup("Offline", "target_qps")
        if v is not None:
            out["offline_expected_qps"] = num(v)
    elif scenario is Scenario.SINGLE_STREAM:
        v = lookup("SingleStream", "target_latency")
        if v is not None:
            out["single_stream_expected_latency_ns"] = int(num(v) * 1_000_000)
        v = lookup("SingleStream", "target_latency_percentile")
        if v is not None:
            out["target_latency_percentile"] = num(v) / 100
    elif scenario is Scenario.MULTI_STREAM:
        v = lookup("MultiStream", "target_latency")
        if v is not None:
            out["multi_stream_expected_latency_ns"] = int(num(v) * 1_000_000)
        v = lookup("MultiStream", "samples_per_query")
        if v is not None:
            out["multi_stream_samples_per_query"] = int(num(v))
        v = lookup("MultiStream", "target_latency_percentile")
        if v is not None:
            out["target_latency_percentile"] = num(v) / 100
    return out


def _apply(settings: TestSettings, values: Mapping[str, Any], where: str) -> TestSettings:
    changes: dict[str, Any] = {}
    limits = settings.limits
    for key, raw in values.items():
        value = _coerce(key, raw, where)
        if key in _LIMIT_KEYS:
            ns = None if value is None or value <= 0 else int(round(value * 1_000_000))
            if key == "ttft_latency_ms":
                limits = replace(limits, ttft_ns=ns)
            elif key == "tpot_latency_ms":
                limits = replace(limits, tpot_ns=ns)
            else:
                limits = replace(limits, e2e_ns=ns)
        elif key == "send_lag_limit_ms":
            changes["send_lag_limit_ns"] = int(round(value * 1_000_000))
        elif key == "mode":
            changes["mode"] = _mode(value, where)
        else:
            changes[key] = value
    changes["limits"] = limits
    return replace(settings, **changes)


def _mode(value: str, where: str) -> Mode:
    v = value.lower()
    if v in ("performance", "performanceonly"):
        return Mode.PERFORMANCE
    if v in ("accuracy", "accuracyonly"):
        return Mode.ACCURACY
    raise ConfigError(f"{where}: mode must be 'performance' or 'accuracy' (got {value!r})")


def _own_pattern_base(round_name: str, benchmark: str, scenario: Scenario) -> TestSettings:
    """tokenmark patterns borrow the benchmark's dataset facts but no MLPerf rules."""
    preset, _ = resolve(round_name, benchmark)
    ref = next(iter(preset.scenarios))
    base = mlperf_settings(round_name, preset.name, ref)
    return replace(
        base,
        scenario=scenario,
        limits=LatencyLimits(),
        min_query_count=1,
        min_duration_ms=60_000,
        performance_sample_count=0,
        total_sample_count=0,
        sample_concatenate_permutation=False,
        target_latency_percentile=0.99,
    )


def default_scenario(round_name: str, benchmark: str) -> Scenario | None:
    """The scenario a run takes when none is given: the one a name implies (Interactive
    aliases), else Server where the benchmark has it; None means the user must choose."""
    preset, implied = resolve(round_name, benchmark)
    if implied is not None:
        return implied
    return Scenario.SERVER if Scenario.SERVER in preset.scenarios else None


def build_settings(
    round_name: str,
    benchmark: str,
    scenario: Scenario | None,
    *,
    profile: str = "",
    toml: Mapping[str, Any] | None = None,
    toml_name: str = "config file",
    user_conf: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    seeds: Seeds | None = None,
    pinned: Pinned | None = None,
) -> LayeredSettings:
    """Layer the settings of one run; every bad input raises :class:`ConfigError`.

    The layers, each beating the ones before: the round's preset (or ``pinned``, a
    manifest's recorded settings, in its place: ``round_name``, ``benchmark`` and
    ``scenario`` are then the manifest's) < ``profile`` < the file's [settings] <
    ``user_conf`` < ``overrides`` (the flags) < ``seeds``."""
    if pinned is not None:
        base = pinned.settings
        preset, _ = resolve(base.round, base.benchmark)
        sc = base.scenario
        layers = [Layer(f"manifest {pinned.sha256[:16]}", {"manifest_sha256": pinned.sha256})]
    else:
        preset, implied = resolve(round_name, benchmark)
        picked = scenario or implied
        if picked is None:
            choices = ", ".join(s.value for s in preset.scenarios)
            raise ConfigError(
                f"no scenario given for {preset.name}; choose one of: {choices} "
                "(or a tokenmark pattern: constant, poisson, gamma, closed)"
            )
        sc = picked
        if sc.is_mlperf:
            base = mlperf_settings(round_name, preset.name, sc)
            layers = [Layer(f"preset {preset.round}/{preset.name}/{sc.value}", {})]
        else:
            base = _own_pattern_base(round_name, preset.name, sc)
            layers = [Layer(f"preset {preset.round}/{preset.name} (dataset facts only; "
                            f"{sc.value} pattern)", {})]
    settings = base
    if profile:
        if profile not in PROFILES:
            raise ConfigError(
                f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}"
            )
        settings = _apply(settings, PROFILES[profile], f"profile {profile}")
        layers.append(Layer(f"profile {profile}", dict(PROFILES[profile])))
    if toml:
        values = dict(toml.get("settings", {}))
        settings = _apply(settings, values, toml_name)
        layers.append(Layer(f"file {toml_name}", values))
    if user_conf is not None:
        model = (
            preset.scenarios[sc].loadgen_model if sc in preset.scenarios
            else preset.loadgen_model
        )
        values = read_user_conf(user_conf, model, sc)
        settings = _apply(settings, values, str(user_conf))
        layers.append(Layer(f"user.conf {user_conf}", values))
    if overrides:
        values = {k: v for k, v in overrides.items() if v is not None}
        if values:
            settings = _apply(settings, values, "command line")
            layers.append(Layer("command line", values))
    if seeds is not None:
        if sc.is_mlperf:
            raise ConfigError(
                "seeds cannot be changed for an MLPerf scenario (LoadGen fixes them per "
                "round); use a tokenmark pattern such as 'poisson' to choose seeds"
            )
        settings = replace(settings, seeds=seeds)
        layers.append(Layer("seeds", {"qsl": seeds.qsl, "sample_index": seeds.sample_index,
                                      "schedule": seeds.schedule}))
    return LayeredSettings(settings, preset, tuple(layers))
