"""Issue 27 item 4: help that reads well (escaped markup, every option described, metavars
as users write them, commands in panels with run first, tables not cut when piped)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import typer.main
from rich.console import Console
from typer.testing import CliRunner

from tokenmark.cli import app
from tokenmark.cli import app as _app_module  # noqa: F401  (registers every command)
from tokenmark.errors import DatasetError


def leaves():
    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd
    return list(walk(typer.main.get_command(app), []))


def test_every_option_and_argument_is_described():
    missing = [f"{' '.join(path)} {p.name}" for path, cmd in leaves() for p in cmd.params
               if not getattr(p, "help", None)]
    assert missing == []


def test_no_python_type_metavars_in_any_help():
    runner = CliRunner()
    bad = {}
    for path, _ in leaves():
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        found = re.findall(r"<(?:bool|str|int|float|path|list\[[^\]]*\])>", res.output)
        if found:
            bad[" ".join(path)] = found
    assert bad == {}


def test_metavars_as_users_write_them():
    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"(--[a-z-]+)(?:\s+-\w)?\s+([A-Z]+|auto\|live\|plain\|jsonl\|off)\s", res.output)}
    assert rows["--qps"] == "FLOAT" and rows["--concurrency"] == "INT"
    assert rows["--url"] == "URL" and rows["--config"] == "PATH"
    assert rows["--header"] == "TEXT" and rows["--progress"] == "auto|live|plain|jsonl|off"


def test_rich_markup_in_help_survives():
    res = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    assert "TOML file with [run], [settings], [dataset], [sut] and [target] tables." in text
    assert "--temperature FLOAT Sampling temperature" in text


def test_install_hints_keep_their_extra(monkeypatch):
    from tokenmark.cli import app as cli_app_module
    buf = io.StringIO()
    mod = sys.modules["tokenmark.cli.app"]
    monkeypatch.setattr(mod, "err", Console(file=buf, width=200))
    mod.bad_input(DatasetError("reading Parquet needs pyarrow: pip install 'tokenmark[parquet]'"))
    assert "pip install 'tokenmark[parquet]'" in buf.getvalue()
    assert cli_app_module is not None


def test_commands_in_panels_with_run_first():
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"})
    panels = re.findall(r"╭─ (\w+) ─", res.output)
    assert panels == ["Options", "Run", "Results", "Submissions", "Trust", "Tools"]
    commands = re.findall(r"^│ ([a-z][a-z-]+) ", res.output, re.M)
    assert commands[0] == "run"
    assert {"results", "submission", "verify", "version", "sweep"} <= set(commands)
    # a command's summary reads as one paragraph (no line break from the docstring)
    assert re.search(r"accuracy\.txt", res.output)
    assert "and\n" not in res.output.split("score", 1)[1].split("audit", 1)[0].replace("│", "")


def test_tables_are_not_cut_when_piped():
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    res = subprocess.run([sys.executable, "-m", "tokenmark", "presets", "v6.0"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "…" not in res.stdout
    assert max(len(line) for line in res.stdout.splitlines()) > 80  # drawn at full width
    assert "llama2-70b-99.9" in res.stdout
