"""A flag the user gave beats the same key of a --config TOML file, for every option that
has one, including a falsy flag (``--prefix-groups 0``, ``--no-stream``, ``--tokenizer
builtin``); a flag left at its default gives way to the file (README: "flags override
both"). Before issue 20, 9 options of ``run`` took the file's value over an explicit
flag (turns, sharegpt_turns, mlperf_output, tokenizer builtin, image_size, trace_format,
api_key_env, api, stream, routing) and falsy flags lost to the file.

The command runs for real up to the point where its workload spec (or HTTP target
configuration) is complete; the stand-in for the next step records what it was given
and stops the command there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tokenmark.adapters.openai_target as openai_target
import tokenmark.api.launch as launch
import tokenmark.cli.run  # noqa: F401  (registers `run`)
import tokenmark.cli.scale as cli_scale
from tests.config.run_params import kind as kind_of
from tests.config.run_params import run_params
from tokenmark.cli.app import app
from tokenmark.config.layering import FlagsOverFile
from tokenmark.config.runspec import TOML_KEYS, RunSpec


class _Stop(Exception):
    pass


def _capture(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> dict[str, Any]:
    got: dict[str, Any] = {}

    def stand_in(obj: Any, *args: Any, **kwargs: Any) -> Any:
        got["obj"] = obj
        raise _Stop

    monkeypatch.setattr(module, name, stand_in)
    return got


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "run.toml"
    p.write_text(text, encoding="utf-8")
    return p


def _invoke(args: list[str]) -> None:
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, _Stop), res.output


# (flag as given, TOML key = value of the [dataset] table, WorkloadSpec attribute,
#  the flag's value there, the file's value there)
DATASET = [
    (["--turns", "5"], 'turns = "2"', "turns", "5", "2"),
    (["--sharegpt-turns", "all"], 'sharegpt_turns = "first"', "sharegpt_turns", "all",
     "first"),
    (["--mlperf-output", "reference"], 'mlperf_output = "max"', "mlperf_output",
     "reference", "max"),
    (["--tokenizer", "builtin"], 'tokenizer = "server"', "tokenizer", "builtin", "server"),
    (["--image-size", "64x64"], 'image_size = "256x256"', "image_size", "64x64", "256x256"),
    (["--trace-format", "azure"], 'trace_format = "mooncake"', "trace_format", "azure",
     "mooncake"),
    # falsy flags
    (["--prefix-groups", "0"], "prefix_groups = 4", "prefix_groups", 0, 4),
    (["--conversations", "0"], "conversations = 3", "conversations", 0, 3),
    (["--system-len", "0"], "system_len = 7", "system_tokens", 0, 7),
    (["--no-chat-template"], "chat_template = true", "chat_template", False, True),
    (["--columns", ""], 'columns = "q"', "columns", "", "q"),
    (["--input-len", "32"], 'input = "64"', "input_lengths", "32", "64"),
]


@pytest.mark.parametrize(("flag", "line", "attr", "flag_value", "file_value"), DATASET,
                         ids=[d[2] for d in DATASET])
def test_a_dataset_flag_beats_the_file_and_the_file_beats_the_default(
        tmp_path, monkeypatch, flag, line, attr, flag_value, file_value):
    got = _capture(monkeypatch, launch, "build_workload")
    cfg = _toml(tmp_path, f"[dataset]\n{line}\n")
    _invoke(["run", "--config", str(cfg), *flag])
    assert getattr(got["obj"], attr) == flag_value
    _invoke(["run", "--config", str(cfg)])
    assert getattr(got["obj"], attr) == file_value


# (flags, [target] line, OpenAIConfig attribute, the flag's value, the file's value)
TARGET = [
    (["--api-key-env", "MY_KEY"], 'api_key_env = "FILE_KEY"', "api_key_env", "MY_KEY",
     "FILE_KEY"),
    (["--api", "completions"], 'api = "chat"', "api", "completions", "chat"),
    (["--no-stream"], "stream = true", "stream", False, True),
    (["--stream"], "stream = false", "stream", True, False),
    (["--routing", "round-robin"], 'routing = "least-in-flight"', "routing", "round-robin",
     "least-in-flight"),
    (["--no-ignore-eos"], "ignore_eos = true", "ignore_eos", False, True),
    (["--model", "m-flag"], 'model = "m-file"', "model", "m-flag", "m-file"),
    (["--extra-body", '{"a": 1}'], "extra_body = '{\"b\": 2}'", "extra_body", '{"a": 1}',
     '{"b": 2}'),
]


@pytest.mark.parametrize(("flag", "line", "attr", "flag_value", "file_value"), TARGET,
                         ids=[f"{t[2]}{i}" for i, t in enumerate(TARGET)])
def test_a_target_flag_beats_the_file(tmp_path, monkeypatch, flag, line, attr, flag_value,
                                      file_value):
    got = _capture(monkeypatch, openai_target, "check_target")
    cfg = _toml(tmp_path, f'[target]\nurls = ["http://127.0.0.1:9"]\n{line}\n')
    base = ["run", "--config", str(cfg), "--dataset-size", "8"]
    _invoke([*base, *flag])
    assert getattr(got["obj"], attr) == flag_value
    _invoke(base)
    assert getattr(got["obj"], attr) == file_value


def test_a_url_flag_beats_the_files_urls(tmp_path, monkeypatch):
    got = _capture(monkeypatch, openai_target, "check_target")
    cfg = _toml(tmp_path, '[target]\nurls = ["http://127.0.0.1:9"]\n')
    _invoke(["run", "--config", str(cfg), "--dataset-size", "8", "--url",
             "http://127.0.0.1:8"])
    assert got["obj"].urls == ("http://127.0.0.1:8",)


@pytest.mark.parametrize(("table", "flag", "seen", "flag_value", "file_value"), [
    ('[run]\nbenchmark = "llama2-70b-99"', ["-b", "llama3.1-8b"],
     lambda layered: layered.preset.name, "llama3.1-8b", "llama2-70b-99"),
    ('[settings]\nmode = "accuracy"', ["--mode", "performance"],
     lambda layered: layered.settings.mode.value, "PerformanceOnly", "AccuracyOnly"),
], ids=["benchmark", "mode_performance"])
def test_run_and_settings_flags_beat_the_file(tmp_path, monkeypatch, table, flag, seen,
                                              flag_value, file_value):
    got: list[Any] = []

    def stand_in(spec: Any, layered: Any, *args: Any) -> Any:
        got.append(seen(layered))
        raise _Stop

    monkeypatch.setattr(launch, "build_workload", stand_in)
    cfg = _toml(tmp_path, table + "\n")
    _invoke(["run", "--config", str(cfg), *flag])
    _invoke(["run", "--config", str(cfg)])
    assert got == [flag_value, file_value]


def test_a_zero_sut_flag_beats_the_file(tmp_path, monkeypatch):
    seen: dict[str, Any] = {}

    def stand_in(layered: Any, dataset: Any, spec: Any, *args: Any, **kwargs: Any) -> Any:
        seen["spec"] = spec
        raise _Stop

    monkeypatch.setattr(launch, "run_benchmark", stand_in)
    cfg = _toml(tmp_path, '[sut]\nkind = "latency-model"\nttft_ms = 80.0\nmax_batch = 4\n')
    base = ["run", "--config", str(cfg), "--dataset-size", "8", "--no-db", "-o",
            str(tmp_path / "out")]
    _invoke([*base, "--sut-ttft-ms", "0", "--sut-max-batch", "0"])
    model = seen["spec"].model
    assert (model.ttft_ns, model.max_batch) == (0, 0)
    _invoke(base)
    model = seen["spec"].model
    assert (model.ttft_ns, model.max_batch) == (80_000_000, 4)


def test_scale_commands_layer_the_same_way(tmp_path, monkeypatch):
    got = _capture(monkeypatch, cli_scale, "build_workload")
    cfg = _toml(tmp_path, '[dataset]\ninput = "64"\ntokenizer = "server"\n')
    for cmd in ("find-peak", "sweep", "scaling-run"):
        _invoke([cmd, "--config", str(cfg), "--input-len", "32", "--tokenizer", "builtin"])
        assert (got["obj"].input_lengths, got["obj"].tokenizer) == ("32", "builtin"), cmd
        _invoke([cmd, "--config", str(cfg)])
        assert (got["obj"].input_lengths, got["obj"].tokenizer) == ("64", "server"), cmd


def test_flags_over_file_by_hand():
    table = {"turns": "2", "path": "a.jsonl", "prefix_groups": 4}
    pick = FlagsOverFile(table, frozenset({"prefix_groups"}))
    assert pick("prefix_groups", 0) == 0  # given, falsy: still beats the file
    assert pick("turns", "3") == "2"  # not given: the file's
    assert pick("dataset", None, "path") == "a.jsonl"  # the file's key under another name
    assert pick("limit", None) is None  # neither: the flag's default


# -- every option of `run` that a TOML file can set (issue 20 item 1) ----------------------

def _samples(param, default):
    """(the value given on the command line, its args, the file's value as TOML text and
    as parsed): the flag's value is its default where it has one (a flag given at its
    default must still beat the file), and differs from the file's."""
    kind = kind_of(param.name)
    if kind is bool:
        flag = param.opts[0] if default else param.secondary_opts[0]
        return bool(default), [flag], str(not default).lower(), not default
    if kind is int:
        value = 3 if default is None else default
        return value, [param.opts[0], str(value)], "7", 7
    if kind is float:
        value = 3.5 if default is None else default
        return value, [param.opts[0], str(value)], "7.25", 7.25
    if kind is list:
        return ("http://flag:1",), [param.opts[0], "http://flag:1"], '["http://file:2"]', \
            ("http://file:2",)
    value = "flag-value" if default in (None, "") else default
    return value, [param.opts[0], str(value)], '"file-value"', "file-value"


