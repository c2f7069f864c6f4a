"""Issue 21 / issue 20 item 1: ``tokenmark run`` loads only its run path before its first
request. The results store (SQLAlchemy), the report (Jinja2), packaging, accuracy scoring
and the scale commands load where they are used, after the run, so the CPU time before
the first request stays small (bench/cli_peers.py prints it)."""

from __future__ import annotations

import json
import subprocess
import sys

#: Never loaded before `tokenmark run`'s first request.
HEAVY = ("sqlalchemy", "alembic", "jinja2", "tokenmark.store", "tokenmark.api.results",
         "tokenmark.report", "tokenmark.api.submission", "tokenmark.api.scale",
         "tokenmark.api.correctness", "tokenmark.webui", "tokenmark.importer",
         "cryptography", "tokenmark.trust.bundle")

_PROBE = """
import json, sys
from tokenmark.adapters import inprocess
seen = []
issue = inprocess.LatencyModelSUT.issue
def first(self, *a, **k):
    if not seen:
        seen.append(sorted(sys.modules))
    return issue(self, *a, **k)
inprocess.LatencyModelSUT.issue = first
from tokenmark.cli import main
try:
    main(["run", "--sut", "latency-model", "--virtual-time", "-s", "closed",
          "--concurrency", "1", "--dataset-size", "4", "--min-queries", "4",
          "--max-queries", "4", "--min-duration", "0", "--no-db", "--progress", "off",
          "-q", "-o", sys.argv[1]])
except SystemExit as e:
    print(json.dumps({"exit": e.code, "modules": seen[0] if seen else None}))
"""


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def test_run_loads_nothing_heavy_before_its_first_request(tmp_path):
    p = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "out")],
                       capture_output=True, text=True, check=False, timeout=300)
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["exit"] == 0, p.stderr[-2000:]
    assert got["modules"] is not None, "the system under test was never asked"
    assert _loaded(got["modules"], HEAVY) == []
    # options convert without pydantic where the installed Typer is one tokenmark/cli/coerce.py
    # was checked against (Typer 0.29 builds a pydantic adapter per option: ~0.07 s)
    from tokenmark.cli import coerce

    if coerce.supported():
        assert _loaded(got["modules"], ("pydantic",)) == []
    # the run itself still happened and wrote its results afterwards
    assert (tmp_path / "out" / "results.json").is_file()


def test_importing_the_run_command_loads_no_store_and_no_web_stack():
    code = ("import json, sys, tokenmark.cli.run; "
            "print(json.dumps(sorted(sys.modules)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True, timeout=120)
    modules = json.loads(p.stdout)
    assert _loaded(modules, (*HEAVY, "pydantic", "fastapi", "tokenmark.api.trust",
                             "tokenmark.api")) == []


def test_the_run_command_is_registered_alone():
    from tokenmark.cli import _modules_for

    assert _modules_for(["run", "--qps", "3"]) == ("run",)
    assert _modules_for(["presets"]) == ("run",)
    assert len(_modules_for(["--help"])) > 1
