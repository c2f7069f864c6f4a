"""Trace replay: Mooncake JSONL and Azure CSV, speed-up, shared prefixes, bad traces."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
from tokenmark.clock import FakeClock, run_virtual
from tokenmark.config.layering import build_settings
from tokenmark.errors import DatasetError
from tokenmark.loadgen.runner import Runner
from tokenmark.mlperf.scenarios import timed_trace
from tokenmark.mlperf.settings import Scenario, effective
from tokenmark.sources.traces import load_trace
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.traces import TraceWorkload

TOK = BuiltinTokenizer()
MOONCAKE = [
    {"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [1, 2, 3]},
    {"timestamp": 250, "input_length": 9, "output_length": 5, "hash_ids": [1, 2, 7]},
    {"timestamp": 250, "input_length": 6, "output_length": 0, "hash_ids": [9, 10]},
    {"timestamp": 1000, "input_length": 4, "output_length": 2},
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_mooncake_offsets_speedup_and_shared_blocks(tmp_path):
    table = load_trace(write(tmp_path / "trace.jsonl", MOONCAKE))
    w = TraceWorkload.from_table(table, speedup=2.0, block_tokens=4)
    assert w.offsets_ns.tolist() == [0, 125_000_000, 125_000_000, 500_000_000]
    ds = w.dataset
    s = [ds.sample(i) for i in range(4)]
    for x, row in zip(s, MOONCAKE, strict=True):
        assert x.input_tokens == row["input_length"] == TOK.count(x.prompt)
        assert len(x.token_ids or ()) == row["input_length"]
    assert [x.output_tokens for x in s] == [3, 5, 1, 2]  # 0 is sent as 1
    # hash ids 1 and 2 name the same 8 tokens in requests 0 and 1; 3 vs 7 differ
    a, b = s[0].token_ids or (), s[1].token_ids or ()
    assert a[:8] == b[:8] and a[8:9] != b[8:9]
    assert [x.prefix_tokens for x in s] == [0, 8, 0, 0]
    assert s[0].prefix_group == s[1].prefix_group == 1 and s[3].prefix_group == -1
    assert ds.describe()["shared_prefix_tokens"] == 8


def test_out_of_order_timestamps_name_the_line_or_are_sorted(tmp_path):
    rows = [MOONCAKE[0], MOONCAKE[3], MOONCAKE[1], MOONCAKE[2]]
    table = load_trace(write(tmp_path / "t.jsonl", rows))
    with pytest.raises(DatasetError, match=r"t\.jsonl line 3: its timestamp is earlier than "
                                           r"line 2's; sort the trace.*--trace-sort"):
        TraceWorkload.from_table(table)
    w = TraceWorkload.from_table(table, sort=True, block_tokens=4)
    assert w.offsets_ns.tolist() == [0, 250_000_000, 250_000_000, 1_000_000_000]
    # stable: the two requests at 250 ms keep their file order (input 9, then 6)
    assert [w.dataset.sample(i).input_tokens for i in range(4)] == [10, 9, 6, 4]
    assert w.dataset.sample(1).prefix_tokens == 8  # hash ids follow their requests


def test_azure_csv_timestamps(tmp_path):
    p = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n"
                 "2023-11-16 18:15:51.0000000,879,0\n")
    w = TraceWorkload.from_table(load_trace(p), speedup=0.5)
    assert w.offsets_ns.tolist() == [0, 2 * 4_314_579_000, 2 * 4_319_410_000]
    assert [w.dataset.sample(i).output_tokens for i in range(3)] == [44, 109, 1]
    assert w.dataset.sample(2).input_tokens == 879


BAD = [
    ("a.csv", "TIMESTAMP,ContextTokens\n1,2\n", r"line 1: no column 'GeneratedTokens'"),
    ("b.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,2,3\n",
     r"line 2: TIMESTAMP 'yesterday' is not a time"),
    ("c.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1.5,0,3\n",
     r"line 2: ContextTokens is 0; it must be at least 1"),
    ("d.jsonl", '{"timestamp": 0, "input_length": 5}\n', r"line 1: no 'output_length'"),
    ("e.jsonl", '{"timestamp": -3, "input_length": 5, "output_length": 1}\n',
     r"line 1: timestamp is -3"),
    ("f.jsonl", '{"timestamp": 1, "input_length": "x", "output_length": 1}\n',
     r"line 1: input_length is 'x', not a whole number"),
    ("g.jsonl", '{"timestamp": 1, "input_length": 2, "output_length": 1, "hash_ids": 5}\n',
     r"line 1: hash_ids must be a list"),
    ("h.txt", "x", r"cannot tell the trace format"),
    ("i.jsonl", "", r"the file is empty"),
]


@pytest.mark.parametrize("name,text,match", BAD, ids=[b[0] for b in BAD])
def test_bad_traces(tmp_path, name, text, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(DatasetError, match=match):
        load_trace(p)


def test_header_only_trace_and_bad_speedup(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(DatasetError, match="no requests"):
        TraceWorkload.from_table(load_trace(p))
    q = write(tmp_path / "t.jsonl", MOONCAKE)
    with pytest.raises(DatasetError, match="speed-up must be a positive number"):
        TraceWorkload.from_table(load_trace(q), speedup=0)


def test_a_trace_runs_at_its_recorded_times(tmp_path):
    w = TraceWorkload.from_table(load_trace(write(tmp_path / "t.jsonl", MOONCAKE)),
                                 block_tokens=4)
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.TRACE)
    eff = effective(layered.settings, len(w.dataset))
    sched = timed_trace(eff, w.offsets_ns, w.sample_index)
    clock = FakeClock()
    records = []
    runner = Runner(sched, w.dataset, LatencyModelSUT(clock, LatencyModel()), clock,
                    consumers=[records.append])

    async def main():
        return await asyncio.ensure_future(runner.run())

    run_virtual(main(), clock)
    got = sorted((r.sample_index, r.scheduled_ns, r.issued_ns) for r in records)
    assert [(i, t) for i, t, _ in got] == list(zip(range(4), w.offsets_ns.tolist(),
                                                   strict=True))
    assert all(issued == t for _, t, issued in got)
    assert np.all(np.diff(sched.scheduled_ns) >= 0)
