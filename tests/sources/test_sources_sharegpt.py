"""ShareGPT: the single-turn convention and full multi-turn replay."""

from __future__ import annotations

import json

import pytest

from tokenmark.errors import DatasetError
from tokenmark.sources.sharegpt import load_sharegpt
from tokenmark.tokenizer import BuiltinTokenizer
from tokenmark.workload.table import TableOptions

TOK = BuiltinTokenizer()
CONVS = [
    {"id": "a", "conversations": [{"from": "human", "value": "ka be"},
                                  {"from": "gpt", "value": "di do du"},
                                  {"from": "human", "value": "fa"},
                                  {"from": "gpt", "value": "ga ge"}]},
    {"id": "b", "conversations": [{"from": "gpt", "value": "only an answer"}]},
    {"id": "c", "conversations": [{"from": "system", "value": "sa"},
                                  {"from": "human", "value": "la le li"},
                                  {"from": "gpt", "value": "ma"}]},
]


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "sharegpt.json"
    p.write_text(json.dumps(CONVS, indent=1))
    return p


def test_first_turns_with_answer_lengths(path):
    ds = load_sharegpt(path, TOK, TableOptions())
    assert len(ds) == 2  # the conversation without a user message is skipped
    assert [ds.sample(i).prompt for i in range(2)] == ["ka be", "la le li"]
    assert [ds.sample(i).output_tokens for i in range(2)] == [3, 1]
    assert not ds.sample(0).is_chat


def test_all_turns_replay_the_dataset_answers(path):
    ds = load_sharegpt(path, TOK, TableOptions(), turns="all")
    assert len(ds) == 3
    t1 = ds.sample(1)
    assert [m.content for m in t1.messages or ()] == ["ka be", "di do du", "fa"]
    assert (t1.conversation, t1.turn, t1.output_tokens) == (0, 1, 2)
    assert t1.input_tokens == TOK.count("ka be di do du fa")
    c = ds.sample(2)
    assert [m.role for m in c.messages or ()] == ["system", "user"] and c.conversation == 2
    assert ds.describe()["conversations"] == 2


def test_jsonl_and_bad_speakers(tmp_path):
    p = tmp_path / "s.jsonl"
    bad = {"conversations": [{"from": "robot", "value": "x"}]}
    p.write_text(json.dumps(CONVS[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"s\.jsonl line 2: unknown speaker 'robot'"):
        load_sharegpt(p, TOK, TableOptions())
    p.write_text(json.dumps({"id": 1}) + "\n")
    with pytest.raises(DatasetError, match="line 1: no 'conversations' list"):
        load_sharegpt(p, TOK, TableOptions())
