"""Settings layering and effective settings, with every bad-input path."""

from __future__ import annotations

import pytest

from tokenmark.config.layering import build_settings, read_toml, read_user_conf
from tokenmark.errors import ConfigError
from tokenmark.mlperf.settings import Scenario, Seeds, TestSettings, effective

MS = 1_000_000


def test_preset_then_profile_then_toml_then_userconf_then_flags(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text("[settings]\ntarget_qps = 12.5\nmin_duration_ms = 30000\n")
    conf = tmp_path / "user.conf"
    conf.write_text(
        "# comment\n"
        "llama3_1-8b.Server.target_qps = 20\n"
        "*.Server.min_duration = 40000\n"
        "llama3_1-8b.*.performance_sample_count_override = 128\n"
    )
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             toml=read_toml(toml), toml_name="run.toml", user_conf=conf,
                             overrides={"target_qps": 25.0, "ttft_latency_ms": 500.0})
    s = layered.settings
    assert s.target_qps == 25.0  # flags win
    assert s.min_duration_ms == 40_000  # user.conf over the TOML file and the profile
    assert s.performance_sample_count == 128
    assert s.limits.ttft_ns == 500 * MS and s.limits.tpot_ns == 100 * MS  # preset TPOT kept
    assert [layer.name.split()[0] for layer in layered.layers] == [
        "preset", "profile", "file", "user.conf", "command"]
    assert s.seeds.schedule == 3936089224930324775  # the v6.0 seed


def test_user_conf_precedence_matches_loadgen(tmp_path):
    conf = tmp_path / "user.conf"
    conf.write_text(
        "*.*.min_query_count = 1\n"
        "llama2-70b-interactive.*.min_query_count = 2\n"
        "*.Server.min_query_count = 3\n"
        "llama2-70b-interactive.Server.min_query_count = 4\n"
        "llama2-70b.Server.min_query_count = 99\n"
    )
    v = read_user_conf(conf, "llama2-70b-interactive", Scenario.INTERACTIVE)
    assert v["min_query_count"] == 4
    conf.write_text("*.*.min_query_count = 1\nllama2-70b-interactive.*.min_query_count = 2\n"
                    "*.Server.min_query_count = 3\n")
    assert read_user_conf(conf, "llama2-70b-interactive", Scenario.SERVER)["min_query_count"] == 3


def test_interactive_uses_its_own_loadgen_model_and_limits(tmp_path):
    conf = tmp_path / "user.conf"
    conf.write_text("llama3_1-8b-interactive.Server.target_qps = 7\n"
                    "llama3_1-8b.Server.target_qps = 99\n")
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.INTERACTIVE, user_conf=conf)
    assert layered.settings.target_qps == 7
    limits = layered.settings.limits
    assert limits.ttft_ns == 500 * MS and limits.tpot_ns == 30 * MS


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(round_name="v9.9"), "unknown MLPerf round"),
        (dict(benchmark="llama9"), "unknown benchmark"),
        (dict(profile="turbo"), "unknown profile"),
        (dict(overrides={"target_qps": "fast"}), "target_qps must be a number"),
        (dict(overrides={"bogus": 1}), "unknown setting 'bogus'"),
        (dict(scenario=Scenario.MULTI_STREAM), "MultiStream"),
        (dict(seeds=Seeds(1, 2, 3)), "seeds cannot be changed"),
    ],
)
def test_bad_input_is_one_clear_line(kwargs, message):
    args = dict(round_name="v6.0", benchmark="llama3.1-8b", scenario=Scenario.SERVER)
    args.update(kwargs)
    with pytest.raises(ConfigError, match=message) as e:
        build_settings(args.pop("round_name"), args.pop("benchmark"), args.pop("scenario"),
                       **args)
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[settings\nx=1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_toml(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        read_toml(tmp_path / "missing.toml")
    bad.write_text("[setings]\nx=1\n")
    with pytest.raises(ConfigError, match="unknown table"):
        read_toml(bad)
    bad.write_text("[settings]\nschedule_rng_seed = 5\n")
    with pytest.raises(ConfigError, match="seeds"):
        read_toml(bad)
    conf = tmp_path / "user.conf"
    conf.write_text("llama3_1-8b.Server.target_qps 5\n")
    with pytest.raises(ConfigError, match=r"user.conf:1: expected"):
        read_user_conf(conf, "llama3_1-8b", Scenario.SERVER)
    conf.write_text("llama3_1-8b.Server.target_qps = fast\n")
    with pytest.raises(ConfigError, match="integer or double"):
        read_user_conf(conf, "llama3_1-8b", Scenario.SERVER)
    conf.write_text("*.*.qsl_rng_seed = 5\n")
    with pytest.raises(ConfigError, match="seed"):
        read_user_conf(conf, "llama3_1-8b", Scenario.SERVER)


def _ts(scenario, **kw):
    base = dict(round="v6.0", benchmark="x", scenario=scenario, seeds=Seeds(1, 2, 3))
    base.update(kw)
    return TestSettings(**base)


def test_effective_settings_follow_loadgen():
    off = effective(_ts(Scenario.OFFLINE, offline_expected_qps=100, min_duration_ms=600_000,
                        min_query_count=24576), 24576)
    # samples_per_query = max(min_query_count, 1.1 * 600 s * 100) and min queries 1
    assert off.samples_per_query == 66000 and off.min_query_count == 1
    assert off.target_duration_ns == 0 and off.min_sample_count == 66000
    ms = effective(_ts(Scenario.MULTI_STREAM, min_query_count=662), 1000)
    assert ms.samples_per_query == 8 and ms.min_sample_count == 662 * 8
    ss = effective(_ts(Scenario.SINGLE_STREAM, sample_concatenate_permutation=True,
                       min_duration_ms=1000, min_query_count=100,
                       single_stream_expected_latency_ns=10 * MS), 64)
    # 2 * 1 s * 100 qps = 200, padded up past the next multiple of 64 (LoadGen's rule)
    assert ss.min_query_count == 256
    inter = effective(_ts(Scenario.INTERACTIVE, target_qps=3), 10)
    assert inter.scenario.loadgen is Scenario.SERVER


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(scenario=Scenario.SERVER, target_qps=0), "target_qps must be > 0"),
        (dict(scenario=Scenario.POISSON, target_qps=-1), "target_qps must be > 0"),
        (dict(scenario=Scenario.OFFLINE, offline_expected_qps=0), "offline_expected_qps"),
        (dict(scenario=Scenario.SERVER, target_qps=0.5, min_duration_ms=1000),
         "shorter than one query"),
        (dict(scenario=Scenario.CLOSED_LOOP), "concurrency > 0"),
        (dict(scenario=Scenario.SERVER, min_duration_ms=5000, max_duration_ms=1000),
         "max_duration"),
        (dict(scenario=Scenario.SERVER, cooldown_ms=10), "cool-down"),
        (dict(scenario=Scenario.SERVER, performance_sample_count=50), "exceeds the dataset"),
    ],
)
def test_impossible_settings(kw, message):
    scenario = kw.pop("scenario")
    with pytest.raises(ConfigError, match=message):
        effective(_ts(scenario, **kw), 10)
