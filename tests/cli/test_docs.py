"""The README, the reference (docs/reference.md) and --help cannot fall behind the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenmark.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
DOCS = README + "\n" + REFERENCE


def commands() -> list[str]:
    import typer.main

    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_every_command_is_documented_with_an_example_and_help():
    import typer.main

    runner = CliRunner()
    group = typer.main.get_command(app)
    for name in commands():
        assert f"### `tokenmark {name}`" in REFERENCE, f"the reference lacks a section for {name}"
        assert re.search(rf"^tokenmark {name}\b", DOCS, re.M), f"no example of {name}"
        cmd = group.commands[name]  # type: ignore[attr-defined]
        subs = sorted(cmd.commands) if hasattr(cmd, "commands") else [None]
        for sub in subs:
            argv = [name, sub] if sub else [name]
            shown = " ".join(argv)
            assert re.search(rf"^tokenmark {shown}\b", DOCS, re.M), f"no example of {shown}"
            res = runner.invoke(app, [*argv, "--help"])
            assert res.exit_code == 0
            assert "Example:" in res.output, f"{shown} --help has no example"


@pytest.mark.parametrize("command", ["run", "find-peak", "sweep", "scaling-run"])
def test_every_run_option_is_mentioned_in_the_reference(command):
    import typer.main

    run = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    undocumented = [
        opt for p in run.params for opt in p.opts
        if opt.startswith("--") and opt not in REFERENCE and opt != "--help"
    ]
    # options that share a line with a sibling are listed there by name
    assert undocumented == [], f"docs/reference.md does not mention: {undocumented}"


def test_changelog_and_quickstart():
    assert "make run" in README and "make test" in README
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).is_file(), f"README links to a missing {link}"
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")


def readme_run_examples() -> list[list[str]]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", DOCS, re.S):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            needs_files = ("--config", "--user-conf", "--url", "--dataset", "--trace",
                           "--model-dir", "--image-dir", ">",
                           # real time only; tests/submission and tests/distributed run them
                           "--loadgen official", "--distributed")
            if line.startswith("tokenmark run") and not any(x in line for x in needs_files):
                out.append(shlex.split(line)[1:])
    return out


@pytest.mark.parametrize("args", readme_run_examples(), ids=lambda a: " ".join(a[:6]))
def test_readme_run_examples_work(args, tmp_path):
    """Each example runs (on the virtual clock, shortened) and ends VALID or INVALID."""
    extra = ["--virtual-time", "-o", str(tmp_path / "out")]
    if "-q" not in args and "--json" not in args:
        extra.append("-q")
    res = CliRunner().invoke(app, [*args, *extra])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code in (0, 1), res.output
