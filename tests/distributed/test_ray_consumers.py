"""``run --distributed ray``: the workers ship encoded lines and packed columns; a
consumer that takes records one by one still gets every record, exactly as written."""

from __future__ import annotations

import pytest

from tokenmark.adapters.inprocess import LatencyModel
from tokenmark.api.run import SutSpec, default_dataset, run_benchmark
from tokenmark.api.scale import distributed_driver
from tokenmark.config.layering import build_settings
from tokenmark.metrics.summary import Accumulator
from tokenmark.mlperf.settings import Scenario
from tokenmark.output.records import read_records
from tokenmark.records import RequestRecord

pytestmark = pytest.mark.ray


def test_record_consumers_get_the_records_the_file_holds(local_ray, tmp_path):
    layered = build_settings("v6.0", "llama3.1-8b", Scenario.SERVER, profile="demo",
                             overrides={"min_duration_ms": 500, "target_qps": 400,
                                        "min_query_count": 200, "send_lag_limit_ms": 100.0})
    got: list[RequestRecord] = []
    res = run_benchmark(layered, default_dataset(layered),
                        SutSpec(model=LatencyModel(ttft_ns=20_000_000, tpot_ns=2_000_000)),
                        tmp_path, driver=distributed_driver("ray", workers=2),
                        record_consumers=[got.append])
    on_disk = list(read_records(tmp_path / "records.jsonl"))
    assert len(got) == res.summary.issued >= 200
    assert got == on_disk  # same records, same (arrival) order, same numbering and times
    assert sorted(r.seq for r in got) == list(range(len(got)))
    assert all(len(r.chunk_ns) > 1 for r in got)  # streamed: the ITL path is exercised
    acc = Accumulator()
    for r in got:
        acc.add(r)
    assert acc.completed == res.summary.completed and acc.failed == 0
