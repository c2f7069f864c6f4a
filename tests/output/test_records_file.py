"""records.jsonl has one list of fields and one encoder: every record attribute is in the
file, a record's line is the same whether it is encoded from the object or from columns
(the simulator's writer), and it reads back as the record it was."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenmark.output.records import FIELDS, encode_columns, encode_record, read_records
from tokenmark.records import ErrorClass, Phase, RequestRecord, TokenSource

ints = st.integers(min_value=-1, max_value=2**62)
texts = st.text(max_size=80)


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    first = draw(st.integers(-1, 10**12))
    chunk_ns: list[int] = []
    chunk_tokens: list[int] = []
    if first >= 0:
        t = first
        for gap in draw(st.lists(st.integers(0, 10**9), max_size=6)):
            chunk_ns.append(t)
            t += gap
        chunk_ns.append(t)
        chunk_tokens = draw(st.lists(st.integers(0, 7), min_size=len(chunk_ns),
                                     max_size=len(chunk_ns)))
    return RequestRecord(
        seq=draw(ints), query_id=draw(ints), sample_index=draw(ints),
        scheduled_ns=draw(ints), issued_ns=draw(ints), first_token_ns=first,
        done_ns=draw(ints), input_tokens=draw(ints), output_tokens=draw(ints),
        token_source=draw(st.sampled_from(TokenSource)), chunk_ns=chunk_ns,
        chunk_tokens=chunk_tokens if any(k != 1 for k in chunk_tokens) else [1] * len(chunk_ns),
        error=draw(st.none() | st.sampled_from(ErrorClass)), error_detail=draw(texts),
        phase=draw(st.sampled_from(Phase)), endpoint=draw(texts),
        alt_output_tokens=draw(ints), cached_input_tokens=draw(ints),
        reasoning_tokens=draw(ints), first_answer_ns=draw(ints),
        server_input_tokens=draw(ints), finish_reason=draw(st.text(max_size=64)),
        stream_tokens=draw(ints), token_basis=draw(st.sampled_from(
            ("", "ids", "logprobs", "events", "usage", "chunks"))),
        demanded_output_tokens=draw(ints))


def test_every_record_attribute_is_a_field_of_the_file():
    attrs = [attr for _, attr in FIELDS]
    assert sorted(attrs) == sorted(f.name for f in dataclasses.fields(RequestRecord))
    assert len(set(attrs)) == len(attrs) and len({k for k, _ in FIELDS}) == len(FIELDS)


@given(records())
def test_a_line_from_columns_is_the_line_from_the_record(r):
    line = encode_record(r)
    assert list(json.loads(line)) == [key for key, _ in FIELDS]
    columns = {attr: [getattr(r, attr)] for _, attr in FIELDS}
    assert list(encode_columns(columns)) == [line]


@given(st.lists(records(), max_size=5))
def test_lines_read_back_as_the_records(tmp_path_factory, recs):
    path = tmp_path_factory.mktemp("rec") / "records.jsonl"
    path.write_text("".join(encode_record(r) for r in recs))
    back = list(read_records(path))
    assert back == recs


def test_columns_not_given_take_the_records_defaults(tmp_path):
    (line,) = encode_columns({"seq": [3], "query_id": [1], "sample_index": [2],
                              "scheduled_ns": [10], "done_ns": [20]})
    (tmp_path / "r.jsonl").write_text(line)
    (back,) = read_records(tmp_path / "r.jsonl")
    assert back == RequestRecord(seq=3, query_id=1, sample_index=2, scheduled_ns=10,
                                 done_ns=20)


def test_columns_must_name_the_attributes_without_defaults():
    with pytest.raises(ValueError, match="sample_index"):
        list(encode_columns({"seq": [3], "query_id": [1], "scheduled_ns": [10]}))
    with pytest.raises(ValueError, match="not record attributes: query"):
        list(encode_columns({"query": [1]}))