def _field(spec: RunSpec, name: str) -> Any:
    from tokenmark.config.runspec import OPTION_FIELDS

    if name == "dataset_size":  # [dataset] size sizes the workload
        return spec.dataset.size
    group, attr = OPTION_FIELDS.get(name, (None, name))
    if group is None:
        group = next(g for g in ("load", "dataset", "sut", "target", "output", "trust")
                     if hasattr(getattr(spec, g), name))
    return getattr(getattr(spec, group), attr)


def _norm(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def test_every_toml_key_names_an_option_of_run():
    params = run_params()
    assert set(TOML_KEYS) <= set(params), set(TOML_KEYS) - set(params)
    assert len(TOML_KEYS) >= 45


@pytest.mark.parametrize("name", sorted(TOML_KEYS))
def test_every_run_flag_beats_its_toml_key_and_the_key_beats_the_default(
        tmp_path, monkeypatch, name):
    """Through the real command line: the spec `run` builds from `--config` and the flag."""
    param = run_params()[name]
    table, key = TOML_KEYS[name]
    flag_value, args, file_text, file_value = _samples(param, param.default)
    cfg = _toml(tmp_path, f"[{table}]\n{key} = {file_text}\n")
    got: list[RunSpec] = []

    def stand_in(self: RunSpec) -> Any:
        got.append(self)
        raise _Stop

    monkeypatch.setattr(RunSpec, "settings", stand_in)
    _invoke(["run", "--config", str(cfg), *args])
    _invoke(["run", "--config", str(cfg)])
    flag_seen, file_seen = (_norm(_field(s, name)) for s in got)
    assert (flag_seen, file_seen) == (_norm(flag_value), _norm(file_value))
    # and the spec alone (the Python API's way in) layers the same way
    doc = {table: {key: file_value}}
    assert _norm(_field(RunSpec.from_options({name: flag_value}, frozenset({name}), doc),
                        name)) == _norm(flag_value)
    assert _norm(_field(RunSpec.from_options({name: param.default}, frozenset(), doc),
                        name)) == _norm(file_value)


@pytest.mark.parametrize("command", ["find-peak", "sweep", "scaling-run"])
def test_the_scale_commands_build_the_same_spec_as_run(tmp_path, monkeypatch, command):
    """Every option a scale command shares with `run` (same name) lands in the same field
    of the run spec, and each that a TOML file can set beats the file's key there."""
    from tokenmark.cli.scale import _OWN

    run, own = run_params(), run_params(command)
    shared = sorted(n for n in own if n in run and n not in _OWN)
    assert {"benchmark", "scenario", "config", "dataset", "input_len", "url", "api",
            "model", "routing", "workers", "tokenizer"} <= set(shared)
    got: list[RunSpec] = []

    def stand_in(self: RunSpec) -> Any:
        got.append(self)
        raise _Stop

    monkeypatch.setattr(RunSpec, "settings", stand_in)
    for name in (n for n in shared if n in TOML_KEYS):
        param = own[name]
        table, key = TOML_KEYS[name]
        # the scale command's own default, given on its command line
        flag_value, args, file_text, file_value = _samples(run[name], param.default)
        if run[name].is_flag:
            args = [param.opts[0] if param.default else param.secondary_opts[0]]
        cfg = _toml(tmp_path, f"[{table}]\n{key} = {file_text}\n")
        got.clear()
        _invoke([command, "--config", str(cfg), *args])
        _invoke([command, "--config", str(cfg)])
        assert [_norm(_field(s, name)) for s in got] == [_norm(flag_value),
                                                          _norm(file_value)], name
