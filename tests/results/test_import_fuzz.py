"""The importer against damaged and hostile files, fuzzed as the HTTP path is.

A published submission tree (one submitter of the shared samples) and a tokenmark
``results.json`` are damaged one file at a time: bytes overwritten, inserted or cut,
lines repeated, JSON values swapped for generated ones (nesting up to 100,000 deep, huge
numbers, non-finite numbers, wrong types). Whatever the damage, :func:`scan` returns
(never raises), every problem is a per-file error naming a file of the tree and a
reason, and no more is read than the intact tree gives. ``bench/fuzz_inputs.py`` runs
the same properties at a larger count.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import SAMPLES
from tokenmark.importer import scan

SUBMITTER = "v6.0/closed/Dell"
EXAMPLES = int(os.environ.get("TOKENMARK_FUZZ_EXAMPLES", "250"))
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                      st.floats(allow_nan=True, allow_infinity=True),
                      st.integers(min_value=10**18, max_value=10**400))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def _deep(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "[" else '{"a":' * depth + "1" + "}" * depth


@st.composite
def damage(draw: Any, size: int, is_json: bool) -> tuple[str, Any]:
    """One damage to a file of ``size`` bytes: (kind, arguments)."""
    kinds = ["overwrite", "insert", "truncate", "repeat_lines"]
    if is_json:
        kinds += ["json_value", "deep"]
    kind = draw(st.sampled_from(kinds))
    pos = draw(st.integers(0, max(size - 1, 0)))
    if kind in ("overwrite", "insert"):
        return kind, (pos, draw(st.binary(min_size=1, max_size=64)))
    if kind == "truncate":
        return kind, pos
    if kind == "repeat_lines":
        return kind, (pos, draw(st.integers(1, 50)))
    if kind == "json_value":
        return kind, (draw(st.integers(0, 30)), draw(JSON_VALUE))
    return kind, (draw(st.sampled_from([65, 1000, 100_000])), draw(st.sampled_from("[{")))


def _apply(data: bytes, kind: str, arg: Any) -> bytes:
    if kind == "overwrite":
        pos, b = arg
        return data[:pos] + b + data[pos + len(b):]
    if kind == "insert":
        pos, b = arg
        return data[:pos] + b + data[pos:]
    if kind == "truncate":
        return data[:arg]
    if kind == "repeat_lines":
        pos, times = arg
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        line = data[start:end + 1 if end >= 0 else len(data)]
        return data[:start] + line * times + data[start:]
    doc = json.loads(data)  # json_value and deep: one top-level value replaced
    assert isinstance(doc, dict) and doc
    keys = sorted(doc)
    if kind == "json_value":
        which, value = arg
        doc[keys[which % len(keys)]] = value
        return json.dumps(doc).encode()
    depth, bracket = arg
    doc[keys[depth % len(keys)]] = "__deep__"
    return json.dumps(doc).replace('"__deep__"', _deep(depth, bracket), 1).encode()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, list[Path], int]:
    root = tmp_path_factory.mktemp("fuzz") / "v6.0" / "closed" / "Dell"
    shutil.copytree(SAMPLES / SUBMITTER, root)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    clean = scan(root.parent.parent, official=False)
    assert not clean.errors and clean.rows
    return root.parent.parent, files, len(clean.rows)


def _check(found: Any, root: Path, rows: int) -> None:
    assert len(found.rows) <= rows
    for e in found.errors:
        assert e.path and e.reason, e
        assert not Path(e.path).is_absolute() or Path(e.path).is_relative_to(root)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_damaged_submission_tree_gives_per_file_errors_never_a_crash(tree, data):
    root, files, rows = tree
    path = data.draw(st.sampled_from(files))
    original = path.read_bytes()
    kind, arg = data.draw(damage(len(original), path.suffix == ".json"))
    try:
        path.write_bytes(_apply(original, kind, arg))
        found = scan(root, official=False)  # raises nothing, whatever the damage
    finally:
        path.write_bytes(original)
    _check(found, root, rows)


@pytest.fixture(scope="module")
def run_results(tmp_path_factory) -> Path:
    from tokenmark.api.run import SutSpec, run_benchmark
    from tokenmark.config.layering import build_settings
    from tokenmark.dataset import LengthDistribution, SyntheticDataset
    from tokenmark.mlperf.settings import Scenario

    out = tmp_path_factory.mktemp("run")
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.CONSTANT, overrides={
        "target_qps": 50.0, "min_duration_ms": 200, "min_query_count": 5})
    ds = SyntheticDataset(8, LengthDistribution.parse("16"), LengthDistribution.parse("4"))
    run_benchmark(layered, ds, SutSpec(kind="latency-model"), out, virtual_time=True)
    assert scan(out / "results.json").runs
    return out / "results.json"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_damaged_results_json_is_one_error_or_a_run(run_results, tmp_path_factory, data):
    original = run_results.read_bytes()
    kind, arg = data.draw(damage(len(original), True))
    target = tmp_path_factory.mktemp("bad") / "results.json"
    target.write_bytes(_apply(original, kind, arg))
    found = scan(target)
    assert len(found.runs) + len(found.errors) == 1
    _check(found, target.parent, 0)
