"""Token ids of any width in an accuracy log, read as the TEST06 script's --dtype reads
them, proven against a plain reference (struct) over adversarial input; and the
truncation mark of truncate_accuracy_log.py, with LF or CRLF line ends."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenmark.errors import DatasetError
from tokenmark.mlperf.accuracylog import decode_ids, is_truncated, token_width

IDS32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
VOCAB = st.integers(min_value=0, max_value=2**20)  # token ids a tokenizer gives


def reference(hex_text: str, width: int) -> list[int]:
    raw = bytes.fromhex(hex_text)
    fmt = "<" + ("i" if width == 4 else "q") * (len(raw) // width)
    return list(struct.unpack(fmt, raw))


def encode(ids: list[int], width: int) -> str:
    return b"".join(i.to_bytes(width, "little", signed=True) for i in ids).hex().upper()


@given(st.lists(IDS32, max_size=40), st.sampled_from([4, 8]))
def test_decode_equals_struct_at_either_width(ids: list[int], width: int) -> None:
    text = encode(ids, width)
    assert decode_ids(text, width) == reference(text, width) == ids
    assert decode_ids(text.lower(), width) == ids


@given(st.binary(max_size=64), st.sampled_from([4, 8]))
def test_decode_any_bytes_equals_struct_or_refuses(raw: bytes, width: int) -> None:
    if len(raw) % width:
        with pytest.raises(DatasetError, match=f"not a whole number of int{8 * width}s"):
            decode_ids(raw.hex(), width)
    else:
        assert decode_ids(raw.hex(), width) == reference(raw.hex(), width)


@given(st.lists(st.lists(IDS32, min_size=1, max_size=20), min_size=1, max_size=6))
def test_int64_logs_are_read_as_int64(outs: list[list[int]]) -> None:
    entries = [{"data": encode(o, 8), "token_data": encode(o[:1], 8)} for o in outs]
    assert token_width(entries) == 8
    assert [decode_ids(e["data"], token_width(entries)) for e in entries] == outs


@given(st.lists(st.tuples(st.lists(VOCAB, min_size=1, max_size=20), st.integers(1, 2)),
                min_size=1, max_size=6))
def test_int32_logs_stay_int32_unless_every_second_id_is_zero(
        outs: list[tuple[list[int], int]]) -> None:
    # token_data: the first id (LoadGen's first token) or the first two
    entries = [{"data": encode(o, 4), "token_data": encode(o[:first], 4)} for o, first in outs]
    # the one int32 log that also reads as int64: every data and token_data an even number
    # of ids with each second id 0 (the int64 reading's upper halves)
    ambiguous = all(len(ids) % 2 == 0 and not any(ids[1::2])
                    for o, first in outs for ids in (o, o[:first]))
    assert token_width(entries) == (8 if ambiguous else 4)


def test_width_of_a_log_without_ids_is_loadgens_int32() -> None:
    assert token_width([]) == 4
    assert token_width([{"data": "", "token_data": ""}]) == 4
    with pytest.raises(DatasetError, match="4 or 8 bytes"):
        decode_ids("00", 2)


@given(st.text(max_size=200), st.text(max_size=200))
def test_truncation_mark_in_either_line_ending(head: str, tail: str) -> None:
    lf = f"{head}\n\n...\n\n{tail}".encode()
    assert is_truncated(lf) and is_truncated(lf.replace(b"\n", b"\r\n"))
    plain = (head + tail).replace("...", "").encode()
    assert not is_truncated(plain)
