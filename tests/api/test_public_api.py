"""tokenmark.api: the curated public names resolve, and importing the package is free.

``tokenmark run`` imports ``tokenmark.api`` before its first request, so the package
itself must import none of the facades (each pulls in its command family's stack); a
name loads its module on first use (PEP 562).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys

import pytest

import tokenmark.api as api
from tests.paths import ROOT


def test_every_public_name_resolves_to_its_modules_own_public_object() -> None:
    assert api.__all__, "the curated list is empty"
    assert len(set(api.__all__)) == len(api.__all__), "a name is listed twice"
    assert set(api.__all__) == set(api._WHERE)
    for name in api.__all__:
        mod = importlib.import_module(f"tokenmark.api.{api._WHERE[name]}")
        assert name in mod.__all__, f"{name} is not public in {mod.__name__}"
        assert getattr(api, name) is getattr(mod, name), name


def test_type_checkers_see_the_same_names_from_the_same_modules() -> None:
    tree = ast.parse(inspect.getsource(api))
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                for alias in imp.names:
                    seen[alias.asname or alias.name] = imp.module.rpartition(".")[2]
    assert seen == api._WHERE


def test_no_submodule_name_is_shadowed_by_a_public_name() -> None:
    modules = {p.stem for p in (ROOT / "tokenmark" / "api").glob("*.py")} - {"__init__"}
    assert set(api._FROM) <= modules
    assert not modules & set(api.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'calibrate'"):
        api.calibrate  # noqa: B018  (two families define it; neither is exported here)


def test_importing_the_package_imports_no_facade() -> None:
    code = (
        "import sys, tokenmark.api\n"
        "print(sorted(m for m in sys.modules if m.startswith('tokenmark.api.')))\n"
        "tokenmark.api.SutSpec\n"
        "print(sorted(m for m in sys.modules if m.startswith('tokenmark.api.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=120).stdout.splitlines()
    assert out[0] == "[]"
    assert "'tokenmark.api.run'" in out[1]


def test_renamed_names_keep_their_old_name_in_their_module() -> None:
    """Issue 20 gave each clashing name its own; the old one still works where it was."""
    from tokenmark import analyses
    from tokenmark.api import results, simulation, trust

    assert simulation.calibrate is simulation.fit_perf_model is api.fit_perf_model
    assert simulation.scaling is simulation.simulate_scaling is api.simulate_scaling
    assert trust.calibrate is trust.calibrate_client is api.calibrate_client
    assert results.scaling is results.scaling_efficiency is api.scaling_efficiency
    assert analyses.scaling is analyses.scaling_efficiency
    for old in ("calibrate", "scaling"):
        assert old not in api.__all__


def test_the_references_python_examples_run(tmp_path, monkeypatch) -> None:
    """docs/reference.md's Python API examples, as written (virtual time): the run spec
    through run_spec, and the layers by hand."""
    text = (ROOT / "docs" / "reference.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    for code, folder in zip(blocks, ("spec", "api"), strict=True):
        env: dict[str, object] = {}
        exec(compile(code, "reference.md", "exec"), env)  # noqa: S102
        result = env["result"]
        assert (tmp_path / "results" / folder / "results.json").is_file()
        assert result.exit_code in (0, 1)  # type: ignore[attr-defined]  (VALID or INVALID)
        assert result.summary.completed > 0  # type: ignore[attr-defined]
