"""One result read from two sources, or twice: the richer row is kept.

The case a user hit: v5.1 NVIDIA GB300-NVL72 x72 deepseek-r1 Offline was stored with
its weight type (``fp4``, from the v5.1 summary table); importing the result again from
its result folder, which has no ``measurements.json`` (the shared sample has none),
replaced the row and the weight type was lost.
"""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.paths import SAMPLES, SHARED_DATA
from tokenmark.api import results as results_api
from tokenmark.resultrows import (
    SOURCE_LOGS,
    SOURCE_TABLE,
    Label,
    ResultRow,
    merge_rows,
)
from tokenmark.store import Store

V51 = SHARED_DATA / "mlperf" / "summaries" / "v5.1_summary_results.json"
GB300 = ("v5.1", "GB300-NVL72_GB300-288GB_aarch64x72_TRT", "deepseek-r1", "Offline")


def _gb300(db: str) -> ResultRow:
    with Store.open(db) as st:
        [row] = [r for r in st.rows({"round": "v5.1", "system_id": GB300[1],
                                     "benchmark": GB300[2], "scenario": GB300[3]})]
    return row


@pytest.mark.parametrize("order", ["table first", "logs first"])
def test_a_poorer_source_never_loses_the_weight_type(db, order):
    sources = [V51, SAMPLES / "v5.1"] if order == "table first" else [SAMPLES / "v5.1", V51]
    for src in sources:
        rep = results_api.import_results(src, db=db)
        assert rep.ok and rep.differences == ()
    row = _gb300(db)
    # the logs' row (detail log: 420659 tokens/s) with the table's weight type and figure
    assert (row.source, row.value, row.table_value) == (SOURCE_LOGS, 420659.0, 420659.0)
    assert row.weight_data_types == "fp4"
    assert row.accuracy["exact_match"] == pytest.approx(81.76845943482225)  # accuracy.txt
    before = row
    for src in sources:  # re-importing either changes nothing
        again = results_api.import_results(src, db=db)
        assert again.counts is not None and again.counts.updated == 0
    assert _gb300(db) == before


_TEXT = st.sampled_from(["", "fp4", "fp8", "x"])
_NUM = st.one_of(st.none(), st.sampled_from([1.0, 2.5, 420659.0]))


def _rows() -> st.SearchStrategy[ResultRow]:
    return st.builds(
        lambda source, value, weights, power, framework, acc, avail, label: ResultRow(
            round="v5.1", division="closed", submitter="NVIDIA", system_id=GB300[1],
            benchmark=GB300[2], scenario=GB300[3], value=value, unit="Tokens/s",
            metric="m", label=label, source=source, weight_data_types=weights,
            power_value=power, power_unit="Watts" if power is not None else None,
            framework=framework, accuracy=acc, availability=avail),
        st.sampled_from([SOURCE_LOGS, SOURCE_TABLE]), st.sampled_from([420659.0, 420000.0]),
        _TEXT, _NUM, _TEXT, st.sampled_from([{}, {"rouge1": 44.0}]),
        st.sampled_from([None, "available"]), st.sampled_from(list(Label)))


@given(_rows(), _rows())
def test_merging_keeps_the_better_source_and_every_field(old, new):
    """Properties of :func:`merge_rows`, for any two rows of one result:

    * the logs' row wins over a table's, whatever the order; between rows of one source
      the newer (``new``) wins;
    * a field either row has is never lost (weight type, power, accuracy, ...);
    * merging the same new row again changes nothing (an import is idempotent);
    * a table figure meeting the logs' is kept as ``table_value``, and a difference is
      reported exactly when the two figures differ.
    """
    m = merge_rows(old, new)
    kept = m.row
    if {old.source, new.source} == {SOURCE_LOGS, SOURCE_TABLE}:
        logs, table = (old, new) if old.source == SOURCE_LOGS else (new, old)
        assert kept.source == SOURCE_LOGS and kept.value == logs.value
        assert kept.table_value == table.value
        assert (m.difference is not None) == (logs.value != table.value)
    else:
        assert kept.value == new.value and kept.label == new.label and m.difference is None
    for f in ("weight_data_types", "framework", "accuracy", "availability", "power_value"):
        if getattr(old, f) or getattr(new, f):
            assert getattr(kept, f), f
    assert merge_rows(kept, new).row == kept
    assert {f.name for f in fields(ResultRow)} >= {"table_value", "source", "quirks"}


def test_rows_of_different_results_do_not_merge():
    a = ResultRow(round="v5.1", division="closed", submitter="A", system_id="s",
                  benchmark="b", scenario="Offline", value=1.0, unit="Tokens/s", metric="m",
                  label=Label.OFFICIAL)
    with pytest.raises(ValueError, match="different results"):
        merge_rows(a, replace(a, scenario="Server"))
